"""One large trace file decoded on several cores: its event array cut into parts at event
boundaries, each part decoded and folded into a reader's partial state (columns) by a worker
process, the partial states merged in file order.

Decoding is CPU-bound and msgspec holds the GIL, so the parts go to processes, started with
spawn like the rank readers' (a reader may have started threads, which fork copies broken).
What comes back is each part's columns, a few bytes per event, never the decoded events. The
calling process folds parts too, taking them from the front of the file while the pool takes
them from the back, so a worker that starts late or a busy machine only shifts the share.

The parts are cut and folded as advisor.formats.parts says, and checked in file order: a
part that fails (its end was a cut inside a string or inside an event) is decoded again
together with the next part, whose result is dropped. Anything else unusual (NaN, a cut file,
invalid JSON, a worker that died) hands the file back to the sequential path, which reads it
and words the problem as before: the parallel path gives the same result or none.

A .gz stream cannot be entered in the middle: the calling process inflates it (zlib does
most of that without the interpreter lock) and cuts parts off the inflated bytes as they
arrive, at the same proposed boundaries, handing their bytes to the workers (or folding them
itself while every worker has two unfinished); a part whose end proves to be no boundary
sends the file back to the sequential path, since its bytes are gone by then.

Only files of at least `MIN_BYTES` (inflated, for a .gz file: gzip's own note of its size) are
cut (small files are not worth a process), and only in a process that is not itself a worker
(ranks read in parallel already use the cores). A file the command line's forked child has
been folding (16-128 MiB, any size where two CPUs are idle: advisor.formats.read_ahead) is
shared with that child instead.
`ADVISOR_DECODE_WORKERS` sets the number of processes (default: the CPUs this process may use
that are idle now; 1 turns this off, and the read-ahead too).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

from advisor import cpu_idle
from advisor.collector import tune_for_command_line
from advisor.errors import UnreadableInput
from advisor.formats import read_ahead
from advisor.formats.files import Chunks, Limits, open_content
from advisor.formats.parts import (
    CUT_WINDOW,
    EVENT_START,
    Fold,
    Part,
    PartResult,
    fold_part,
    plan_parts,
)
from advisor.formats.stream import CHUNK_BYTES, Span, array_start
from advisor.progress import FileProgress

S = TypeVar("S")

WORKERS_ENV = "ADVISOR_DECODE_WORKERS"
MIN_BYTES = 64 * 1024 * 1024
"""Smaller files are decoded by one process: starting another costs more than it saves."""
PART_BYTES = 16 * 1024 * 1024
"""About this much of the file per part: small enough to share the work evenly, large enough
that a part's columns are worth sending back."""
SWITCH_S = 0.0005
"""The thread switch interval while workers fold parts. Their results reach this process
through a pipe in 64 KiB pieces, each read by the executor's thread only once it gets the
interpreter lock from the thread folding here: at the default 5 ms a worker waited 30-45 ms
to hand over each part (1.8 MB), at 0.5 ms 5-25 ms."""


@dataclass
class Parts(Generic[S]):
    """The merged state of a file decoded in parts, with what the sequential stream gives."""

    state: S
    header: dict[str, Any]
    events: int
    parts: int  # how many parts the state was merged from
    spans: list[Span] = field(default_factory=list)
    """Where each batch folded lies in the file, in file order (EventStream.spans)."""


Merge = Callable[[list[S]], S]


def decode_workers() -> int:
    """Processes to decode one file with: ADVISOR_DECODE_WORKERS, else the CPUs this process
    may run on that are idle now (on CPUs other work holds, more processes only share them,
    and each costs its start); 1 in a worker process (its parent shares out the cores
    already)."""
    if multiprocessing.parent_process() is not None:
        return 1
    value = os.environ.get(WORKERS_ENV, "").strip()
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            return 1
    try:
        cpus = len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    idle = cpu_idle.idle_cpus()
    return max(1, min(cpus, math.floor(idle + 0.5)))


