"""The layout of a rank folder: what this reader is called, where the analysed output lies,
which folder names say which framework, which files are read; and how msprof-analyze's
cluster output is known (its detection runs on every input, so it imports nothing heavy)."""

import re
from pathlib import Path

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

STEP_TRACE = "cluster_step_trace_time.csv"
"""The cluster output's CSV of every rank's steps."""
DATABASE = "cluster_analysis.db"
"""The cluster output's database (msprof-analyze 26's default export)."""


def output_folder(path: Path) -> Path:
    """The cluster output a path names: the folder, or the folder of its CSV or database
    named alone."""
    return path.parent if path.name in (STEP_TRACE, DATABASE) and path.is_file() else path


def rank_folders_in(folder: Path) -> bool:
    """Whether `folder` holds rank folders (`*_ascend_pt`, `*_ascend_ms`, `PROF_*`): the data
    a cluster output beside them was made from."""
    try:
        return any(
            p.name.endswith(tuple(FOLDER_SUFFIXES)) or p.name.startswith("PROF_")
            for p in folder.iterdir()
            if p.is_dir()
        )
    except OSError:
        return False
