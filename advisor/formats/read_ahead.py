"""Trace files folded ahead, in a forked child, while the command line prepares.

An `advisor run` spends its first half second or more on one core importing pandas and
preparing the rules; folding a trace's events into a reader's state (columns, a walk) needs
neither. So, before that, the command line forks a child that cuts each trace file the
claiming readers name (`Reader.trace_folds`) into parts and folds them from the back; when a
reader reaches the file, `advisor.formats.parallel.read_in_parts` folds the front here until
it meets the child, and merges both shares in file order (advisor.formats.shared_folds).

Fork, not spawn: a spawned process imports advisor and its libraries again (1.5 s on a
2-core machine), a forked one starts with them. Fork copies only the calling thread, so locks
other threads held stay held in the copy: the child is forked only on Linux and only while
the process has one thread, which the command line has before it imports NumPy or pyarrow
(both start threads). A file that does not read cleanly (NaN, cut short, unreadable) goes to
its reader's sequential path, which words the problem as before. So the tables and findings
are the same with or without the child, and it writes nothing but an unlinked temporary file.

This module is light (the standard library): every `advisor run` imports it, and only one
that forks loads the decoding (shared_folds).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor import collector

if TYPE_CHECKING:
    from advisor.formats.parts import Fold
    from advisor.formats.shared_folds import AheadFile, ReadAhead

MIN_BYTES = 16 * 1024 * 1024
"""Smaller files are folded by their readers: on 6-9 MB traces the child saved nothing (its
imports take most of the head start) and cost 0.3 s of CPU (benchmarks/README.md, round 24)."""
MAX_BYTES = 128 * 1024 * 1024
"""At most this much is folded ahead, the files together: where more than two CPUs are idle a
larger file decodes faster on all of them (advisor.formats.parallel) than shared with one
child, and later files wait for their readers. Where two are, the first file goes to the child
whatever its size: the parallel path would give it one more process too, spawned (its start
costs a second or more), where the child is forked and starts before the preparation."""


@dataclass(frozen=True)
class TraceFold:
    """A trace file a reader will fold, and how: `read_in_parts(path, decode, fold, ...,
    chunk_bytes=chunk_bytes)` with these very functions (compared by equality) takes the
    parts folded ahead."""

    path: Path
    decode: Callable[[bytes], list[Any]]
    fold: Fold[Any]
    chunk_bytes: int | None = None
    """The batch size `read` passes; None: EventStream's default (stream.CHUNK_BYTES)."""

    def batch_bytes(self) -> int:
        from advisor.formats.stream import CHUNK_BYTES  # loaded by then: the caller streams

        return CHUNK_BYTES if self.chunk_bytes is None else self.chunk_bytes

    def matches(self, path: Path, decode: object, fold: object, chunk_bytes: int) -> bool:
        return (
            self.path == path
            and self.decode == decode
            and self.fold == fold
            and self.batch_bytes() == chunk_bytes
        )


_current: ReadAhead | None = None


def shared(path: Path, decode: object, fold: object, chunk_bytes: int) -> AheadFile | None:
    """The running read-ahead's share of `path` folded with these functions, else None."""
    if _current is None:
        return None
    return _current.shared(path, decode, fold, chunk_bytes)


def can_fork() -> bool:
    """Whether forking is safe here: Linux, and this process has one thread."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


@contextmanager
def folding(jobs: Sequence[TraceFold]) -> Iterator[None]:
    """Fold `jobs` ahead in a forked child until the block ends, when this is a command-line
    process, forking is safe and another CPU is idle (parallel.decode_workers, which
    ADVISOR_DECODE_WORKERS=1 sets to one); else the readers fold their files themselves."""
    global _current
    if (
        not _worth_it(jobs, two_cpus=True)
        or _current is not None
        or not collector.in_command_line()
    ):
        yield
        return
    # loaded only here: the decoding, which the parallel path takes the shares from
    from advisor.formats.parallel import decode_workers
    from advisor.formats.shared_folds import ReadAhead

    workers = decode_workers() if can_fork() else 1
    jobs = _worth_it(jobs, two_cpus=workers == 2)
    if workers < 2 or not jobs:
        yield
        return
    try:
        _current = ReadAhead(jobs)
    except OSError:  # no process, pipe or temporary file to be had: read as usual
        yield
        return
    try:
        yield
    finally:
        ahead, _current = _current, None
        ahead.close()


def _worth_it(jobs: Sequence[TraceFold], *, two_cpus: bool) -> list[TraceFold]:
    """The uncompressed files (a .gz one cannot be entered in the middle) of MIN_BYTES or
    more, in order, as long as they come to MAX_BYTES together, the first one whatever its
    size when `two_cpus` are idle: the child's results wait in its temporary file until their
    reader gets there, so it never runs far ahead."""
    chosen: list[TraceFold] = []
    total = 0
    for job in jobs:
        try:
            size = job.path.stat().st_size
        except OSError:
            continue
        if job.path.suffix.lower() == ".gz" or size < MIN_BYTES:
            continue
        total += size
        if total > MAX_BYTES and (chosen or not two_cpus):
            break
        chosen.append(job)
    return chosen
