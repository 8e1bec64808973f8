"""The reader's name and the file names of the old layout: each names its kind and the rank
it belongs to."""

from __future__ import annotations

import re
from functools import cache

READER = "mindspore_legacy"
_KINDS = (
    ("step_trace", r"step_trace_raw_(\d+)_detail_time\.csv"),
    ("device_queue", r"device_queue_profiling_(\d+)\.txt"),
    ("dataset_iterator", r"dataset_iterator_profiling_(\d+)\.txt"),
    ("getnext", r"minddata_aicpu_(\d+)\.txt"),
    ("pipeline", r"minddata_pipeline_raw_(\d+)\.csv"),
    ("timeline", r"output_timeline_data_(\d+)\.txt"),
    ("aicpu", r"aicpu_intermediate_(\d+)\.csv"),
    ("aicore_detail", r"aicore_intermediate_(\d+)_detail\.csv"),
    ("aicore_type", r"aicore_intermediate_(\d+)_type\.csv"),
    ("framework", r"framework_raw_(\d+)\.csv"),
    ("cpu", r"minddata_cpu_utilization_(\d+)\.json"),
    ("flops", r"flops_(\d+)\.txt"),
    ("flops_summary", r"flops_summary_(\d+)\.json"),
    ("memory_summary", r"memory_usage_summary_(\d+)\.json"),
    ("hccl", r"hccl_raw_(\d+)\.csv"),
    ("cluster", r"ascend_cluster_analyse_[a-z-]+_\d+_\d+_(\d+)\.csv"),
    ("gpu_timeline", r"gpu_timeline_display_(\d+)\.json"),
    ("gpu_activity", r"gpu_activity_data_(\d+)\.csv"),
    ("gpu_op_detail", r"gpu_op_detail_info_(\d+)\.csv"),
    ("gpu_op_type", r"gpu_op_type_info_(\d+)\.csv"),
    ("dynamic_shape", r"dynamic_shape_info_(\d+)\.json"),
)
# Files that alone make a folder a MindSpore profiler folder (framework_raw alone does not).
DETECTING = (
    "step_trace",
    "device_queue",
    "dataset_iterator",
    "getnext",
    "pipeline",
    "aicore_type",
    "cpu",
    "gpu_timeline",
    "gpu_activity",
    "gpu_op_detail",
    "gpu_op_type",
    "dynamic_shape",
)


@cache
def _patterns() -> dict[str, re.Pattern[str]]:
    """_KINDS compiled when a folder is first looked at (listing plugins never does)."""
    return {kind: re.compile(pattern) for kind, pattern in _KINDS}


def kind_of(name: str) -> tuple[str, int] | None:
    """(kind, rank) of a file name of the old layout; None for other files."""
    for kind, pattern in _patterns().items():
        match = pattern.fullmatch(name)
        if match:
            return kind, int(match[1])
    return None
