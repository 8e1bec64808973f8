"""Summary CSVs of an export: one builder per file type msprof alone writes (step_trace,
task_time, aicpu_mi, dp) beside the layouts shared with torch_npu (advisor.formats), and the
rows of merged summaries split per device."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.formats.cann_csv import (
    DEVICE_COLUMN,
    CsvKind,
    SummaryCsv,
    frame_of,
    read_summary_table,
)
from advisor.formats.cann_summaries import API_STATISTIC, OP_STATISTIC, OP_SUMMARY
from advisor.formats.cann_tasks import task_categories
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


def in_read_order(chosen: dict[str, list[Path]]) -> list[tuple[str, list[Path]]]:
    """op_summary before task_time: task_time is read only for devices lacking op_summary."""
    return [(kind, chosen[kind]) for kind in CSV_TABLES if kind in chosen]


def _steps_from_step_trace(csv: SummaryCsv) -> pd.DataFrame:
    end = csv.number("Iteration End(us)")
    duration = csv.number("Iteration Time(us)")
    reduces = [csv.number(c) for c in csv.copies("Reduce Duration(us)")]
    return frame_of(
        {
            "step": csv.number("Iteration ID"),
            "start_us": end - duration,
            "end_us": end,
            "duration_us": duration,
            "fp_bp_us": csv.number("FP to BP Time(us)"),
            "grad_refresh_us": csv.number(
                csv.first("Iteration Refresh(us)", "Grad Refresh Bound(us)")
            ),
            "data_aug_bound_us": csv.number("Data Aug Bound(us)"),
            # `N/A` in a reduce group means the iteration had fewer groups: it adds nothing.
            "reduce_us": pd.concat(reduces, axis=1).sum(axis=1) if reduces else None,
            "model_id": csv.number("Model ID"),
        }
    )


_KERNEL_TYPES = {"KERNEL_AICORE": "AI_CORE", "KERNEL_AICPU": "AI_CPU"}
_CONTROL_TASKS = frozenset({"PROFILING_ENABLE", "PROFILING_DISABLE", "TASK_TIMEOUT_SET"})
"""task_time's tasks (kernel_name N/A) that switch the profiler on and off or set the stream's
timeout: no work of the model. Counted as tasks, the two profiler switches stretched a
workload of 15 ms of kernels to the 917 ms the profiler was on, and the time before the last
one read as a 749 ms wait."""


def _device_ops_from_task_time(csv: SummaryCsv) -> pd.DataFrame:
    kernel_type = csv.text("kernel_type").fillna("UNKNOWN")
    core_type = kernel_type.map(lambda t: _KERNEL_TYPES.get(t, t))
    work = ~kernel_type.isin(_CONTROL_TASKS).to_numpy(bool)
    tasks = frame_of(
        {
            "name": csv.text("kernel_name").fillna(kernel_type),  # N/A names: non-kernel tasks
            "core_type": core_type,
            "start_us": csv.number("task_start(us)"),
            "duration_us": csv.number("task_time(us)"),
            "stream": csv.number("stream_id"),
            "task_id": csv.number("task_id"),
            "category": task_categories(core_type),
        }
    )
    return tasks if work.all() else tasks[work].reset_index(drop=True)


def _sample_numbers(csv: SummaryCsv) -> pd.Series:
    """1, 2, ... per device in file order: a merged CSV interleaves the rows of devices."""
    devices = csv.text("Device_id")
    key = devices.fillna("") if devices is not None else pd.Series("", index=csv.index)
    return key.groupby(key).cumcount() + 1


def _queues_from_aicpu_mi(csv: SummaryCsv) -> pd.DataFrame:
    """Data-preparation queue read by GetNext on the device (data sink with AI CPU): one row
    per read, as MindSpore's `minddata_aicpu` samples, so DATA-002/004 apply."""
    start = csv.number("Start Time(us)")
    size = csv.number("Queue Size")
    return frame_of(
        {
            "queue": pd.Series("device", index=csv.index),
            "step": _sample_numbers(csv),
            "size": size,
            "empty": size == 0,
            "time_us": start,
            "wait_us": csv.number("End Time(us)") - start,
        }
    )


