"""Dynamic-shape metric provider: each operator's time and input shapes per step (the view
MindInsight draws for dynamic-shape networks), so a rule can tell operators whose shapes change
between steps, and what the steps after a change cost, from those that run the same shapes
every step.

An operator is known by its name. Its shape set in a step is the set of input shapes of its
runs in that step, so an operator name called by several layers (aten::mm in every linear
layer) is dynamic only when that set changes, not because its layers differ. The time at stake
is the time a new shape's first step took above the operator's settled steps (those not right
after a change) of the same shapes: the recompiling, re-tiling, autotuning or first allocations
a new shape pays, apart from its work (a batch of 64 simply takes longer than one of 8). A
change to shapes no settled step ran cannot be told from its work, and is counted apart, not
in the time. Device operators are used where they carry shapes and steps (MindSpore, Ascend
PyTorch), else host operators (PyTorch profiler's aten operators with their Input Dims), the
outermost call with shapes of each stack only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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

    The figures come from sorted arrays of all runs at once (operators, steps and shapes as
    integer codes), not a loop over operators nor pandas groupings or row filters of the
    wide source table: a profile runs thousands of operators, every run derives this table,
    and on a small profile a pandas operation costs more than its data."""
    ops = profile.tables[source]
    missing = [ops[column].array.isna() for column in ("input_shapes", "step", "duration_us")]
    rows = np.flatnonzero(~(missing[0] | missing[1] | missing[2]))  # arrays: 4x faster
    if source == "host_ops":
        # only the outermost call with shapes of each stack: aten::addmm inside aten::linear
        # (or aten::mm inside AddmmBackward0) is the same time, counted once
        rows = rows[~intervals.nested_calls(ops, rows)]
    names, name_of = pd.factorize(ops["name"].to_numpy(object, na_value="")[rows], sort=True)
    shapes, shape_of = pd.factorize(ops["input_shapes"].to_numpy(object)[rows], sort=True)
    steps, step_of = pd.factorize(ops["step"].iloc[rows], sort=True)
    order = np.lexsort((shapes, steps, names))
    per_step = _StepRuns(names[order], steps[order], shapes[order], shape_of)
    group = np.empty(len(order), dtype="int64")  # each run's operator-and-step group
    group[order] = per_step.group
    per_step.time_us = _sums(ops["duration_us"].to_numpy("float64", na_value=np.nan)[rows], group)
    table = _rows(per_step.operated_twice(), list(step_of))
    found = len(table["name_code"])
    op_type = (
        _first_known(ops["op_type"].to_numpy(object, na_value=None)[rows], names)
        if "op_type" in ops
        else np.full(int(names.max(initial=-1)) + 1, None, dtype=object)
    )
    columns = {
        "name": pd.array(name_of[table["name_code"]], dtype="string"),
        "op_type": pd.array(op_type[table["name_code"]], dtype="string"),
        "source": pd.array([source] * found, dtype="string"),
        "steps": table["steps"].astype("int64"),
        "shapes": _distinct_per(names, shapes, table["name_code"]).astype("int64"),
        "variants": table["variants"].astype("int64"),
        **{k: np.asarray(table[k], dtype="int64") for k in _COUNTS},
        **{k: np.asarray(table[k], dtype="float64") for k in _FIGURES},
        "shapes_per_step": pd.array(table["shapes_per_step"], dtype="string"),
    }
    profile.tables[TABLE] = conform(TABLE, pd.DataFrame(columns))


_FIGURES = ("total_us", "min_step_us", "median_step_us", "max_step_us", "excess_us")
_COUNTS = ("changes", "unmatched_changes")


class _StepRuns:
    """The runs sorted by operator, step and shape, cut into one group per operator and step:
    its time and its shape set (its distinct shapes, sorted, joined by " + ")."""

    def __init__(
        self, names: np.ndarray, steps: np.ndarray, shapes: np.ndarray, shape_of: np.ndarray
    ) -> None:
        count = len(names)
        new_step = np.ones(count, dtype=bool)
        new_step[1:] = (names[1:] != names[:-1]) | (steps[1:] != steps[:-1])
        new_shape = new_step.copy()
        new_shape[1:] |= shapes[1:] != shapes[:-1]
        self.starts = np.flatnonzero(new_step)
        self.group = np.cumsum(new_step) - 1  # of each sorted run
        distinct = np.flatnonzero(new_shape)  # first run of each operator, step and shape
        texts = shape_of[shapes[distinct]].tolist()
        cuts = np.searchsorted(distinct, self.starts).tolist() + [len(distinct)]
        self.shape_set = np.array(
            [" + ".join(texts[a:b]) for a, b in zip(cuts[:-1], cuts[1:])], dtype=object
        )
        self.name = names[self.starts]
        self.step = steps[self.starts]
        self.time_us = np.zeros(len(self.starts))

    def operated_twice(self) -> _StepRuns:
        """Only the groups of operators seen in two or more steps."""
        seen = np.bincount(self.name, minlength=int(self.name.max(initial=-1)) + 1)
        keep = seen[self.name] >= 2
        for field in ("name", "step", "shape_set", "time_us"):
            setattr(self, field, getattr(self, field)[keep])
        return self


