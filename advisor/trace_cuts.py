"""A trace snippet's events cut from the profile's original Chrome trace.

The file is streamed once (formats/stream.EventStream) for all windows of the profile, never
loaded whole; of a file its reader indexed (formats/trace_index) only the batches that can
hold a window's events or a lane's name are decoded. Kept apart from advisor/traces.py so that
a profile read from other files (CSV, databases) never imports the JSON decoders.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from advisor.engine.windows import Window
from advisor.errors import UnreadableInput
from advisor.formats import trace_index
from advisor.formats.files import Chunks, Limits, open_content
from advisor.formats.stream import CutNotAtEvent, EventStream, array_start
from advisor.snippet_picks import Lanes, Offered, Pick

if TYPE_CHECKING:
    from advisor.formats.stream import Span
    from advisor.formats.trace_index import TraceIndex

CHUNK_BYTES = 2 * 1024 * 1024
"""Bytes of a trace decoded at a time when no index names the parts (all but the last batch
become `_Event` structs); the readers' batch size (advisor.formats.stream.CHUNK_BYTES)."""
PARALLEL_BYTES = 128 * 1024 * 1024
"""Trace files from this size are filtered for the snippets on several cores: a snippet's
pass does less per event than a reader, so starting processes pays off later (an 88 MB
trace: no faster; 406 MB: 2.4 -> 1.7 s on two cores)."""
INDEXED_SHARE = 0.75
"""A file is decoded whole (on several cores when large) when the batches its index names
for the windows are more than this share of it."""
_HEAD_BYTES = 1024 * 1024  # where the event array must start for a file's parts to be read
_METADATA = {"process_name", "process_labels", "process_sort_index", "thread_name"}
_METADATA |= {"thread_sort_index"}
_NO_ARGS = msgspec.Raw()
_NUMBERS = (float, int)


def _relative(ts: Any, whole: int, frac: float) -> float | None:
    """A `ts` as written (number or decimal string) minus the origin (whole + frac), exact
    to the digits of a decimal string: epoch µs do not fit a float64's fraction."""
    if isinstance(ts, str):
        head, _, tail = ts.strip().partition(".")
        try:
            return (int(head) - whole) + (float("0." + tail) if tail else 0.0) - frac
        except ValueError:
            try:
                return float(ts) - whole - frac
            except ValueError:
                return None
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return float(ts) - whole - frac
    return None


def _duration(value: Any) -> float | None:
    try:
        dur = float(value)
    except (TypeError, ValueError):
        return None
    return dur if math.isfinite(dur) and dur >= 0 else None


class _Event(msgspec.Struct, gc=False):
    """The keys a snippet copies; args stay raw JSON until an event is kept."""

    ph: Any = None
    name: Any = ""
    cat: Any = None
    pid: Any = None
    tid: Any = 0
    ts: Any = None
    dur: Any = None
    args: msgspec.Raw = _NO_ARGS


_DECODER = msgspec.json.Decoder(list[_Event])


def _decode(data: bytes) -> list[Any]:
    """An EventStream `decode`: events as `_Event`s, dicts where the structs cannot hold the
    batch (an entry that is no object), ValueError on invalid JSON."""
    try:
        return _DECODER.decode(data)
    except msgspec.ValidationError:
        return orjson.loads(data)
    except msgspec.DecodeError as exc:  # not a ValueError in every msgspec version
        raise ValueError(str(exc)) from None


def _as_event(entry: Any) -> _Event | None:
    """An entry of a batch decoded as dicts (the stream's last batch, fallbacks) as an
    `_Event`; None for an entry that is no event object."""
    if entry.__class__ is _Event:
        return entry  # type: ignore[no-any-return]
    if not isinstance(entry, dict):
        return None
    args = entry.get("args")
    return _Event(
        ph=entry.get("ph"),
        name=entry.get("name", ""),
        cat=entry.get("cat"),
        pid=entry.get("pid"),
        tid=entry.get("tid", 0),
        ts=entry.get("ts"),
        dur=entry.get("dur"),
        args=msgspec.Raw(orjson.dumps(args)) if isinstance(args, dict) else _NO_ARGS,
    )


