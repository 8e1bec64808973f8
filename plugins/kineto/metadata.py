"""The `metadata` table of a Kineto trace: its header (versions, distributedInfo, profiler
settings) and the properties of the device the trace is for."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from advisor import intervals
from advisor.formats.metadata import MetadataRows
from advisor.formats.torch_records import TORCH_COMPILED
from advisor.lazy import lazy_module
from advisor.text_codes import isin_mask, passing_mask

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

_SETTINGS = ("record_shapes", "with_stack", "profile_memory", "with_flops", "with_modules")
"""Header keys some PyTorch versions write for the profiler's arguments."""
_VERSIONS = {
    "cupti_version": "version.cupti",
    "cuda_runtime_version": "version.cuda_runtime",
    "cuda_driver_version": "version.driver",
    "hip_runtime_version": "version.hip_runtime",
    "rocm_version": "version.rocm",
}
_DEVICE = {
    "name": "device.name",
    "numSms": "device.sm_count",
    "totalGlobalMem": "device.memory_bytes",
    "warpSize": "device.warp_size",
}


_GRAPH_LAUNCH = re.compile(r"^(?:cuda|hip|cu)GraphLaunch")
"""The runtime (or driver) call that replays a captured CUDA/HIP graph."""
MOST = 0.5
"""The share of the device's compute time a mode's kernels must take for the steps to run
in it: a vLLM step whose one Torch-Compiled Region launched one 2 µs kernel of 10.9 ms ran
eager, and told to look for graph breaks, its engineer would look at the wrong code."""
_GENERATED = re.compile(r"^triton")
"""Kernels Inductor generated (Triton's, on CUDA and ROCm: `triton_poi_fused_add_0`, and
`triton__0d1d2d` in PyTorch 2.0)."""
_GRAPH_CALL = re.compile(r"^## Call CompiledFxGraph")
"""The host record of Inductor's compiled graph call (recent PyTorch releases)."""


def execution_mode(tables: Mapping[str, pd.DataFrame]) -> str | None:
    """How the traced steps ran: "graphs" where most of the device's compute time is kernels a
    graph launch replayed (by hand or torch.compile's reduce-overhead mode), "compiled" where
    most is kernels launched inside torch.compile's code and Inductor generated code there
    (`_GENERATED` kernels or its `_GRAPH_CALL`), else "eager": advice to compile or capture
    the step is for eager runs only. AOTAutograd's regions over eager kernels alone (backend
    "aot_eager", functorch's aot_module: HTA's df_index_resolver sample, 11,280 aten kernels
    in its CompiledFunction regions, none generated) launch operator by operator, and were
    told their host work lay outside the compiled code. A trace without kernels (CPU only)
    is judged by whether its host records hold either at all; None without host records."""
    host = tables.get("host_ops")
    if host is None or host.empty:
        return None
    names = host["name"]
    ops = tables.get("device_ops")
    compute = np.zeros(0, dtype=bool) if ops is None else isin_mask(ops["category"], ["compute"])
    duration = np.zeros(0) if ops is None else ops["duration_us"].to_numpy("float64", na_value=0.0)
    total = float(duration[compute].sum())
    if not total > 0:
        if passing_mask(names, _GRAPH_LAUNCH.match).any():
            return "graphs"
        return "compiled" if passing_mask(names, TORCH_COMPILED.match).any() else "eager"
    replayed = compute & passing_mask(ops["launch_name"], _GRAPH_LAUNCH.match)
    if duration[replayed].sum() >= MOST * total:
        return "graphs"
    regions = passing_mask(names, TORCH_COMPILED.match)
    if not regions.any():
        return "eager"
    start = host["start_us"].to_numpy("float64")[regions]
    starts, ends = intervals.merge(start, start + host["duration_us"].to_numpy("float64")[regions])
    launch = ops["launch_us"].to_numpy("float64", na_value=np.nan)
    last = np.searchsorted(starts, launch, side="right") - 1  # the last region begun by then
    inside = compute & (last >= 0) & (launch < ends[np.clip(last, 0, None)])
    if duration[inside].sum() < MOST * total:
        return "eager"
    generated = passing_mask(ops["name"], _GENERATED.match)[inside].any()
    return "compiled" if generated or passing_mask(names, _GRAPH_CALL.match).any() else "eager"


def header_metadata(
    doc: dict[str, Any], device: dict[str, Any] | None, source: str, execution: str | None
) -> pd.DataFrame | None:
    rows = MetadataRows()
    rows.add("framework.execution", execution, source)
    rows.add("profiler.schema_version", doc.get("schemaVersion"), source)
    for key in _SETTINGS:
        rows.add(f"profiler.{key}", doc.get(key), source)
    for key, value in doc.items():
        if str(key).endswith("_version"):
            rows.add(_VERSIONS.get(str(key), f"version.{key}"), value, source)
    info = doc.get("distributedInfo")
    if isinstance(info, dict):
        for key in ("backend", "rank", "world_size", "pg_count"):
            rows.add(f"distributed.{key}", info.get(key), source)
        rows.add("version.nccl", info.get("nccl_version"), source)
    if device:
        for key, name in _DEVICE.items():
            rows.add(name, device.get(key), source)
        major, minor = device.get("computeMajor"), device.get("computeMinor")
        if isinstance(major, int) and isinstance(minor, int):
            rows.add("device.compute_capability", f"{major}.{minor}", source)
    return rows.frame()
