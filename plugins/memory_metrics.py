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
from typing import TYPE_CHECKING, Any

from advisor import intervals
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.lazy import lazy_module
from advisor.model import TABLES, Profile, conform
from advisor.text_codes import isin_mask

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


def curve_device(memory: pd.DataFrame) -> np.ndarray:
    """Rows of the device the memory curve is drawn for: the accelerator with the highest
    allocated peak (a GPU or NPU beside the host's CPU samples), else the CPU. Arrays, not a
    pandas grouping: every profile with memory samples derives this, most with few rows."""
    if "device" not in memory or memory["device"].isna().all():
        return np.ones(len(memory), dtype=bool)
    codes, devices = pd.factorize(memory["device"].to_numpy(object, na_value=""))
    allocated = memory["allocated_bytes"].to_numpy("float64", na_value=np.nan)
    peaks = np.full(len(devices), -np.inf)
    np.fmax.at(peaks, codes, allocated)
    peaks[np.isneginf(peaks)] = -1.0  # a device without a known level ranks below any other
    accelerator = np.array([not str(d).lower().startswith("cpu") for d in devices], dtype=bool)
    candidates = np.flatnonzero(accelerator) if accelerator.any() else np.arange(len(devices))
    chosen = candidates[np.argmax(peaks[candidates])]  # the first of equal peaks
    return codes == chosen


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
    times = memory["time_us"].to_numpy("float64", na_value=np.nan)
    rows = np.flatnonzero(curve_device(memory) & ~np.isnan(times))
    rows = rows[np.argsort(times[rows], kind="stable")]
    times = times[rows]
    by_step = np.argsort(steps["step"].to_numpy("float64", na_value=np.nan), kind="stable")
    start = steps["start_us"].to_numpy("float64")[by_step]
    end = steps["end_us"].to_numpy("float64")[by_step]
    out: dict[str, Any] = {
        "step": steps["step"].to_numpy()[by_step],
        "samples": np.searchsorted(times, end, side="left")
        - np.searchsorted(times, start, side="left"),
    }
    if "device" in memory and len(rows):
        out["device"] = pd.array([memory["device"].iloc[rows[0]]] * len(by_step), dtype="string")
    for column, prefix in (("allocated_bytes", "allocated"), ("reserved_bytes", "reserved")):
        if column not in memory:
            continue
        values = memory[column].to_numpy("float64", na_value=np.nan)[rows]
        for part, levels in _levels(times, values, start, end).items():
            out[f"{prefix}_{part}_bytes"] = levels
    if "allocated_end_bytes" in out:
        out["growth_bytes"] = out["allocated_end_bytes"] - out["allocated_start_bytes"]
        ends = out["allocated_end_bytes"]
        out["end_growth_bytes"] = np.concatenate(([np.nan], np.diff(ends)))[: len(ends)]
    in_order = {c.name: out[c.name] for c in TABLES["memory_steps"].columns if c.name in out}
    # in the contract's order: conform then keeps the frame instead of selecting its columns
    profile.tables["memory_steps"] = conform("memory_steps", pd.DataFrame(in_order))


# -- blocks charged to operators (Kineto) ----------------------------------------------------


def _release_times(
    device: np.ndarray, address: pd.Series, time: np.ndarray, size: np.ndarray
) -> np.ndarray:
    """For each event (device, block address, time, bytes), the time of the free that follows
    an allocation at the same address (NaN: none while profiling, or not an allocation)."""
    device_code = pd.factorize(device, sort=True)[0]
    address_code, addresses = pd.factorize(address, sort=True)
    address_code[address_code < 0] = len(addresses)  # unknown addresses last, never paired
    order = np.lexsort((time, address_code, device_code))  # stable
    device_code, address_code = device_code[order], address_code[order]
    time, size = time[order], size[order]
    paired = (
        (device_code[1:] == device_code[:-1])
        & (address_code[1:] == address_code[:-1])
        & (address_code[:-1] < len(addresses))
        & (size[1:] < 0)
        & (size[:-1] > 0)
    )
    release = np.full(len(order), np.nan)
    release[order[:-1][paired]] = time[1:][paired]
    return release


