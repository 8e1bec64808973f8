"""A trace's parts folded by two processes: a child forked before the command line prepares
folds them from the back, this process from the front once its reader gets there
(advisor.formats.read_ahead says when, and why fork).

The two meet through a shared board (which part each has taken); the child's results wait
in an unlinked temporary file, so it never waits for this process, and this process reads
each result where a note on a pipe says it lies. A part the child did not deliver (it died,
or wrote something unreadable) is folded here; the parts are then checked and merged as the
parallel path's are (parallel.merge_parts).
"""

from __future__ import annotations

import math
import mmap
import os
import pickle
import signal
import struct
import sys
import tempfile
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.formats.parts import Part, PartResult, fold_part, plan_parts

if TYPE_CHECKING:
    from advisor.formats.read_ahead import TraceFold

PART_BYTES = 4 * 1024 * 1024
"""About this much of a file per part: fine enough that the two processes meet near where
their shares are equal, coarse enough that a part's columns are worth sending."""
_NOTE = struct.Struct("<iiqq")  # job, part (-1: the plan), offset and length in the store


class Board:
    """Which parts of each job the two processes have taken, in memory both see: the
    lowest part the child has started (the number of parts until it starts one) and the
    parts this process has claimed (those below the value). A race between the two claims
    makes both fold one part, never neither: each writes its claim before it reads the
    other's."""

    def __init__(self, counts: Sequence[int]) -> None:
        self.map = mmap.mmap(-1, 8 * max(1, len(counts)))
        for job, count in enumerate(counts):
            self.set_child(job, count)
            self.set_parent(job, 0)

    def child(self, job: int) -> int:
        return int.from_bytes(self.map[8 * job : 8 * job + 4], "little", signed=True)

    def set_child(self, job: int, part: int) -> None:
        self.map[8 * job : 8 * job + 4] = part.to_bytes(4, "little", signed=True)

    def parent(self, job: int) -> int:
        return int.from_bytes(self.map[8 * job + 4 : 8 * job + 8], "little", signed=True)

    def set_parent(self, job: int, parts: int) -> None:
        self.map[8 * job + 4 : 8 * job + 8] = parts.to_bytes(4, "little", signed=True)


def _part_count(path: Path) -> int:
    return max(2, math.ceil(path.stat().st_size / PART_BYTES))


class ReadAhead:
    """A forked child planning and folding `jobs` from the back; `shared` hands a job's plan
    to this process, `AheadFile.fold_with` folds its front share and gathers the rest."""

    def __init__(self, jobs: Sequence[TraceFold]) -> None:
        self.jobs = list(jobs)
        counts = [_part_count(j.path) for j in self.jobs]
        self.board = Board(counts)
        self.store = tempfile.TemporaryFile()  # noqa: SIM115 (closed by close())
        self.notes: dict[tuple[int, int], tuple[int, int]] = {}
        self.unread = b""
        notes_in, notes_out = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the child never returns from here
            os.close(notes_in)
            _child(self.jobs, counts, self.board, self.store.fileno(), notes_out)
        os.close(notes_out)
        self.notes_in: int | None = notes_in
        self.taken: set[int] = set()
        self.gathered: set[int] = set()
        self.closed = False

    def shared(
        self, path: Path, decode: object, fold: object, chunk_bytes: int
    ) -> AheadFile | None:
        """The plan of the job that `matches` (each job is handed out once), waiting for the
        child to write it; None when no job matches, the file could not be cut, or the child
        is gone."""
        job = next(
            (
                k
                for k, j in enumerate(self.jobs)
                if k not in self.taken and j.matches(path, decode, fold, chunk_bytes)
            ),
            None,
        )
        if job is None:
            return None
        self.taken.add(job)
        plan = self.result(job, -1)
        if not isinstance(plan, tuple):
            return None
        prefix, parts = plan
        return AheadFile(self, job, prefix, parts)

    def result(self, job: int, part: int) -> Any:
        """What the child wrote of (job, part), waiting for it; None when the child is gone
        without writing it."""
        while (job, part) not in self.notes and self.read_notes(block=True):
            pass
        where = self.notes.pop((job, part), None)
        if where is None:
            return None
        offset, length = where
        try:
            return pickle.loads(os.pread(self.store.fileno(), length, offset))
        except Exception:  # a short or damaged record: fold the part here
            return None

    def read_notes(self, *, block: bool) -> bool:
        """Take the child's notes waiting in the pipe (waiting for one when `block`); False
        once the child has closed it."""
        if self.notes_in is None:
            return False
        os.set_blocking(self.notes_in, block)
        try:
            data = os.read(self.notes_in, 64 * 1024)
        except BlockingIOError:
            return True
        if not data:
            os.close(self.notes_in)
            self.notes_in = None
            return False
        data, size = self.unread + data, _NOTE.size
        whole = len(data) - len(data) % size
        for at in range(0, whole, size):
            job, part, offset, length = _NOTE.unpack_from(data, at)
            self.notes[(job, part)] = (offset, length)
        self.unread = data[whole:]
        return True

    def done_with(self, job: int) -> None:
        """`job`'s results are all here: once every job's are, the child and its temporary
        file (on a tmpfs /tmp, memory) are let go, before the analysis goes on."""
        self.gathered.add(job)
        if len(self.gathered) == len(self.jobs):
            self.close()

    def close(self) -> None:
        """End the child if it still runs, reap it, drop its results (once)."""
        if self.closed:
            return
        self.closed = True
        with suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        if self.notes_in is not None:
            os.close(self.notes_in)
            self.notes_in = None
        self.store.close()
        self.board.map.close()


