"""The layout of a rank folder: what this reader is called, where the analysed output lies,
which folder names say which framework, which files are read."""

import re

READER = "ascend_pt"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
FOLDER_SUFFIXES = {"_ascend_pt": "PyTorch", "_ascend_ms": "MindSpore"}
PROFILER_DB = re.compile(r"^ascend_(?:pytorch|mindspore)_profiler(?:_(\d+))?\.db$")
"""The profiler's own database (a rank's, or one named on its own)."""
TRACE_FILE = "trace_view.json"
OUTPUT_FILES = (
    TRACE_FILE,
    "kernel_details.csv",
    "step_trace_time.csv",
    "op_statistic.csv",
    "api_statistic.csv",
    "communication.json",
    "communication_matrix.json",
    "memory_record.csv",
    "operator_memory.csv",
    "ascend_pytorch_profiler_{rank}.db",
)
