"""Reader for Ascend PyTorch (torch_npu) and MindSpore >= 2.3 profiler folders.

A `{worker}_{timestamp}_ascend_pt/` (PyTorch) or `..._ascend_ms/` (MindSpore) folder is one rank:
`profiler_info_{rank}.json` and `profiler_metadata.json` (config, environment), the CANN export
`PROF_*/` and the analysed `ASCEND_PROFILER_OUTPUT/`, which is what is read here:

- `trace_view.json`: a bare list of Chrome trace events whose `ts` is usually a string of µs
  with three decimals. Framework ops (`Python` process) -> host_ops (with_stack=True: their
  `Call stack` -> host_ops.call_stack) and `ProfilerStep#N` -> steps; `CANN` API calls ->
  host_ops (compile, sync, launch, cann_api); `Ascend Hardware` tasks -> device_ops;
  `HCCL`/`Communication` ops -> comm_ops; `Overlap Analysis` (Computing, Communication,
  Communication(Not Overlapped), Free) -> the per-step breakdown of `steps` (free_us adds
  the step's time before its first device task and after its last, in no track).
- `kernel_details.csv` -> device_ops (preferred over the trace's tasks: it has shapes and PMU
  ratios); `step_trace_time.csv` -> the step breakdown where the trace gives none;
  `op_statistic.csv` -> op_stats; `api_statistic.csv` -> host_ops when the trace has no CANN
  calls; `communication.json` / `communication_matrix.json` -> comm_ops; `memory_record.csv`
  -> memory; `operator_memory.csv` -> op_allocations (the blocks each operator allocated);
  MindSpore's `FRAMEWORK/cpu_op_execute_timestamp_{rank}.txt` (operators run on the host CPU)
  -> host_ops of kind cpu_kernel, unless the trace has them as its `CPU OP` process;
  MindSpore's `minddata_pipeline_raw_{rank}.csv` -> pipeline_ops.

trace_view.json is decoded in batches (`advisor.formats.stream.EventStream`); of each event
only the fields the tables need are kept, as columns, so memory follows those columns, not the
file. A trace cut short keeps its complete events, with a warning.

Timestamps are epoch µs (~1.7e15), where float64 keeps only 0.25 µs. Every timestamp is
therefore split into its whole µs, taken exactly, and its fraction, and the whole part is
rebased on one integer origin before the two are added: times keep the digits written. All
files share one clock; a file whose times do not overlap the trace's (another run) keeps its
rows but loses its start times, with a warning. When the folder has no usable
ASCEND_PROFILER_OUTPUT but a CANN export, the export is read by the installed reader that claims
it (msprof's), through the plugin host: blocking that plugin keeps its code from running.

With `export_type=db` the profiler writes `ascend_pytorch_profiler_{rank}.db` /
`ascend_mindspore_profiler_{rank}.db` and `analysis.db` instead, which hold the same data; when
the folder has the database it is read in place of the text files (it reads faster), and
`meta.extra["source"]` is `db`.

msprof-analyze's cluster output (`cluster_analysis_output/`: cluster_step_trace_time.csv and
the cluster communication files) is read as one profile per rank by ClusterOutputReader
(`cluster_output`), unless the rank folders it was made from lie beside it.

Not read: operator_details.csv, npu_module_mem.csv and the binary records
of MindSpore's `FRAMEWORK/` (`mindspore.op_range`: the framework side is in the trace).

Modules: `folder` reads one rank folder into its profile; `trace_view` takes trace_view.json
apart (folded into columns by advisor.formats.trace_columns); `kernel_details`, `steps` (with
step_trace_time.csv), `communication`, `memory`, `operator_memory` and `cpu_ops` read the
other files; `db` the profiler database; `meta` the metadata files; `kinds` classifies host
calls and device tasks; `export` reads the CANN export beside a folder without output;
`layout` names the folder's parts.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisor.formats.cann_comm import TASK_COLUMNS
from advisor.formats.cann_pmu import PMU_COLUMNS
from advisor.hookspecs import hookimpl
from advisor.model import Profile

from .layout import (
    DATABASE,
    FOLDER_SUFFIXES,
    OUTPUT_DIR,
    PROFILER_DB,
    STEP_TRACE,
    TRACE_FILE,
    output_folder,
    rank_folders_in,
)

if TYPE_CHECKING:
    from advisor.formats.read_ahead import TraceFold

_STEPS = "call prof.step() once per iteration (step_trace_time.csv)"
_TEXT_EXPORT = (
    "export the text results (export_type Text), which write kernel_details.csv and trace_view.json"
)
_SAME_RUN = (
    "kernel_details.csv and trace_view.json of the same run (export_type Text): task start "
    "times come from them, and a file of another run loses its times (see the reader warning)"
)
_PMU = (
    "aic_metrics=AiCMetrics.PipeUtilization in the profiler's experimental config (PMU "
    "columns of kernel_details.csv)"
)
_MEMORY_RECORD = "profile_memory=True (memory_record.csv)"
_OPERATOR_MEMORY = "profile_memory=True (operator_memory.csv)"
_DISTRIBUTED = "profile a distributed run (communication.json)"
_TRANSPORTS = (
    "profile a distributed run and export the text results (communication.json: "
    "per-transport sizes and times)"
)
_LEVEL1 = (
    "profiler_level=ProfilerLevel.Level1 or above in the experimental config (the HCCL tasks "
    "of trace_view.json)"
)
_METADATA = (
    "torch_npu 2.1 or later writes profiler_metadata.json (environment variables) and "
    "profiler_info_{rank}.json beside the output: keep them with it"
)
_COLLECT_ZH = {
    _STEPS: "在每个迭代调用一次 prof.step()（step_trace_time.csv）",
    _TEXT_EXPORT: "导出文本结果（export_type Text），会生成 kernel_details.csv 和 trace_view.json",
    _SAME_RUN: "使用同一次运行的 kernel_details.csv 和 trace_view.json（export_type Text）："
    "任务开始时间取自它们，另一次运行的文件会失去时间（见读取告警）",
    _PMU: "在 profiler 的 experimental config 中设置 aic_metrics=AiCMetrics.PipeUtilization"
    "（kernel_details.csv 的 PMU 列）",
    _MEMORY_RECORD: "profile_memory=True（memory_record.csv）",
    _OPERATOR_MEMORY: "profile_memory=True（operator_memory.csv）",
    _DISTRIBUTED: "采集分布式训练（communication.json）",
    _TRANSPORTS: "采集分布式训练并导出文本结果（communication.json：各传输类型的数据量和耗时）",
    _LEVEL1: "在 experimental config 中设置 profiler_level=ProfilerLevel.Level1 或更高"
    "（trace_view.json 中的 HCCL 任务）",
    _METADATA: "torch_npu 2.1 及以上会在输出旁写 profiler_metadata.json（环境变量）和 "
    "profiler_info_{rank}.json：请与输出一起保留",
}


class AscendPtReader:
    """Reads one `*_ascend_pt` / `*_ascend_ms` folder (or its ASCEND_PROFILER_OUTPUT)."""

    name = "ascend_pt"
    formats = (
        "Ascend PyTorch / MindSpore profiler output (*_ascend_pt, *_ascend_ms, "
        "ASCEND_PROFILER_OUTPUT)",
    )
    collect = {
        "steps": _STEPS,
        "device_ops": _TEXT_EXPORT,
        "device_ops.start_us": _SAME_RUN,
        **dict.fromkeys((f"device_ops.{c}" for c in PMU_COLUMNS), _PMU),
        "memory": _MEMORY_RECORD,
        "op_allocations": _OPERATOR_MEMORY,
        "host_ops.input_shapes": "record_shapes=True",
        "comm_ops": _DISTRIBUTED,
        **dict.fromkeys(
            (
                f"comm_ops.{c}"
                for c in ("sdma_bytes", "sdma_transit_us", "sdma_bandwidth_gbps")
                + ("rdma_bytes", "rdma_transit_us", "rdma_bandwidth_gbps")
            ),
            _TRANSPORTS,
        ),
        **dict.fromkeys(
            (f"comm_ops.{c}" for c in TASK_COLUMNS),
            _LEVEL1,
        ),
        "metadata": _METADATA,
    }
    """How to make the Ascend profiler record what a rule lacks (see Reader.collect)."""
    collect_zh = _COLLECT_ZH

    def detect(self, path: Path) -> bool:
        """Names only: the output folder itself, a rank folder, a folder holding one, or a
        profiler database named on its own."""
        path = Path(path)
        if not path.is_dir():
            return PROFILER_DB.match(path.name) is not None
        return (
            path.name == OUTPUT_DIR
            or path.name.endswith(tuple(FOLDER_SUFFIXES))
            or (path / OUTPUT_DIR).is_dir()
        )

    def read(self, path: Path) -> list[Profile]:
        from .folder import FolderReader  # the readers load when there is something to read

        path = Path(path)
        if path.is_dir():
            return FolderReader(path).read()
        return FolderReader(path.parent, database=path).read()

    def trace_folds(self, path: Path) -> list[TraceFold]:
        """trace_view.json, which `read` folds into columns when no profiler database stands
        in for it, for advisor to fold ahead while it prepares."""
        from advisor.formats.read_ahead import TraceFold  # only where a trace is
        from advisor.formats.trace_columns import DECODER, read_columns

        path = Path(path)
        output = path if path.name == OUTPUT_DIR else path / OUTPUT_DIR
        trace = output / TRACE_FILE
        if not path.is_dir() or not trace.is_file():
            return []
        if any(PROFILER_DB.match(p.name) for p in output.glob("ascend_*_profiler*.db")):
            return []
        return [TraceFold(trace, DECODER.decode, read_columns)]


_RANK_FOLDERS = (
    "analyse the rank folders msprof-analyze summarised (*_ascend_pt, *_ascend_ms): the "
    "cluster output keeps only their step breakdown and communication"
)
_RANK_FOLDERS_ZH = (
    "分析 msprof-analyze 汇总的各 rank 目录（*_ascend_pt、*_ascend_ms）："
    "集群分析结果只保留了迭代耗时拆解和通信数据"
)


class ClusterOutputReader:
    """Reads msprof-analyze's `cluster_analysis_output/` where the rank folders it summarises
    are not beside it (advisor reads those instead when they are)."""

    name = "msprof_analyze_cluster"
    formats = ("msprof-analyze cluster output (cluster_analysis_output/)",)
    collect = dict.fromkeys(
        ("device_ops", "host_ops", "memory", "op_allocations", "op_stats"), _RANK_FOLDERS
    )
    """The rank folders hold what the summary left out: a rule lacking it says where it is."""
    collect_zh = {_RANK_FOLDERS: _RANK_FOLDERS_ZH}

    def detect(self, path: Path) -> bool:
        """A folder holding cluster_step_trace_time.csv or cluster_analysis.db
        (cluster_analysis_output/, or renamed), or one of those files named alone, with no
        rank folder in the folder nor beside it."""
        folder = output_folder(Path(path))
        return (
            ((folder / STEP_TRACE).is_file() or (folder / DATABASE).is_file())
            and not rank_folders_in(folder)
            and not rank_folders_in(folder.parent)
        )

    def read(self, path: Path) -> list[Profile]:
        from .cluster_output import read_cluster_output

        return read_cluster_output(output_folder(Path(path)))


@hookimpl
def advisor_readers() -> list[AscendPtReader | ClusterOutputReader]:
    return [AscendPtReader(), ClusterOutputReader()]