def from_files(
    files: Sequence[Path],
    origin: float,
    windows: Sequence[Window],
    indexes: Mapping[str, TraceIndex],
) -> list[Pick]:
    """One pass over the trace files, each event offered to the windows it overlaps. Of a
    file the reader indexed only the batches that can hold a window's events are decoded
    (advisor.formats.trace_index); a large uncompressed file is otherwise filtered on several
    cores (advisor.formats.parallel), each part's candidates coming back in file order: the
    same events, offered in the same order."""
    lanes = Lanes()
    picks = [Pick(window, lanes) for window in windows]
    spans: dict[tuple[float, float], list[Pick]] = {}  # windows that differ in names only
    for pick in picks:
        spans.setdefault((pick.window.start_us, pick.window.end_us), []).append(pick)
    bounds, sharing = list(spans), [Offered(same) for same in spans.values()]
    order = itertools.count()
    seen: set[tuple[Any, ...]] = set()  # an event msprof writes in two timelines is kept once
    for path in files:
        for candidate in _file_candidates(path, origin, bounds, indexes):
            event = candidate[0]
            if len(candidate) == 1:  # metadata naming a lane
                lanes.metadata(event.name, event.pid, event.tid, _args(event))
                continue
            _, start, dur, hits = candidate
            kept = _kept(event, start, dur, lanes)
            if kept is None:
                continue
            if len(files) > 1:
                key = (kept["name"], kept["ts"], kept["dur"], kept["pid"], kept["tid"])
                if key in seen:
                    continue
                seen.add(key)
            n = next(order)
            for window in hits:
                sharing[window].offer(kept, n)
    for offered in sharing:
        offered.close()
    return picks


def _file_candidates(
    path: Path,
    origin: float,
    windows: Sequence[tuple[float, float]],
    indexes: Mapping[str, TraceIndex],
) -> Iterator[tuple[Any, ...]]:
    """The candidates (_candidates) of one file, in file order: from the parts its index
    names (of a .gz file always, of another when they are a good deal less than the file),
    else from its parts decoded on several cores when the file is large and uncompressed,
    else from one stream."""
    from advisor.formats.parallel import read_in_parts  # only for a large file

    indexed = _indexed_parts(path, origin, windows, indexes)
    if indexed is not None:
        prefix, parts = indexed
        streams = _inflated_parts if _compressed(path) else _file_parts
        try:
            for stream in streams(path, parts, prefix):
                yield from _candidates(stream, origin, windows)
        except CutNotAtEvent:
            raise UnreadableInput(path, "changed since it was read") from None
        return
    parts = read_in_parts(
        path,
        _decode,
        partial(_part_candidates, origin=origin, windows=tuple(windows)),
        _concatenated,
        chunk_bytes=CHUNK_BYTES,
        min_bytes=PARALLEL_BYTES,
    )
    if parts is not None:
        yield from parts.state
        return
    yield from _candidates(
        EventStream(path, chunk_bytes=CHUNK_BYTES, decode=_decode), origin, windows
    )


def _indexed_parts(
    path: Path,
    origin: float,
    windows: Sequence[tuple[float, float]],
    indexes: Mapping[str, TraceIndex],
) -> tuple[bytes, list[Span]] | None:
    """(the text before the event array, the parts to decode) when the reader indexed this
    file as it is now and, for an uncompressed file, the parts are at most INDEXED_SHARE of it
    (a .gz file is inflated whole either way: its parts only spare decoding); else None."""
    index = indexes.get(trace_index.key(path)) if indexes else None
    if index is None:
        return None
    parts = index.parts(path, origin, list(windows))
    if parts is None:
        return None
    if _compressed(path):
        with _inflating(path) as content:
            head = content.read(_HEAD_BYTES)
    else:
        taken = sum((index.size if end is None else end) - start for start, end in parts)
        if taken > INDEXED_SHARE * index.size:
            return None
        with open(path, "rb") as raw:
            head = raw.read(_HEAD_BYTES)
    start = array_start(head)
    if start is None:
        return None
    return start[0], parts


def _compressed(path: Path) -> bool:
    return path.suffix.lower() == ".gz"


def _file_parts(path: Path, parts: list[Span], prefix: bytes) -> Iterator[EventStream]:
    """A stream of each part of an uncompressed file, which each seeks to its part."""
    for span in parts:
        yield EventStream(path, chunk_bytes=CHUNK_BYTES, decode=_decode, span=span, prefix=prefix)


