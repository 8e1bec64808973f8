"""`comm_ops.compute_overlap_us`: how long each collective ran beside a matrix multiply.

A collective that moves data inside the node (SDMA) while a large MatMul streams its operands
shares the device's memory bandwidth with it; msprof-analyze's bandwidth-contention check
looks for SDMA ops that overlap a MatMul task and move data slowly. The overlap is computed
for every op at once against the union of the MatMul tasks (no loop per op).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor import intervals
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


def covered_before(merged: intervals.Intervals, points: np.ndarray) -> np.ndarray:
    """Length of the merged set lying before each point."""
    starts, ends = merged
    if starts.size == 0:
        return np.zeros(points.size)
    before = np.concatenate(([0.0], np.cumsum(ends - starts)))
    index = np.searchsorted(starts, points, side="right")  # blocks starting at or before
    last = np.maximum(index - 1, 0)
    partial = np.where(index > 0, np.clip(points - starts[last], 0.0, ends[last] - starts[last]), 0)
    return before[last] * (index > 0) + partial


def matmul_tasks(device_ops: pd.DataFrame) -> pd.Series:
    """Compute tasks that are matrix multiplies, by op type or, without one, by name."""
    label = device_ops["op_type"] if "op_type" in device_ops else device_ops["name"]
    label = label.fillna(device_ops["name"])
    compute = (device_ops["category"] == "compute").fillna(False)
    return compute & label.str.contains("matmul", case=False, regex=False).fillna(False)


def compute_overlap(profile: Profile) -> None:
    ops = profile.tables["device_ops"]
    comm = profile.tables["comm_ops"]
    chosen = ops[matmul_tasks(ops)]
    starts = chosen["start_us"].to_numpy(dtype="float64")
    merged = intervals.merge(starts, starts + chosen["duration_us"].to_numpy(dtype="float64"))
    begin = comm["start_us"].to_numpy(dtype="float64")
    end = begin + comm["duration_us"].to_numpy(dtype="float64")
    overlap = covered_before(merged, np.nan_to_num(end)) - covered_before(
        merged, np.nan_to_num(begin)
    )
    known = ~(np.isnan(begin) | np.isnan(end))
    if "kind" in comm:
        known &= (comm["kind"] != "link").fillna(True).to_numpy()
    profile.tables["comm_ops"] = comm.assign(compute_overlap_us=np.where(known, overlap, np.nan))


PROVIDERS = [
    MetricProvider(
        "comm_compute_overlap",
        (
            "comm_ops.start_us",
            "comm_ops.duration_us",
            "device_ops.start_us",
            "device_ops.duration_us",
            "device_ops.category",
        ),
        ("comm_ops.compute_overlap_us",),
        compute_overlap,
        "comm_ops.compute_overlap_us: time each op ran beside a MatMul task",
    )
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
