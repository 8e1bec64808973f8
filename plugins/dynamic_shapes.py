"""Dynamic-shape metric provider: each operator's time and input shapes per step (the view
MindInsight draws for dynamic-shape networks), so a rule can tell operators whose shapes change
between steps, and what the steps after a change cost, from those that run the same shapes
every step.

An operator is known by its name. Its shape set in a step is the set of input shapes of its
runs in that step, so an operator name called by several layers (aten::mm in every linear
layer) is dynamic only when that set changes, not because its layers differ. The time at stake
is the time above the operator's median per-step time in the steps right after a change: the
recompilation or re-tiling a new shape pays (an upper bound, as a larger shape also simply takes
longer). Device operators are used where they carry shapes and steps (MindSpore, Ascend
PyTorch), else host operators (PyTorch profiler's aten operators with their Input Dims), the
outermost call with shapes of each stack only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor import intervals
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.lazy import lazy_module
from advisor.model import TABLES, Profile, conform
from advisor.units import fmt_us

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

TABLE = "dynamic_shape_ops"
SHOWN_STEPS = 8  # steps listed in shapes_per_step besides every step with a change


def dynamic_shape_ops(profile: Profile, source: str) -> None:
    """dynamic_shape_ops from `source` (device_ops or host_ops): one row per operator seen in
    two or more steps with input shapes.

    The figures come from groupings of all runs at once, not a loop over operators: a profile
    runs thousands of operators and every run derives this table."""
    runs = profile.tables[source]
    runs = runs[runs["input_shapes"].notna() & runs["step"].notna() & runs["duration_us"].notna()]
    if source == "host_ops":
        # only the outermost call with shapes of each stack: aten::addmm inside aten::linear
        # (or aten::mm inside AddmmBackward0) is the same time, counted once
        runs = runs[~intervals.nested_calls(runs)]
    runs = runs.assign(name=runs["name"].astype(str), input_shapes=runs["input_shapes"].astype(str))
    keys = ["name", "step"]
    times = runs.groupby(keys, sort=True)["duration_us"].sum()
    distinct = runs[[*keys, "input_shapes"]].drop_duplicates().sort_values([*keys, "input_shapes"])
    sets = _joined(distinct.set_index(keys)["input_shapes"], " + ")
    per_step = pd.DataFrame({"time_us": times, "shape_set": sets})
    steps = per_step.groupby(level="name").size()
    per_step = per_step[per_step.index.get_level_values("name").isin(steps[steps >= 2].index)]
    names = per_step.index.get_level_values("name")
    first = ~pd.Series(names, index=per_step.index).duplicated().to_numpy()
    previous = per_step["shape_set"].groupby(level="name").shift()
    per_step["changed"] = per_step["shape_set"].ne(previous) & ~first
    profile.tables[TABLE] = conform(TABLE, _rows(runs, per_step, source))


def _rows(runs: pd.DataFrame, per_step: pd.DataFrame, source: str) -> pd.DataFrame:
    """One row per operator from its per-step figures (`per_step`, indexed by name and step)."""
    by_name = per_step.groupby(level="name", sort=False)
    median = by_name["time_us"].transform("median")
    excess = (per_step["time_us"] - median).clip(lower=0).where(per_step["changed"], 0.0)
    position = by_name.cumcount()
    shown = per_step[(position < SHOWN_STEPS) | per_step["changed"]]
    text = pd.Series(
        [
            f"{step}: {shape_set} ({fmt_us(time_us)})"
            for (_, step), shape_set, time_us in zip(
                shown.index.tolist(), shown["shape_set"].tolist(), shown["time_us"].tolist()
            )
        ],
        index=shown.index,
    )
    ops = runs[runs["name"].isin(per_step.index.get_level_values("name"))].groupby("name")
    table = by_name.agg(
        steps=("time_us", "size"),
        variants=("shape_set", "nunique"),
        changes=("changed", "sum"),
        total_us=("time_us", "sum"),
        min_step_us=("time_us", "min"),
        median_step_us=("time_us", "median"),
        max_step_us=("time_us", "max"),
    )
    table["excess_us"] = excess.groupby(level="name").sum()
    table["shapes"] = ops["input_shapes"].nunique()
    table["shapes_per_step"] = _joined(text.droplevel("step"), " | ")
    table["op_type"] = ops["op_type"].first() if "op_type" in runs else None
    table["source"] = source
    columns = [c.name for c in TABLES[TABLE].columns]
    return table.rename_axis("name").reset_index().reindex(columns=columns)


def _joined(texts: pd.Series, separator: str) -> pd.Series:
    """The texts under each index label joined by `separator`, one row per label; `texts`
    is sorted by its index. (groupby(...).agg(separator.join) goes through pandas once per
    group, several times slower than slicing one list.)"""
    codes, _ = pd.factorize(texts.index)
    starts = np.flatnonzero(np.diff(codes) != 0) + 1 if len(codes) else np.array([], dtype=int)
    bounds = [0, *starts.tolist(), len(codes)] if len(codes) else [0]
    values = texts.astype(str).tolist()
    joined = [separator.join(values[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    return pd.Series(joined, index=texts.index[bounds[:-1]], dtype=object)


def _from_device(profile: Profile) -> None:
    dynamic_shape_ops(profile, "device_ops")


def _from_host(profile: Profile) -> None:
    dynamic_shape_ops(profile, "host_ops")


_OUTPUTS = (TABLE,) + tuple(f"{TABLE}.{c.name}" for c in TABLES[TABLE].columns)
_NEEDS = ("name", "duration_us", "input_shapes", "step")

PROVIDERS = [
    MetricProvider(
        "dynamic_shape_ops_device",
        tuple(f"device_ops.{c}" for c in _NEEDS),
        _OUTPUTS,
        _from_device,
        "dynamic_shape_ops: time and input shapes per step of device operators",
    ),
    MetricProvider(
        "dynamic_shape_ops_host",
        tuple(f"host_ops.{c}" for c in _NEEDS),
        _OUTPUTS,
        _from_host,
        "dynamic_shape_ops: time and input shapes per step of host operators (no device shapes)",
    ),
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
