"""Trace snippets: the events of each finding's window as a small Chrome trace.

`advisor run` writes one `traces/finding-<n>.json` per finding with a time window
(engine/windows.py: its worst step, or the span of its evidence), which Perfetto
(ui.perfetto.dev) and chrome://tracing open as it is: the user lands on the events behind the
finding instead of searching a trace of gigabytes for them.

Where the profile is a Chrome trace (Kineto, torch_npu / MindSpore `trace_view.json`, msprof
timelines), a snippet holds the original complete events (`ph: X`, args included) that overlap
the window, and the names of their processes and threads; the file is streamed once
(formats/stream.EventStream) for all windows of the profile, never loaded whole, and of a
file its reader indexed (formats/trace_index) only the batches that can hold a window's
events or a lane's name are decoded. Other formats
(CSV, databases, MindSpore text files, MegEngine) have no trace to cut from: their snippets are
built from the normalized tables (steps, host calls, device tasks, collectives), one process
per table. Either way times are the profile's µs, the time base of the report and its tables.

Bounded: at most MAX_EVENTS complete events per snippet, the operators the evidence names
first, then the longest (`otherData.dropped` counts the rest), and snippets for at most
MAX_PROFILES profiles of a run (those with the most urgent findings), since each re-reads
its trace.
"""

from __future__ import annotations

import heapq
import itertools
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import orjson

from advisor.compat import zip_strict
from advisor.engine.evaluate import Finding
from advisor.engine.outcome import SEVERITIES
from advisor.engine.windows import Window
from advisor.errors import UnreadableInput
from advisor.formats import trace_index
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta
from advisor.version import __version__

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from pandas.api.extensions import ExtensionArray

    from advisor.api import AnalysisResult, ProfileAnalysis
    from advisor.formats.stream import Span
    from advisor.formats.trace_index import TraceIndex
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

MAX_EVENTS = 10_000
"""Complete events a snippet keeps at most."""
MAX_PROFILES = 16
"""Profiles of one run that get snippets at most."""
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
MAX_METADATA = 10_000
"""Process and thread metadata events kept from a trace."""
_METADATA = {"process_name", "process_labels", "process_sort_index", "thread_name"}
_METADATA |= {"thread_sort_index"}
_SYNTHETIC_ID = 900_000_000
"""Where the integer ids of lanes a trace names by a string start (Perfetto wants integers)."""
_MSPROF_TIMELINE = re.compile(r"(msprof|task_time|hccl|step_trace)_[\d_]+\.json")
"""msprof's timelines: per kind, and merged (which repeats some of the others' events)."""
_NO_ARGS = msgspec.Raw()
_NUMBERS = (float, int)
_TABLE_LANES = (("steps", 1, "steps"), ("host_ops", 2, "host"), ("device_ops", 3, "device"))
_TABLE_LANES += (("comm_ops", 4, "communication"),)
_TID_COLUMNS = {"device_ops": "stream", "host_ops": "thread"}
"""The column a table's events take their lane (tid) from; none: all on one."""
_CAT_COLUMNS = {"device_ops": "category", "host_ops": "kind", "comm_ops": "kind"}
"""The column a table's events take their category from."""


def _lane_columns(frame: pd.DataFrame, table: str) -> list[str]:
    """The columns of a TABLE_LANES table its events are made of (`_rows`, `_spans`)."""
    end = "end_us" if table == "steps" else "duration_us"
    wanted = ["start_us", end, "step", "name", _TID_COLUMNS.get(table), _CAT_COLUMNS.get(table)]
    return [c for c in dict.fromkeys(wanted) if c is not None and c in frame]


def snippet_name(profile: str | None, finding: int) -> str:
    """A snippet's file name in the output's `traces/` folder: `finding-<n>.json` for the one
    profile of a run, `finding-<profile>-<n>.json` with several (`<profile>` as in
    `prof_rule_<profile>.json`)."""
    return f"finding-{finding}.json" if profile is None else f"finding-{profile}-{finding}.json"


