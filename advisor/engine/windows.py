"""The stretch of time a finding is about: its worst step, or the span its evidence covers.

A trace snippet of that window (advisor/traces.py) lets the user open exactly the events
behind a finding in Perfetto, and the report's timeline marks it. The evidence rows a rule
selected are sorted worst first, so the window follows the first of them that can be placed:

1. a row naming a step (`step` column) whose start and end the steps table knows: that step,
   widened to the evidence rows of the same step that carry their own times (a kernel
   launched in the step may end after it);
2. else a row with its own start (`start_us`): the step holding that start, or the row's own
   span where no step holds it;
3. else rows that aggregate operators (op_stats: one row per operator type): the step in which
   the device_ops of those operators took the most time.

Findings whose evidence none of these places (settings, memory totals, cluster and compare
findings) have no window. The window also names the operators or kernels of the evidence that
ran inside it, so a snippet can be checked for them and keep them when it must drop events.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from advisor.engine.row_order import stable_order
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

MAX_NAMES = 20
"""Names of evidence operators a window keeps (the worst first)."""
_GROUP_KEYS = ("name", "op_type")
"""Columns by which aggregated evidence rows (op_stats) point at device_ops rows."""
COLUMNS = ("step", "start_us", "duration_us", *_GROUP_KEYS)
"""The columns of the evidence rows that `evidence_window` reads."""


@dataclass(frozen=True)
class Window:
    """A finding's time window, in the profile's µs (the tables' time base)."""

    start_us: float
    end_us: float
    step: int | None
    """The step the window is (or lies in); None for a span no step holds."""
    names: tuple[str, ...] = ()
    """Operators or kernels of the evidence that ran inside the window, worst first."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "start_us": self.start_us,
            "end_us": self.end_us,
            "step": self.step,
            "names": list(self.names),
        }


Columns = Union["pd.DataFrame", Mapping[str, Any]]
"""Rows read column by column: a finding's evidence rows as arrays by column name (taken from
its table, all of one length), or a whole table."""


def evidence_window(
    profile: Profile,
    table: str,
    rows: Mapping[str, Any] | None,
    spans: dict[int, tuple[float, float]],
) -> Window | None:
    """The window of a finding whose evidence is `rows` of `table` (arrays by column, at least
    those of COLUMNS the table has, worst first); None when nothing in them can be placed in
    time. `spans`: the profile's step_spans, computed once for all its findings."""
    count = len(next(iter(rows.values()))) if rows else 0
    if rows is None or not count:
        return None
    window = _step_window(rows, count, spans)
    if window is None:
        window = _timed_window(rows, count, spans)
    if window is None and table != "device_ops":
        window = _aggregate_window(profile, rows, spans)
    return window


def step_spans(profile: Profile) -> dict[int, tuple[float, float]]:
    """Start and end of each step the steps table places (the first row of a repeated
    step number, as msprof repeats them per model)."""
    steps = profile.tables.get("steps")
    if steps is None or steps.empty or not {"start_us", "end_us"} <= set(steps):
        return {}
    # plain arrays: a profile's few steps, where pandas' dropna and itertuples cost ~1 ms
    columns = [
        steps[c].to_numpy("float64", na_value=np.nan) for c in ("step", "start_us", "end_us")
    ]
    placed = ~np.isnan(np.vstack(columns)).any(axis=0)
    spans: dict[int, tuple[float, float]] = {}
    seen: set[float] = set()
    for step, lo, hi in zip(*(c[placed].tolist() for c in columns)):
        if step in seen:
            continue
        seen.add(step)
        if hi >= lo:
            spans[int(step)] = (lo, hi)
    return spans