def _charged_operators(host: pd.DataFrame, thread: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Name of the framework operator charged with a block allocated at `at` on `thread`
    (None: no operator was running on that thread)."""
    start = host["start_us"].to_numpy("float64", na_value=np.nan)
    duration = host["duration_us"].to_numpy("float64", na_value=np.nan)
    rows = np.flatnonzero(
        isin_mask(host["kind"], FRAMEWORK_KINDS)
        & ~np.isnan(start)
        & ~np.isnan(duration)
        & host["thread"].notna().to_numpy(dtype=bool)
    )
    start, duration = start[rows], duration[rows]
    op_thread = host["thread"].iloc[rows].to_numpy("int64")
    order = np.lexsort((-duration, start, op_thread))  # the longest first of equal starts
    rows, op_start, op_thread = rows[order], start[order], op_thread[order]
    op_end = op_start + duration[order]
    parent = intervals.nest(op_thread, op_start, op_end)
    found = intervals.innermost(op_thread, op_start, op_end, parent, thread, at)
    names = host["name"].iloc[rows].astype(str).to_numpy(dtype=object)
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
    size = memory["bytes"].to_numpy("float64", na_value=np.nan)
    time = memory["time_us"].to_numpy("float64", na_value=np.nan)
    events = np.flatnonzero(~np.isnan(size) & ~np.isnan(time) & (size != 0))
    size, time = size[events], time[events]
    has_device = "device" in memory
    device = (
        memory["device"].to_numpy(object, na_value="")[events]
        if has_device
        else np.full(len(events), "", dtype=object)
    )
    release = _release_times(device, memory["address"].iloc[events], time, size)
    allocs = size > 0
    events, size, time, release = events[allocs], size[allocs], time[allocs], release[allocs]
    thread = memory["thread"].to_numpy("float64", na_value=np.nan)[events]
    names = np.full(len(events), None, dtype=object)
    known = ~np.isnan(thread)
    if known.any():
        names[known] = _charged_operators(
            profile.tables["host_ops"], thread[known].astype("int64"), time[known]
        )
    charged = np.flatnonzero(names != None)  # noqa: E711 (elementwise)
    events = events[charged]
    frame = pd.DataFrame(
        {
            "name": pd.array(names[charged], dtype="string"),
            "bytes": size[charged],
            "start_us": time[charged],
            "end_us": release[charged],
            "device": memory["device"].array[events] if has_device else None,
            "allocated_bytes": memory["allocated_bytes"].to_numpy("float64", na_value=np.nan)[
                events
            ]
            if "allocated_bytes" in memory
            else np.nan,
        }
    )
    profile.tables["op_allocations"] = conform("op_allocations", frame)


# -- memory per operator ---------------------------------------------------------------------


def _held_at_peak(
    device: np.ndarray, size: np.ndarray, start: np.ndarray, end: np.ndarray, level: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per block: the bytes it held at its device's allocated peak (the first sample of the
    highest level; 0 when not alive then) and that peak (NaN where the device has no level)."""
    held = np.full(len(size), np.nan)
    peak = np.full(len(size), np.nan)
    for value in pd.unique(device).tolist():  # devices are few
        rows = np.flatnonzero(device == value)
        levels = level[rows]
        if np.isnan(levels).all():
            continue
        highest = int(np.nanargmax(levels))
        moment = start[rows[highest]]
        peak[rows] = levels[highest]
        alive = (start[rows] <= moment) & (np.isnan(end[rows]) | (end[rows] > moment))
        held[rows] = np.where(alive, size[rows], 0.0)
    return held, peak


def op_memory(profile: Profile) -> None:
    """One row per operator and device, from its blocks, with arrays and one pandas grouping
    (its compensated sums): every profile with blocks derives this, most with few rows."""
    blocks = profile.tables["op_allocations"]
    count = len(blocks)
    device = (
        blocks["device"].to_numpy(object, na_value="")
        if "device" in blocks
        else np.full(count, "", dtype=object)
    )
    size = blocks["bytes"].to_numpy("float64", na_value=np.nan)
    start = blocks["start_us"].to_numpy("float64", na_value=np.nan)
    has_end = "end_us" in blocks
    end = (
        blocks["end_us"].to_numpy("float64", na_value=np.nan) if has_end else np.full(count, np.nan)
    )
    if "allocated_bytes" in blocks and has_end:
        level = blocks["allocated_bytes"].to_numpy("float64", na_value=np.nan)
        held, peak = _held_at_peak(device, size, start, end, level)
    else:  # no level to find the peaks in
        held, peak = np.full(count, np.nan), np.full(count, np.nan)
    names = blocks["name"].astype(str).to_numpy(dtype=object)
    name_code, _ = pd.factorize(names)
    device_code, devices = pd.factorize(device)
    group, firsts = pd.factorize(name_code * max(len(devices), 1) + device_code)  # first seen first
    groups = len(firsts)
    sums = (
        pd.DataFrame(
            {
                "allocated_bytes": size,
                "unreleased_bytes": np.where(np.isnan(end), size, 0.0) if has_end else np.nan,
                "peak_held_bytes": held,
            }
        )
        .groupby(group, sort=True)
        .sum(min_count=1)
    )
    max_bytes = np.full(groups, -np.inf)
    np.maximum.at(max_bytes, group, size)
    peak_bytes = np.full(groups, np.nan)
    np.fmax.at(peak_bytes, group, peak)
    held_bytes = sums["peak_held_bytes"].to_numpy("float64")
    allocated = sums["allocated_bytes"].to_numpy("float64")
    first_row = np.full(groups, count, dtype="int64")
    np.minimum.at(first_row, group, np.arange(count))
    order = np.lexsort(
        (
            np.where(np.isnan(allocated), np.inf, -allocated),
            np.where(np.isnan(held_bytes), np.inf, -held_bytes),
        )
    )  # largest first, missing last, ties in the order first seen
    rows = first_row[order]
    share = np.divide(held_bytes, peak_bytes, out=np.full(groups, np.nan), where=peak_bytes > 0)
    table = pd.DataFrame(
        {
            "name": pd.array(names[rows], dtype="string"),
            "device": pd.array(np.where(device[rows] == "", None, device[rows]), dtype="string"),
            "allocations": np.bincount(group, minlength=groups)[order].astype("int64"),
            "allocated_bytes": allocated[order],
            "max_bytes": max_bytes[order],
            "unreleased_bytes": sums["unreleased_bytes"].to_numpy("float64")[order],
            "peak_held_bytes": held_bytes[order],
            "peak_bytes": peak_bytes[order],
            "peak_share": share[order],
        }
    )
    profile.tables["op_memory"] = conform("op_memory", table)


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