def read_in_parts(
    path: Path,
    decode: Callable[[bytes], list[Any]],
    fold: Fold[S],
    merge: Merge[S],
    *,
    progress: FileProgress | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    min_bytes: int | None = None,
) -> Parts[S] | None:
    """The file decoded in parts on several processes and merged, or shared with the command
    line's read-ahead child, which folds it from the back (advisor.formats.read_ahead); None
    when the file is not worth it (smaller than `min_bytes`, default MIN_BYTES) or not
    suitable (then the caller reads it sequentially).

    `decode` and `fold` must be importable by name (a worker process unpickles them): `fold`
    iterates a stream of one part and returns the reader's state of those events, `merge`
    joins the states of consecutive parts, in file order.
    """
    shared = read_ahead.shared(path, decode, fold, chunk_bytes)
    if shared is not None:  # the command line's read-ahead child folds it from the back

        def here(part: Part) -> PartResult[S]:
            return fold_part(str(path), part, shared.prefix, decode, fold, chunk_bytes)

        return merge_parts(path, shared.parts, shared.fold_with(here), here, merge, progress)
    compressed = path.suffix.lower() == ".gz"
    try:
        size = _inflated_size(path) if compressed else path.stat().st_size
    except OSError:
        return None
    if size < (MIN_BYTES if min_bytes is None else min_bytes):
        return None
    workers = decode_workers()  # after the size: it may watch the CPUs (cpu_idle)
    if workers < 2:
        return None
    count = max(workers, math.ceil(size / PART_BYTES))  # parts
    if compressed:
        with _pool(workers - 1) as pool, _switch_interval(SWITCH_S):
            return run_inflated_parts(
                path, decode, fold, merge, pool, progress, chunk_bytes, workers - 1, size // count
            )
    plan = plan_parts(path, count)
    if plan is None:
        return None
    prefix, parts = plan
    processes = min(workers, len(parts)) - 1
    with _pool(processes) as pool, _switch_interval(SWITCH_S if processes else None):
        return run_parts(
            path, prefix, parts, decode, fold, merge, pool, progress, chunk_bytes, processes
        )


@contextmanager
def _switch_interval(seconds: float | None) -> Iterator[None]:
    """The interpreter's thread switch interval set to `seconds` (None: left as it is) until
    the block ends."""
    if seconds is None:
        yield
        return
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


@contextmanager
def _pool(processes: int) -> Iterator[Executor | None]:
    """Worker processes, or none (the calling process folds every part)."""
    if processes < 1:
        with nullcontext() as none:
            yield none
        return
    with ProcessPoolExecutor(
        processes,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=tune_for_command_line,  # they are advisor's processes alone
    ) as pool:
        yield pool


def run_parts(
    path: Path,
    prefix: bytes,
    parts: list[Part],
    decode: Callable[[bytes], list[Any]],
    fold: Fold[S],
    merge: Merge[S],
    pool: Executor | None,
    progress: FileProgress | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    processes: int = 1,
) -> Parts[S] | None:
    """Fold every part (the pool's from the back, this process's from the front, until they
    meet), check them in file order, merge. None when the sequential path must read the
    file."""

    def here(part: Part) -> PartResult[S]:
        return fold_part(str(path), part, prefix, decode, fold, chunk_bytes)

    results: list[PartResult[S] | None] = [None] * len(parts)
    futures: dict[int, Future[PartResult[S]]] = {}
    front, back = 0, len(parts)  # this process takes parts[:front], the pool parts[back:]

    def top_up() -> None:
        """Keep two parts per worker submitted and not done (one running, one waiting), taken
        from the back: a part submitted cannot be taken back once a worker holds it."""
        nonlocal back, pool
        try:
            while pool is not None and back - 1 >= front:
                if sum(not f.done() for f in futures.values()) >= 2 * processes:
                    return
                back -= 1
                futures[back] = pool.submit(
                    fold_part, str(path), parts[back], prefix, decode, fold, chunk_bytes
                )
        except RuntimeError:  # no process can start (a spawned child still importing its main)
            pool = None

    try:
        top_up()
        while front < back:
            front += 1
            results[front - 1] = here(parts[front - 1])
            top_up()
        for i, future in futures.items():
            results[i] = future.result()
    except BrokenExecutor:
        return None
    finally:
        for future in futures.values():
            future.cancel()
    return merge_parts(path, parts, results, here, merge, progress)


def merge_parts(
    path: Path,
    parts: list[Part],
    results: list[PartResult[S] | None],
    here: Callable[[Part], PartResult[S]],
    merge: Merge[S],
    progress: FileProgress | None = None,
) -> Parts[S] | None:
    """The parts' results checked in file order and merged; a part whose end proved to be
    no event boundary is folded again (`here`) together with the next. None when the
    sequential path must read the file."""
    states: list[S] = []
    spans: list[Span] = []
    events, i = 0, 0
    header: dict[str, Any] = {}
    while i < len(parts):
        result, end = results[i], i + 1
        # Part i starts at an event (the first byte of the array, or the end of a part that
        # decoded whole). Failing at its end, it takes the next part in too.
        while result is not None and result.state is None and result.cut and end < len(parts):
            result = here(Part(parts[i].start, parts[end].end))
            end += 1
        if result is None or result.state is None or not result.clean:
            return None  # invalid bytes, NaN, a cut file: the sequential path says what
        states.append(result.state)
        spans += result.spans
        events += result.events
        header = result.header or header
        if progress is not None:
            after = parts[end].start if end < len(parts) else path.stat().st_size
            progress.read(after - parts[i].start)
            progress.decoded(result.events)
        i = end
    return Parts(merge(states), header, events, len(states), spans)