def _times(
    rows: Columns, count: int, picked: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of each of the `count` rows, or of those at positions `picked` (NaN
    where the row has no start)."""
    if "start_us" not in rows:
        nan = np.full(count if picked is None else len(picked), np.nan)
        return nan, nan
    start = rows["start_us"].to_numpy("float64", na_value=np.nan)
    duration = (
        rows["duration_us"].to_numpy("float64", na_value=0.0)
        if "duration_us" in rows
        else np.zeros(count)
    )
    if picked is not None:
        start, duration = start[picked], duration[picked]
    return start, start + np.nan_to_num(duration)


def _names(rows: Columns, picked: np.ndarray | None = None) -> tuple[str, ...]:
    """The distinct names of the rows (of those at positions `picked`), in their order.

    The rows are a finding's few evidence rows or one step's operators: their names are read
    as an array, as a DataFrame row selection costs more than the names themselves."""
    if "name" not in rows:
        return ()
    column = rows["name"]
    names, present = column.to_numpy(object), ~np.asarray(column.isna(), dtype=bool)
    if picked is not None:
        names, present = names[picked], present[picked]
    return tuple(dict.fromkeys(str(n) for n in names[present]))[:MAX_NAMES]


def _step_window(rows: Columns, count: int, spans: dict[int, tuple[float, float]]) -> Window | None:
    if "step" not in rows or not spans:
        return None
    steps = rows["step"].to_numpy("float64", na_value=np.nan)
    step = next((int(s) for s in steps[~np.isnan(steps)] if int(s) in spans), None)
    if step is None:
        return None
    lo, hi = spans[step]
    same = np.flatnonzero(steps == step)
    start, end = _times(rows, count, same)
    timed = ~np.isnan(start)
    if timed.any():
        lo, hi = min(lo, float(start[timed].min())), max(hi, float(end[timed].max()))
    return Window(lo, hi, step, _names(rows, same))


def _holding(spans: dict[int, tuple[float, float]], at: float) -> int | None:
    return next((s for s, (lo, hi) in spans.items() if lo <= at < hi), None)


def _timed_window(
    rows: Columns, count: int, spans: dict[int, tuple[float, float]]
) -> Window | None:
    start, end = _times(rows, count)
    timed = np.flatnonzero(~np.isnan(start))
    if timed.size == 0:
        return None
    first = int(timed[0])
    step = _holding(spans, float(start[first]))
    if step is not None:
        lo, hi = spans[step]
        lo, hi = min(lo, float(start[first])), max(hi, float(end[first]))
    else:
        lo, hi = float(start[first]), float(end[first])
    inside = np.flatnonzero((start >= lo) & (end <= hi))
    return Window(lo, hi, step, _names(rows, inside))


def _aggregate_window(
    profile: Profile, rows: Mapping[str, Any], spans: dict[int, tuple[float, float]]
) -> Window | None:
    """The step in which the device_ops the aggregated rows stand for took the most time."""
    ops = profile.tables.get("device_ops")
    key = next((k for k in _GROUP_KEYS if k in rows and ops is not None and k in ops), None)
    if key is None or ops is None or "step" not in ops or not spans:
        return None
    wanted = pd.Series(rows[key]).dropna().astype(str).unique()
    # positions of the operators in a placed step, not a selection of the table's dozens of
    # columns: only their step, duration, times and names are read
    steps = ops["step"].to_numpy("float64", na_value=np.nan)
    mine = np.flatnonzero(ops[key].isin(wanted).to_numpy(bool, na_value=False) & ~np.isnan(steps))
    mine = mine[np.isin(steps[mine].astype("int64"), list(spans))]
    if not mine.size:
        return None
    mine_steps = steps[mine].astype("int64")
    duration = ops["duration_us"].iloc[mine]
    by_step = duration.groupby(mine_steps).sum()
    step = int(by_step.index[int(by_step.to_numpy().argmax())])
    lo, hi = spans[step]
    in_step = mine[mine_steps == step]
    start, end = _times(ops, len(ops), in_step)
    timed = ~np.isnan(start)
    if timed.any():
        lo, hi = min(lo, float(start[timed].min())), max(hi, float(end[timed].max()))
    worst = in_step[stable_order([(duration.array[mine_steps == step], False)])]
    return Window(lo, hi, step, _names(ops, worst))