def _sums(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """The sum of `values` per group code 0..n-1, each group summed in the order of `values`
    as pandas sums (compensated): the same figures to the last digit as a pandas grouping."""
    return pd.Series(values).groupby(groups, sort=True).sum().to_numpy("float64")


def _rows(per_step: _StepRuns, step_of: list) -> dict[str, Any]:
    """One row per operator (columns as arrays) from its per-step groups, which are sorted
    by operator, then step."""
    name, time_us, shape_set = per_step.name, per_step.time_us, per_step.shape_set
    count = len(name)
    first = np.ones(count, dtype=bool)
    first[1:] = name[1:] != name[:-1]
    changed = np.zeros(count, dtype=bool)
    changed[1:] = shape_set[1:] != shape_set[:-1]
    changed &= ~first
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], count)
    operator = np.cumsum(first) - 1  # each group's row in the table
    sizes = ends - starts
    median = _medians(time_us, operator, starts, sizes)
    set_codes = pd.factorize(shape_set)[0]
    settled = _settled_medians(time_us, operator, set_codes, changed)
    matched = changed & ~np.isnan(settled)
    excess = np.where(matched, np.clip(time_us - settled, 0, None), 0.0)
    position = np.arange(count) - np.repeat(starts, sizes)
    shown = np.flatnonzero((position < SHOWN_STEPS) | changed)
    texts = [
        f"{step_of[step]}: {shapes} ({fmt_us(time)})"
        for step, shapes, time in zip(
            per_step.step[shown].tolist(), shape_set[shown].tolist(), time_us[shown].tolist()
        )
    ]
    cuts = np.searchsorted(shown, starts).tolist() + [len(shown)]
    return {
        "name_code": name[starts],
        "steps": sizes,
        "variants": _distinct_per(name, set_codes, name[starts]),
        "changes": np.bincount(operator, weights=changed, minlength=len(starts)).astype("int64"),
        "unmatched_changes": np.bincount(
            operator, weights=changed & ~matched, minlength=len(starts)
        ).astype("int64"),
        "total_us": _sums(time_us, operator),
        "min_step_us": np.minimum.reduceat(time_us, starts) if count else np.zeros(0),
        "median_step_us": median,
        "max_step_us": np.maximum.reduceat(time_us, starts) if count else np.zeros(0),
        "excess_us": _sums(excess, operator),
        "shapes_per_step": [" | ".join(texts[a:b]) for a, b in zip(cuts[:-1], cuts[1:])],
    }


def _medians(
    values: np.ndarray, group: np.ndarray, starts: np.ndarray, sizes: np.ndarray
) -> np.ndarray:
    """The median of each group's values (groups contiguous, from `starts`, `sizes` long), as
    np.median gives it (the middle value, or the mean of the two middle ones), from one sort
    of all values instead of a median per group. The values are per-step times, never NaN."""
    ordered = values[np.lexsort((values, group))]
    return (ordered[starts + (sizes - 1) // 2] + ordered[starts + sizes // 2]) / 2


def _settled_medians(
    time_us: np.ndarray, operator: np.ndarray, set_codes: np.ndarray, changed: np.ndarray
) -> np.ndarray:
    """For each per-step group, the median time of its operator's settled groups (not right
    after a change) with the same shape set; NaN where it has none (`_medians` over the
    settled groups, keyed by operator and shape set)."""
    keys = operator.astype("int64") * (int(set_codes.max(initial=0)) + 1) + set_codes
    settled = ~changed
    distinct, group = np.unique(keys[settled], return_inverse=True)
    sizes = np.bincount(group, minlength=len(distinct))
    medians = _medians(time_us[settled], group, np.cumsum(sizes) - sizes, sizes)
    at = np.searchsorted(distinct, keys)
    found = at < len(distinct)
    found[found] = distinct[at[found]] == keys[found]
    out = np.full(len(keys), np.nan)
    out[found] = medians[at[found]]
    return out


def _distinct_per(groups: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The number of distinct `values` of each group code in `wanted`."""
    pairs = np.unique(np.stack([groups, values]), axis=1) if len(groups) else np.zeros((2, 0))
    counts = np.bincount(pairs[0].astype("int64"), minlength=int(groups.max(initial=-1)) + 1)
    return counts[wanted] if len(wanted) else np.zeros(0, dtype="int64")


def _first_known(op_type: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Each operator code's first recorded op_type, in the runs' order (None: none)."""
    known = np.flatnonzero(pd.notna(op_type))
    values = np.full(int(names.max(initial=-1)) + 1, None, dtype=object)
    codes, first = np.unique(names[known], return_index=True)
    values[codes] = op_type[known[first]]
    return values


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
