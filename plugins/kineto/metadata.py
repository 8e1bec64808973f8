"""The `metadata` table of a Kineto trace: its header (versions, distributedInfo, profiler
settings) and the properties of the device the trace is for."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from advisor.formats.metadata import MetadataRows
from advisor.formats.torch_records import TORCH_COMPILED
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
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


def execution_mode(host_names: Iterable[str]) -> str:
    """How the traced steps ran: "graphs" where they replay CUDA graphs (by hand or
    torch.compile's reduce-overhead mode), "compiled" where they run torch.compile's code,
    else "eager": advice to compile or capture the step is for eager runs only."""
    compiled = False
    for name in host_names:
        if _GRAPH_LAUNCH.match(name):
            return "graphs"
        compiled = compiled or bool(TORCH_COMPILED.match(name))
    return "compiled" if compiled else "eager"


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