def snippet_numbers(result: AnalysisResult) -> list[list[int]]:
    """Per analysis of `result` (in its order), the numbers of the findings that get a
    snippet (profile_snippets' keys): those with a window, in the MAX_PROFILES profiles
    chosen; none elsewhere. Known before any trace is read, so the snippets can be cut one
    profile at a time as they are written."""
    chosen = set(_most_urgent(result.analyses))
    return [
        [f.rank for f in a.findings if f.window is not None] if i in chosen else []
        for i, a in enumerate(result.analyses)
    ]


def _most_urgent(analyses: Sequence[ProfileAnalysis]) -> list[int]:
    """The MAX_PROFILES analyses with windows whose findings are most urgent."""

    def urgency(i: int) -> tuple[int, float]:
        placed = [f for f in analyses[i].findings if f.window is not None]
        return (
            min(SEVERITIES.index(f.severity) for f in placed),
            -sum(f.impact_us or 0.0 for f in placed),
        )

    placed = [i for i, a in enumerate(analyses) if any(f.window for f in a.findings)]
    return sorted(placed, key=urgency)[:MAX_PROFILES]


def window_rows(profile: Profile, findings: Sequence[Finding]) -> dict[str, pd.DataFrame]:
    """What a profile's snippets need of its tables, for a run that drops the tables once a
    profile is evaluated (`ProfileAnalysis.without_tables`): nothing where the original trace
    is cut at output time, else the rows of TABLE_LANES' tables that overlap a window (at
    most MAX_EVENTS per table and window, the longest)."""
    windows = [f.window for f in findings if f.window is not None]
    if not windows or trace_files(profile.meta)[0]:
        return {}
    kept: dict[str, pd.DataFrame] = {}
    for table, _, _ in _TABLE_LANES:
        frame = profile.tables.get(table)
        if frame is None or frame.empty or "start_us" not in frame:
            continue
        start, end = _spans(frame, table)
        at = np.unique(np.concatenate([_longest(start, end, w) for w in windows]))
        kept[table] = pd.DataFrame(  # only the columns the events are made of
            {c: frame[c].array.take(at) for c in _lane_columns(frame, table)},
            index=frame.index[at],
        )
    return kept


def _longest(start: np.ndarray, end: np.ndarray, window: Window) -> np.ndarray:
    """Positions of the MAX_EVENTS longest rows overlapping the window (of equally long ones
    the first): what a snippet of the window can show."""
    inside = np.flatnonzero((start <= window.end_us) & (end >= window.start_us))
    if len(inside) <= MAX_EVENTS:
        return inside
    return inside[np.argsort(-(end - start)[inside], kind="stable")[:MAX_EVENTS]]


def profile_snippets(analysis: ProfileAnalysis) -> dict[int, dict[str, Any]]:
    """The snippet of each of the profile's findings that has a window, by its number."""
    placed = [(f, f.window) for f in analysis.findings if f.window is not None]
    if not placed:
        return {}
    # findings often share a window (two rules on the same step): its events are picked once
    windows = list(dict.fromkeys(window for _, window in placed))
    profile = analysis.profile
    tables = profile.tables if analysis.window_rows is None else analysis.window_rows
    files, origin = trace_files(profile.meta)
    note = ""
    picks: list[_Pick] | None = None
    if files and origin is not None:
        try:
            picks = _from_files(files, origin, windows, profile.meta.trace_index)
            source = "original events of " + ", ".join(str(f) for f in files)
        except (UnreadableInput, OSError) as exc:
            note = f"; the original trace could not be read again ({exc})"
    if picks is None:
        picks = [_from_tables(tables, window) for window in windows]
        source = "built from advisor's normalized tables" + note
    by_window = dict(zip_strict(windows, picks))
    return {f.rank: _document(profile, f, by_window[window], source) for f, window in placed}


