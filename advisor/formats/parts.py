"""A trace file's event array cut into parts at event boundaries, and one part folded into a
reader's state: what the processes decoding one file together share (advisor.formats.parallel,
advisor.formats.read_ahead).

Where to cut. A part boundary is proposed after an approximate offset at the first `}`, `,`,
`{"key":` with only whitespace between (an event's start, which a string can only mimic in
contrived ways: inside a string every `"` is escaped). It is proven afterwards, never trusted:
the first part starts at the array's first byte, and a part that starts at an event and
decodes as a whole (`[` + its bytes + `]`) ends at an event boundary, since the decoder's
parse of those bytes is the file's own (`parallel.merge_parts` checks them in file order).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from advisor.errors import UnreadableInput
from advisor.formats.stream import CutNotAtEvent, EventStream, Span, array_start

S = TypeVar("S")

Fold = Callable[[EventStream], S]
"""A reader's fold: the state (columns, a walk) of the events of one stream."""

CUT_WINDOW = 1024 * 1024
"""Bytes searched for an event start after an approximate offset."""
EVENT_START = re.compile(rb'\}\s*,\s*(\{\s*"[^"\\]*"\s*:)')


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


def plan_parts(path: Path, count: int) -> tuple[bytes, list[Part]] | None:
    """(the text before the array, about `count` parts) of an uncompressed trace file; None
    when it has no event array or too few event starts to cut at."""
    with open(path, "rb") as raw:
        start = array_start(raw.read(CUT_WINDOW))
        if start is None:
            return None
        prefix, first = start
        size = os.fstat(raw.fileno()).st_size
        parts: list[Part] = []
        begin = first
        for k in range(1, count):
            at = max(first + (size - first) * k // count, begin)
            raw.seek(at)
            match = EVENT_START.search(raw.read(CUT_WINDOW))
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
    data: bytes | None = None,
) -> PartResult[S]:
    """One part folded into the reader's state (in a worker process, the read-ahead child or
    the caller's), read from the file or, for a .gz file, from `data`, its inflated bytes."""
    stream = EventStream(
        Path(path),
        decode=decode,
        chunk_bytes=chunk_bytes,
        span=(part.start, part.end),
        prefix=prefix,
        content=None if data is None else io.BytesIO(data),
    )
    try:
        state = fold(stream)
    except CutNotAtEvent:
        return PartResult(None, cut=True)
    except UnreadableInput:
        return PartResult(None)
    clean = not stream.non_finite and stream.truncated is None
    return PartResult(state, stream.events, stream.header, clean, spans=stream.spans)
