"""Reader for the old-layout MindSpore profiler folder (`<output>/profiler/`, MindSpore <= 2.2).

Every file name ends in the device/rank number `N`; a folder holding files of several numbers
gives one Profile per number. Files read (formats.md §3.1-3.2):

- `step_trace_raw_{N}_detail_time.csv` -> steps. Times are Ascend system counts (10 ns); the
  last row is MindSpore's average row (`step_num` `-` or `0`), never a step. MindSpore's step
  runs from the previous step's end and includes the wait for data (`iteration_interval`);
  as in msprof, a step here starts at its FP start, and the wait is its data_aug_bound_us.
  The `stream_{s}_parallel_{k}` duration columns are the all-reduces of the step -> reduce_us;
  each collective's `<name>_start_point` / `<name>_end_point` (`stream_{s}_parallel_{k}` or
  `stream_{s}_{k}_AllReduce-op{N}`) -> communication_us, and its part after bp_point, which no
  computation hides -> comm_not_overlapped_us.
- `hccl_raw_{N}.csv` (profile_communication=True) -> comm_ops: per step and collective an op
  row (transit and wait time, bytes between ranks) and its link rows (src->dst, transport,
  time, bytes); MindSpore writes ms and KB of 1000 bytes.
- `device_queue_profiling_{N}.txt` (sink mode), else `dataset_iterator_profiling_{N}.txt`:
  lines `type extra batch value [timestamp]`; type 1 is the host queue (capacity `extra`,
  size `value`) at batch `batch` -> queues rows `host`. Type 0 lines are stage times.
- `minddata_aicpu_{N}.txt`: `GetNext_dequeue_wait start end size` (µs) -> queues rows
  `device`, numbered in file order, with the dequeue wait.
- `minddata_pipeline_raw_{N}.csv` -> pipeline_ops, with each operator's input-queue usage
  (its children's output queues) and how often its own output queue was empty.
- `output_timeline_data_{N}.txt` (AI Core tasks, ms) and `aicpu_intermediate_{N}.csv` (AI CPU
  kernels, µs) -> device_ops, with op type, shapes and block dim from `framework_raw_{N}.csv`.
  Without a timeline, `aicore_intermediate_{N}_detail.csv` gives one row per operator (its
  total time, no start) and `aicore_intermediate_{N}_type.csv` gives op_stats.
- `flops_{N}.txt` -> device_ops.flops by operator name: `FLOPs` (old header) or the sum of the
  cube and vector `MFLOPs` columns, in millions. `flops_summary_{N}.json` (model FLOPs, FLOPS
  and FLOPS utilisation against the AI Core peak) -> `meta.extra["flops_summary"]`.
- `minddata_cpu_utilization_{N}.json` -> cpu_usage: one row per sample for the host
  (`device_info`), the training process (`process_info`) and each pipeline operator
  (`op_info`, op_id -1 is MindSpore's extra entry and is skipped as its analyser does); each
  operator's mean user + sys utilisation -> pipeline_ops.cpu_pct.

All absolute times (steps, GetNext samples, tasks) are on the device clock and are rebased to
the earliest of them; CPU samples are numbered, not timed (their clock is the host's). Not
read: flops_scope, memory, timeline JSON and cluster files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from advisor import intervals
from advisor.errors import UnreadableInput
from advisor.formats.cann_csv import open_csv
from advisor.formats.cann_tasks import collective as collective_name
from advisor.formats.minddata import read_pipeline_raw
from advisor.formats.numbers import finite_float as _float
from advisor.formats.numbers import int_from_text as _int
from advisor.formats.numbers import to_numbers
from advisor.hookspecs import hookimpl
from advisor.model import Profile, ProfileMeta, conform

READER = "mindspore_legacy"
TICKS_PER_US = 100.0  # step_trace_raw: Ascend syscnt, 10 ns
MS = 1000.0
CLOCK_TOLERANCE_US = 60e6  # GetNext samples further than this from the steps: another clock

_KINDS: dict[str, re.Pattern[str]] = {
    kind: re.compile(pattern) for kind, pattern in (
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
    )
}
# Files that alone make a folder a MindSpore profiler folder (framework_raw alone does not).
_DETECTING = ("step_trace", "device_queue", "dataset_iterator", "getnext", "pipeline",
              "aicore_type", "cpu")
GIB = 1024.0 ** 3
MFLO = 1e6  # flops_{N}.txt counts in millions (MindSpore docs: "FLOPs ... M (10^6)")
_SYSTEM_METRICS = {"user_utilization": "user_pct", "sys_utilization": "sys_pct",
                   "io_utilization": "io_pct", "idle_utilization": "idle_pct",
                   "runable_processes": "runnable", "context_switch_count": "context_switches"}


def _kind_of(name: str) -> tuple[str, int] | None:
    for kind, pattern in _KINDS.items():
        match = pattern.fullmatch(name)
        if match:
            return kind, int(match[1])
    return None


class MindSporeLegacyReader:
    """Reads a MindSpore `profiler/` folder of the old layout (one Profile per rank)."""

    name = READER
    formats = ("MindSpore profiler folder, old layout (profiler/)",)
    collect = {
        "memory": "Profiler(profile_memory=True)",
        "comm_ops": "Profiler(profile_communication=True)",
    }
    """How to make the MindSpore profiler record what a rule lacks (see Reader.collect)."""

    def detect(self, path: Path) -> bool:
        """A folder holding step trace, data-queue, pipeline or AI Core files (names only)."""
        path = Path(path)
        if not path.is_dir():
            return False
        for child in path.iterdir():
            kind = _kind_of(child.name)
            if kind is not None and kind[0] in _DETECTING:
                return True
        return False

    def read(self, path: Path) -> list[Profile]:
        path = Path(path)
        ranks: dict[int, dict[str, Path]] = {}
        for child in sorted(path.iterdir()):
            kind = _kind_of(child.name)
            if kind is not None and child.is_file():
                ranks.setdefault(kind[1], {})[kind[0]] = child
        readers = [_RankReader(path, rank, ranks[rank]) for rank in sorted(ranks)]
        profiles = [p for reader in readers if (p := reader.read())]
        # a rank with nothing readable is left out, but the user still hears why
        lost = [w for reader in readers if all(reader.profile is not p for p in profiles)
                for w in reader.profile.warnings]
        if not profiles:
            raise UnreadableInput(path, "no readable MindSpore profiler data (step trace, data "
                                        "queues, pipeline or AI Core operator files)"
                                  + (f"; {lost[0]}" if lost else ""))
        profiles[0].warnings += lost
        return profiles


@hookimpl
def advisor_readers() -> list[MindSporeLegacyReader]:
    return [MindSporeLegacyReader()]


# ---------------------------------------------------------------------------------------------
# One rank


@dataclass
class _RankReader:
    folder: Path
    rank: int
    files: dict[str, Path]
    profile: Profile = field(init=False)
    # absolute device-clock µs columns, rebased together at the end
    clocked: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        meta = ProfileMeta(READER, str(self.folder), framework="MindSpore", device_kind="NPU",
                           device_id=str(self.rank), rank=self.rank)
        self.profile = Profile(meta)

    def warn(self, file: str | Path, problem: str, *, line: int | None = None,
             column: str | None = None) -> None:
        self.profile.warn(Path(file).name, problem, line=line, column=column, reader=READER)

    def read(self) -> Profile | None:
        readers: tuple[tuple[str, Callable[[Path], pd.DataFrame | None], str,
                             tuple[str, ...]], ...] = (
            ("step_trace", self._steps, "steps", ("start_us", "end_us")),
            ("pipeline", self._pipeline, "pipeline_ops", ()),
            ("hccl", self._hccl, "comm_ops", ()),
        )
        for kind, read, table, clock in readers:
            self._add(kind, read, table, clock)
        self._queues()
        self._device_ops()
        self._flops()
        self._cpu_usage()
        self._memory()
        if not self.profile.tables:
            return None
        self._rebase()
        self.profile.tables = {name: conform(name, df)
                               for name, df in self.profile.tables.items()}
        return self.profile

    def _add(self, kind: str, read: Callable[[Path], pd.DataFrame | None], table: str,
             clock: tuple[str, ...]) -> None:
        path = self.files.get(kind)
        if path is None:
            return
        frame = read(path)
        self.profile.meta.files_read.append(path.name)
        if frame is not None and not frame.empty:
            self.profile.tables[table] = frame
            if clock:
                self.clocked[table] = clock

    def _csv(self, path: Path, required: tuple[str, ...]) -> tuple[dict[str, str],
                                                                   pd.DataFrame] | None:
        """String cells of a CSV with its required columns; None (warned) otherwise."""
        csv = open_csv(path, path.name, self.warn, required)
        return None if csv is None else (csv.written, csv.df)

    def _numbers(self, path: Path, df: pd.DataFrame, column: str) -> pd.Series:
        return to_numbers(df[column], file=path.name, column=column, warn=self.warn)

    # -- steps -----------------------------------------------------------------------------

    def _steps(self, path: Path) -> pd.DataFrame | None:
        required = ("step_num", "start_point", "end_point", "total", "iteration_interval")
        read = self._csv(path, required)
        if read is None:
            return None
        _, df = read
        step_text = df["step_num"].str.strip()
        keep = step_text.str.fullmatch(r"0*[1-9]\d*")
        last = len(df) - 1
        if step_text.iloc[last] in ("-", "0"):  # MindSpore's average row
            keep.iloc[last] = False
            bad = ~keep
            bad.iloc[last] = False
        else:
            self.warn(path, "no average row at the end (file cut short?)", line=last + 2)
            bad = ~keep
        if bad.any():
            first = int(np.argmax(bad.to_numpy()))
            self.warn(path, f"{int(bad.sum())} rows without a step number skipped "
                            f"(first: {step_text.iloc[first]!r})", line=first + 2,
                      column="step_num")
        df = df[keep.to_numpy()]
        if df.empty:
            self.warn(path, "no step rows (only the average row)")
            return None

        def ticks(column: str) -> pd.Series | None:
            if column not in df.columns:
                return None
            return self._numbers(path, df, column) / TICKS_PER_US

        reduces = [c for c in df.columns if re.fullmatch(r"stream_\d+_parallel_\d+", c)]
        reduce_us = (pd.concat([ticks(c) for c in reduces], axis=1).sum(axis=1, min_count=1)
                     if reduces else None)
        interval = ticks("iteration_interval")
        start = ticks("fp_point")
        if start is None:
            start = ticks("start_point") + interval
        end = ticks("end_point")
        columns: dict[str, Any] = {
            "step": pd.to_numeric(df["step_num"]),
            "start_us": start,
            "end_us": end,
            "duration_us": end - start,
            "fp_bp_us": ticks("fp_and_bp"),
            "grad_refresh_us": ticks("tail"),
            "data_aug_bound_us": interval,
            "reduce_us": reduce_us,
        }
        exposure = _collective_exposure(
            {name: (ticks(f"{name}_start_point"), ticks(f"{name}_end_point"))
             for name in _collective_columns(df.columns)},
            ticks("fp_point"), ticks("bp_point"))
        if exposure is not None:
            columns["communication_us"], columns["comm_not_overlapped_us"] = exposure
        frame = pd.DataFrame({k: v for k, v in columns.items() if v is not None})
        zero = frame["start_us"].fillna(0) <= 0
        if zero.any():
            self.warn(path, f"{int(zero.sum())} steps without a start point skipped")
            frame = frame[~zero.to_numpy()]
        return frame.reset_index(drop=True)

    # -- communication -----------------------------------------------------------------------

    def _hccl(self, path: Path) -> pd.DataFrame | None:
        """comm_ops from hccl_raw_{rank}.csv (profile_communication=True): per step and
        collective its transit and wait time, and per link and transport the time and bytes
        moved. MindSpore writes times in ms and sizes in KB (1 KB = 1000 bytes); the last row
        ("-") is the average and is not read."""
        read = self._csv(path, ("step_num", "communication_operator_cost"))
        if read is None:
            return None
        _, df = read
        rows: list[dict[str, Any]] = []
        for index, (step_text, ops_text) in enumerate(
                zip(df["step_num"], df["communication_operator_cost"])):
            step = _int(step_text)
            if step is None:
                continue
            try:
                ops = orjson.loads(ops_text)
            except orjson.JSONDecodeError:
                self.warn(path, "communication_operator_cost is not JSON; row skipped",
                          line=index + 2, column="communication_operator_cost")
                continue
            for name, cost in (ops.items() if isinstance(ops, dict) else ()):
                rows.extend(_hccl_rows(str(name), step, cost))
        if not rows:
            self.warn(path, "no communication operator found")
            return None
        return pd.DataFrame(rows)

    # -- queues ----------------------------------------------------------------------------

    def _queues(self) -> None:
        parts = []
        host_path = self.files.get("device_queue") or self.files.get("dataset_iterator")
        if host_path is not None:
            self.profile.meta.files_read.append(host_path.name)
            host = self._host_queue(host_path)
            if host is not None:
                parts.append(host)
        getnext_path = self.files.get("getnext")
        if getnext_path is not None:
            self.profile.meta.files_read.append(getnext_path.name)
            device = self._device_queue(getnext_path)
            if device is not None:
                parts.append(device)
        if parts:
            frame = pd.concat(parts, ignore_index=True)
            frame["empty"] = frame["size"] == 0
            self.profile.tables["queues"] = frame
            if frame["time_us"].notna().any():
                self.clocked["queues"] = ("time_us",)

    def _lines(self, path: Path) -> list[tuple[int, list[str]]] | None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.warn(path, f"cannot read file: {getattr(exc, 'strerror', None) or exc}")
            return None
        lines = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1)
                 if line.strip()]
        if not lines:
            self.warn(path, "empty file")
            return None
        return lines

    def _report_bad(self, path: Path, bad: list[tuple[int, str]], expected: str) -> None:
        if bad:
            line, text = bad[0]
            what = "line is" if len(bad) == 1 else "lines are"
            self.warn(path, f"{len(bad)} {what} not '{expected}' and skipped "
                            f"(first: {text[:60]!r})", line=line)

    def _host_queue(self, path: Path) -> pd.DataFrame | None:
        lines = self._lines(path)
        if lines is None:
            return None
        rows, bad = [], []
        for number, cells in lines:
            values = _ints(cells[:4])
            if len(cells) not in (4, 5) or values is None or values[0] not in (0, 1):
                bad.append((number, " ".join(cells)))
            elif values[0] == 1:  # connector size; type 0 lines are stage times
                rows.append({"queue": "host", "step": values[2], "size": float(values[3]),
                             "capacity": float(values[1]), "time_us": np.nan})
        self._report_bad(path, bad, "type extra-info batch value [timestamp]")
        if not rows:
            if not bad:
                self.warn(path, "no host-queue size lines (type 1)")
            return None
        return pd.DataFrame(rows)

    def _device_queue(self, path: Path) -> pd.DataFrame | None:
        lines = self._lines(path)
        if lines is None:
            return None
        rows, bad = [], []
        for number, cells in lines:
            values = _ints(cells[1:4]) if len(cells) == 4 else None
            if values is None or not cells[0].startswith("GetNext"):
                bad.append((number, " ".join(cells)))
                continue
            start, end, size = values
            rows.append({"queue": "device", "step": len(rows) + 1, "size": float(size),
                         "time_us": float(start), "wait_us": float(end - start)})
        self._report_bad(path, bad, "GetNext_dequeue_wait start end size")
        return pd.DataFrame(rows) if rows else None

    # -- data pipeline ---------------------------------------------------------------------

    def _pipeline(self, path: Path) -> pd.DataFrame | None:
        return read_pipeline_raw(path, path.name, self.warn)

    # -- device operators ------------------------------------------------------------------

    def _device_ops(self) -> None:
        parts = []
        for kind, read in (("timeline", self._aicore_tasks), ("aicpu", self._aicpu_kernels)):
            path = self.files.get(kind)
            if path is not None:
                self.profile.meta.files_read.append(path.name)
                frame = read(path)
                if frame is not None:
                    parts.append(frame)
        timed = bool(parts)
        if not timed and "aicore_detail" in self.files:
            path = self.files["aicore_detail"]
            self.profile.meta.files_read.append(path.name)
            frame = self._aicore_totals(path)
            if frame is not None:
                parts.append(frame)
        if not parts:
            self._op_stats_from_types()
            return
        ops = pd.concat(parts, ignore_index=True)
        ops = self._with_framework_info(ops)
        ops["category"] = "compute"
        self.profile.tables["device_ops"] = ops
        if timed:
            self.clocked["device_ops"] = ("start_us",)

    def _aicore_tasks(self, path: Path) -> pd.DataFrame | None:
        read = self._csv(path, ("op_name", "start_time(ms)", "duration(ms)"))
        if read is None:
            return None
        _, df = read
        frame = pd.DataFrame({
            "name": df["op_name"],
            "core_type": "AI_CORE",
            "start_us": self._numbers(path, df, "start_time(ms)") * MS,
            "duration_us": self._numbers(path, df, "duration(ms)") * MS,
        })
        if "stream_id" in df.columns:
            frame["stream"] = self._numbers(path, df, "stream_id")
        return frame

    def _aicpu_kernels(self, path: Path) -> pd.DataFrame | None:
        read = self._csv(path, ("kernel_type", "run_start", "run_end"))
        if read is None:
            return None
        _, df = read
        start = self._numbers(path, df, "run_start")
        return pd.DataFrame({"name": df["kernel_type"], "op_type": df["kernel_type"],
                             "core_type": "AI_CPU", "start_us": start,
                             "duration_us": self._numbers(path, df, "run_end") - start})

    def _aicore_totals(self, path: Path) -> pd.DataFrame | None:
        read = self._csv(path, ("execution_time",))
        if read is None:
            return None
        _, df = read
        name = next((c for c in ("full_op_name", "full_kernel_time", "full_kernel_name")
                     if c in df.columns), None)
        if name is None:
            self.warn(path, "missing column 'full_op_name'", column="full_op_name")
            return None
        return pd.DataFrame({"name": df[name], "core_type": "AI_CORE",
                             "duration_us": self._numbers(path, df, "execution_time") * MS})

    def _with_framework_info(self, ops: pd.DataFrame) -> pd.DataFrame:
        """Op type, shapes, dtypes and block dim by full operator name (framework_raw)."""
        path = self.files.get("framework")
        if path is None:
            return ops
        read = self._csv(path, ())
        if read is None:
            return ops
        self.profile.meta.files_read.append(path.name)
        _, df = read
        name = next((c for c in ("full_op_name", "full_kernel_name") if c in df.columns), None)
        op_type = next((c for c in ("op_type", "kernel_type") if c in df.columns), None)
        if name is None or op_type is None:
            self.warn(path, "missing column 'full_op_name' or 'op_type'")
            return ops
        info = pd.DataFrame({"name": df[name], "fw_op_type": df[op_type]})
        if "block_dim" in df.columns:
            info["block_dim"] = self._numbers(path, df, "block_dim")
        if "op_info" in df.columns:
            parsed = [self._op_info(path, text, line) for line, text in
                      enumerate(df["op_info"], 2)]
            for column in ("input_shapes", "input_dtypes", "output_shapes"):
                info[column] = [p.get(column) for p in parsed]
        info = info.drop_duplicates("name")
        merged = ops.merge(info, on="name", how="left")
        fw_type = merged.pop("fw_op_type")
        merged["op_type"] = (merged["op_type"].fillna(fw_type) if "op_type" in merged
                             else fw_type)
        return merged

    def _op_info(self, path: Path, text: str, line: int) -> dict[str, str]:
        """Shapes and dtypes from the op_info JSON: `;` between tensors, as msprof writes."""
        if not text:
            return {}
        try:
            tensors = orjson.loads(text)
        except orjson.JSONDecodeError:
            self.warn(path, "op_info is not JSON; shapes left empty", line=line,
                      column="op_info")
            return {}
        if not isinstance(tensors, dict):
            return {}
        out: dict[str, list[str]] = {"input_shapes": [], "input_dtypes": [],
                                     "output_shapes": []}
        for key in sorted(tensors, key=_tensor_order):
            tensor = tensors[key]
            if not isinstance(tensor, dict):
                continue
            if key.startswith("input"):
                out["input_shapes"].append(str(tensor.get("shape", "")))
                out["input_dtypes"].append(str(tensor.get("data_type", "")))
            elif key.startswith("output"):
                out["output_shapes"].append(str(tensor.get("shape", "")))
        return {k: ";".join(v) for k, v in out.items() if v}

    def _op_stats_from_types(self) -> None:
        path = self.files.get("aicore_type")
        if path is None:
            return
        self.profile.meta.files_read.append(path.name)
        read = self._csv(path, ("execution_frequency",))
        if read is None:
            return
        _, df = read
        op_type = next((c for c in ("op_type", "kernel_type") if c in df.columns), None)
        time = next((c for c in ("execution_time", "total_time", "task_time")
                     if c in df.columns), None)
        if op_type is None or time is None:
            missing = "op_type" if op_type is None else "execution_time"
            self.warn(path, f"missing column {missing!r}", column=missing)
            return
        total = self._numbers(path, df, time) * MS
        count = self._numbers(path, df, "execution_frequency")
        frame = pd.DataFrame({"op_type": df[op_type], "core_type": "AI_CORE", "count": count,
                              "total_us": total, "avg_us": total / count.where(count > 0),
                              "ratio": total / total.sum() if total.sum() > 0 else np.nan})
        self.profile.tables["op_stats"] = frame.dropna(subset=["count", "total_us"])

    # -- FLOPs ---------------------------------------------------------------------------------

    def _flops(self) -> None:
        """FLOPs per operator onto device_ops by name; the model summary into meta."""
        path = self.files.get("flops_summary")
        if path is not None:
            self.profile.meta.files_read.append(path.name)
            summary = self._json(path)
            if isinstance(summary, dict) and summary:
                self.profile.meta.extra["flops_summary"] = {
                    k: _float(v) for k, v in summary.items() if isinstance(k, str)}
                self._utilization(summary)
            elif summary is not None:
                self.warn(path, "not a JSON object of FLOPs figures")
        path = self.files.get("flops")
        ops = self.profile.tables.get("device_ops")
        if path is None or ops is None:
            return  # without device operators the per-operator FLOPs have nowhere to go
        self.profile.meta.files_read.append(path.name)
        read = self._csv(path, ("full_kernel_name",))
        if read is None:
            return
        _, df = read
        counts = [c for c in df.columns if c == "FLOPs" or c.startswith("MFLOPs")]
        if not counts:
            self.warn(path, "missing column 'FLOPs'", column="FLOPs")
            return
        mflops = pd.concat([self._numbers(path, df, c) for c in counts], axis=1)
        flops = pd.Series(mflops.sum(axis=1, min_count=1).to_numpy() * MFLO,
                          index=df["full_kernel_name"]).groupby(level=0).first()
        self.profile.tables["device_ops"] = ops.assign(flops=ops["name"].map(flops))

    def _utilization(self, summary: dict[str, Any]) -> None:
        """The device's FLOPS utilisation (%, achieved FLOPS over the AI Core peak; the FLOPS
        are GFLOPS per MindSpore's docs) as rows of the utilization table, for rules."""
        rows = [(measure, value, unit) for measure, key, unit, scale in (
                    ("flops_utilization", "FLOPS_Utilization", "%", 1.0),
                    ("flops_per_s", "FLOPS", "FLOPS", 1e9))
                if math.isfinite(value := _float(summary.get(key)) * scale)]
        if rows:
            self.profile.tables["utilization"] = pd.DataFrame(
                rows, columns=["measure", "value", "unit"])

    def _memory(self) -> None:
        """Peak device memory against capacity from `memory_usage_summary_{rank}.json`, as
        one `memory` row: MindSpore writes `capacity` and `peak_mem` in GiB (its parser divides
        the byte counts by 1024**3). The sample has no time: the summary covers the run."""
        path = self.files.get("memory_summary")
        if path is None:
            return
        self.profile.meta.files_read.append(path.name)
        summary = self._json(path)
        if summary is None:
            return
        if not isinstance(summary, dict):
            self.warn(path, "not a JSON object with capacity and peak_mem")
            return
        peak, capacity = _float(summary.get("peak_mem")), _float(summary.get("capacity"))
        if not (math.isfinite(peak) and peak >= 0):
            self.warn(path, f"peak_mem is not a number of GiB: {summary.get('peak_mem')!r}")
            return
        self.profile.tables["memory"] = pd.DataFrame({
            "time_us": [np.nan], "allocated_bytes": [peak * GIB], "reserved_bytes": [peak * GIB],
            "capacity_bytes": [capacity * GIB if math.isfinite(capacity) and capacity > 0
                               else np.nan],
            "device": [f"NPU:{self.rank}"]})

    def _json(self, path: Path) -> Any:
        """Parsed JSON, or None (warned) when the file cannot be read or parsed."""
        try:
            return orjson.loads(path.read_bytes())
        except OSError as exc:
            self.warn(path, f"cannot read file: {exc.strerror or exc}")
        except orjson.JSONDecodeError as exc:
            self.warn(path, f"not valid JSON ({exc.msg}, line {exc.lineno})")
        return None

    # -- CPU utilisation -----------------------------------------------------------------------

    def _cpu_usage(self) -> None:
        path = self.files.get("cpu")
        if path is None:
            return
        self.profile.meta.files_read.append(path.name)
        data = self._json(path)
        if data is None:
            return
        if not isinstance(data, dict):
            self.warn(path, "not a JSON object (expected device_info, process_info, op_info)")
            return
        cpus = _int(data.get("cpu_processor_num"))
        parts = [self._cpu_rows(path, "device_info", data.get("device_info"), "system"),
                 self._cpu_rows(path, "process_info", data.get("process_info"), "process")]
        ops = data.get("op_info", [])
        if not isinstance(ops, list):
            self.warn(path, "'op_info' is not a list; operator utilisation skipped")
            ops = []
        bad = 0
        for op in ops:
            op_id = _int(op.get("op_id")) if isinstance(op, dict) else None
            if op_id is None or not isinstance(op.get("metrics"), dict):
                bad += 1
            elif op_id >= 0:  # op_id -1 is not a pipeline operator
                rows = self._cpu_rows(path, f"op_info[{op_id}]", op["metrics"], "pipeline_op")
                parts.append(None if rows is None else rows.assign(op_id=op_id))
        if bad:
            self.warn(path, f"{bad} op_info entries without op_id or metrics skipped")
        parts = [p for p in parts if p is not None]
        if not parts:
            self.warn(path, "no utilisation samples")
            return
        frame = pd.concat(parts, ignore_index=True).assign(cpus=cpus)
        self.profile.tables["cpu_usage"] = self._with_pipeline_info(frame)

    def _cpu_rows(self, path: Path, where: str, metrics: Any,
                  scope: str) -> pd.DataFrame | None:
        """One row per sample of a metrics object; lists of other lengths padded with NaN."""
        if metrics is None:
            return None
        if not isinstance(metrics, dict):
            self.warn(path, f"'{where}' is not an object; skipped")
            return None
        columns: dict[str, list[float]] = {}
        for key, column in _SYSTEM_METRICS.items():
            values = metrics.get(key)
            if values is None:
                continue
            numbers = [_float(v) for v in values] if isinstance(values, list) else None
            if numbers is None or any(np.isnan(v) for v in numbers):
                self.warn(path, f"'{where}.{key}' is not a list of numbers; left empty")
                continue
            columns[column] = numbers
        if "user_pct" not in columns:
            self.warn(path, f"'{where}' has no user_utilization samples; skipped")
            return None
        length = max(len(v) for v in columns.values())
        frame = pd.DataFrame({c: v + [np.nan] * (length - len(v)) for c, v in columns.items()})
        return frame.assign(scope=scope, sample=range(length))

    def _with_pipeline_info(self, cpu: pd.DataFrame) -> pd.DataFrame:
        """Operator type and workers on the CPU rows; mean CPU per operator on pipeline_ops."""
        ops = self.profile.tables.get("pipeline_ops")
        if ops is None or "op_id" not in cpu:
            return cpu
        info = ops[["op_id", "op_type", "workers"]]
        cpu = cpu.merge(info, on="op_id", how="left")
        busy = cpu["user_pct"] + cpu["sys_pct"] if "sys_pct" in cpu else cpu["user_pct"]
        mean = busy.groupby(cpu["op_id"]).mean()
        self.profile.tables["pipeline_ops"] = ops.assign(cpu_pct=ops["op_id"].map(mean))
        return cpu

    # -- one clock -------------------------------------------------------------------------

    def _rebase(self) -> None:
        """Rebase device-clock times to the earliest; queue samples on another clock lose
        their times (the steps decide which clock is the profile's)."""
        tables = self.profile.tables
        if "queues" in self.clocked and "steps" in self.clocked:
            times = tables["queues"]["time_us"]
            steps = tables["steps"]
            far = ((times < steps["start_us"].min() - CLOCK_TOLERANCE_US)
                   | (times > steps["end_us"].max() + CLOCK_TOLERANCE_US))
            if far.any():
                self.warn(self.files["getnext"], "GetNext times are not on the step trace's "
                                                 "clock; sample times dropped")
                tables["queues"] = tables["queues"].assign(time_us=np.nan)
                del self.clocked["queues"]
        starts = [tables[t][list(cols)].min().min() for t, cols in self.clocked.items()]
        starts = [s for s in starts if pd.notna(s)]
        if not starts:
            return
        origin = float(min(starts))
        self.profile.meta.extra["time_origin_us"] = origin
        for table, columns in self.clocked.items():
            tables[table] = tables[table].assign(
                **{c: tables[table][c] - origin for c in columns})


