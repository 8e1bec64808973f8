"""The normalized Profile: the contract between readers, metric providers and rules.

Every reader, whatever its input format, produces `Profile` objects whose tables follow
`TABLES`. Rules are written against these names, so a column documented here means the same
thing (and has the same unit) for every framework. Times are microseconds (float64) on one
clock per profile, rebased so that the earliest event of the profile is at 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class Column:
    """One documented column of a normalized table."""

    name: str
    dtype: str  # "float64" | "int64" | "string" | "bool" | "Int64"
    unit: str
    doc: str
    required: bool = False


@dataclass(frozen=True)
class TableSpec:
    """A normalized table: what one row is and which columns it may carry."""

    name: str
    row: str
    columns: tuple[Column, ...]

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)


def _c(name: str, dtype: str, unit: str, doc: str, required: bool = False) -> Column:
    return Column(name, dtype, unit, doc, required)


US = "µs"
TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        TableSpec("steps", "training iteration", (
            _c("step", "int64", "", "iteration number as the profiler numbers it", True),
            _c("start_us", "float64", US, "iteration start", True),
            _c("end_us", "float64", US, "iteration end", True),
            _c("duration_us", "float64", US, "iteration time (end - start)", True),
            _c("fp_bp_us", "float64", US, "forward+backward time (FP start to BP end)"),
            _c("grad_refresh_us", "float64", US,
               "BP end to iteration end (msprof 'Iteration Refresh' / 'Grad Refresh Bound')"),
            _c("data_aug_bound_us", "float64", US,
               "gap between the previous iteration end and this FP start "
               "(msprof 'Data Aug Bound')"),
            _c("reduce_us", "float64", US, "sum of all-reduce durations inside the iteration"),
            _c("computing_us", "float64", US, "device compute time (union of compute tasks)"),
            _c("communication_us", "float64", US, "device communication time (union)"),
            _c("comm_not_overlapped_us", "float64", US, "communication not hidden by compute"),
            _c("free_us", "float64", US, "device time with neither compute nor communication"),
            _c("bubble_us", "float64", US, "pipeline-parallel bubble time"),
            _c("model_id", "Int64", "", "graph/model id the iteration belongs to"),
        )),
        TableSpec("device_ops", "device task or kernel", (
            _c("name", "string", "", "task/kernel name (op name)", True),
            _c("op_type", "string", "", "operator type (e.g. MatMulV2, Cast)"),
            _c("core_type", "string", "",
               "AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC, MIX_AIV, COMMUNICATION, GPU, ...", True),
            _c("start_us", "float64", US, "task start"),
            _c("duration_us", "float64", US, "task duration", True),
            _c("wait_us", "float64", US, "idle time on the device before this task started"),
            _c("stream", "Int64", "", "stream id"),
            _c("task_id", "Int64", "", "task id within its stream"),
            _c("step", "Int64", "", "iteration the task belongs to"),
            _c("first_in_step", "bool", "",
               "first task of its step: msprof charges the gap between iterations (Data Aug "
               "Bound) to this task's wait_us"),
            _c("input_shapes", "string", "", "input shapes as the profiler writes them"),
            _c("input_dtypes", "string", "", "input data types"),
            _c("output_shapes", "string", "", "output shapes"),
            _c("block_dim", "Int64", "", "cores the task ran on ('Block Dim' / 'Block Num')"),
            _c("category", "string", "",
               "compute, communication, memcpy, memset or other", True),
            _c("compute_class", "string", "",
               "finer class (derived): cube, vector, flash_attention, conv, matmul, "
               "other_compute, aicpu, memcpy, communication, other"),
            _c("memcpy_kind", "string", "",
               "HtoD, DtoH, DtoD, PtoP for copies; with host memory pageable or pinned"),
            _c("host_memory", "string", "", "pageable or pinned, for host<->device copies"),
            _c("bytes", "float64", "bytes", "bytes moved (copies, communication)"),
            _c("flops", "float64", "FLO",
               "floating-point operations the task performs (a count, not a rate), where the "
               "profiler computes them (MegEngine opr_footprint 'computation')"),
            _c("op_state", "string", "", "static or dynamic (shape), where recorded"),
            _c("aicore_time_us", "float64", US, "PMU: AI Core busy time"),
            _c("vec_ratio", "float64", "ratio", "PMU: vector unit busy ratio"),
            _c("mac_ratio", "float64", "ratio", "PMU: cube (MAC) unit busy ratio"),
            _c("scalar_ratio", "float64", "ratio", "PMU: scalar unit busy ratio"),
            _c("mte2_ratio", "float64", "ratio", "PMU: MTE2 (GM->local) busy ratio"),
        )),
        TableSpec("host_ops", "framework/host operator or API call", (
            _c("name", "string", "", "API or operator name", True),
            _c("kind", "string", "",
               "aten (framework operator), python, cann_api, runtime, launch (kernel launch), "
               "sync (stream/device/event synchronisation), compile (operator compilation), "
               "dataloader, annotation, optimizer, memory, cpu_kernel (an operator executed on "
               "the host CPU, as MindSpore's CPU OP)", True),
            _c("level", "string", "", "API level (AscendCL, Runtime, Node, Model, ...)"),
            _c("start_us", "float64", US, "call start"),
            _c("duration_us", "float64", US, "call duration (or total time for aggregated rows)",
               True),
            _c("count", "Int64", "", "number of calls (aggregated sources)"),
            _c("thread", "Int64", "", "host thread id"),
            _c("step", "Int64", "", "iteration the call belongs to"),
        )),
        TableSpec("op_stats", "operator type (per core type)", (
            _c("op_type", "string", "", "operator type", True),
            _c("core_type", "string", "", "core type the operator ran on", True),
            _c("count", "int64", "", "number of executions", True),
            _c("total_us", "float64", US, "total execution time", True),
            _c("avg_us", "float64", US, "mean execution time"),
            _c("min_us", "float64", US, "shortest execution"),
            _c("max_us", "float64", US, "longest execution"),
            _c("ratio", "float64", "ratio", "share of total device op time (0..1)", True),
        )),
        TableSpec("comm_ops", "communication operation", (
            _c("name", "string", "", "communication op name (for a link: src->dst)", True),
            _c("kind", "string", "",
               "op (one collective or point-to-point operation) or link (a rank-to-rank link of "
               "an op, from a communication matrix); absent means op"),
            _c("op", "string", "", "allreduce, allgather, broadcast, ..."),
            _c("group", "string", "", "communication group"),
            _c("start_us", "float64", US, "op start"),
            _c("duration_us", "float64", US, "op duration", True),
            _c("bytes", "float64", "bytes", "payload size"),
            _c("transport", "string", "", "SDMA, RDMA, HCCS, PCIE, LOCAL, ..."),
            _c("bandwidth_gbps", "float64", "GB/s", "achieved bandwidth"),
            _c("wait_us", "float64", US, "time spent waiting for peers"),
            _c("transit_us", "float64", US, "time spent moving data"),
        )),
        TableSpec("queues", "queue sample", (
            _c("queue", "string", "", "host, device or a pipeline operator name", True),
            _c("step", "Int64", "", "step or batch number"),
            _c("size", "float64", "items", "queue size at the sample", True),
            _c("capacity", "float64", "items", "queue capacity"),
            _c("empty", "bool", "", "size == 0"),
            _c("time_us", "float64", US, "sample time"),
            _c("wait_us", "float64", US,
               "time the consumer waited for an item at this sample (MindSpore GetNext "
               "dequeue wait)"),
        )),
        TableSpec("pipeline_ops", "data-pipeline operator", (
            _c("op_id", "int64", "", "operator id", True),
            _c("op_type", "string", "", "operator type (Batch, Map, ...)", True),
            _c("workers", "Int64", "", "num_parallel_workers"),
            _c("queue_usage", "float64", "ratio", "mean output-queue usage (0..1)"),
            _c("parent", "Int64", "", "parent operator id"),
            _c("children", "Int64", "",
               "number of child operators feeding it (0 for a dataset source)"),
            _c("input_queue_usage", "float64", "ratio",
               "mean usage of its input queues (the children's output queues); missing for "
               "a source"),
            _c("queue_capacity", "float64", "items", "output-queue capacity"),
            _c("queue_empty_ratio", "float64", "ratio",
               "share of output-queue samples that found the queue empty (0..1)"),
            _c("cpu_pct", "float64", "%",
               "mean CPU utilisation of the operator's threads (user + sys) over the CPU "
               "samples, as MindSpore's minddata analyser sums it; divide by workers for the "
               "per-worker figure"),
        )),
        TableSpec("memory", "allocator sample", (
            _c("time_us", "float64", US, "sample time", True),
            _c("allocated_bytes", "float64", "bytes", "allocated memory"),
            _c("reserved_bytes", "float64", "bytes", "reserved memory"),
            _c("device", "string", "", "device the sample is for"),
            _c("capacity_bytes", "float64", "bytes", "total memory of that device"),
        )),
        TableSpec("ranks", "rank of a multi-rank run (built across its profiles; means per step)", (
            _c("rank", "int64", "", "rank (or device) number", True),
            _c("steps", "int64", "", "number of steps profiled on that rank", True),
            _c("duration_us", "float64", US, "mean step time on that rank", True),
            _c("computing_us", "float64", US, "mean device compute time per step"),
            _c("communication_us", "float64", US, "mean device communication time per step"),
            _c("comm_not_overlapped_us", "float64", US,
               "mean communication not hidden by compute per step"),
            _c("free_us", "float64", US, "mean device idle time per step"),
        )),
        TableSpec("tuning", "AOE-tuned operator or subgraph, or one AOE tuning task", (
            _c("kind", "string", "",
               "op, subgraph, or task (one row per AOE tuning task: its outcome, the model "
               "times before/after where AOE measured them, and its repository counts)", True),
            _c("name", "string", "",
               "operator name, subgraph repo_key, or task name (tuning_name)", True),
            _c("op_type", "string", "", "operator type (several joined with ',')"),
            _c("mode", "string", "", "Format, Schedule, Impl, SGAT; OPAT or SGAT for a task"),
            _c("before_us", "float64", US, "time before tuning"),
            _c("after_us", "float64", US, "time after tuning"),
            _c("improvement_pct", "float64", "%",
               "improvement reported by AOE: (before / after - 1) x 100"),
            _c("update_mode", "string", "", "add, update, ..."),
            _c("status", "string", "",
               "improved, regressed, failed, incomplete; completed for a task that finished "
               "without model-level times", True),
            _c("task", "string", "", "AOE task (report key)"),
            _c("repo_total", "Int64", "",
               "task rows: tuning strategies tuned (repo_summary total_num)"),
            _c("repo_unsatisfied", "Int64", "",
               "task rows: strategies neither in the repository before nor written after "
               "(repo_summary repo_unsatisfied_num)"),
        )),
        TableSpec("cpu_usage", "host CPU utilisation sample of one scope (whole host, training "
                               "process or one data-pipeline operator)", (
            _c("scope", "string", "",
               "system (the whole host), process (the training process) or pipeline_op (the "
               "threads of one data-pipeline operator)", True),
            _c("sample", "Int64", "", "sample number, from 0 in sampling order"),
            _c("op_id", "Int64", "", "pipeline operator id (scope pipeline_op)"),
            _c("op_type", "string", "", "pipeline operator type (scope pipeline_op)"),
            _c("workers", "Int64", "", "num_parallel_workers of the operator"),
            _c("user_pct", "float64", "%", "CPU time in user mode", True),
            _c("sys_pct", "float64", "%", "CPU time in kernel (system) mode"),
            _c("io_pct", "float64", "%", "CPU time waiting for I/O (scope system)"),
            _c("idle_pct", "float64", "%", "idle CPU time (scope system)"),
            _c("runnable", "float64", "processes",
               "processes running or ready to run (scope system)"),
            _c("context_switches", "float64", "switches",
               "context switches the profiler counted for the sample (scope system)"),
            _c("cpus", "Int64", "", "logical CPUs of the host"),
        )),
        TableSpec("utilization", "whole-run utilisation figure a profiler computed itself", (
            _c("measure", "string", "",
               "flops_utilization (achieved FLOPS over the device's peak, MindSpore "
               "flops_summary), flops_per_s", True),
            _c("value", "float64", "", "the figure, in `unit`", True),
            _c("unit", "string", "", "%, FLOPS ..."),
        )),
    )
}

_NULLABLE_NUMERIC = {"Int64"}


@dataclass
class ReaderWarning:
    """Something a reader could not read, reported to the user instead of a traceback."""

    file: str
    problem: str
    line: int | None = None
    column: str | None = None
    reader: str = ""

    def __str__(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        named = self.column is None or repr(self.column) in self.problem
        col = "" if named else f" (column {self.column!r})"
        return f"{where}: {self.problem}{col}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "column": self.column,
                "problem": self.problem, "reader": self.reader}


@dataclass
class ProfileMeta:
    """Where a profile came from: framework, format, device, rank, versions, files read."""

    source_format: str
    path: str
    framework: str = "unknown"
    device_kind: str = "unknown"  # NPU, GPU, CPU
    device_name: str = ""
    device_id: str | None = None
    rank: int | None = None
    world_size: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    files_read: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_format": self.source_format, "path": self.path,
            "framework": self.framework, "device_kind": self.device_kind,
            "device_name": self.device_name, "device_id": self.device_id, "rank": self.rank,
            "world_size": self.world_size, "versions": dict(self.versions),
            "files_read": list(self.files_read), "extra": dict(self.extra),
        }


@dataclass
class Profile:
    """Normalized tables plus meta and warnings; a table is absent when the source lacks it."""

    meta: ProfileMeta
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    warnings: list[ReaderWarning] = field(default_factory=list)
    providers_run: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        """Short human name: the device or rank this profile is for."""
        if self.meta.rank is not None:
            return f"rank {self.meta.rank}"
        if self.meta.device_id is not None:
            return f"device {self.meta.device_id}"
        return Path(self.meta.path).name

    def has(self, table: str, column: str | None = None) -> bool:
        """True when the table exists and, if named, the column holds at least one value."""
        df = self.tables.get(table)
        if df is None:
            return False
        if column is None:
            return True
        return column in df.columns and bool(df[column].notna().any())

    def warn(self, file: str | Path, problem: str, *, line: int | None = None,
             column: str | None = None, reader: str = "") -> None:
        """Record a problem; a file path relative to the profile is made whole for the user."""
        path = Path(file)
        if not path.is_absolute() and not str(file).startswith("<"):
            base = Path(self.meta.path)
            path = (base if base.is_dir() else base.parent) / path
        self.warnings.append(ReaderWarning(str(path), problem, line, column, reader))


def conform(table: str, df: pd.DataFrame) -> pd.DataFrame:
    """Cast a reader's frame to the documented dtypes; drop undocumented columns.

    Readers build frames from heterogeneous sources; casting here, once, means every rule sees
    the same dtypes whatever the reader. Columns that are entirely missing stay missing, so a
    rule requiring them is reported "not applicable" rather than evaluated on NaN.
    """
    spec = TABLES[table]
    df = df.reset_index(drop=True)  # align columns by position, whatever the reader's index
    out = {}
    for col in spec.columns:
        if col.name not in df.columns:
            continue
        series = df[col.name]
        if col.dtype == "float64":
            series = pd.to_numeric(series, errors="coerce").astype("float64")
        elif col.dtype in ("int64", *_NULLABLE_NUMERIC):
            numbers = pd.to_numeric(series, errors="coerce")
            if numbers.dtype.kind != "i":  # floats, huge ints: no int64 beyond its range
                numbers = numbers.astype("float64").round()
                numbers = numbers.where(numbers.abs() < 2.0**63)
            series = numbers.astype("Int64")
            if col.dtype == "int64" and not series.isna().any():
                series = series.astype("int64")
        elif col.dtype == "bool":
            series = series.astype("bool")
        else:
            series = series.astype("string")
        out[col.name] = series
    return pd.DataFrame(out, index=pd.RangeIndex(len(df)))


def contract_problems(profile: Profile) -> list[str]:
    """What breaks the table contract: unknown tables or columns, missing required columns.

    Readers (built-in and third-party) can assert this is empty in their tests.
    """
    problems = []
    for name, frame in profile.tables.items():
        spec = TABLES.get(name)
        if spec is None:
            problems.append(f"unknown table {name!r}")
            continue
        problems += [f"{name}: unknown column {c!r}" for c in frame.columns
                     if c not in spec.column_names]
        problems += [f"{name}: missing required column {c.name!r}" for c in spec.columns
                     if c.required and c.name not in frame.columns]
    return problems
