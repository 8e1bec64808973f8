"""`comm_ops.compute_overlap_us`: how long each collective ran beside a matrix multiply;
`parallel_comm`: the communication time of each parallel group.

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
from advisor.model import Profile, comm_operations, conform

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


def parallel_comm(profile: Profile) -> None:
    """The communication operations' time per parallel group (comm_ops.parallel_group: tp,
    dp, pp, embd...), the ops of no described group left out of the groups but not of the
    total the shares are taken of."""
    ops = comm_operations(profile.tables["comm_ops"])
    total = float(ops["duration_us"].sum())
    known = ops[ops["parallel_group"].notna()]
    if known.empty or total <= 0:
        return
    op = known["op"] if "op" in known else pd.Series(None, index=known.index, dtype="string")
    by_op = (
        pd.DataFrame({"group": known["parallel_group"], "op": op, "us": known["duration_us"]})
        .groupby(["group", "op"], sort=True)["us"]
        .sum()
        .reset_index()
        .sort_values(["us", "group", "op"], ascending=[False, True, True], kind="stable")
    )
    grouped = known.groupby("parallel_group", sort=True)["duration_us"].agg(["size", "sum"])
    table = pd.DataFrame(
        {
            "parallel_group": grouped.index.astype("string"),
            "ops": grouped["size"].to_numpy("int64"),
            "duration_us": grouped["sum"].to_numpy("float64"),
            "share": grouped["sum"].to_numpy("float64") / total,
            "main_op": grouped.index.map(by_op.drop_duplicates("group").set_index("group")["op"]),
        }
    ).sort_values(["duration_us", "parallel_group"], ascending=[False, True], kind="stable")
    profile.tables["parallel_comm"] = conform("parallel_comm", table.reset_index(drop=True))


PROVIDERS = [
    MetricProvider(
        "parallel_comm",
        ("comm_ops.parallel_group", "comm_ops.duration_us"),
        tuple(
            f"parallel_comm.{c}"
            for c in ("parallel_group", "ops", "duration_us", "share", "main_op")
        ),
        parallel_comm,
        "parallel_comm: the communication operations' time per parallel group (tp, dp, pp...)",
    ),
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
    ),
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