def trace_files(meta: ProfileMeta) -> tuple[list[Path], float | None]:
    """The Chrome-trace files a profile was read from, and the `ts` of the profile's time 0
    in them; ([], None) when it was read from other files or its origin is unknown."""
    base = Path(meta.path)
    folder = base if base.is_dir() else base.parent
    read = [folder / name for name in meta.files_read]
    extra = meta.extra
    if meta.source_format == "kineto":
        files = [base] if base.is_file() else []
        origin = extra.get("trace_ts_origin")
    elif meta.source_format in ("ascend-pt", "ascend-ms"):
        files = [p for p in read if p.name == "trace_view.json"]
        origin = extra.get("time_origin_us")
    elif meta.source_format.startswith("msprof"):
        files = [p for p in read if _MSPROF_TIMELINE.fullmatch(p.name)]
        origin = extra.get("time_origin_us")
    else:
        return [], None
    if not files or not isinstance(origin, (int, float)) or not math.isfinite(origin):
        return [], None
    return files, float(origin)


@dataclass
class _Pick:
    """The events kept for one window: the named ones first, then the longest others."""

    window: Window
    lanes: _Lanes
    """The names of the trace's processes and threads (shared by a trace's windows)."""
    named: list[dict[str, Any]] = field(default_factory=list)
    longest: list[tuple[float, int, dict[str, Any]]] = field(default_factory=list)
    seen: int = 0
    kept: list[dict[str, Any]] | None = None
    """events(), once made (the findings sharing the window read the same list)."""

    def offer(self, event: dict[str, Any], order: int) -> None:
        self.seen += 1
        if event["name"] in self.window.names and len(self.named) < MAX_EVENTS:
            self.named.append(event)
            return
        item = (float(event["dur"]), order, event)
        if len(self.longest) < MAX_EVENTS:
            heapq.heappush(self.longest, item)
        else:
            heapq.heappushpop(self.longest, item)

    def events(self) -> list[dict[str, Any]]:
        """The lanes' metadata, then the kept events in time order (at most MAX_EVENTS)."""
        if self.kept is None:
            room = MAX_EVENTS - len(self.named)
            others = [e for _, _, e in heapq.nlargest(room, self.longest)] if room > 0 else []
            kept = sorted([*self.named, *others], key=lambda e: (e["ts"], -e["dur"]))
            used: dict[int, dict[int, None]] = {}
            for event in kept:
                used.setdefault(event["pid"], {})[event["tid"]] = None
            self.kept = [*self.lanes.describe(used), *kept]
        return self.kept


