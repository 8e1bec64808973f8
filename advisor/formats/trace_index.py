"""Where each stretch of time lies in a trace file, so that cutting the windows of a run's
findings (advisor.traces) decodes only the batches that can hold their events, not the whole
file a second time: on a 300 MB trace that second pass was a third of the run.

A reader that decodes a file batch by batch (advisor.formats.stream) notes for each batch the
earliest start and the latest end of its complete (`X`) events on the file's own clock, and
whether it holds metadata events (which name the lanes every snippet shows); the stream notes
where the batch's bytes lie (in a .gz file's inflated content, which the snippets then
inflate once more but decode only in part). A batch holding an event whose time or duration
the reader could not read, or an entry it could not take as an event, is unbounded: read for
every window, because the snippet's own reading might still place it. The index describes the
file as it was read: it is used only while the file keeps that size and modification time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from advisor.formats.stream import Span

if TYPE_CHECKING:
    from advisor.model import ProfileMeta

MARGIN_US = 2.0
"""Slack on both sides of a window: a batch's end is summed before the origin is subtracted,
a snippet's after, and at epoch microseconds a float is exact to 0.25 µs only."""


class BatchTimes(NamedTuple):
    """What a reader saw in one batch (times on the file's clock, as written)."""

    first: float = math.inf  # earliest start of a complete event (inf: none)
    last: float = -math.inf  # latest end of one (-inf: none)
    names_lanes: bool = False  # holds metadata events


UNBOUNDED = BatchTimes(-math.inf, math.inf, True)
"""A batch with something the reader could not place in time."""


@dataclass(frozen=True)
class TraceIndex:
    """The batches of one trace file: span of its content and times, in file order; `size`
    and `mtime_ns` are the file's own (compressed, for a .gz file)."""

    size: int
    mtime_ns: int
    spans: tuple[Span, ...]
    times: tuple[BatchTimes, ...]

    def parts(
        self, path: Path, origin: float, windows: list[tuple[float, float]]
    ) -> list[Span] | None:
        """The spans of the file that can hold an event of `windows` (µs after `origin`) or
        a lane's name, consecutive batches joined, in file order; None when the file is no
        longer the one indexed."""
        try:
            stat = path.stat()
        except OSError:
            return None
        if (stat.st_size, stat.st_mtime_ns) != (self.size, self.mtime_ns):
            return None
        placed = [(a + origin - MARGIN_US, b + origin + MARGIN_US) for a, b in windows]
        parts: list[Span] = []
        previous = False  # whether the batch before was taken
        for (start, end), times in zip(self.spans, self.times):
            taken = times.names_lanes or any(
                times.first <= b and times.last >= a for a, b in placed
            )
            if taken and previous:
                parts[-1] = (parts[-1][0], end)
            elif taken:
                parts.append((start, end))
            previous = taken
        return parts


def build(path: Path, spans: list[Span], times: list[BatchTimes]) -> TraceIndex | None:
    """The index of a file read in batches; None when the stream noted no spans or the
    reader's notes do not pair with them one to one."""
    if not spans or len(spans) != len(times):
        return None
    try:
        stat = path.stat()
    except OSError:
        return None
    return TraceIndex(stat.st_size, stat.st_mtime_ns, tuple(spans), tuple(times))


def record(meta: ProfileMeta, path: Path, spans: list[Span], times: list[BatchTimes]) -> None:
    """Keep the index of a file read in batches with the profile (ProfileMeta.trace_index),
    when there is one (build)."""
    index = build(path, spans, times)
    if index is not None:
        meta.trace_index[key(path)] = index


def key(path: Path) -> str:
    """How ProfileMeta.trace_index names a file: the same file however a path reaches it."""
    return str(path.resolve())