def _inflated_size(path: Path) -> int:
    """A .gz file's inflated size as gzip notes it in its last four bytes (modulo 4 GiB, and
    of the last member only): a guess for whether to cut it, never trusted beyond that."""
    with open(path, "rb") as raw:
        raw.seek(0, os.SEEK_END)
        if raw.tell() < 18:  # a header and a trailer
            return 0
        raw.seek(-4, os.SEEK_END)
        return int.from_bytes(raw.read(4), "little")


def run_inflated_parts(
    path: Path,
    decode: Callable[[bytes], list[Any]],
    fold: Fold[S],
    merge: Merge[S],
    pool: Executor | None,
    progress: FileProgress | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    processes: int = 1,
    part_bytes: int = PART_BYTES,
) -> Parts[S] | None:
    """A .gz file inflated here and cut into parts of about `part_bytes` as its bytes arrive,
    each part folded by the pool while it has fewer than two unfinished parts per worker,
    else here; checked and merged in file order. None when the sequential path must read the
    file: it could not be inflated (within its limits) or cut, or a part failed (its bytes
    are gone by then)."""
    pending: list[Future[PartResult[S]] | PartResult[S]] = []
    try:
        with open_content(path, Limits.from_env(path)) as (content, raw):
            for part, data, prefix in _inflated_cuts(
                path, content, raw, progress, chunk_bytes, part_bytes
            ):
                waiting = sum(isinstance(p, Future) and not p.done() for p in pending)
                task = partial(fold_part, str(path), part, prefix, decode, fold, chunk_bytes, data)
                pending.append(
                    pool.submit(task) if pool is not None and waiting < 2 * processes else task()
                )
                del data, task  # the part's bytes freed before the next part's are cut
        results = [p.result() if isinstance(p, Future) else p for p in pending]
    except (UnreadableInput, EOFError, OSError, BrokenExecutor):  # BadGzipFile: an OSError
        return None
    finally:
        for p in pending:
            if isinstance(p, Future):
                p.cancel()
    if not results or any(r.state is None or not r.clean for r in results):
        return None
    if progress is not None:
        progress.decoded(sum(r.events for r in results))
    header: dict[str, Any] = {}
    for result in results:
        header = result.header or header
    return Parts(
        merge([r.state for r in results if r.state is not None]),
        header,
        sum(r.events for r in results),
        len(results),
        [span for r in results for span in r.spans],
    )


def _inflated_cuts(
    path: Path,
    content: Chunks,
    raw: BinaryIO,
    progress: FileProgress | None,
    chunk_bytes: int,
    part_bytes: int,
) -> Iterator[tuple[Part, bytes, bytes]]:
    """(part, its bytes, the text before the array) of inflated `content`, cut about every
    `part_bytes` at a proposed event boundary (plan_parts' rule); raises UnreadableInput when
    there is no event array or no boundary within CUT_WINDOW after a proposed cut."""
    buf = bytearray()

    def more() -> bool:
        """Inflate the next chunk onto `buf`; False at the end."""
        chunk = content.read(chunk_bytes)
        if progress is not None and chunk:
            progress.read(raw.tell() - progress.done_bytes)
        buf.extend(chunk)
        return bool(chunk)

    eof = False
    while not eof and len(buf) < CUT_WINDOW:
        eof = not more()
    start = array_start(bytes(buf[:CUT_WINDOW]))
    if start is None:
        raise UnreadableInput(path, "no event array near the start")
    prefix, begin = start
    base = 0  # buf[0] is byte `base` of the content
    while True:
        at = begin - base + max(part_bytes, 1)  # where a cut is proposed
        match = None
        while True:
            if at < len(buf):
                match = EVENT_START.search(buf, at, at + CUT_WINDOW)
            if match is not None or eof or len(buf) >= at + CUT_WINDOW:
                break
            eof = not more()
        if match is None:
            if not eof:
                raise UnreadableInput(path, "no event boundary to cut at")
            yield Part(begin, None), bytes(buf[begin - base :]), prefix
            return
        end = match.start() + 1
        yield Part(begin, base + end), bytes(buf[begin - base : end]), prefix
        begin = base + match.start(1)
        del buf[: begin - base]
        base = begin
