"""`step_trace_raw_{N}_detail_time.csv`: steps, their reduce and communication time, on the
device clock (Ascend system counts of 10 ns)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor import intervals
from advisor.formats.metadata import MetadataRows
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from .context import Rank

TICKS_PER_US = 100.0  # step_trace_raw: Ascend syscnt, 10 ns


def read_steps(rank: Rank, path: Path) -> pd.DataFrame | None:
    """steps of step_trace_raw, without MindSpore's average row and steps without a start."""
    required = ("step_num", "start_point", "end_point", "total", "iteration_interval")
    read = rank.csv(path, required)
    if read is None:
        return None
    _, df = read
    step_text = df["step_num"].str.strip()
    keep = step_text.str.fullmatch(r"0*[1-9]\d*")
    last = len(df) - 1
    if step_text.iloc[last] in ("-", "0"):  # MindSpore's average row
        keep.iloc[last] = False
        bad = ~keep
        bad.iloc[last] = False
    else:
        rank.warn(path, "no average row at the end (file cut short?)", line=last + 2)
        bad = ~keep
    if bad.any():
        first = int(np.argmax(bad.to_numpy()))
        rank.warn(
            path,
            f"{int(bad.sum())} rows without a step number skipped "
            f"(first: {step_text.iloc[first]!r})",
            line=first + 2,
            column="step_num",
        )
    df = df[keep.to_numpy()]
    if df.empty:
        rank.warn(path, "no step rows (only the average row)")
        return None

    def ticks(column: str) -> pd.Series | None:
        if column not in df.columns:
            return None
        return rank.numbers(path, df, column) / TICKS_PER_US

    reduces = [c for c in df.columns if re.fullmatch(r"stream_\d+_parallel_\d+", c)]
    reduce_us = (
        pd.concat([ticks(c) for c in reduces], axis=1).sum(axis=1, min_count=1) if reduces else None
    )
    interval = ticks("iteration_interval")
    start = ticks("fp_point")
    if start is None:
        start = ticks("start_point") + interval
    end = ticks("end_point")
    columns: dict[str, Any] = {
        "step": pd.to_numeric(df["step_num"]),
        "start_us": start,
        "end_us": end,
        "duration_us": end - start,
        "fp_bp_us": ticks("fp_and_bp"),
        "grad_refresh_us": ticks("tail"),
        "data_aug_bound_us": interval,
        "reduce_us": reduce_us,
    }
    exposure = _collective_exposure(
        {
            name: (ticks(f"{name}_start_point"), ticks(f"{name}_end_point"))
            for name in _collective_columns(df.columns)
        },
        ticks("fp_point"),
        ticks("bp_point"),
    )
    if exposure is not None:
        columns["communication_us"], columns["comm_not_overlapped_us"] = exposure
    frame = pd.DataFrame({k: v for k, v in columns.items() if v is not None})
    zero = frame["start_us"].fillna(0) <= 0
    if zero.any():
        rank.warn(path, f"{int(zero.sum())} steps without a start point skipped")
        frame = frame[~zero.to_numpy()]
    return frame.reset_index(drop=True)


def _collective_columns(columns: Any) -> list[str]:
    """The collectives step_trace_raw times per step: `<name>_start_point` and
    `<name>_end_point` pairs, named `stream_<id>_parallel_<n>` or, in newer MindSpore,
    `stream_<id>_<n>_AllReduce-op<N>` and the like."""
    names = {
        str(c)[: -len("_start_point")]
        for c in columns
        if re.fullmatch(r"stream_\d+_.+_start_point", str(c))
    }
    return sorted(n for n in names if f"{n}_end_point" in columns)


def _collective_exposure(
    spans: dict[str, tuple[pd.Series | None, pd.Series | None]],
    fp: pd.Series | None,
    bp: pd.Series | None,
) -> tuple[pd.Series, pd.Series] | None:
    """Per step, the time collectives ran (their union) and the part of it outside the
    forward and backward pass [fp_point, bp_point): an all-reduce still running after the
    backward pass ends has no computation left to hide it."""
    spans = {k: v for k, v in spans.items() if v[0] is not None and v[1] is not None}
    if not spans or fp is None or bp is None:
        return None
    starts = np.column_stack([v[0].to_numpy("float64") for v in spans.values()])
    ends = np.column_stack([v[1].to_numpy("float64") for v in spans.values()])
    total, exposed = [], []
    for row, (lo, hi) in enumerate(zip(fp.to_numpy("float64"), bp.to_numpy("float64"))):
        ok = (starts[row] > 0) & (ends[row] > starts[row])  # 0: not run in this step
        runs = intervals.merge(starts[row][ok], ends[row][ok])
        inside = intervals.total(intervals.clip(runs, lo, hi)) if hi > lo else 0.0
        total.append(intervals.total(runs))
        exposed.append(intervals.total(runs) - inside)
    index = fp.index
    return pd.Series(total, index=index), pd.Series(exposed, index=index)


def mark_graph_mode(rank: Rank) -> None:
    """metadata `framework.mode` = graph when the step trace gave the steps: MindSpore writes
    it (iteration start, FP/BP points) in graph mode only; in PyNative mode its profiler gives
    operators, the timeline and the data pipeline, no step trace (MindInsight's PyNative
    profiling guide). Rules then know not to advise graph mode to a graph-mode run."""
    path = rank.files.get("step_trace")
    if path is None or "steps" not in rank.profile.tables:
        return
    rows = MetadataRows()
    rows.add("framework.mode", "graph", path.name)
    tables = rank.profile.tables
    tables["metadata"] = pd.concat([tables.get("metadata"), rows.frame()], ignore_index=True)