@dataclass
class AheadFile:
    """One job's plan, shared between this process and the child."""

    ahead: ReadAhead
    job: int
    prefix: bytes
    parts: list[Part]

    def fold_with(self, here: Callable[[Part], PartResult[Any]]) -> list[PartResult[Any] | None]:
        """Every part's result: this process folds parts with `here` from the front until it
        reaches the parts the child has started; the child's results follow, and a part the
        child did not deliver is folded here too."""
        ahead, job, count = self.ahead, self.job, len(self.parts)
        results: list[PartResult[Any] | None] = [None] * count
        front = 0
        while front < count:
            ahead.read_notes(block=False)
            if front >= ahead.board.child(job):
                break
            ahead.board.set_parent(job, front + 1)
            results[front] = here(self.parts[front])
            front += 1
        for part in range(front, count):
            result = ahead.result(job, part)
            results[part] = result if isinstance(result, PartResult) else here(self.parts[part])
        ahead.done_with(job)
        return results


def _child(jobs: list[TraceFold], counts: list[int], board: Board, store: int, notes: int) -> None:
    """The forked child: plan every job, then fold each one's parts from the back until it
    meets this process's claims, writing each result to the store and a note of where it
    lies to the pipe; it exits without the parent's exit handlers or buffers."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends it on Ctrl-C
        quiet = os.open(os.devnull, os.O_WRONLY)
        os.dup2(quiet, 1)
        os.dup2(quiet, 2)
        offset = 0

        def send(job: int, part: int, value: object) -> None:
            nonlocal offset
            data = memoryview(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
            written = 0
            while written < len(data):
                written += os.pwrite(store, data[written:], offset + written)
            os.write(notes, _NOTE.pack(job, part, offset, len(data)))
            offset += len(data)

        plans = []
        for job, (fold, count) in enumerate(zip(jobs, counts)):
            plan = plan_parts(fold.path, count)
            send(job, -1, plan)
            plans.append(plan)
        _without_pandas()
        for job, (fold, plan) in enumerate(zip(jobs, plans)):
            if plan is None:
                continue
            prefix, parts = plan
            for part in range(len(parts) - 1, -1, -1):
                board.set_child(job, part)
                if part < board.parent(job):
                    break
                result = fold_part(
                    str(fold.path), parts[part], prefix, fold.decode, fold.fold, fold.batch_bytes()
                )
                send(job, part, result)
    except BaseException:  # a closed pipe (the parent is done) or anything else
        code = 1
    finally:
        os._exit(code)


def _without_pandas() -> None:
    """Keep pandas out of the child: pyarrow imports it on its first array (to tell a Series
    from a list) and tries again on each conversion of a list until it has it, 0.3 s before
    the child's first part, and the folds need only NumPy and pyarrow. A fold that would
    need pandas after all (a reader's rare fallback) fails with ImportError; this process
    then folds that part and the rest."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())


class _NoPandas:
    """An import finder that refuses pandas (and finds nothing else)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("pandas is not imported by the read-ahead child")
