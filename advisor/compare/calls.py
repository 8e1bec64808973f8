"""Framework APIs by name and device kernels by type and input shape, of two runs.

The operator comparison pairs calls in execution order; these two views ignore the order and
sum by key instead (msprof-analyze's ApiCompare and KernelCompare sheets): an API called more
often, or a kernel of one type and shape that got slower (same work, slower code: a library or
compiler version), shows whatever the call tree around it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.compare.tree import FRAMEWORK_KINDS, nest, sorted_intervals
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

API_KINDS = (*FRAMEWORK_KINDS, "python")
"""host_ops kinds that are framework APIs: operators (aten::*, Optimizer.step#...) and Python
functions (python_function events, nn.Module calls, recorded with with_stack=True)."""
NO_SHAPE = "N/A"  # kernels without recorded input shapes share one key, as the compare tool does


def api_calls(profile: Profile) -> pd.DataFrame:
    """One row per framework API call: name, kind, duration_us and self_us (its duration less
    that of the API calls directly inside it on its thread)."""
    host = profile.tables.get("host_ops")
    if host is None or host.empty or "kind" not in host:
        return pd.DataFrame(
            {
                "name": pd.Series(dtype=str),
                "kind": pd.Series(dtype=str),
                "duration_us": pd.Series(dtype=float),
                "self_us": pd.Series(dtype=float),
            }
        )
    calls = host[host["kind"].isin(API_KINDS).fillna(False) & host["duration_us"].notna()]
    if "start_us" not in calls:
        calls = calls.assign(start_us=np.nan)
    timed = sorted_intervals(calls)
    parent = nest(
        timed["thread"].to_numpy("int64"),
        timed["start_us"].to_numpy("float64"),
        timed["end_us"].to_numpy("float64"),
    )
    duration = timed["duration_us"].to_numpy("float64")
    inside = np.zeros(len(timed))
    has_parent = parent >= 0
    np.add.at(inside, parent[has_parent], duration[has_parent])
    untimed = calls[calls["start_us"].isna()]  # aggregated rows: all their time is their own
    untimed_us = untimed["duration_us"].to_numpy("float64")
    return pd.DataFrame(
        {
            "name": [*timed["name"].astype(str), *untimed["name"].astype(str)],
            "kind": [*timed["kind"].astype(str), *untimed["kind"].astype(str)],
            "duration_us": np.concatenate([duration, untimed_us]),
            "self_us": np.concatenate([np.maximum(duration - inside, 0.0), untimed_us]),
        }
    )


def kernel_calls(profile: Profile) -> pd.DataFrame:
    """One row per device task other than communication: kernel (its operator type where the
    profiler names one, else its name), input_shapes and duration_us."""
    ops = profile.tables.get("device_ops")
    if ops is None or ops.empty:
        return pd.DataFrame(
            {
                "kernel": pd.Series(dtype=str),
                "input_shapes": pd.Series(dtype=str),
                "duration_us": pd.Series(dtype=float),
            }
        )
    if "category" in ops:
        ops = ops[(ops["category"] != "communication").fillna(True)]
    ops = ops[ops["duration_us"].notna()]
    name = ops["name"].astype("string")
    kernel = ops["op_type"].astype("string").fillna(name) if "op_type" in ops else name
    shapes = (
        ops["input_shapes"].astype("string")
        if "input_shapes" in ops
        else pd.Series(pd.NA, index=ops.index, dtype="string")
    )
    shapes = shapes.where(shapes.str.strip() != "")
    return pd.DataFrame(
        {
            "kernel": kernel.fillna("").astype(str).to_numpy(),
            "input_shapes": shapes.fillna(NO_SHAPE).astype(str).to_numpy(),
            "duration_us": ops["duration_us"].astype(float).to_numpy(),
        }
    )


def _per_key(
    frame: pd.DataFrame, keys: list[str], sums: dict[str, str], steps: int, spread: bool = False
) -> pd.DataFrame:
    """Calls and summed times per key, per step; the mean call (avg_us) and, with `spread`,
    the longest and shortest call."""
    grouped = frame.groupby(keys, sort=False)
    table = grouped.agg(count=("duration_us", "size"), **{k: (v, "sum") for k, v in sums.items()})
    per_step = list(table.columns)
    table["avg_us"] = table["us"] / table["count"]
    if spread:
        table["max_us"] = grouped["duration_us"].max()
        table["min_us"] = grouped["duration_us"].min()
    table[per_step] = table[per_step] / steps
    return table


def _join(base: pd.DataFrame, comp: pd.DataFrame) -> pd.DataFrame:
    table = base.add_prefix("base_").join(comp.add_prefix("comp_"), how="outer").reset_index()
    base_us, comp_us = table["base_us"].fillna(0.0), table["comp_us"].fillna(0.0)
    counts = [c for c in table.columns if c.endswith("_count") or c in ("base_us", "comp_us")]
    table[counts] = table[counts].fillna(0.0)
    table["diff_us"] = comp_us - base_us
    table["diff_avg_us"] = table["comp_avg_us"] - table["base_avg_us"]
    table["ratio"] = comp_us / base_us.where(base_us > 0)
    return table.sort_values("diff_us", ascending=False, kind="stable", ignore_index=True)


def compare_apis(
    base: pd.DataFrame, comp: pd.DataFrame, base_steps: int, comp_steps: int
) -> pd.DataFrame:
    """The compare_apis table from two runs' `api_calls`."""
    sums = {"us": "duration_us", "self_us": "self_us"}
    kinds = pd.concat([base, comp]).drop_duplicates("name").set_index("name")["kind"]
    table = _join(
        _per_key(base, ["name"], sums, base_steps), _per_key(comp, ["name"], sums, comp_steps)
    )
    table.insert(1, "kind", table["name"].map(kinds))
    return table


def compare_kernels(
    base: pd.DataFrame, comp: pd.DataFrame, base_steps: int, comp_steps: int
) -> pd.DataFrame:
    """The compare_kernels table from two runs' `kernel_calls`."""
    keys = ["kernel", "input_shapes"]
    sums = {"us": "duration_us"}
    return _join(
        _per_key(base, keys, sums, base_steps, spread=True),
        _per_key(comp, keys, sums, comp_steps, spread=True),
    )
