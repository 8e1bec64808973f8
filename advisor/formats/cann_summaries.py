"""The CANN summary layouts msprof and torch_npu both write: op_summary (torch_npu's
kernel_details is op_summary under other column names), op_statistic and api_statistic."""

from __future__ import annotations

import pandas as pd

from advisor.formats.cann_csv import CsvKind, SummaryCsv, frame_of
from advisor.formats.cann_tasks import task_categories


def device_ops_from_op_summary(csv: SummaryCsv) -> pd.DataFrame:
    """device_ops of op_summary: one row per task, with shapes and PMU ratios."""
    core_type = csv.text("Task Type").fillna("UNKNOWN")
    if csv.has("Task Start Time(us)"):
        start = csv.number("Task Start Time(us)")
    else:  # CANN <= 6.0 wrote `Task Start Time` in ns
        start = csv.number("Task Start Time")
        start = start / 1000.0 if start is not None else None
    return frame_of(
        {
            "name": csv.text("Op Name"),
            "op_type": csv.text("OP Type"),
            "core_type": core_type,
            "start_us": start,
            "duration_us": csv.number("Task Duration(us)"),
            "wait_us": csv.number("Task Wait Time(us)"),
            "stream": csv.number("Stream ID"),
            "task_id": csv.number("Task ID"),
            "input_shapes": csv.text("Input Shapes"),
            "input_dtypes": csv.text("Input Data Types"),
            "output_shapes": csv.text("Output Shapes"),
            "block_dim": csv.number(csv.first("Block Num", "Block Dim")),
            "category": task_categories(core_type),
            "op_state": csv.text("OP State"),
            "aicore_time_us": csv.number("aicore_time(us)"),
            "vec_ratio": csv.coalesce("aic_vec_ratio", "aiv_vec_ratio", "vec_ratio"),
            "mac_ratio": csv.coalesce("aic_mac_ratio", "mac_ratio"),
            "scalar_ratio": csv.coalesce("aic_scalar_ratio", "aiv_scalar_ratio", "scalar_ratio"),
            "mte2_ratio": csv.coalesce("aic_mte2_ratio", "aiv_mte2_ratio", "mte2_ratio"),
        }
    )


def op_stats_from_op_statistic(csv: SummaryCsv) -> pd.DataFrame:
    """op_stats of op_statistic: one row per op type and core type."""
    ratio = csv.number("Ratio(%)")
    return frame_of(
        {
            "op_type": csv.text("OP Type"),
            "core_type": csv.text("Core Type"),
            "count": csv.number("Count"),
            "total_us": csv.number("Total Time(us)"),
            "avg_us": csv.number("Avg Time(us)"),
            "min_us": csv.number("Min Time(us)"),
            "max_us": csv.number("Max Time(us)"),
            "ratio": ratio / 100.0,
        }
    )


def host_ops_from_api_statistic(csv: SummaryCsv) -> pd.DataFrame:
    """host_ops of api_statistic: one row per CANN API, its total time and call count."""
    table = frame_of(
        {
            "name": csv.text("API Name"),
            "level": csv.text("Level"),
            "duration_us": csv.number("Time(us)"),
            "count": csv.number("Count"),
        }
    )
    return table.assign(kind="cann_api")


OP_SUMMARY = CsvKind(
    "device_ops", ("Op Name", "Task Type", "Task Duration(us)"), device_ops_from_op_summary
)
OP_STATISTIC = CsvKind(
    "op_stats",
    ("OP Type", "Core Type", "Count", "Total Time(us)", "Ratio(%)"),
    op_stats_from_op_statistic,
)
API_STATISTIC = CsvKind("host_ops", ("API Name", "Time(us)"), host_ops_from_api_statistic)
