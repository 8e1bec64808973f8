"""One read of one rank folder: every file of ASCEND_PROFILER_OUTPUT (and MindSpore's beside
it) on one clock, assembled into the profile's tables."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import UnreadableInput
from advisor.formats import trace_index
from advisor.formats.aicore_freq import with_rated
from advisor.formats.cann_comm import TASK_COLUMNS, comm_as_device_ops
from advisor.formats.cann_csv import read_summary_table
from advisor.formats.cann_summaries import API_STATISTIC, OP_STATISTIC
from advisor.formats.cann_tasks import with_wait
from advisor.formats.comm_groups import ParallelGroup, with_parallel_groups
from advisor.formats.decimal_clock import Clock
from advisor.formats.files import load_json
from advisor.formats.metadata import MetadataRows, rows_recording
from advisor.formats.minddata import read_pipeline_raw
from advisor.formats.timebase import drop_far_times, far_warning, robust_origin, table_times
from advisor.formats.trace_columns import fold_trace
from advisor.formats.warn import HeldWarnings
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta, conform

from .communication import (
    parse_communication,
    parse_communication_matrix,
    with_trace_tasks,
)
from .cpu_ops import CPU_KERNEL, CPU_OP_FILE, read_cpu_op_timestamps
from .db import profiler_databases, read_databases
from .export import exports_beside
from .kernel_details import KernelDetails, kernels_with_launches, read_kernel_details
from .kinds import cann_kind
from .layout import FOLDER_SUFFIXES, OUTPUT_DIR, OUTPUT_FILES, READER, TRACE_FILE
from .memory import read_memory_record
from .meta import read_metadata, set_framework
from .operator_memory import read_operator_memory
from .steps import (
    fill_breakdown,
    read_step_trace_time,
    step_of,
    steps_from_table,
    steps_with_breakdown,
)
from .trace_view import TraceTables, role_tables

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

TIME_COLUMNS = {
    "steps": ("start_us", "end_us"),
    "device_ops": ("start_us", "launch_us"),
    "host_ops": ("start_us",),
    "comm_ops": ("start_us",),
    "memory": ("time_us",),
    "op_allocations": ("start_us", "end_us"),
    "aicore_freq": ("start_us", "end_us"),
}
CLOCK_TOLERANCE_US = 60e6  # how far outside the trace's span another file's times may lie


@dataclass
class EarlyKernels:
    """kernel_details.csv parsed ahead of its turn (FolderReader._parse_kernels)."""

    path: Path
    warnings: HeldWarnings
    details: KernelDetails | None


class FolderReader:
    """One `read()` of one rank folder."""

    def __init__(self, path: Path, database: Path | None = None) -> None:
        """`path`: the rank folder or its ASCEND_PROFILER_OUTPUT; `database`: a profiler
        database the user named on its own, read alone (with the metadata beside it)."""
        self.database = database
        if database is not None:
            path = database.parent
        self.path = path
        inside_output = path.name == OUTPUT_DIR or database is not None
        self.output = path if inside_output else path / OUTPUT_DIR
        self.root = path.parent if path.name == OUTPUT_DIR else path
        framework = next(
            (fw for suffix, fw in FOLDER_SUFFIXES.items() if self.root.name.endswith(suffix)), None
        )
        self.framework_known = framework is not None
        meta = ProfileMeta(
            source_format="ascend-pt",
            path=str(database or path),
            framework=framework or "PyTorch",
            device_kind="NPU",
        )
        set_framework(meta, meta.framework)
        self.profile = Profile(meta)
        self.clock = Clock()
        self.tables: dict[str, pd.DataFrame] = {}
        self.anchor: tuple[float, float, str] | None = None
        """The span (on the clock) of the file the others must lie near, and its name: the
        trace, else kernel_details.csv; a file far from it comes from another run."""
        self.metadata = MetadataRows()
        self.parallel_groups: dict[str, ParallelGroup] = {}
        """The communication groups the metadata describes, by the id HCCL gives them."""

    def warn(
        self,
        file: str | Path,
        problem: str,
        *,
        line: int | None = None,
        column: str | None = None,
        unread: bool = False,
        zh: str = "",
    ) -> None:
        self.profile.warn(
            file, problem, line=line, column=column, reader=READER, unread=unread, zh=zh
        )

    def rel(self, path: Path) -> str:
        try:
            return path.relative_to(self.path).as_posix()
        except ValueError:
            return str(path)

    def _file(self, name: str) -> Path | None:
        path = self.output / name
        return path if path.is_file() else None

    def _read(self, path: Path) -> None:
        rel = self.rel(path)
        if rel not in self.profile.meta.files_read:
            self.profile.meta.files_read.append(rel)

    # -- orchestration ------------------------------------------------------------------------

    def read(self) -> list[Profile]:
        if not self.path.is_dir():
            raise UnreadableInput(self.path, "not a directory")
        self._read_metadata()
        if self.database is not None:
            return self._read_database_alone(self.database)
        if self._read_databases():
            self._read_pipeline()
            self._finish()
            return [self.profile]
        early = self._parse_kernels()  # while a read-ahead child folds the trace
        trace = self._read_trace()
        kernels = self._kernels_on_clock(early)
        step_table = self._read_csv_file(
            "step_trace_time.csv", lambda path, rel: read_step_trace_time(path, rel, self.warn)
        )
        self._build_steps(trace, step_table, kernels)
        self._build_device_ops(trace, kernels)
        self._build_host_ops(trace.host_ops)
        if trace.aicore_freq is not None:
            self.tables["aicore_freq"] = trace.aicore_freq
        self._read_op_statistic()
        self._build_comm_ops(trace)
        self._read_pipeline()
        memory = self._read_csv_file(
            "memory_record.csv",
            lambda path, rel: read_memory_record(path, rel, self.clock, self.warn),
        )
        if memory is not None and not memory.empty:
            self.tables["memory"] = self._same_clock(memory, "time_us", "memory_record.csv")
        self._read_operator_memory()
        if not self.tables:
            return self._without_output()
        self._recorded_but_missing()
        self._finish()
        return [self.profile]

    def _recorded_but_missing(self) -> None:
        """How to get what a rule lacks, where the profiler's own settings say it recorded
        it and the file is not in the folder (a copy of some of the files: MindStudio
        Insight's level-1 run, profiled with profile_memory=True, shared without
        trace_view.json and operator_memory.csv): asking for the setting again would be
        wrong, the whole output folder is what is missing."""
        extra = self.profile.meta.extra
        wanted: list[tuple[tuple[str, ...], str, str]] = []
        if extra.get("profiler_level") in ("Level1", "Level2"):
            needs = tuple(f"comm_ops.{c}" for c in TASK_COLUMNS)
            wanted.append((needs, f"profiler_level={extra['profiler_level']}", TRACE_FILE))
        if extra.get("profile_memory") is True:
            wanted.append((("memory",), "profile_memory=True", "memory_record.csv"))
            wanted.append((("op_allocations",), "profile_memory=True", "operator_memory.csv"))
        for needs, setting, name in wanted:
            if self._file(name) is not None:
                continue
            hint = (
                f"it was recorded ({setting}), but {OUTPUT_DIR} here holds no {name}: analyse "
                "the whole output folder the profiler wrote"
            )
            self.profile.meta.collect_zh[hint] = (  # keyed by the English text, as the reader's
                f"采集时已记录（{setting}），但此处的 {OUTPUT_DIR} 中没有 {name}："
                "请分析采集生成的完整输出目录"
            )
            for need in needs:
                self.profile.meta.collect[need] = hint

    def _read_database_alone(self, database: Path) -> list[Profile]:
        """The profile of a database named on its own; UnreadableInput when it gave nothing."""
        if not self._read_databases():
            told = [w.problem for w in self.profile.warnings if Path(w.file) == database]
            raise UnreadableInput(database, "; ".join(told) or "no profiler tables in it")
        self._finish()
        return [self.profile]

    def _without_output(self) -> list[Profile]:
        """No table from ASCEND_PROFILER_OUTPUT: read the CANN export beside it, if any."""
        problems = "; ".join(f"{Path(w.file).name}: {w.problem}" for w in self.profile.warnings[:3])
        looked = f"{OUTPUT_DIR}/{{{', '.join(OUTPUT_FILES)}}}"
        if not self.output.is_dir():
            what = f"no {OUTPUT_DIR} folder"
        elif problems:
            what = f"nothing readable in {OUTPUT_DIR} ({problems})"
        else:
            what = f"no profiler output found (looked for {looked})"
        metadata = self.metadata.frame()
        if metadata is not None:  # environment and versions go with the export's profiles
            self.profile.tables["metadata"] = metadata
        return exports_beside(self.path, self.root, what, self.profile)

    # -- metadata -----------------------------------------------------------------------------

    def _read_metadata(self) -> None:
        self.parallel_groups = read_metadata(
            self.root,
            self.output,
            self.profile.meta,
            self.framework_known,
            self._load,
            self._read,
            self.metadata,
        )

    def _load(self, path: Path) -> Any:
        try:
            return load_json(path)
        except UnreadableInput as exc:
            self.warn(self.rel(path), exc.problem, unread=True)
            return None

    # -- the profiler database ----------------------------------------------------------------

    def _read_databases(self) -> bool:
        """The profiler database in place of the text files when the folder has both: its
        tables hold what trace_view.json and the CSVs do, and it reads faster than the trace
        alone parses (0.46 s against 0.73 s for a 64 MB trace_view.json; measured in
        tests/fixtures/ascend_db/README.md). False when there is none, or nothing in it could
        be read: the text files are read then, on a clock of their own."""
        if not self.output.is_dir():
            return False
        main, analysis = profiler_databases(self.output, self.profile.meta.rank)
        main = self.database or main
        if main is None:
            return False
        meta = self.profile.meta
        env_known = "env" in meta.extra  # from profiler_metadata.json, already in self.metadata
        db = read_databases(main, analysis, self.clock, meta, self.rel, self.warn)
        tables = (db.steps, db.device_ops, db.comm_ops, db.memory, db.aicore_freq)
        if not db.files or (all(t is None for t in tables) and not db.host_ops):
            self.clock = Clock()
            return False
        for path in db.files:
            self._read(path)
        if not env_known and "env" in meta.extra:  # META_DATA's ENV_VARIABLES: for ENV rules
            self.metadata.add_env(meta.extra["env"], self.rel(main))
        self.profile.meta.extra["source"] = "db"
        if db.steps is not None and not db.steps.empty:
            self.tables["steps"] = db.steps.drop(columns=["preparing_us"], errors="ignore")
        if db.device_ops is not None:
            self.tables["device_ops"] = db.device_ops
        self._build_host_ops(db.host_ops)
        if db.comm_ops is not None:
            self.tables["comm_ops"] = db.comm_ops
        if db.memory is not None and not db.memory.empty:
            self.tables["memory"] = db.memory
        if db.op_allocations is not None and not db.op_allocations.empty:
            self.tables["op_allocations"] = db.op_allocations
        if db.aicore_freq is not None:
            self.tables["aicore_freq"] = db.aicore_freq
        self.parallel_groups = self.parallel_groups or db.parallel_groups
        return True

    # -- trace_view.json ----------------------------------------------------------------------

    def _read_trace(self) -> TraceTables:
        path = self._file(TRACE_FILE)
        if path is None:
            return TraceTables()
        rel = self.rel(path)
        try:
            folded = fold_trace(path, self.warn, rel)
            trace = role_tables(folded.columns, self.clock, self.warn, rel)
        except UnreadableInput as exc:
            self.warn(rel, exc.problem, unread=True)
            return TraceTables()
        trace_index.record(self.profile.meta, path, folded.spans, folded.columns.batch_times)
        self.anchor = None if trace.span is None else (*trace.span, TRACE_FILE)
        if trace.span is None:
            self.warn(
                rel,
                "no timed events of a known process (Python, CANN, Ascend Hardware, "
                "HCCL, Overlap Analysis)",
            )
        else:
            self._read(path)
        return trace

    def _read_pipeline(self) -> None:
        """MindSpore's data pipeline operators (`minddata_pipeline_raw_{rank}.csv`)."""
        paths = sorted(p for p in self.output.glob("minddata_pipeline_raw_*.csv") if p.is_file())
        if not paths:
            return
        frame = read_pipeline_raw(paths[0], self.rel(paths[0]), self.warn)
        self._read(paths[0])
        if frame is not None:
            self.tables["pipeline_ops"] = frame

    def _read_cpu_kernels(self) -> list[pd.DataFrame]:
        """MindSpore's host CPU operators from FRAMEWORK/, when the trace does not have them."""
        framework = self.root / "FRAMEWORK"
        paths = (
            sorted(
                p
                for p in framework.glob("cpu_op_execute_timestamp_*.txt")
                if CPU_OP_FILE.match(p.name) and p.is_file()
            )
            if framework.is_dir()
            else []
        )
        if self.profile.meta.rank is not None:
            own = [
                p
                for p in paths
                if CPU_OP_FILE.match(p.name).group(1) == str(self.profile.meta.rank)
            ]
            paths = own or paths
        frames = []
        for path in paths[:1]:
            frame = read_cpu_op_timestamps(path, self.rel(path), self.clock, self.warn)
            if frame is not None:
                frames.append(frame)
                self._read(path)
        return frames

    # -- CSV files ----------------------------------------------------------------------------

    def _read_csv_file(
        self, name: str, parse: Callable[[Path, str], pd.DataFrame | None]
    ) -> pd.DataFrame | None:
        path = self._file(name)
        if path is None:
            return None
        frame = parse(path, self.rel(path))
        if frame is not None and not frame.empty:
            self._read(path)
        return frame

    def _parse_kernels(self) -> EarlyKernels | None:
        """kernel_details.csv parsed before trace_view.json: where a read-ahead child folds
        the trace meanwhile, it takes more of the trace (benchmarks/README.md, round 26)."""
        path = self._file("kernel_details.csv")
        if path is None:
            return None
        held = HeldWarnings()
        return EarlyKernels(path, held, read_kernel_details(path, self.rel(path), held))

    def _kernels_on_clock(self, early: EarlyKernels | None) -> pd.DataFrame | None:
        """The parsed kernel_details.csv taken as if read after the trace: its warnings and
        its place among the files read follow the trace's, its starts go on the clock the
        trace fixed."""
        if early is None:
            return None
        early.warnings.replay(self.warn)
        if early.details is None or early.details.ops.empty:
            return None
        self._read(early.path)
        kernels = early.details.on(self.clock)
        device = kernels.attrs.get("device_id")
        if device is not None and self.profile.meta.device_id is None:
            self.profile.meta.device_id = device
        kernels = self._same_clock(kernels, "start_us", "kernel_details.csv")
        starts = kernels.get("start_us")
        if self.anchor is None and starts is not None and starts.notna().any():
            self.anchor = (float(starts.min()), float(starts.max()), "kernel_details.csv")
        return kernels

    def _read_operator_memory(self) -> None:
        """The blocks each operator allocated; a file on another clock is left out whole (its
        blocks could not be placed in steps or against the memory curve)."""
        name = "operator_memory.csv"
        frame = self._read_csv_file(
            name, lambda path, rel: read_operator_memory(path, rel, self.clock, self.warn)
        )
        if frame is None or frame.empty:
            return
        frame = self._same_clock(frame, "start_us", name)
        if frame["start_us"].notna().any():
            self.tables["op_allocations"] = frame

    def _same_clock(self, frame: pd.DataFrame, column: str, name: str) -> pd.DataFrame:
        """Drop a file's times when they cannot be on the clock of the anchor file (another run)."""
        if self.anchor is None or column not in frame or frame[column].isna().all():
            return frame
        lo, hi = frame[column].min(), frame[column].max()
        first, last, anchor = self.anchor
        if hi >= first - CLOCK_TOLERANCE_US and lo <= last + CLOCK_TOLERANCE_US:
            return frame
        gap = f"{max(first - hi, lo - last) / 1e6:,.0f}"
        self.warn(
            self.rel(self.output / name),
            f"times are {gap} s away from {anchor}'s, so the files come "
            f"from different runs or clocks; its {column} values are left out",
            zh=f"时间与 {anchor} 相差 {gap} 秒，两个文件来自不同的运行或时钟；"
            f"其 {column} 值不予采用",
        )
        return frame.assign(**{column: np.nan})

    def _read_op_statistic(self) -> None:
        path = self._file("op_statistic.csv")
        if path is None:
            return
        frame = read_summary_table(OP_STATISTIC, path, self.rel(path), self.warn)
        if frame is not None and not frame.empty:
            self.tables["op_stats"] = frame
            self._read(path)

    # -- assembling tables --------------------------------------------------------------------

    def _build_steps(
        self, trace: TraceTables, table: pd.DataFrame | None, kernels: pd.DataFrame | None
    ) -> None:
        single = table is not None and len(table) == 1 and pd.notna(table["step"].iloc[0])
        steps = steps_with_breakdown(trace, int(table["step"].iloc[0]) if single else 0)
        if table is not None and not table.empty:
            steps = (
                fill_breakdown(steps, table)
                if steps is not None
                else steps_from_table(table, kernels)
            )
        if steps is not None and not steps.empty:
            self.tables["steps"] = steps.drop(columns=["preparing_us"], errors="ignore")

    def _build_device_ops(self, trace: TraceTables, kernels: pd.DataFrame | None) -> None:
        """kernel_details.csv's tasks (more columns), unless it comes from another run than
        trace_view.json (its times were left out): the trace's own device tasks are this
        run's work then, and a CSV of another run would only lend its numbers to this one."""
        other_run = (
            kernels is not None
            and "start_us" in kernels
            and kernels["start_us"].isna().all()
            and trace.device_ops is not None
            and not trace.device_ops.empty
        )
        if other_run:
            self.warn(
                self.rel(self.output / "kernel_details.csv"),
                "from another run, so not used: the device tasks are trace_view.json's "
                f"{len(trace.device_ops):,}",
                zh="来自另一次运行，不予使用：设备任务取自 trace_view.json"
                f"（{len(trace.device_ops):,} 个）",
            )
            kernels = None
        if kernels is not None:
            if trace.launches is not None:
                kernels = kernels_with_launches(kernels, trace.launches)
            self.tables["device_ops"] = kernels
            return
        parts = [trace.device_ops] if trace.device_ops is not None else []
        if trace.comm_ops is not None and not trace.comm_ops.empty:
            # the op-level rows stand for the collectives' tasks, as in kernel_details
            parts = [p[p["category"] != "communication"] for p in parts]
            parts.append(comm_as_device_ops(trace.comm_ops))
        parts = [p for p in parts if not p.empty]
        if parts:
            self.tables["device_ops"] = with_wait(pd.concat(parts, ignore_index=True))

    def _build_host_ops(self, parts: list[pd.DataFrame]) -> None:
        parts = [p for p in parts if not p.empty]
        if not any((p["kind"] == CPU_KERNEL).any() for p in parts):
            parts += self._read_cpu_kernels()
        has_cann = any("level" in p for p in parts)
        if not has_cann and (path := self._file("api_statistic.csv")) is not None:
            frame = read_summary_table(API_STATISTIC, path, self.rel(path), self.warn)
            if frame is not None and not frame.empty:
                parts.append(frame.assign(kind=frame["name"].fillna("").map(cann_kind)))
                self._read(path)
        if not parts:
            return
        host = pd.concat(parts, ignore_index=True)
        steps = self.tables.get("steps")
        if steps is not None and "start_us" in host and steps["start_us"].notna().any():
            host["step"] = step_of(host["start_us"].to_numpy(float, na_value=np.nan), steps)
        self.tables["host_ops"] = host

    def _build_comm_ops(self, trace: TraceTables) -> None:
        parts = []
        path = self._file("communication.json")
        data = self._load(path) if path is not None else None
        if data is not None:
            comm, totals = parse_communication(data, self.clock)
            if totals:
                self.profile.meta.extra["comm_bandwidth"] = totals
            if comm is not None:
                comm = with_trace_tasks(comm, trace.comm_ops)
                parts.append(self._same_clock(comm, "start_us", "communication.json"))
            if comm is not None or totals:
                self._read(path)
            else:
                self.warn(self.rel(path), "no communication op found")
        if not parts and trace.comm_ops is not None and not trace.comm_ops.empty:
            parts.append(trace.comm_ops)
        path = self._file("communication_matrix.json")
        data = self._load(path) if path is not None else None
        if data is not None:
            links = parse_communication_matrix(data)
            if links is not None:
                parts.append(links)
                self._read(path)
            else:
                self.warn(self.rel(path), "no communication link found")
        if parts:
            self.tables["comm_ops"] = pd.concat(parts, ignore_index=True)

    def _finish(self) -> None:
        """Drop rows with broken far-off times, rebase every time on the earliest one, cast
        to the contract."""
        tables = self.tables
        metadata = self.metadata.frame()
        if metadata is not None:
            tables["metadata"] = metadata
            rated = metadata["value"].iloc[rows_recording(metadata, "device.aicore_freq_mhz")]
            if "aicore_freq" in tables and not rated.empty:  # the chip's clock, from info.json
                tables["aicore_freq"] = with_rated(tables["aicore_freq"], rated.iloc[0])
        if "comm_ops" in tables:  # peers and links in global ranks, where the groups say
            tables["comm_ops"] = with_parallel_groups(tables["comm_ops"], self.parallel_groups)
        times = table_times(tables, TIME_COLUMNS)
        if times.size and self.clock.origin is not None:
            shift, centre = robust_origin(times)
            far = drop_far_times(tables, TIME_COLUMNS, centre)
            if far:
                self.warn(".", far_warning(far, self.clock.origin))  # the folder as a whole
            self.profile.meta.extra["time_origin_us"] = self.clock.origin + shift
            for name, columns in TIME_COLUMNS.items():
                if name in tables:
                    tables[name] = tables[name].assign(
                        **{c: tables[name][c] - shift for c in columns if c in tables[name]}
                    )
        self.profile.tables = {name: conform(name, frame) for name, frame in tables.items()}
