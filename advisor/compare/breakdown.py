"""The overall breakdown of one run per step, and of two runs side by side.

The categories are the compare tool's (seed 003): kernel time by class (cube, vector, conv
forward/backward, flash attention forward/backward, paged attention, other compute), then
computing time (union of compute tasks), uncovered communication (and its wait), SDMA/memcpy,
free time (neither computing nor communicating) and E2E step time, plus the memory peak.
Everything is a mean per step, so runs profiled for different numbers of steps compare.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from advisor.lazy import lazy_module
from advisor.model import Profile, comm_operations

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

METRICS: tuple[tuple[str, str], ...] = (
    ("cube", "µs"),
    ("vector", "µs"),
    ("conv_forward", "µs"),
    ("conv_backward", "µs"),
    ("flash_attention_forward", "µs"),
    ("flash_attention_backward", "µs"),
    ("paged_attention", "µs"),
    ("other_compute", "µs"),
    ("lccl", "µs"),
    ("computing", "µs"),
    ("comm_not_overlapped", "µs"),
    ("wait", "µs"),
    ("sdma", "µs"),
    ("free", "µs"),
    ("e2e", "µs"),
    ("operators", "µs"),
    ("dataloader", "µs"),
    ("memory_peak", "bytes"),
)
"""Breakdown rows, in display order. `lccl` is the time of LCCL communication kernels (the
row appears only when a run has some); `operators` is the time of the top-level framework
operators per step (host time in a CPU-only run: the figure a CPU trace has); `dataloader`
the host time spent fetching batches."""

KERNEL_METRICS = (
    "cube",
    "vector",
    "conv_forward",
    "conv_backward",
    "flash_attention_forward",
    "flash_attention_backward",
    "paged_attention",
    "other_compute",
)

_BACKWARD = re.compile(r"grad|backward|backprop|bwd|dgrad|wgrad", re.I)
_PAGED = re.compile(r"paged_?attention", re.I)
_KERNEL_CLASSES = {"cube": ("cube", "matmul"), "vector": ("vector",)}
LCCL_KERNEL = "kernel_aivec"
"""Name of the device tasks of LCCL (Ascend's lightweight collective library), whose
collectives run as kernels on the vector cores: msprof-analyze counts tasks of this name
(any case) as Lccl time, apart from computation."""


def is_lccl(ops: pd.DataFrame) -> pd.Series:
    """Rows of device_ops that are LCCL communication kernels."""
    return ops["name"].astype("string").str.lower().eq(LCCL_KERNEL).fillna(False).astype(bool)


def step_count(profile: Profile) -> int:
    steps = profile.tables.get("steps")
    return max(len(steps), 1) if steps is not None else 1


def _kernel_times(ops: pd.DataFrame) -> dict[str, tuple[float, int]]:
    """Total time and count of compute kernels per breakdown category."""
    compute = ops[(ops["category"] == "compute").fillna(False) & ~is_lccl(ops)]
    text = (compute["op_type"].fillna("") + " " if "op_type" in compute else "") + compute[
        "name"
    ].fillna("")
    klass = (
        compute["compute_class"].fillna("other_compute")
        if "compute_class" in compute
        else pd.Series("other_compute", index=compute.index)
    )
    backward = text.str.contains(_BACKWARD)
    paged = text.str.contains(_PAGED)
    category = np.select(
        [
            paged,
            klass.eq("flash_attention") & backward,
            klass.eq("flash_attention"),
            klass.eq("conv") & backward,
            klass.eq("conv"),
            klass.isin(_KERNEL_CLASSES["cube"]),
            klass.isin(_KERNEL_CLASSES["vector"]),
        ],
        [
            "paged_attention",
            "flash_attention_backward",
            "flash_attention_forward",
            "conv_backward",
            "conv_forward",
            "cube",
            "vector",
        ],
        "other_compute",
    )
    grouped = compute["duration_us"].groupby(category).agg(["sum", "count"])
    return {str(k): (float(v["sum"]), int(v["count"])) for k, v in grouped.iterrows()}


def breakdown(profile: Profile, operators_us: float) -> dict[str, tuple[float, float]]:
    """metric -> (value per step, count per step) of one run; metrics it lacks are absent."""
    steps = step_count(profile)
    out: dict[str, tuple[float, float]] = {}
    ops = profile.tables.get("device_ops")
    if ops is not None and not ops.empty:
        out |= dict.fromkeys(KERNEL_METRICS, (0.0, 0.0))
        for metric, (total, count) in _kernel_times(ops).items():
            out[metric] = (total / steps, count / steps)
        lccl = ops.loc[is_lccl(ops), "duration_us"]
        out["lccl"] = (float(lccl.sum()) / steps, len(lccl) / steps)
        copies = ops[ops["category"].isin(["memcpy", "memset"]).fillna(False)]
        out["sdma"] = (float(copies["duration_us"].sum()) / steps, len(copies) / steps)
    table = profile.tables.get("steps")
    if table is not None and not table.empty:
        for metric, column in (
            ("computing", "computing_us"),
            ("comm_not_overlapped", "comm_not_overlapped_us"),
            ("free", "free_us"),
            ("e2e", "duration_us"),
        ):
            if profile.has("steps", column):
                out[metric] = (float(table[column].mean()), np.nan)
    comm = profile.tables.get("comm_ops")
    if comm is not None and profile.has("comm_ops", "wait_us"):
        out["wait"] = (float(comm_operations(comm)["wait_us"].sum()) / steps, np.nan)
    if operators_us:
        out["operators"] = (operators_us / steps, np.nan)
    host = profile.tables.get("host_ops")
    if host is not None and "kind" in host and host["kind"].eq("dataloader").any():
        loading = host.loc[host["kind"].eq("dataloader").fillna(False), "duration_us"]
        out["dataloader"] = (float(loading.sum()) / steps, len(loading) / steps)
    peak = _memory_peak(profile)
    if pd.notna(peak):
        out["memory_peak"] = (peak, np.nan)
    return out


def _memory_peak(profile: Profile) -> float:
    """The largest reserved memory of any device, or allocated where the allocator reports no
    reservation (CPU allocators report 0): from the memory samples of a trace, else from a
    memory snapshot's history (allocator_state's peaks), else what a memory timeline export's
    kinds of tensor held together at its peak; NaN without any."""
    for table, columns in (
        ("memory", ("reserved_bytes", "allocated_bytes")),
        ("allocator_state", ("peak_reserved_bytes", "peak_allocated_bytes")),
    ):
        frame = profile.tables.get(table)
        if frame is None or frame.empty:
            continue
        peaks = [frame[c].max() for c in columns if c in frame]
        return float(next((p for p in peaks if pd.notna(p) and p > 0), np.nan))
    kinds = profile.tables.get("memory_kinds")
    if kinds is not None and not kinds.empty:
        peak = kinds["at_peak_bytes"].sum(min_count=1)
        return float(peak) if pd.notna(peak) and peak > 0 else np.nan
    return np.nan


def compare_breakdown(
    base: dict[str, tuple[float, float]], comp: dict[str, tuple[float, float]]
) -> pd.DataFrame:
    """The compare_overall table: one row per metric either run has."""
    rows = []
    for metric, unit in METRICS:
        if metric not in base and metric not in comp:
            continue
        # a run without data-loading events spent no host time loading
        absent = (0.0, 0.0) if metric == "dataloader" else (np.nan, np.nan)
        b_value, b_count = base.get(metric, absent)
        c_value, c_count = comp.get(metric, absent)
        if metric == "lccl" and not (b_count or c_count):
            continue  # neither run uses LCCL
        rows.append(
            {
                "metric": metric,
                "unit": unit,
                "base": b_value,
                "comparison": c_value,
                "base_count": b_count,
                "comp_count": c_count,
            }
        )
    frame = pd.DataFrame(
        rows, columns=["metric", "unit", "base", "comparison", "base_count", "comp_count"]
    )
    frame["diff"] = frame["comparison"] - frame["base"]
    frame["ratio"] = frame["comparison"] / frame["base"].where(frame["base"] > 0)
    return frame
