"""One large trace file decoded on several cores: its event array cut into parts at event
boundaries, each part decoded and folded into a reader's partial state (columns) by a worker
process, the partial states merged in file order.

Decoding is CPU-bound and msgspec holds the GIL, so the parts go to processes, started with
spawn like the rank readers' (a reader may have started threads, which fork copies broken).
What comes back is each part's columns, a few bytes per event, never the decoded events. The
calling process folds parts too, taking them from the front of the file while the pool takes
them from the back, so a worker that starts late or a busy machine only shifts the share.

Where to cut. A part boundary is proposed after an approximate offset at the first `}`, `,`,
`{"key":` with only whitespace between (an event's start, which a string can only mimic in
contrived ways: inside a string every `"` is escaped). It is proven afterwards, never trusted:
the first part starts at the array's first byte, and a part that starts at an event and
decodes as a whole (`[` + its bytes + `]`) ends at an event boundary, since the decoder's
parse of those bytes is the file's own. So the parts are checked in file order; a part that
fails (its end was a cut inside a string or inside an event) is decoded again together with
the next part, whose result is dropped. Anything else unusual (NaN, a cut file, invalid
JSON, a worker that died) hands the file back to the sequential path, which reads it and words
the problem as before: the parallel path gives the same result or none.

Only uncompressed files of at least `MIN_BYTES` are cut (a .gz stream cannot be entered in
the middle, and small files are not worth a process), and only in a process that is not
itself a worker (ranks read in parallel already use the cores). `ADVISOR_DECODE_WORKERS` sets
the number of processes (default: the CPUs this process may use that are idle now; 1 turns
this off).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import re
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import BrokenExecutor, Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from advisor import cpu_idle
from advisor.collector import tune_for_command_line
from advisor.errors import UnreadableInput
from advisor.formats.stream import (
    CHUNK_BYTES,
    CutNotAtEvent,
    EventStream,
    Span,
    array_start,
)
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
_WINDOW = 1024 * 1024  # bytes searched for an event start after an approximate offset
_EVENT_START = re.compile(rb'\}\s*,\s*(\{\s*"[^"\\]*"\s*:)')


@dataclass(frozen=True)
class Part:
    """Bytes [start, end) of the file: whole events separated by commas; `end` None for the
    last part, which runs to the end of the file (the array's `]` and what follows)."""

    start: int
    end: int | None


@dataclass
class PartResult(Generic[S]):
    """What one part gave: its reader state, or None when it failed (`problem` says why)."""

    state: S | None
    events: int = 0
    header: dict[str, Any] | None = None
    clean: bool = True  # no NaN, not cut short: read exactly as the sequential path reads it
    cut: bool = False  # failed because its end is no event boundary (else: invalid bytes)
    spans: list[Span] = field(default_factory=list)  # EventStream.spans


@dataclass
class Parts(Generic[S]):
    """The merged state of a file decoded in parts, with what the sequential stream gives."""

    state: S
    header: dict[str, Any]
    events: int
    parts: int  # how many parts the state was merged from
    spans: list[Span] = field(default_factory=list)
    """Where each batch folded lies in the file, in file order (EventStream.spans)."""


Fold = Callable[[EventStream], S]
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
    """The file decoded in parts on several processes and merged; None when the file is not
    worth it (smaller than `min_bytes`, default MIN_BYTES) or not suitable (then the caller
    reads it sequentially).

    `decode` and `fold` must be importable by name (a worker process unpickles them): `fold`
    iterates a stream of one part and returns the reader's state of those events, `merge`
    joins the states of consecutive parts, in file order.
    """
    if path.suffix.lower() == ".gz":
        return None
    try:
        size = path.stat().st_size
    except OSError:
        return None
    if size < (MIN_BYTES if min_bytes is None else min_bytes):
        return None
    workers = decode_workers()  # after the size: it may watch the CPUs (cpu_idle)
    if workers < 2:
        return None
    plan = plan_parts(path, max(workers, math.ceil(size / PART_BYTES)))
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


def plan_parts(path: Path, count: int) -> tuple[bytes, list[Part]] | None:
    """(the text before the array, about `count` parts) of an uncompressed trace file; None
    when it has no event array or too few event starts to cut at."""
    with open(path, "rb") as raw:
        start = array_start(raw.read(_WINDOW))
        if start is None:
            return None
        prefix, first = start
        size = os.fstat(raw.fileno()).st_size
        parts: list[Part] = []
        begin = first
        for k in range(1, count):
            at = max(first + (size - first) * k // count, begin)
            raw.seek(at)
            match = _EVENT_START.search(raw.read(_WINDOW))
            if match is None:
                continue
            parts.append(Part(begin, at + match.start() + 1))
            begin = at + match.start(1)
        parts.append(Part(begin, None))
    return (prefix, parts) if len(parts) > 1 else None


def fold_part(
    path: str,
    part: Part,
    prefix: bytes,
    decode: Callable[[bytes], list[Any]],
    fold: Fold[S],
    chunk_bytes: int,
) -> PartResult[S]:
    """One part folded into the reader's state (in a worker process or the caller's)."""
    stream = EventStream(
        Path(path),
        decode=decode,
        chunk_bytes=chunk_bytes,
        span=(part.start, part.end),
        prefix=prefix,
    )
    try:
        state = fold(stream)
    except CutNotAtEvent:
        return PartResult(None, cut=True)
    except UnreadableInput:
        return PartResult(None)
    clean = not stream.non_finite and stream.truncated is None
    return PartResult(state, stream.events, stream.header, clean, spans=stream.spans)


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
