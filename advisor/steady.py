"""Warm-up steps: the first profiled steps that are far slower than the rest.

The first iterations of a run compile graphs and kernels, autotune, allocate memory and
start data-loader workers; in a pipeline-parallel run the later stages also wait for the
first micro-batch of stages launched later. Such a step can take ten times a normal one.
Averaged in, it makes every per-step figure (step time, bubble, idle share, the slow-rank
comparison) describe the start-up instead of the training, so those figures use the steady
steps and the warm-up is reported once, as what it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

WARMUP_FACTOR = 2.0
"""A leading step is warm-up when it takes more than this many times the median of the steps
after it (our choice: step times of a steady run vary by tens of percent, not by 2x)."""
MIN_STEADY_STEPS = 3
"""Steps that must remain after the warm-up for their median to stand for the steady state."""


def warmup_count(durations: Sequence[float]) -> int:
    """How many leading steps (in step order) are warm-up: each one slower than WARMUP_FACTOR
    times the median of the steps after it, with at least MIN_STEADY_STEPS steps left."""
    values = np.asarray(durations, dtype="float64")
    count = 0
    while len(values) - count > MIN_STEADY_STEPS:
        later = values[count + 1 :]
        median = float(np.nanmedian(later)) if np.isfinite(later).any() else float("nan")
        if not (median > 0 and values[count] > WARMUP_FACTOR * median):
            break
        count += 1
    return count


def warmup_mask(steps: pd.DataFrame) -> pd.Series:
    """True for the warm-up rows of a steps table (aligned with it): its `warmup` column once
    derived, else worked out here. None are marked when a step number repeats (msprof numbers
    the steps of each model from 1): the first rows are then not the run's first iterations."""
    if "warmup" in steps:
        return steps["warmup"].astype(bool)
    marked = np.zeros(len(steps), dtype=bool)
    order = _unique_step_order(steps["step"]) if len(steps) and "duration_us" in steps else None
    if order is not None:
        durations = steps["duration_us"].to_numpy("float64", na_value=np.nan)[order]
        marked[order[: warmup_count(durations)]] = True
    return pd.Series(marked, index=steps.index)


def _unique_step_order(step: pd.Series) -> np.ndarray | None:
    """The rows' positions in step order, as a stable sort of the column orders them
    (missing last); None when a step number repeats. By NumPy for step numbers: a tenth of
    what sorting the table and hashing the column cost on a few steps, which every rank
    pays four times."""
    if step.dtype.kind in "iuf":
        values = step.to_numpy("float64", na_value=np.nan)
        if len(np.unique(values)) < len(values):  # NaNs count as one, as is_unique's do
            return None
        return np.argsort(values, kind="stable")
    if not step.is_unique:
        return None
    return step.reset_index(drop=True).sort_values(kind="stable").index.to_numpy()


def steady_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps table without its warm-up rows (the table itself when it has none)."""
    mask = warmup_mask(steps)
    return steps if not mask.any() else steps[~mask.to_numpy(bool)]


FRAGMENT_SHARE = 0.5
"""A last step shorter than this share of the median of the steps before it, and with no
device work, is where the profiler stopped (our choice, as WARMUP_FACTOR the other way)."""


def trailing_fragment(steps: pd.DataFrame, device_ops: pd.DataFrame | None) -> int | None:
    """The row of `steps` that is a fragment the profiler cut off, else None.

    `torch.profiler`'s last `prof.step()` opens one more ProfilerStep, which lasts until the
    profiler stops: a step of tens of microseconds in which the device runs nothing. Counted
    as a step, it halves the step time of a two-step trace and drags every per-step mean. The
    last step (by start) is such a fragment when no device task overlaps it while one
    overlaps an earlier step, and it is shorter than FRAGMENT_SHARE of the earlier steps'
    median. A profile without device tasks (CPU only) has no such fragment."""
    columns = {"start_us", "end_us", "duration_us"}
    if device_ops is None or device_ops.empty or not columns <= set(steps):
        return None
    if not {"start_us", "duration_us"} <= set(device_ops):
        return None
    placed = steps.dropna(subset=["start_us", "end_us"]).sort_values("start_us", kind="stable")
    if len(placed) < 2:
        return None
    earlier = placed["duration_us"].to_numpy("float64", na_value=np.nan)[:-1]
    last = placed.iloc[-1]
    median = float(np.nanmedian(earlier)) if np.isfinite(earlier).any() else float("nan")
    if not float(last["duration_us"]) < FRAGMENT_SHARE * median:
        return None
    start = device_ops["start_us"].to_numpy("float64", na_value=np.nan)
    end = start + device_ops["duration_us"].to_numpy("float64", na_value=0.0)

    def busy(a: float, b: float) -> bool:
        return bool(((start < b) & (end > a)).any())

    if busy(float(last["start_us"]), float(last["end_us"])):
        return None
    before = placed.iloc[:-1]
    if not any(busy(a, b) for a, b in zip(before["start_us"], before["end_us"])):
        return None
    return int(placed.index[-1])
