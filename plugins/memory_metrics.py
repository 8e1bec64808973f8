"""Memory of one run: the curve per step (`memory_steps`), the blocks operators allocate
(`op_allocations`, from Kineto's [memory] events) and the memory per operator (`op_memory`).

The allocator's samples say how much is allocated; Kineto's also say which block each one
allocated or freed (`Bytes`, `Addr`) and on which thread, so a block is charged to the operator
running on that thread when it was allocated and lives until the free of the same address.
torch_npu and MindSpore write the same per-block facts themselves (operator_memory.csv, read by
their reader into `op_allocations`), so `op_memory` is built the same way for both.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from advisor import intervals
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.lazy import lazy_module
from advisor.model import Profile, conform

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

FRAMEWORK_KINDS = ("aten", "optimizer")
"""host_ops kinds that are framework operators, the ones a block is charged to."""

ALLOCATOR_CALLS = re.compile(
    r"^aten::(empty|empty_strided|empty_like|new_empty|new_empty_strided|resize_)$"
)
"""Operators that only allocate: a block allocated inside one is charged to its caller
(aten::addmm, not the aten::empty it calls), as torch_npu's operator_memory.csv does."""


# -- the memory curve per step ---------------------------------------------------------------


def curve_device(memory: pd.DataFrame) -> pd.Series:
    """Rows of the device the memory curve is drawn for: the accelerator with the highest
    allocated peak (a GPU or NPU beside the host's CPU samples), else the CPU."""
    if "device" not in memory or memory["device"].isna().all():
        return pd.Series(True, index=memory.index)
    device = memory["device"].fillna("")
    peaks = memory.groupby(device, sort=False)["allocated_bytes"].max().fillna(-1.0)
    accelerators = peaks[~peaks.index.str.lower().str.startswith("cpu")]
    chosen = (accelerators if len(accelerators) else peaks).idxmax()
    return device == chosen


def _levels(
    times: np.ndarray, values: np.ndarray, start: np.ndarray, end: np.ndarray
) -> dict[str, np.ndarray]:
    """Start (last sample before the step, else its first), peak and end (its last sample,
    else the level carried into it) of one sorted series, for every step window."""
    known = ~np.isnan(values)
    times, values = times[known], values[known]
    count = len(values)
    if not count:
        return {part: np.full(len(start), np.nan) for part in ("start", "peak", "end")}
    before = np.searchsorted(times, start, side="left") - 1  # last sample before the start
    first = before + 1
    last = np.searchsorted(times, end, side="left") - 1  # last sample before the end
    inside = last >= first
    carried = np.where(before >= 0, values[np.maximum(before, 0)], np.nan)
    opening = values[np.minimum(first, count - 1)]
    begin = np.where(before >= 0, carried, np.where(inside, opening, np.nan))
    finish = np.where(inside, values[np.maximum(last, 0)], carried)
    peak = begin.copy()
    for k in np.flatnonzero(inside).tolist():  # one slice per step: steps are few
        peak[k] = np.nanmax([begin[k], values[first[k] : last[k] + 1].max()])
    return {"start": begin, "peak": peak, "end": finish}


def memory_steps(profile: Profile) -> None:
    memory, steps = profile.tables["memory"], profile.tables["steps"]
    memory = memory[curve_device(memory).to_numpy(dtype=bool)]
    memory = memory[memory["time_us"].notna()].sort_values("time_us", kind="stable")
    steps = steps.sort_values("step", kind="stable")
    start = steps["start_us"].to_numpy("float64")
    end = steps["end_us"].to_numpy("float64")
    times = memory["time_us"].to_numpy("float64")
    out = pd.DataFrame(
        {
            "step": steps["step"].to_numpy(),
            "samples": np.searchsorted(times, end, side="left")
            - np.searchsorted(times, start, side="left"),
        }
    )
    if "device" in memory and len(memory):
        out["device"] = memory["device"].iloc[0]
    for column, prefix in (("allocated_bytes", "allocated"), ("reserved_bytes", "reserved")):
        if column not in memory:
            continue
        levels = _levels(times, memory[column].to_numpy("float64", na_value=np.nan), start, end)
        for part, values in levels.items():
            out[f"{prefix}_{part}_bytes"] = values
    if "allocated_end_bytes" in out:
        out["growth_bytes"] = out["allocated_end_bytes"] - out["allocated_start_bytes"]
        out["end_growth_bytes"] = out["allocated_end_bytes"].diff()
    profile.tables["memory_steps"] = conform("memory_steps", out)


