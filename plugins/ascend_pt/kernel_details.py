"""kernel_details.csv: device tasks with shapes and PMU ratios (op_summary under other column
names), and the torch_to_npu launch of each from the trace."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.formats.cann_csv import open_csv
from advisor.formats.cann_summaries import device_ops_from_op_summary, unquoted_shapes
from advisor.formats.cann_tasks import device_category
from advisor.formats.decimal_clock import Clock, exact_parts
from advisor.formats.interning import expand
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

# kernel_details.csv header -> the op_summary header the msprof mapping reads.
_KERNEL_COLUMNS = {
    "Name": "Op Name",
    "Type": "OP Type",
    "Accelerator Core": "Task Type",
    "Start Time(us)": "Task Start Time(us)",
    "Duration(us)": "Task Duration(us)",
    "Wait Time(us)": "Task Wait Time(us)",
}
_KERNEL_REQUIRED = ("Name", "Accelerator Core", "Duration(us)")
_SHAPE_COLUMNS = ("input_shapes", "output_shapes")


@dataclass
class KernelDetails:
    """device_ops from kernel_details.csv whose exact start times are not on the profile's
    clock yet: the file is parsed before trace_view.json, while a read-ahead child folds the
    trace (advisor.formats.read_ahead), and the trace's times fix the clock's origin."""

    ops: pd.DataFrame
    starts: tuple[np.ndarray, np.ndarray] | None
    """Whole µs and fraction of each start as written (decimal_clock.exact_parts)."""

    def on(self, clock: Clock) -> pd.DataFrame:
        """The rows with start_us on `clock` (which they fix when nothing did before)."""
        if self.starts is not None:  # the same cells again, parsed exactly
            exact = clock.from_parts(*self.starts)
            self.ops["start_us"] = np.where(self.ops["start_us"].notna(), exact, np.nan)
        return self.ops


def read_kernel_details(path: Path, rel: str, warn: WarnFn) -> KernelDetails | None:
    """device_ops from kernel_details.csv through the msprof op_summary mapping."""
    csv = open_csv(path, rel, warn, _KERNEL_REQUIRED)
    if csv is None:
        return None
    mapping = {k: v for k, v in _KERNEL_COLUMNS.items() if csv.has(k) and not csv.has(v)}
    csv.rename(mapping)
    ops = device_ops_from_op_summary(csv, vector_first=True)
    # bad cells already warned; placed on the clock by KernelDetails.on
    starts = exact_parts(csv.cells("Task Start Time(us)")) if "start_us" in ops else None
    codes, core_types = pd.factorize(ops["core_type"], use_na_sentinel=False)
    ops["category"] = expand(codes, [device_category(t) for t in core_types])
    for column in _SHAPE_COLUMNS:  # `"""8,3;4"""` in the file reads as `"8,3;4"`
        if column in ops:
            ops[column] = unquoted_shapes(ops[column])
    step = csv.number("Step Id")
    if step is not None:
        ops["step"] = step
    device = csv.text("Device_id")
    if device is not None and device.notna().any():
        ops.attrs["device_id"] = str(device.dropna().iloc[0])
    return KernelDetails(ops, starts)


LAUNCH_MATCH_US = 0.13  # kernel_details may write starts as float64 (0.25 µs steps at epoch µs)


def kernels_with_launches(kernels: pd.DataFrame, launches: pd.DataFrame) -> pd.DataFrame:
    """kernel_details rows with launch_us / launch_thread of the torch_to_npu flow ending at
    the same time (the nearest within LAUNCH_MATCH_US; one kernel per flow)."""
    starts = (
        kernels["start_us"].to_numpy(float, na_value=np.nan)
        if "start_us" in kernels
        else np.full(len(kernels), np.nan)
    )
    launch_us = np.full(len(kernels), np.nan)
    thread = np.full(len(kernels), np.nan)
    timed = np.flatnonzero(np.isfinite(starts))
    if timed.size and not launches.empty:
        left = pd.DataFrame({"start_us": starts[timed], "row": timed}).sort_values("start_us")
        right = launches.sort_values("start_us").rename(columns={"start_us": "flow_us"})
        found = pd.merge_asof(
            left,
            right,
            left_on="start_us",
            right_on="flow_us",
            direction="nearest",
            tolerance=LAUNCH_MATCH_US,
        )
        found = found.dropna(subset=["flow_us"])
        found["gap"] = (found["start_us"] - found["flow_us"]).abs()
        found = found.sort_values("gap", kind="stable").drop_duplicates("flow_us")
        rows = found["row"].to_numpy(np.int64)
        launch_us[rows] = found["launch_us"].to_numpy(float)
        thread[rows] = found["launch_thread"].to_numpy(float)
    return kernels.assign(launch_us=launch_us, launch_thread=thread)