def _tensor_order(key: str) -> tuple[str, int]:
    kind, _, index = key.partition("_")
    return kind, int(index) if index.isdigit() else 0


def _ints(cells: list[str]) -> list[int] | None:
    values = [_int(c) for c in cells]
    return None if any(v is None for v in values) else values  # type: ignore[return-value]


def _collective_columns(columns: Any) -> list[str]:
    """The collectives step_trace_raw times per step: `<name>_start_point` and
    `<name>_end_point` pairs, named `stream_<id>_parallel_<n>` or, in newer MindSpore,
    `stream_<id>_<n>_AllReduce-op<N>` and the like."""
    names = {str(c)[:-len("_start_point")] for c in columns
             if re.fullmatch(r"stream_\d+_.+_start_point", str(c))}
    return sorted(n for n in names if f"{n}_end_point" in columns)


def _collective_exposure(spans: dict[str, tuple[pd.Series | None, pd.Series | None]],
                         fp: pd.Series | None, bp: pd.Series | None
                         ) -> tuple[pd.Series, pd.Series] | None:
    """Per step, the time collectives ran (their union) and the part of it outside the
    forward and backward pass [fp_point, bp_point): an all-reduce still running after the
    backward pass ends has no computation left to hide it."""
    spans = {k: v for k, v in spans.items() if v[0] is not None and v[1] is not None}
    if not spans or fp is None or bp is None:
        return None
    starts = np.column_stack([v[0].to_numpy("float64") for v in spans.values()])
    ends = np.column_stack([v[1].to_numpy("float64") for v in spans.values()])
    total, exposed = [], []
    for row, (lo, hi) in enumerate(zip(fp.to_numpy("float64"), bp.to_numpy("float64"))):
        ok = (starts[row] > 0) & (ends[row] > starts[row])  # 0: not run in this step
        runs = intervals.merge(starts[row][ok], ends[row][ok])
        inside = intervals.total(intervals.clip(runs, lo, hi)) if hi > lo else 0.0
        total.append(intervals.total(runs))
        exposed.append(intervals.total(runs) - inside)
    index = fp.index
    return pd.Series(total, index=index), pd.Series(exposed, index=index)


