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

import pandas as pd

from advisor import intervals
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.model import TABLES, Profile, conform
from advisor.units import fmt_us

TABLE = "dynamic_shape_ops"
SHOWN_STEPS = 8  # steps listed in shapes_per_step besides every step with a change


def dynamic_shape_ops(profile: Profile, source: str) -> None:
    """dynamic_shape_ops from `source` (device_ops or host_ops): one row per operator seen in
    two or more steps with input shapes."""
    runs = profile.tables[source]
    runs = runs[runs["input_shapes"].notna() & runs["step"].notna() & runs["duration_us"].notna()]
    if source == "host_ops":
        # only the outermost call with shapes of each stack: aten::addmm inside aten::linear
        # (or aten::mm inside AddmmBackward0) is the same time, counted once
        runs = runs[~intervals.nested_calls(runs)]
    rows = []
    for name, op in runs.groupby("name", sort=False):
        per_step = op.groupby("step", sort=True).agg(
            time_us=("duration_us", "sum"),
            shape_set=("input_shapes", lambda s: " + ".join(sorted(set(s)))),
        )
        if len(per_step) < 2:
            continue
        rows.append(_row(str(name), op, per_step, source))
    columns = [c.name for c in TABLES[TABLE].columns]
    profile.tables[TABLE] = conform(TABLE, pd.DataFrame(rows, columns=columns))


def _row(name: str, op: pd.DataFrame, per_step: pd.DataFrame, source: str) -> dict[str, object]:
    times, sets = per_step["time_us"], per_step["shape_set"]
    changed = sets.ne(sets.shift()) & (sets.index != sets.index[0])
    median = float(times.median())
    excess = float((times[changed] - median).clip(lower=0).sum())
    shown = [
        f"{step}: {sets[step]} ({fmt_us(float(times[step]))})"
        for i, step in enumerate(per_step.index)
        if i < SHOWN_STEPS or changed[step]
    ]
    types = op["op_type"].dropna() if "op_type" in op else pd.Series(dtype="string")
    return {
        "name": name,
        "op_type": types.iloc[0] if len(types) else None,
        "source": source,
        "steps": len(per_step),
        "shapes": op["input_shapes"].nunique(),
        "variants": sets.nunique(),
        "changes": int(changed.sum()),
        "total_us": float(times.sum()),
        "min_step_us": float(times.min()),
        "median_step_us": median,
        "max_step_us": float(times.max()),
        "excess_us": excess,
        "shapes_per_step": " | ".join(shown),
    }


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
