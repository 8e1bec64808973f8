"""Was a run profiled minimally? The profiler options a profile records that inflate its times.

Recording input shapes, Python stacks, memory events, module hierarchy or FLOPs, a torch_npu
profiler level above Level0, AI Core PMU metrics or the L2 cache, and on an NPU the CPU
activity itself, all add host and device work to the profiled steps: E2E time, free time and
uncovered communication grow (msprof-analyze marks such a comparison "Not minimal profiling"
and counts a torch_npu profile as minimal only at Level0 without the CPU activity). The
settings are read from what the profiler wrote (the `metadata` table's `profiler.*` rows,
torch_npu's profiler_level/aic_metrics) and, where a profile does not state them, from what it
recorded (input shapes, python_function events, memory samples, PMU columns, framework
operators on an NPU).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from advisor.compat import zip_strict
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

_SWITCHES = (
    "record_shapes",
    "with_stack",
    "profile_memory",
    "with_modules",
    "with_flops",
    "l2_cache",
)
"""torch / torch_npu profiler switches that record more per event when true."""
_ON = {"true", "1", "yes", "on"}  # how profilers write a switch that is on (Kineto: 1)
_MINIMAL_LEVELS = {"level0", "level_none", "none"}
_NO_METRICS = {"aicorenone", "acl_aicore_none", "none", "", "false", "off"}
_METRIC_KEYS = ("profiler.aic_metrics", "profiler.ai_core_metrics", "profiler.aiCoreMetrics")
_PMU = ("mac_ratio", "vec_ratio", "scalar_ratio", "mte1_ratio", "mte2_ratio", "mte3_ratio")

COLUMNS = ("option", "value", "evidence")


def _settings(profile: Profile) -> dict[str, tuple[str, str]]:
    """profiler.* settings the profile states: key -> (value, file)."""
    out: dict[str, tuple[str, str]] = {}
    meta = profile.tables.get("metadata")
    if meta is not None and not meta.empty:
        rows = meta[meta["key"].astype(str).str.startswith("profiler.")]
        source = rows["source"] if "source" in rows else pd.Series("", index=rows.index)
        for key, value, file in zip_strict(rows["key"], rows["value"], source.fillna("")):
            out[str(key)] = (str(value), str(file))
    for key in ("profiler_level", "aic_metrics"):  # torch_npu's, kept by the reader
        value = profile.meta.extra.get(key)
        if value and f"profiler.{key}" not in out:
            out[f"profiler.{key}"] = (str(value), "profiler_info.json")
    return out


def _rows(frame: pd.DataFrame | None, column: str, test: Callable[[pd.Series], pd.Series]) -> int:
    """How many rows of a table pass a test on one column (0 without the table or column)."""
    if frame is None or column not in frame:
        return 0
    return int(test(frame[column]).fillna(False).sum())


def heavy_options(profile: Profile) -> pd.DataFrame:
    """One row per option that inflated the profile's times: option, value, evidence (the
    file stating it, or what the profile recorded because of it)."""
    stated = _settings(profile)
    host = profile.tables.get("host_ops")
    device = profile.tables.get("device_ops")
    rows: list[tuple[str, str, str]] = []

    def recorded(option: str, count: int, what: str) -> None:
        if count:
            rows.append((option, "recorded", f"{count:,} {what}"))

    for switch in _SWITCHES:
        key = f"profiler.{switch}"
        if key in stated:
            value, file = stated[key]
            if value.strip().lower() in _ON:
                rows.append((switch, value, file))
        elif switch == "record_shapes":
            shapes = _rows(host, "input_shapes", pd.Series.notna)
            recorded(switch, shapes, "host calls with input shapes")
        elif switch == "with_stack":
            frames = _rows(host, "kind", lambda kind: kind.eq("python"))
            recorded(switch, frames, "Python function events")
        elif switch == "profile_memory":
            memory = profile.tables.get("memory")
            recorded(switch, 0 if memory is None else len(memory), "memory samples")
    level = stated.get("profiler.profiler_level")
    if level and level[0].strip().lower() not in _MINIMAL_LEVELS:
        rows.append(("profiler_level", level[0], level[1]))
    metrics = next((stated[k] for k in _METRIC_KEYS if k in stated), None)
    if metrics is not None:
        if metrics[0].strip().lower() not in _NO_METRICS:
            rows.append(("aic_metrics", metrics[0], metrics[1]))
    elif device is not None and any(c in device for c in _PMU):
        pmu = device[[c for c in _PMU if c in device]].notna().any(axis=1)
        recorded("aic_metrics", int(pmu.sum()), "kernels with PMU metrics")
    if str(profile.meta.device_kind).upper() == "NPU":
        operators = _rows(host, "kind", lambda kind: kind.isin(["aten", "optimizer"]))
        recorded("cpu_activity", operators, "framework operators recorded on the host")
    return pd.DataFrame(rows, columns=list(COLUMNS))


def profiling_table(base: Profile, comp: Profile) -> pd.DataFrame:
    """The compare_profiling table: the inflating options of both runs, side by side."""
    frames = [
        heavy_options(p).assign(side=side) for side, p in (("baseline", base), ("comparison", comp))
    ]
    table = pd.concat(frames, ignore_index=True)
    return table[["side", *COLUMNS]]
