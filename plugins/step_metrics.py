"""Built-in metric providers: operator statistics, step assignment and step overlap breakdown.

These derive what most profiles lack on disk: per-step computing / communication / uncovered
communication / free time from device task intervals, and per-type statistics from tasks.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from advisor import intervals
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.model import Profile, conform


def op_stats_from_device_ops(profile: Profile) -> None:
    """Aggregate device tasks by (op type, core type) like msprof's op_statistic."""
    ops = profile.tables["device_ops"]
    op_type = ops["op_type"] if "op_type" in ops else ops["name"]
    frame = pd.DataFrame({"op_type": op_type.fillna(ops["name"]),
                          "core_type": ops["core_type"].fillna("unknown"),
                          "duration_us": ops["duration_us"]})
    grouped = frame.groupby(["op_type", "core_type"], sort=False)["duration_us"].agg(
        count="count", total_us="sum", avg_us="mean", min_us="min", max_us="max").reset_index()
    total = grouped["total_us"].sum()
    grouped["ratio"] = grouped["total_us"] / total if total else 0.0
    grouped = grouped.sort_values("total_us", ascending=False, kind="stable")
    profile.tables["op_stats"] = conform("op_stats", grouped)


def _step_index(starts: np.ndarray, step_start: np.ndarray, step_end: np.ndarray) -> np.ndarray:
    """Position of the step window containing each start, or -1."""
    order = np.argsort(step_start, kind="stable")
    pos = np.searchsorted(step_start[order], starts, side="right") - 1
    valid = pos >= 0
    idx = np.full(starts.shape, -1)
    idx[valid] = order[pos[valid]]
    inside = np.zeros(starts.shape, dtype=bool)
    inside[valid] = starts[valid] < step_end[idx[valid]]
    idx[~inside] = -1
    return idx


def assign_steps(profile: Profile) -> None:
    """Give every device task the step whose [start, end) window contains its start."""
    ops, steps = profile.tables["device_ops"], profile.tables["steps"]
    idx = _step_index(ops["start_us"].to_numpy("float64", na_value=np.nan),
                      steps["start_us"].to_numpy("float64"), steps["end_us"].to_numpy("float64"))
    step_numbers = steps["step"].to_numpy("int64")
    values = pd.array(step_numbers[np.clip(idx, 0, None)] if len(step_numbers) else idx,
                      dtype="Int64")
    values[idx < 0] = pd.NA
    profile.tables["device_ops"] = ops.assign(step=values)


def mark_first_in_step(profile: Profile) -> None:
    """Flag the first task of every step (all False when the profile has no steps)."""
    ops = profile.tables["device_ops"]
    first = np.zeros(len(ops), dtype=bool)
    steps = profile.tables.get("steps")
    if steps is not None and not steps.empty:
        starts = ops["start_us"].to_numpy("float64", na_value=np.nan)
        idx = _step_index(starts, steps["start_us"].to_numpy("float64"),
                          steps["end_us"].to_numpy("float64"))
        frame = pd.DataFrame({"step": idx, "start": starts})
        in_step = frame[frame["step"] >= 0]
        first[in_step.groupby("step")["start"].idxmin().to_numpy()] = True
    profile.tables["device_ops"] = ops.assign(first_in_step=first)


def step_overlap(profile: Profile) -> None:
    """Per step: computing, communication, uncovered communication and free time (µs)."""
    ops, steps = profile.tables["device_ops"], profile.tables["steps"]
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    end = start + ops["duration_us"].to_numpy("float64", na_value=np.nan)
    is_comm = (ops["category"] == "communication").fillna(False).to_numpy()
    compute = intervals.merge(start[~is_comm], end[~is_comm])
    comm = intervals.merge(start[is_comm], end[is_comm])
    # Steps outside the recorded task timeline get no breakdown: no data is not idle time.
    first_task, last_task = np.nanmin(start, initial=np.inf), np.nanmax(end, initial=-np.inf)
    rows = []
    for lo, hi in zip(steps["start_us"], steps["end_us"], strict=True):
        if not (lo < last_task and hi > first_task):
            rows.append((np.nan,) * 4)
            continue
        c = intervals.clip(compute, lo, hi)
        m = intervals.clip(comm, lo, hi)
        computing = intervals.total(c)
        communication = intervals.total(m)
        hidden = intervals.total(intervals.intersect(c, m))
        busy = intervals.total(intervals.union(c, m))
        rows.append((computing, communication, communication - hidden, max(hi - lo - busy, 0.0)))
    cols = ["computing_us", "communication_us", "comm_not_overlapped_us", "free_us"]
    derived = pd.DataFrame(rows, columns=cols, index=steps.index, dtype="float64")
    profile.tables["steps"] = steps.assign(**{c: derived[c] for c in cols})


PROVIDERS = [
    MetricProvider("op_stats", ("device_ops.duration_us", "device_ops.core_type"),
                   ("op_stats",) + tuple(f"op_stats.{c}" for c in (
                       "op_type", "core_type", "count", "total_us", "avg_us", "min_us",
                       "max_us", "ratio")),
                   op_stats_from_device_ops,
                   "op_stats aggregated from device tasks when the source has no statistics"),
    MetricProvider("device_op_steps", ("device_ops.start_us", "steps.start_us", "steps.end_us"),
                   ("device_ops.step",), assign_steps,
                   "device_ops.step from the step windows"),
    MetricProvider("first_in_step", ("device_ops.start_us",), ("device_ops.first_in_step",),
                   mark_first_in_step, "device_ops.first_in_step from the step windows"),
    MetricProvider("step_overlap",
                   ("device_ops.start_us", "device_ops.duration_us", "device_ops.category",
                    "steps.start_us", "steps.end_us"),
                   ("steps.computing_us", "steps.communication_us",
                    "steps.comm_not_overlapped_us", "steps.free_us"),
                   step_overlap,
                   "per-step compute/communication overlap from device task intervals"),
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