def _queues_from_dp(csv: SummaryCsv) -> pd.DataFrame:
    """TensorFlow data-preprocess offload: the host's cached buffer of prepared batches, one
    sample per event; an empty buffer means the host pipeline had nothing ready (DATA-001)."""
    size = csv.number("Cached Buffer Size")
    return frame_of(
        {
            "queue": pd.Series("host", index=csv.index),
            "step": _sample_numbers(csv),
            "size": size,
            "empty": size == 0,
            "time_us": csv.number("Timestamp(us)"),
        }
    )


def _graph_fusions_from_fusion_op(csv: SummaryCsv) -> pd.DataFrame:
    """The fusions the graph compiler applied: the fused operator and the names it replaced
    (`Original Ops`, separated by `;` or `,`, counted here)."""
    original = csv.text("Original Ops")
    names = None if original is None else original.fillna("").str.split(r"[;,]")
    kilobytes = csv.number("Memory Total(KB)")
    return frame_of(
        {
            "fusion_op": csv.text("Fusion Op"),
            "original_ops": original,
            "op_count": None
            if names is None
            else names.map(lambda parts: sum(1 for n in parts if n.strip())),
            "model_id": csv.number("Model ID"),
            "model_name": csv.text("Model Name"),
            "memory_total_bytes": None if kilobytes is None else kilobytes * 1024,
        }
    )


# Read order matters: op_summary before task_time (see `_add_csv_rows`).
CSV_TABLES: dict[str, CsvKind] = {
    "op_summary": OP_SUMMARY,
    "task_time": CsvKind(
        "device_ops", ("kernel_name", "kernel_type", "task_time(us)"), _device_ops_from_task_time
    ),
    "step_trace": CsvKind(
        "steps", ("Iteration ID", "Iteration End(us)", "Iteration Time(us)"), _steps_from_step_trace
    ),
    "op_statistic": OP_STATISTIC,
    "api_statistic": API_STATISTIC,
    "aicpu_mi": CsvKind(
        "queues", ("Start Time(us)", "End Time(us)", "Queue Size"), _queues_from_aicpu_mi
    ),
    "dp": CsvKind("queues", ("Timestamp(us)", "Cached Buffer Size"), _queues_from_dp),
    "fusion_op": CsvKind(
        "graph_fusions", ("Fusion Op", "Original Ops"), _graph_fusions_from_fusion_op
    ),
}


def read_csv_table(kind: str, path: Path, rel: str, warn: WarnFn) -> pd.DataFrame | None:
    """Read one summary CSV of a known kind; warn and return None when it is unusable."""
    return read_summary_table(CSV_TABLES[kind], path, rel, warn)


_DEVICE_ID = re.compile(r"\d{1,9}|host")
"""A `Device_id` naming a device."""


def split_devices(
    frame: pd.DataFrame, rel: str, warn: WarnFn
) -> Iterable[tuple[str, pd.DataFrame]]:
    """Rows of a merged CSV per `Device_id`; rows without one are reported and dropped."""
    if DEVICE_COLUMN not in frame:
        warn(
            rel,
            "missing column 'Device_id' (needed to split merged summaries per device)",
            column="Device_id",
        )
        return []
    # a cell that is neither a number nor `host` (a corrupt row) names no device either
    codes, ids = pd.factorize(frame[DEVICE_COLUMN])  # in order of appearance; missing: -1
    named = np.array([_DEVICE_ID.fullmatch(str(i)) is not None for i in ids], dtype=bool)
    unnamed = codes < 0
    unnamed[~unnamed] = ~named[codes[~unnamed]]
    if unnamed.any():
        warn(
            rel,
            f"{int(unnamed.sum())} rows without a Device_id ignored",
            line=int(np.argmax(unnamed)) + 2,
            column="Device_id",
        )
    if len(ids) == 1 and not unnamed.any():  # one device, the usual case: the frame itself
        return [(str(ids[0]), frame.reset_index(drop=True))]
    return [
        (str(ids[code]), frame.take(np.flatnonzero(codes == code)).reset_index(drop=True))
        for code in np.flatnonzero(named)
    ]
