"""Steps and their time breakdown: ProfilerStep windows with the Overlap Analysis tracks inside
them, else step_trace_time.csv; and the step each host call falls in."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisor import intervals
from advisor.formats.cann_csv import open_csv
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

from .trace_view import OVERLAP_KINDS, TraceTables

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


def steps_with_breakdown(trace: TraceTables, step_number: int) -> pd.DataFrame | None:
    """ProfilerStep windows (or one window over the Overlap Analysis span) with the time of
    each Overlap Analysis track inside them."""
    steps = trace.steps
    span = trace.overlap_span
    if steps is None:
        if span is None:
            return None
        start, end = span
        steps = pd.DataFrame(
            {
                "step": [step_number],
                "start_us": [start],
                "end_us": [end],
                "duration_us": [end - start],
            }
        )
    if span is None:
        return steps
    lo, hi = steps["start_us"].to_numpy(float), steps["end_us"].to_numpy(float)
    columns = {
        column: intervals.covered_between(trace.overlap[kind], lo, hi)
        for kind, column in OVERLAP_KINDS.items()
    }
    columns["free_us"] = columns["free_us"] + _idle_outside(span, lo, hi)
    if trace.comm_ops is not None and not trace.comm_ops.empty:
        comm = trace.comm_ops
        receive = comm["name"].str.lower().str.contains("receive").to_numpy(dtype=bool)
        if receive.any():
            start = comm["start_us"].to_numpy(float)[receive]
            merged = intervals.merge(start, start + comm["duration_us"].to_numpy(float)[receive])
            columns["bubble_us"] = intervals.covered_between(merged, lo, hi)
    return steps.assign(**columns)


def _idle_outside(span: tuple[float, float], lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The part of each step window before the device's first task or after its last (outside
    the Overlap Analysis span), for the windows the span reaches into.

    The Free track holds only the gaps between busy intervals, so a step's time before its
    first task (torch_npu's Preparing) and after its last one is in no track, though the
    device was recorded and did nothing: in a one-step profile 20% of the step. A window the
    span does not reach has no breakdown to complete (no device task was recorded in it)."""
    start, end = span
    inside = intervals.covered_between((np.array([start]), np.array([end])), lo, hi)
    return np.where(inside > 0, (hi - lo) - inside, 0.0)


def step_of(times: np.ndarray, steps: pd.DataFrame) -> pd.array:
    """Step whose [start, end) window holds each time (<NA> outside every step)."""
    start = steps["start_us"].to_numpy(float)
    end = steps["end_us"].to_numpy(float)
    order = np.argsort(start, kind="stable")
    pos = np.searchsorted(start[order], times, side="right") - 1
    idx = order[np.clip(pos, 0, None)]
    inside = (pos >= 0) & (times < end[idx])
    values = pd.array(steps["step"].to_numpy()[idx], dtype="Int64")
    values[~inside] = pd.NA
    return values


STEP_TRACE_COLUMNS = {
    "Computing": "computing_us",
    "Communication": "communication_us",
    "Communication(Not Overlapped)": "comm_not_overlapped_us",
    "Free": "free_us",
    "Bubble": "bubble_us",
    "Preparing": "preparing_us",
}


def read_step_trace_time(path: Path, rel: str, warn: WarnFn) -> pd.DataFrame | None:
    """Per-step breakdown (µs) from step_trace_time.csv; `step` NaN where the file has none."""
    csv = open_csv(path, rel, warn, ("Computing", "Free"))
    if csv is None:
        return None
    frame = pd.DataFrame(
        {"step": csv.number("Step") if csv.has("Step") else pd.Series(np.nan, index=csv.index)}
    )
    for written, column in STEP_TRACE_COLUMNS.items():
        if csv.has(written):
            frame[column] = csv.number(written)
    if csv.has("Type"):  # cluster_step_trace_time.csv layout: keep the rank rows
        frame = frame[csv.text("Type").fillna("").str.lower().isin(["rank", ""])]
    return frame.reset_index(drop=True)


def fill_breakdown(steps: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Breakdown columns from step_trace_time.csv that the trace did not give, by step."""
    if len(table) == 1 and len(steps) == 1 and pd.isna(table["step"].iloc[0]):
        table = table.assign(step=steps["step"].iloc[0])
    table = table.dropna(subset=["step"]).drop_duplicates("step").set_index("step")
    filled = steps.copy()
    taken = []
    for column in table.columns:
        if column == "preparing_us" or (column in filled and filled[column].notna().any()):
            continue
        filled[column] = filled["step"].map(table[column]).to_numpy(dtype=float)
        taken.append(column)
    if "free_us" in taken and "duration_us" in filled:
        filled["free_us"] = _whole_window_free(filled)
    return filled


def _whole_window_free(steps: pd.DataFrame) -> pd.Series:
    """The profiler's Free counts the gaps between a step's tasks only; its window's time
    before the first task (Preparing) and after the last one has no computation or
    communication either. Where a step has a Free figure: the window less its computing and
    uncovered communication, never less than that figure (nor another figure where the
    computing time is missing)."""
    if "computing_us" not in steps:
        return steps["free_us"]
    busy = steps["computing_us"]
    if "comm_not_overlapped_us" in steps:
        busy = busy + steps["comm_not_overlapped_us"].fillna(0.0)
    rest = steps["duration_us"].astype("float64") - busy  # NaN without a computing time
    free = steps["free_us"]
    return free.where(free.isna(), np.fmax(free, rest))


def steps_from_table(table: pd.DataFrame, kernels: pd.DataFrame | None) -> pd.DataFrame:
    """Steps from step_trace_time.csv alone: step time = Computing + Communication(Not
    Overlapped) + Free; the start is the step's first kernel less its Preparing time."""
    steps = table.assign(step=table["step"].fillna(0))
    parts = [c for c in ("computing_us", "comm_not_overlapped_us", "free_us") if c in steps]
    steps["duration_us"] = steps[parts].fillna(0.0).sum(axis=1)
    start = pd.Series(np.nan, index=steps.index)
    if kernels is not None and {"step", "start_us"} <= set(kernels.columns):
        first = kernels.dropna(subset=["start_us"]).groupby("step")["start_us"].min()
        start = steps["step"].map(first).astype(float)
        if "preparing_us" in steps:
            start = start - steps["preparing_us"].fillna(0.0)
    steps["start_us"] = start
    steps["end_us"] = steps["start_us"] + steps["duration_us"]
    return steps.reset_index(drop=True)