def _hccl_rows(name: str, step: int, cost: Any) -> list[dict[str, Any]]:
    """One collective of one step (`[step, transit ms, wait ms, {src-dst: {transport: [ms,
    KB, KB/s]}}]`) as an op row and its link rows; a rank's copies to itself move nothing
    between ranks and add no bytes to the op."""
    if not isinstance(cost, list) or len(cost) < 4 or not isinstance(cost[3], dict):
        return []
    transit, wait = _float(cost[1]) * MS, _float(cost[2]) * MS
    op = collective_name(name)
    links, moved = [], 0.0
    for pair, transports in cost[3].items():
        src, _, dst = str(pair).partition("-")
        if not (src.isdigit() and dst.isdigit()) or not isinstance(transports, dict):
            continue
        for transport, figures in transports.items():
            if not isinstance(figures, list) or len(figures) < 2:
                continue
            link_us, size = _float(figures[0]) * MS, _float(figures[1]) * 1e3
            if src != dst and np.isfinite(size):
                moved += size
            links.append({"name": f"{src}->{dst}", "kind": "link", "op": op, "step": step,
                          "duration_us": link_us, "transit_us": link_us, "bytes": size,
                          "transport": str(transport)})
    return [{"name": name, "kind": "op", "op": op, "step": step,
             "duration_us": transit + np.nan_to_num(wait), "transit_us": transit,
             "wait_us": wait, "bytes": moved if moved else np.nan}, *links]