def _inflated_parts(path: Path, parts: list[Span], prefix: bytes) -> Iterator[EventStream]:
    """A stream of each part of a .gz file, all from one pass of inflating it: the bytes
    between parts are inflated and dropped. Each stream must be read to its end before the
    next is taken."""
    with _inflating(path) as content:
        at = 0  # where the content stands
        for start, end in parts:
            _skip(path, content, start - at)
            yield EventStream(
                path,
                chunk_bytes=CHUNK_BYTES,
                decode=_decode,
                span=(start, end),
                prefix=prefix,
                content=content,
            )
            if end is None:
                return
            at = end


@contextmanager
def _inflating(path: Path) -> Iterator[Chunks]:
    """A .gz file's content, within the same limits as its reader's (formats.files.Limits);
    a file that no longer inflates is UnreadableInput."""
    try:
        with open_content(path, Limits.from_env(path)) as (content, _):
            yield content
    except (EOFError, OSError):  # gzip.BadGzipFile is an OSError
        raise UnreadableInput(
            path, "changed since it was read: truncated or corrupt gzip data"
        ) from None


def _skip(path: Path, content: Chunks, size: int) -> None:
    """Inflate `size` bytes of `content` and drop them."""
    while size > 0:
        chunk = content.read(min(size, CHUNK_BYTES))
        if not chunk:
            raise UnreadableInput(path, "changed since it was read")
        size -= len(chunk)


def _part_candidates(
    stream: Iterable[list[Any]], origin: float, windows: tuple[tuple[float, float], ...]
) -> list[tuple[Any, ...]]:
    """The candidates of one part of a file (in a worker process)."""
    return list(_candidates(stream, origin, windows))


def _concatenated(parts: list[list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    return [candidate for part in parts for candidate in part]


def _candidates(
    batches: Iterable[list[Any]], origin: float, windows: Sequence[tuple[float, float]]
) -> Iterator[tuple[Any, ...]]:
    """The events of `batches` a snippet may hold, in order: (event,) for metadata naming a
    lane, (event, start, dur, windows it overlaps) for a complete event in a window, its start
    relative to `origin` (exact to a decimal string's digits)."""
    lo = min(a for a, _ in windows)
    hi = max(b for _, b in windows)
    whole = math.floor(origin)
    frac = origin - whole
    for batch in batches:
        for entry in batch:  # the hot loop: one pass over every event of the trace
            event = entry if entry.__class__ is _Event else _as_event(entry)
            if event is None:
                continue
            ph = event.ph
            if ph != "X":
                if ph == "M" and event.name in _METADATA:
                    yield (event,)
                continue
            ts, dur = event.ts, event.dur
            # a decimal string is placed by its float first (0.25 µs off at epoch µs),
            # exactly once it is inside a window; inline, not a call: this runs per event
            if ts.__class__ is str:
                try:
                    start = float(ts) - origin
                except ValueError:
                    continue
            elif ts.__class__ in _NUMBERS:
                start = ts - origin
            else:
                continue
            if dur.__class__ not in _NUMBERS or not 0 <= dur < math.inf:
                dur = _duration(dur)
            if dur is None or not (start <= hi and start + dur >= lo):
                continue  # also a NaN start (a trace written with NaN)
            end = start + dur
            hits = [i for i, (a, b) in enumerate(windows) if start <= b and end >= a]
            if not hits:
                continue  # between two windows
            if ts.__class__ is str:
                start = _relative(ts, whole, frac)
                if start is None:
                    continue
            yield (event, start, dur, hits)


def _args(event: _Event) -> dict[str, Any] | None:
    """An event's args as a dict, None when it has none (or they are no object)."""
    if not event.args:
        return None
    try:
        args = msgspec.json.decode(event.args)
    except msgspec.DecodeError:
        return None
    return args if isinstance(args, dict) else None


def _kept(event: _Event, start: float, dur: float, lanes: Lanes) -> dict[str, Any] | None:
    """The event as a snippet holds it: its time relative to the profile, integer lanes."""
    pid, tid = event.pid, event.tid
    pid = pid if pid.__class__ is int else lanes.id(pid)  # most lanes are ints: no call
    tid = tid if tid.__class__ is int else lanes.id(tid)
    if pid is None or tid is None:
        return None
    kept = {
        "name": str(event.name),
        "ph": "X",
        "ts": round(start, 3),
        "dur": round(dur, 3),
        "pid": pid,
        "tid": tid,
    }
    if isinstance(event.cat, str):
        kept["cat"] = event.cat
    args = _args(event)
    if args is not None:
        kept["args"] = args
    return kept