@dataclass
class _Lanes:
    """Integer ids for the processes and threads a trace names by strings, and the
    metadata naming each lane."""

    ids: dict[Any, int] = field(default_factory=dict)
    names: dict[tuple[str, int, int], dict[str, Any]] = field(default_factory=dict)
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(_SYNTHETIC_ID))

    def id(self, value: Any) -> int | None:
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and value:
            if value not in self.ids:
                self.ids[value] = next(self.counter)
                self.names[("label", self.ids[value], 0)] = {"name": value}
            return self.ids[value]
        return None

    def metadata(self, name: str, pid: Any, tid: Any, args: dict[str, Any] | None) -> None:
        """Remember a process or thread metadata event of the trace."""
        pid, tid = self.id(pid), self.id(tid) or 0
        if pid is not None and args is not None and len(self.names) < MAX_METADATA:
            self.names.setdefault((name, pid, tid), args)

    def describe(self, lanes: dict[int, dict[int, None]]) -> list[dict[str, Any]]:
        """Metadata events naming every process and thread in `lanes`."""
        out: list[dict[str, Any]] = []
        for pid, tids in sorted(lanes.items()):
            out.append(self._event("process_name", pid, 0, self._process(pid)))
            for kind in ("process_labels", "process_sort_index"):
                if (kind, pid, 0) in self.names:
                    out.append(self._event(kind, pid, 0, self.names[(kind, pid, 0)]))
            for tid in tids:
                out.append(self._event("thread_name", pid, tid, self._thread(pid, tid)))
                if ("thread_sort_index", pid, tid) in self.names:
                    args = self.names[("thread_sort_index", pid, tid)]
                    out.append(self._event("thread_sort_index", pid, tid, args))
        return out

    def _process(self, pid: int) -> dict[str, Any]:
        named = self.names.get(("process_name", pid, 0)) or self.names.get(("label", pid, 0))
        return named if named and "name" in named else {"name": f"process {pid}"}

    def _thread(self, pid: int, tid: int) -> dict[str, Any]:
        named = self.names.get(("thread_name", pid, tid)) or self.names.get(("label", tid, 0))
        return named if named and "name" in named else {"name": f"thread {tid}"}

    @staticmethod
    def _event(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": args}


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


def _rough(ts: Any, origin: float) -> float | None:
    """A `ts` that is no number (a decimal string) minus the origin, as precise as a float."""
    if ts.__class__ is not str:
        return None
    try:
        return float(ts) - origin
    except ValueError:
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


def _from_files(
    files: Sequence[Path],
    origin: float,
    windows: Sequence[Window],
    indexes: Mapping[str, TraceIndex],
) -> list[_Pick]:
    """One pass over the trace files, each event offered to the windows it overlaps. Of a
    file the reader indexed only the batches that can hold a window's events are decoded
    (advisor.formats.trace_index); a large uncompressed file is otherwise filtered on several
    cores (advisor.formats.parallel), each part's candidates coming back in file order: the
    same events, offered in the same order."""
    lanes = _Lanes()
    picks = [_Pick(window, lanes) for window in windows]
    spans: dict[tuple[float, float], list[_Pick]] = {}  # windows that differ in names only
    for pick in picks:
        spans.setdefault((pick.window.start_us, pick.window.end_us), []).append(pick)
    bounds, sharing = list(spans), list(spans.values())
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
                for pick in sharing[window]:
                    pick.offer(kept, n)
    return picks


def _file_candidates(
    path: Path,
    origin: float,
    windows: Sequence[tuple[float, float]],
    indexes: Mapping[str, TraceIndex],
) -> Iterator[tuple[Any, ...]]:
    """The candidates (_candidates) of one file, in file order: from the parts its index
    names when they are a good deal less than the file, else from its parts decoded on
    several cores when the file is large and uncompressed, else from one stream."""
    from advisor.formats.parallel import read_in_parts  # only when cutting a trace
    from advisor.formats.stream import CutNotAtEvent, EventStream

    indexed = _indexed_parts(path, origin, windows, indexes)
    if indexed is not None:
        prefix, parts = indexed
        try:
            for span in parts:
                stream = EventStream(
                    path, chunk_bytes=CHUNK_BYTES, decode=_decode, span=span, prefix=prefix
                )
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
    file as it is now and the parts are at most INDEXED_SHARE of it; else None."""
    from advisor.formats.stream import array_start

    index = indexes.get(trace_index.key(path)) if indexes else None
    if index is None:
        return None
    parts = index.parts(path, origin, list(windows))
    if parts is None:
        return None
    taken = sum((index.size if end is None else end) - start for start, end in parts)
    if taken > INDEXED_SHARE * index.size:
        return None
    with open(path, "rb") as raw:
        start = array_start(raw.read(_HEAD_BYTES))
    if start is None:
        return None
    return start[0], parts


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
            # exactly once it is inside a window
            start = ts - origin if ts.__class__ in _NUMBERS else _rough(ts, origin)
            if dur.__class__ not in _NUMBERS or not 0 <= dur < math.inf:
                dur = _duration(dur)
            if start is None or dur is None or not (start <= hi and start + dur >= lo):
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


def _kept(event: _Event, start: float, dur: float, lanes: _Lanes) -> dict[str, Any] | None:
    """The event as a snippet holds it: its time relative to the profile, integer lanes."""
    pid, tid = lanes.id(event.pid), lanes.id(event.tid)
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


def _from_tables(tables: Mapping[str, pd.DataFrame], window: Window) -> _Pick:
    """The window's rows of the normalized tables as complete events, a process per table."""
    lanes = _Lanes()
    pick = _Pick(window, lanes)
    order = itertools.count()
    for table, pid, label in _TABLE_LANES:
        frame = tables.get(table)
        if frame is None or frame.empty or "start_us" not in frame:
            continue
        lanes.names[("process_name", pid, 0)] = {"name": label}
        for event in _rows(frame, table, pid, window):
            lanes.names.setdefault(("thread_name", pid, event["tid"]), _thread_label(table, event))
            pick.offer(event, next(order))
    return pick


def _thread_label(table: str, event: dict[str, Any]) -> dict[str, Any]:
    tid = event["tid"]
    label = {"device_ops": f"stream {tid}", "host_ops": f"thread {tid}"}.get(table, table)
    return {"name": label}


def _rows(frame: pd.DataFrame, table: str, pid: int, window: Window) -> Iterable[dict[str, Any]]:
    """The rows of `frame` overlapping the window, as complete events on process `pid`."""
    start, end = _spans(frame, table)
    inside = (start <= window.end_us) & (end >= window.start_us)
    tid_column, cat_column = _TID_COLUMNS.get(table), _CAT_COLUMNS.get(table)
    rows = np.flatnonzero(inside)

    def taken(column: str | None) -> Any:
        """The column's values in the window (None without it), taken from its array: a
        selection of the table's rows and columns costs more than these few rows on pandas 3."""
        return frame[column].array.take(rows) if column is not None and column in frame else None

    names = ("step " + pd.Series(taken("step")).astype(str)) if table == "steps" else taken("name")
    columns = {
        "name": _texts(names, len(rows)),
        "tid": _texts(taken(tid_column), len(rows)),
        "cat": _texts(taken(cat_column), len(rows)),
    }
    for s, e, name, tid, cat in zip_strict(
        start[rows], end[rows], columns["name"], columns["tid"], columns["cat"]
    ):
        event: dict[str, Any] = {
            "name": name or "",
            "ph": "X",
            "ts": round(float(s), 3),
            "dur": round(float(e - s), 3),
            "pid": pid,
            "tid": int(tid) if tid else 0,
        }
        if cat:
            event["cat"] = cat
        yield event


def _spans(frame: pd.DataFrame, table: str) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of each row of a TABLE_LANES table."""
    start = frame["start_us"].to_numpy("float64", na_value=np.nan)
    if table == "steps":
        return start, frame["end_us"].to_numpy("float64", na_value=np.nan)
    return start, start + frame["duration_us"].to_numpy("float64", na_value=0.0)


def _texts(column: pd.Series | ExtensionArray | None, size: int) -> list[str | None]:
    """A column's values as text (None where missing), or Nones without the column."""
    if column is None:
        return [None] * size
    return [None if pd.isna(v) else str(v) for v in column.tolist()]


def _document(profile: Profile, finding: Finding, pick: _Pick, source: str) -> dict[str, Any]:
    window = pick.window
    events = pick.events()
    kept = sum(e["ph"] == "X" for e in events)
    where = f"step {window.step}, " if window.step is not None else ""
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "generator": f"advisor {__version__}",
            "finding": str(finding.rank),
            "rule": finding.rule.id,
            "title": finding.title,
            "profile": profile.meta.path,
            "window": f"{where}{window.start_us:.3f} to {window.end_us:.3f} µs",
            "time_base": "µs since the profile's time origin, as in advisor's tables",
            "source": source,
            "events": str(kept),
            "dropped": str(pick.seen - kept),
        },
    }
