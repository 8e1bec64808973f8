"""Trace snippets: the events of each finding's window as a small Chrome trace.

`advisor run` writes one `traces/finding-<n>.json` per finding with a time window
(engine/windows.py: its worst step, or the span of its evidence), which Perfetto
(ui.perfetto.dev) and chrome://tracing open as it is: the user lands on the events behind the
finding instead of searching a trace of gigabytes for them.

Where the profile is a Chrome trace (Kineto, torch_npu / MindSpore `trace_view.json`, msprof
timelines), a snippet holds the original complete events (`ph: X`, args included) that overlap
the window, and the names of their processes and threads, cut from the file by
advisor/trace_cuts.py (imported only then). Other formats
(CSV, databases, MindSpore text files, MegEngine) have no trace to cut from: their snippets are
built from the normalized tables (steps, host calls, device tasks, collectives), one process
per table. Either way times are the profile's µs, the time base of the report and its tables.

Bounded: at most MAX_EVENTS complete events per snippet, the operators the evidence names
first, then the longest (`otherData.dropped` counts the rest), and snippets for at most
MAX_PROFILES profiles of a run (those with the most urgent findings), since each re-reads
its trace.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor import snippet_picks
from advisor.compat import zip_strict
from advisor.engine.evaluate import Finding
from advisor.engine.outcome import SEVERITIES
from advisor.engine.windows import Window
from advisor.errors import UnreadableInput
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta
from advisor.snippet_picks import Lanes, Pick
from advisor.version import __version__

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from pandas.api.extensions import ExtensionArray

    from advisor.api import AnalysisResult, ProfileAnalysis
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

MAX_PROFILES = 16
"""Profiles of one run that get snippets at most."""
_MSPROF_TIMELINE = re.compile(r"(msprof|task_time|hccl|step_trace)_[\d_]+\.json")
"""msprof's timelines: per kind, and merged (which repeats some of the others' events)."""
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
    most = snippet_picks.MAX_EVENTS
    if len(inside) <= most:
        return inside
    return inside[np.argsort(-(end - start)[inside], kind="stable")[:most]]


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
    picks: list[Pick] | None = None
    if files and origin is not None:
        try:
            from advisor.trace_cuts import from_files  # only a profile read from a trace

            picks = from_files(files, origin, windows, profile.meta.trace_index)
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


def _from_tables(tables: Mapping[str, pd.DataFrame], window: Window) -> Pick:
    """The window's rows of the normalized tables as complete events, a process per table."""
    lanes = Lanes()
    pick = Pick(window, lanes)
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

    names = _step_names(taken("step")) if table == "steps" else taken("name")
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


def _step_names(steps: ExtensionArray | None) -> pd.Series | list[str] | None:
    """`step <n>` for each step number (pandas' text of a missing one differs by version:
    such a column is left to pandas)."""
    if steps is None or pd.isna(steps).any():
        return None if steps is None else "step " + pd.Series(steps).astype(str)
    return [f"step {step}" for step in steps.tolist()]


def _spans(frame: pd.DataFrame, table: str) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of each row of a TABLE_LANES table."""
    start = frame["start_us"].to_numpy("float64", na_value=np.nan)
    if table == "steps":
        return start, frame["end_us"].to_numpy("float64", na_value=np.nan)
    return start, start + frame["duration_us"].to_numpy("float64", na_value=0.0)


def _texts(column: pd.Series | ExtensionArray | list[str] | None, size: int) -> list[str | None]:
    """A column's values as text (None where missing), or Nones without the column."""
    if column is None:
        return [None] * size
    values = column if isinstance(column, list) else column.tolist()
    return [None if pd.isna(v) else str(v) for v in values]


def _document(profile: Profile, finding: Finding, pick: Pick, source: str) -> dict[str, Any]:
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
