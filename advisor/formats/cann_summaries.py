"""The CANN summary layouts msprof and torch_npu both write: op_summary (torch_npu's
kernel_details is op_summary under other column names), op_statistic and api_statistic."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from advisor.formats.cann_csv import CsvKind, SummaryCsv, frame_of
from advisor.formats.cann_pmu import PMU_RATIOS
from advisor.formats.cann_tasks import task_categories
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

VECTOR_CORES = ("AI_VECTOR_CORE", "MIX_AIV")


def pmu_ratios(
    number: Callable[[str], pd.Series | None], core_type: pd.Series, *, vector_first: bool
) -> dict[str, pd.Series | None]:
    """The PMU ratios of each task from the counters a source has (`number(name)`, None when
    absent; each counter asked for once). With `vector_first`, a vector task takes its aiv_
    counter where it has one: kernel_details and the databases write 0, not N/A, in a vector
    task's aic_ columns, so aic-first would give it the cube unit's 0."""
    values = {name: number(name) for sources in PMU_RATIOS.values() for name in sources}
    vector = core_type.isin(VECTOR_CORES).to_numpy(dtype=bool) if vector_first else None
    out: dict[str, pd.Series | None] = {}
    for column, sources in PMU_RATIOS.items():
        present = [values[s] for s in sources if values[s] is not None]
        if not present:
            out[column] = None
            continue
        ratio = present[0]
        for more in present[1:]:
            ratio = ratio.fillna(more)
        own = values.get(sources[1]) if sources[1].startswith("aiv_") else None
        if vector is not None and vector.any() and own is not None:
            ratio = ratio.mask(vector & own.notna().to_numpy(), own)
        out[column] = ratio
    return out


def unquoted_shapes(shapes: pd.Series) -> pd.Series:
    """Shapes as written inside their quotes (`"8,3;4"`: kernel_details' `\"""8,3;4\"""` and
    the databases' strings), missing when empty."""
    text = shapes.str.strip('"')
    return text.mask(text == "")


def device_ops_from_op_summary(csv: SummaryCsv, *, vector_first: bool = False) -> pd.DataFrame:
    """device_ops of op_summary: one row per task, with shapes and PMU ratios (`vector_first`:
    see pmu_ratios)."""
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
            **pmu_ratios(csv.number, core_type, vector_first=vector_first),
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