# -- blocks charged to operators (Kineto) ----------------------------------------------------


def _release_times(blocks: pd.DataFrame) -> np.ndarray:
    """For each row of `blocks` (events with device, address, time, bytes), the time of the
    free that follows an allocation at the same address (NaN: none while profiling, or not
    an allocation)."""
    order = blocks.sort_values(["_device", "address", "time_us"], kind="stable").index
    ordered = blocks.loc[order]
    same = (
        ordered["_device"].shift(-1).eq(ordered["_device"])
        & ordered["address"].shift(-1).eq(ordered["address"]).fillna(False)
    ).to_numpy(dtype=bool)
    next_frees = (ordered["bytes"].shift(-1) < 0).to_numpy(dtype=bool)
    is_alloc = (ordered["bytes"] > 0).to_numpy(dtype=bool)
    release = np.where(
        same & next_frees & is_alloc, ordered["time_us"].shift(-1).to_numpy("float64"), np.nan
    )
    out = pd.Series(release, index=order)
    return out.reindex(blocks.index).to_numpy("float64")


def _charged_operators(host: pd.DataFrame, thread: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Name of the framework operator charged with a block allocated at `at` on `thread`
    (None: no operator was running on that thread)."""
    ops = host[
        host["kind"].isin(FRAMEWORK_KINDS).fillna(False).to_numpy(dtype=bool)
        & host["start_us"].notna().to_numpy()
        & host["duration_us"].notna().to_numpy()
        & host["thread"].notna().to_numpy()
    ]
    ops = ops.assign(
        thread=ops["thread"].astype("int64"), end_us=ops["start_us"] + ops["duration_us"]
    ).sort_values(
        ["thread", "start_us", "duration_us"], ascending=[True, True, False], kind="stable"
    )
    op_thread = ops["thread"].to_numpy("int64")
    op_start = ops["start_us"].to_numpy("float64")
    op_end = ops["end_us"].to_numpy("float64")
    parent = intervals.nest(op_thread, op_start, op_end)
    found = intervals.innermost(op_thread, op_start, op_end, parent, thread, at)
    names = ops["name"].astype(str).to_numpy(dtype=object)
    allocator = np.array([bool(ALLOCATOR_CALLS.match(n)) for n in names], dtype=bool)
    for k in np.flatnonzero(found >= 0).tolist():
        row = found[k]
        while allocator[row] and parent[row] >= 0:
            row = int(parent[row])
        found[k] = row
    charged = np.full(len(at), None, dtype=object)
    hit = found >= 0
    charged[hit] = names[found[hit]]
    return charged


def op_allocations_from_memory(profile: Profile) -> None:
    memory = profile.tables["memory"]
    host = profile.tables["host_ops"]
    events = memory[
        memory["bytes"].notna().to_numpy()
        & memory["time_us"].notna().to_numpy()
        & (memory["bytes"] != 0).to_numpy(dtype=bool)
    ]
    device = events["device"].fillna("") if "device" in events else ""
    events = events.assign(_device=device)
    release = _release_times(events)
    allocs = (events["bytes"] > 0).to_numpy(dtype=bool)
    events, release = events[allocs], release[allocs]
    thread = events["thread"].to_numpy("float64", na_value=np.nan)
    names = np.full(len(events), None, dtype=object)
    known = ~np.isnan(thread)
    if known.any():
        names[known] = _charged_operators(
            host, thread[known].astype("int64"), events["time_us"].to_numpy("float64")[known]
        )
    frame = pd.DataFrame(
        {
            "name": names,
            "bytes": events["bytes"].to_numpy("float64"),
            "start_us": events["time_us"].to_numpy("float64"),
            "end_us": release,
            "device": events["device"].to_numpy() if "device" in events else None,
            "allocated_bytes": events["allocated_bytes"].to_numpy("float64", na_value=np.nan)
            if "allocated_bytes" in events
            else np.nan,
        }
    )
    frame = frame[frame["name"].notna().to_numpy()].reset_index(drop=True)
    profile.tables["op_allocations"] = conform("op_allocations", frame)


# -- memory per operator ---------------------------------------------------------------------


def op_memory(profile: Profile) -> None:
    blocks = profile.tables["op_allocations"]
    device = blocks["device"].fillna("") if "device" in blocks else pd.Series("", blocks.index)
    end = blocks["end_us"] if "end_us" in blocks else pd.Series(np.nan, blocks.index)
    start = blocks["start_us"]
    held = pd.Series(np.nan, index=blocks.index)
    peak = pd.Series(np.nan, index=blocks.index)
    if "allocated_bytes" in blocks and "end_us" in blocks:
        for value in device.unique().tolist():
            rows = device == value
            totals = blocks["allocated_bytes"][rows]
            if totals.isna().all():
                continue
            moment = start[totals.idxmax()]
            peak[rows] = totals.max()
            alive = (start[rows] <= moment) & (end[rows].isna() | (end[rows] > moment))
            held[rows] = np.where(alive, blocks["bytes"][rows], 0.0)
    frame = pd.DataFrame(
        {
            "name": blocks["name"].astype(str),
            "device": device,
            "bytes": blocks["bytes"],
            "unreleased": blocks["bytes"].where(end.isna(), 0.0) if "end_us" in blocks else np.nan,
            "held": held,
            "peak": peak,
        }
    )
    by_operator = frame.groupby(["name", "device"], sort=False)
    grouped = pd.DataFrame(
        {  # one grouping, each figure by pandas' own reductions (a lambda runs per group)
            "allocations": by_operator["bytes"].size(),
            "allocated_bytes": by_operator["bytes"].sum(),
            "max_bytes": by_operator["bytes"].max(),
            "unreleased_bytes": by_operator["unreleased"].sum(min_count=1),
            "peak_held_bytes": by_operator["held"].sum(min_count=1),
            "peak_bytes": by_operator["peak"].max(),
        }
    ).reset_index()
    grouped["peak_share"] = grouped["peak_held_bytes"] / grouped["peak_bytes"].where(
        grouped["peak_bytes"] > 0
    )
    grouped["device"] = grouped["device"].replace("", pd.NA)
    grouped = grouped.sort_values(
        ["peak_held_bytes", "allocated_bytes"], ascending=False, kind="stable", ignore_index=True
    )
    profile.tables["op_memory"] = conform("op_memory", grouped)


MEMORY_STEPS = (
    "step",
    "device",
    "samples",
    *(f"{k}_{p}_bytes" for k in ("allocated", "reserved") for p in ("start", "peak", "end")),
    "growth_bytes",
    "end_growth_bytes",
)
OP_ALLOCATIONS = ("name", "bytes", "start_us", "end_us", "device", "allocated_bytes")
OP_MEMORY = (
    "name",
    "device",
    "allocations",
    "allocated_bytes",
    "max_bytes",
    "unreleased_bytes",
    "peak_held_bytes",
    "peak_bytes",
    "peak_share",
)

PROVIDERS = [
    MetricProvider(
        "memory_steps",
        ("memory.time_us", "memory.allocated_bytes", "steps.start_us", "steps.end_us"),
        ("memory_steps", *(f"memory_steps.{c}" for c in MEMORY_STEPS)),
        memory_steps,
        "memory_steps: allocated and reserved memory at the start, peak and end of each step",
    ),
    MetricProvider(
        "op_allocations",
        (
            "memory.time_us",
            "memory.bytes",
            "memory.address",
            "memory.thread",
            "host_ops.kind",
            "host_ops.thread",
            "host_ops.start_us",
            "host_ops.duration_us",
        ),
        ("op_allocations", *(f"op_allocations.{c}" for c in OP_ALLOCATIONS)),
        op_allocations_from_memory,
        "op_allocations: Kineto [memory] allocations charged to the operator running on their "
        "thread, with the time of their free",
    ),
    MetricProvider(
        "op_memory",
        ("op_allocations.name", "op_allocations.bytes", "op_allocations.start_us"),
        ("op_memory", *(f"op_memory.{c}" for c in OP_MEMORY)),
        op_memory,
        "op_memory: blocks, bytes, unreleased bytes and share of the peak per operator",
    ),
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
