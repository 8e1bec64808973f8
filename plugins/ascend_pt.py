"""Reader for Ascend PyTorch (torch_npu) and MindSpore >= 2.3 profiler folders.

A `{worker}_{timestamp}_ascend_pt/` (PyTorch) or `..._ascend_ms/` (MindSpore) folder is one rank:
`profiler_info_{rank}.json` and `profiler_metadata.json` (config, environment), the CANN export
`PROF_*/` and the analysed `ASCEND_PROFILER_OUTPUT/`, which is what is read here:

- `trace_view.json`: a bare list of Chrome trace events whose `ts` is usually a string of µs
  with three decimals. Framework ops (`Python` process) -> host_ops and `ProfilerStep#N` ->
  steps; `CANN` API calls -> host_ops (compile, sync, launch, cann_api); `Ascend Hardware`
  tasks -> device_ops; `HCCL`/`Communication` ops -> comm_ops; `Overlap Analysis` (Computing,
  Communication, Communication(Not Overlapped), Free) -> the per-step breakdown of `steps`.
- `kernel_details.csv` -> device_ops (preferred over the trace's tasks: it has shapes and PMU
  ratios); `step_trace_time.csv` -> the step breakdown where the trace gives none;
  `op_statistic.csv` -> op_stats; `api_statistic.csv` -> host_ops when the trace has no CANN
  calls; `communication.json` / `communication_matrix.json` -> comm_ops; `memory_record.csv`
  -> memory; MindSpore's `FRAMEWORK/cpu_op_execute_timestamp_{rank}.txt` (operators run on the
  host CPU) -> host_ops of kind cpu_kernel, unless the trace has them as its `CPU OP` process;
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

Not read: the `.db` files, operator_details.csv, operator_memory.csv, npu_module_mem.csv and
the binary records of MindSpore's `FRAMEWORK/` (`mindspore.op_range`: the framework side is in
the trace).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor import intervals
from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.formats.cann_comm import comm_as_device_ops, comm_from_columns
from advisor.formats.cann_csv import open_csv, read_summary_table
from advisor.formats.cann_summaries import API_STATISTIC, OP_STATISTIC, device_ops_from_op_summary
from advisor.formats.cann_tasks import collective, device_category, with_wait
from advisor.formats.chrome_trace import NO_RAW, EventDecoder, TraceEvent, shape_text
from advisor.formats.decimal_clock import Clock, exact_parts
from advisor.formats.files import load_json
from advisor.formats.interning import Codes, arrow_strings, expand, hashable, per_row, unique
from advisor.formats.minddata import read_pipeline_raw
from advisor.formats.numbers import int_or_none
from advisor.formats.numbers import trace_number as _float
from advisor.formats.stream import EventStream
from advisor.formats.timebase import drop_far_times, far_warning, robust_origin
from advisor.formats.warn import WarnFn
from advisor.hookspecs import Reader, hookimpl
from advisor.model import Profile, ProfileMeta, conform
from advisor.plugin_manager import PluginHost
from advisor.progress import FileProgress

READER = "ascend_pt"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
FOLDER_SUFFIXES = {"_ascend_pt": "PyTorch", "_ascend_ms": "MindSpore"}
TIME_COLUMNS = {"steps": ("start_us", "end_us"), "device_ops": ("start_us", "launch_us"),
                "host_ops": ("start_us",), "comm_ops": ("start_us",), "memory": ("time_us",)}
OUTPUT_FILES = ("trace_view.json", "kernel_details.csv", "step_trace_time.csv",
                "op_statistic.csv", "api_statistic.csv", "communication.json",
                "communication_matrix.json", "memory_record.csv")
CLOCK_TOLERANCE_US = 60e6  # how far outside the trace's span another file's times may lie
MB = 1e6  # communication sizes: decimal MB (MB/ms is the GB/s written beside them)
MIB = float(2**20)  # memory_record: MB of the allocator, binary


# ---------------------------------------------------------------------------------------------
# Plugin entry points


class AscendPtReader:
    """Reads one `*_ascend_pt` / `*_ascend_ms` folder (or its ASCEND_PROFILER_OUTPUT)."""

    name = "ascend_pt"
    formats = ("Ascend PyTorch / MindSpore profiler output (*_ascend_pt, *_ascend_ms, "
               "ASCEND_PROFILER_OUTPUT)",)
    collect = {
        "steps": "call prof.step() once per iteration (step_trace_time.csv)",
        "device_ops": "export the text results (export_type Text), which write "
                      "kernel_details.csv and trace_view.json",
        "device_ops.start_us": "kernel_details.csv and trace_view.json of the same run "
                               "(export_type Text): task start times come from them, and a "
                               "file of another run loses its times (see the reader warning)",
        **{f"device_ops.{c}": "aic_metrics=AiCMetrics.PipeUtilization in the profiler's "
                              "experimental config (PMU columns of kernel_details.csv)"
           for c in ("aicore_time_us", "vec_ratio", "mac_ratio", "scalar_ratio", "mte2_ratio")},
        "memory": "profile_memory=True (memory_record.csv)",
        "host_ops.input_shapes": "record_shapes=True",
        "comm_ops": "profile a distributed run (communication.json)",
    }
    """How to make the Ascend profiler record what a rule lacks (see Reader.collect)."""

    def detect(self, path: Path) -> bool:
        """Folder names only: the output folder itself, a rank folder, or a folder holding one."""
        path = Path(path)
        if not path.is_dir():
            return False
        return (path.name == OUTPUT_DIR or path.name.endswith(tuple(FOLDER_SUFFIXES))
                or (path / OUTPUT_DIR).is_dir())

    def read(self, path: Path) -> list[Profile]:
        return _FolderReader(Path(path)).read()


@hookimpl
def advisor_readers() -> list[AscendPtReader]:
    return [AscendPtReader()]


# ---------------------------------------------------------------------------------------------
# Exact timestamps on one clock

def _floats(values: Iterable[Any]) -> np.ndarray:
    """Numbers (None -> NaN); other text also NaN."""
    values = values if isinstance(values, list) else list(values)
    try:
        return np.array(values, dtype="float64")
    except (TypeError, ValueError):
        pass
    try:
        return pd.to_numeric(pd.Series(values, dtype="object"),
                             errors="coerce").to_numpy("float64", na_value=np.nan)
    except (TypeError, ValueError):  # lists or objects among the values
        return np.array([_float(v) for v in values], dtype="float64")


# ---------------------------------------------------------------------------------------------
# Classification of host calls and device tasks

_STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")
_SYNC_APIS = ("aclrtSynchronizeStream", "aclrtSynchronizeDevice", "aclrtSynchronizeEvent")


def framework_kind(name: str, cat: str) -> str:
    """host_ops.kind of a framework-side event (the trace's Python/CPU process)."""
    lower, cat = name.lower(), cat.lower()
    if cat in ("enqueue", "dequeue"):
        return "runtime"  # torch_npu's task queue: Enqueue, Dequeue@aclnnXxx
    if cat in ("user_annotation", "gpu_user_annotation", "mstx", "ms_tx"):
        return "annotation"
    if cat in ("python_function", "gc"):
        # Python frames of torch/utils/data/dataloader.py run inside the DataLoader call:
        # they are its call stack, not more data loading
        return "python"
    if "dataloader" in lower:
        return "dataloader"
    if lower.startswith("optimizer.") or "optimizer.step" in lower:
        return "optimizer"
    return "aten"


def cann_kind(api: str) -> str:
    """host_ops.kind of a CANN API call (`AscendCL@<api>`, `Node@launch`, ...)."""
    if api.startswith("aclopCompileAndExecute"):
        return "compile_execute"  # compiles on a cache miss, then runs: not all compile time
    if api.startswith(("aclopCompile", "opCompile")):
        return "compile"
    if api.startswith(_SYNC_APIS):
        return "sync"
    if "launch" in api.lower():
        return "launch"
    return "cann_api"


def _op_type_from_task(name: str) -> str | None:
    """`aclnnMm_TransData_TransData` -> `TransData` (aclnn API, kernel, op type)."""
    parts = name.split("_")
    return parts[-1] if name.startswith("aclnn") and len(parts) >= 3 and parts[-1] else None


# ---------------------------------------------------------------------------------------------
# trace_view.json

_FRAMEWORK_PROCESSES = {"Python", "CPU", "MindSpore", "PyTorch"}
_OTHER_CPU_PROCESSES = {"CANN", "CPU Usage", "Memory Usage", "OS Runtime API", "GC"}
_OVERLAP_KINDS = {"Computing": "computing_us", "Communication": "communication_us",
                  "Communication(Not Overlapped)": "comm_not_overlapped_us", "Free": "free_us"}
_ROLES = ("framework", "cann", "hardware", "comm", "overlap", "cpu_ops")
_CPU_OP_PROCESS = "CPU OP"  # MindSpore's operators run on the host CPU


def _role(process: str, labels: str) -> str | None:
    if process == "Overlap Analysis":
        return "overlap"
    if process in ("HCCL", "Communication"):
        return "comm"
    if process.startswith("Ascend Hardware"):
        return "hardware"
    if process == "CANN":
        return "cann"
    if process == _CPU_OP_PROCESS:
        return "cpu_ops"
    if process in _FRAMEWORK_PROCESSES or (labels == "CPU" and process
                                           and process not in _OTHER_CPU_PROCESSES):
        return "framework"
    return None


@dataclass
class _TraceTables:
    """What trace_view.json gave (times already on the profile clock)."""

    span: tuple[float, float] | None = None
    steps: pd.DataFrame | None = None  # from ProfilerStep#N
    overlap: dict[str, intervals.Intervals] = field(default_factory=dict)  # merged, per track
    overlap_span: tuple[float, float] | None = None  # Overlap Analysis E2E
    host_ops: list[pd.DataFrame] = field(default_factory=list)
    device_ops: pd.DataFrame | None = None
    comm_ops: pd.DataFrame | None = None
    comm_streams: set[int] = field(default_factory=set)
    # torch_to_npu flows: start_us (of the device task), launch_us, launch_thread
    launches: pd.DataFrame | None = None


_ROLE_CODES = {role: code for code, role in enumerate(_ROLES)}
class _Args(msgspec.Struct, gc=False):
    """The `args` keys the tables need. `Any`: a value of any JSON type is taken as it is and
    converted where it is used; a key that is missing or null is None."""

    thread_id: Any = msgspec.field(default=None, name="Thread Id")
    stream: Any = msgspec.field(default=None, name="Stream Id")
    physical_stream: Any = msgspec.field(default=None, name="Physic Stream Id")
    task_id: Any = msgspec.field(default=None, name="Task Id")
    size_b: Any = msgspec.field(default=None, name="size(B)")
    size_byte: Any = msgspec.field(default=None, name="size(Byte)")
    task_type: Any = msgspec.field(default=None, name="Task Type")
    transport: Any = msgspec.field(default=None, name="transport type")
    plane_stream: Any = msgspec.field(default=None, name="stream id")
    name: Any = None  # of process_name / thread_name metadata
    labels: Any = None  # of process_labels metadata
    # of cpu_op events recorded with shapes: raw JSON, decoded once per distinct value
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")


_DECODER = EventDecoder(_Args)
_NO_ARGS = _DECODER.no_args


_LAUNCH_FLOW = "torch_to_npu"  # the flow from a framework op to the device task it launched


# The numbers and texts kept of each complete event; `thread_id` is CANN's `Thread Id` (else
# the tid), `stream` ... `bytes` the arguments of device tasks.
_NUMBER_COLUMNS = ("pid", "tid", "whole", "frac", "dur", "thread_id", "stream",
                   "physical_stream", "task_id", "bytes")
_TEXT_COLUMNS = ("name", "cat", "task_type")


class _TraceColumns:
    """The fields the tables need of each complete (`X`) event, taken batch by batch.

    Only these columns (codes, numbers, arrow strings) and the metadata outlive a batch. Which
    process, hence which table, an event belongs to is settled at the end, by pid, since the
    metadata may come after the events it names.
    """

    def __init__(self) -> None:
        self.pids, self.tids = Codes(), Codes()
        self.processes: dict[Any, str] = {}
        self.labels: dict[Any, str] = {}
        self.threads: dict[tuple[Any, Any], str] = {}
        self.size = 0
        self.number_chunks: dict[str, list[np.ndarray]] = {k: [] for k in _NUMBER_COLUMNS}
        self.text_chunks: dict[str, list[pa.Array]] = {k: [] for k in _TEXT_COLUMNS}
        # per-plane communication tasks: row -> (transport type, stream id, size(Byte))
        self.plane_tasks: dict[int, tuple[str, Any, Any]] = {}
        # `Input Dims` of events that have it (row -> raw JSON)
        self.shapes: dict[int, bytes] = {}
        # torch_to_npu flow events: (ph, id, pid, tid, ts)
        self.flows: list[tuple[str, Any, Any, Any, Any]] = []
        self.number: dict[str, np.ndarray] = {}
        self.text: dict[str, pa.Array] = {}

    def add(self, batch: list[Any]) -> None:
        """Take the fields of one batch's complete events, and its metadata.

        One loop reads every field of an event while its dict is in the CPU cache: one pass
        per field costs several times more on a large trace (a cache miss per event and pass).
        """
        pid, tid, ts, dur, name, cat = [], [], [], [], [], []
        thread_id, stream, physical, task_id, size, task_type = [], [], [], [], [], []
        planes: dict[int, tuple[str, Any, Any]] = {}
        shapes = self.shapes
        flows = self.flows
        row = self.size
        for e in _DECODER.events(batch):
            if e.__class__ is not TraceEvent:
                continue
            ph = e.ph
            if ph != "X":
                if ph == "M":
                    self._metadata(e)
                elif (ph == "s" or ph == "f") and (e.name == _LAUNCH_FLOW
                                                   or e.cat == _LAUNCH_FLOW):
                    flows.append((ph, hashable(e.id), hashable(e.pid), hashable(e.tid), e.ts))
                continue
            pid.append(e.pid)
            tid.append(t := e.tid)
            ts.append(e.ts)
            dur.append(e.dur)
            name.append(e.name)
            cat.append(e.cat)
            a = e.args or _NO_ARGS
            thread_id.append(t if a.thread_id is None else a.thread_id)
            stream.append(a.stream)
            physical.append(a.physical_stream)
            task_id.append(a.task_id)
            size.append(a.size_byte if a.size_b is None else a.size_b)
            task_type.append(a.task_type or "UNKNOWN")
            if a.transport is not None:
                planes[row] = (str(a.transport), a.plane_stream, a.size_byte)
            if a.input_dims:
                shapes[row] = bytes(a.input_dims)
            row += 1
        if row == self.size:
            return
        self.size = row
        whole, frac = exact_parts(ts)
        del ts
        numbers = {"pid": self.pids.encode(pid), "tid": self.tids.encode(tid),
                   "whole": whole, "frac": frac, "dur": _floats(dur),
                   "thread_id": _floats(thread_id), "stream": _floats(stream),
                   "physical_stream": _floats(physical), "task_id": _floats(task_id),
                   "bytes": _floats(size)}
        for key, values in numbers.items():
            self.number_chunks[key].append(values)
        for key, texts in (("name", name), ("cat", cat), ("task_type", task_type)):
            self.text_chunks[key].append(arrow_strings(texts))
        self.plane_tasks.update(planes)

    def _metadata(self, e: TraceEvent[_Args]) -> None:
        kind, value = e.name, e.args or _NO_ARGS
        if kind == "process_name":
            self.processes[hashable(e.pid)] = str(value.name or "")
        elif kind == "process_labels":
            self.labels[hashable(e.pid)] = str(value.labels or "")
        elif kind == "thread_name":
            self.threads[(hashable(e.pid), hashable(e.tid))] = str(value.name or "")

    def _concatenate(self) -> None:
        for key, chunks in self.number_chunks.items():
            self.number[key] = np.concatenate(chunks)
            chunks.clear()
        for key, chunks in self.text_chunks.items():
            self.text[key] = pa.concat_arrays(chunks)  # one array: `take` on chunks is slow
            chunks.clear()

    def _launch_flows(self, clock: Clock) -> pd.DataFrame | None:
        """The torch_to_npu flows whose start (`s`, at the launching framework op) and end
        (`f`, at the device task) are both there: the end's pid and tid (as codes of the
        trace's columns) and start_us, the start's time (launch_us) and thread."""
        if not self.flows:
            return None
        ph, ident, pid, tid, ts = zip_strict(*self.flows)
        flows = pd.DataFrame({"ph": ph, "id": pd.Series(ident, dtype=object),
                              "pid": pd.Series(pid, dtype=object),
                              "tid": pd.Series(tid, dtype=object),
                              "ts": clock.us(list(ts))})
        flows = flows[np.isfinite(flows["ts"].to_numpy(float))]
        starts = flows[flows["ph"] == "s"].drop_duplicates("id")
        ends = flows[flows["ph"] == "f"].drop_duplicates("id")
        pairs = ends.merge(starts, on="id", suffixes=("", "_s"))
        if pairs.empty:
            return None
        pids, tids = self.pids.index, self.tids.index
        return pd.DataFrame({
            "pid": pairs["pid"].map(lambda v: pids.get(v, -1)).to_numpy(np.int64),
            "tid": pairs["tid"].map(lambda v: tids.get(v, -1)).to_numpy(np.int64),
            "start_us": pairs["ts"].to_numpy(float),
            "launch_us": pairs["ts_s"].to_numpy(float),
            "launch_thread": _floats(pairs["tid_s"].tolist())})

    def thread_names(self, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """(code of each row, the distinct names) of the rows' threads ("" when unnamed)."""
        pairs = (self.number["pid"][rows].astype(np.int64) * len(self.tids.values)
                 + self.number["tid"][rows])
        uniques, codes = np.unique(pairs, return_inverse=True)
        width, pids, tids = len(self.tids.values), self.pids.values, self.tids.values
        names = [self.threads.get((pids[p // width], tids[p % width]), "")
                 for p in uniques.tolist()]
        return codes.reshape(-1), names

    def tables(self, clock: Clock, warn: WarnFn, rel: str) -> _TraceTables:
        out = _TraceTables()
        if not self.size:
            return out
        self._concatenate()
        number = self.number
        pid = number["pid"]
        roles = [_role(self.processes.get(p, ""), self.labels.get(p, "")) for p in self.pids.values]
        role = np.array([-1 if r is None else _ROLE_CODES[r] for r in roles], dtype=np.int8)[pid]
        kept = role >= 0
        if not kept.any():
            return out
        # One origin for all events: the clock's origin is the trace's earliest kept event.
        ts = clock.from_parts(number.pop("whole"), number.pop("frac"), among=kept)
        flows = self._launch_flows(clock)
        dur = number["dur"]
        bad = kept & ~(np.isfinite(ts) & np.isfinite(dur))
        if bad.any():
            warn(rel, f"{int(bad.sum())} events without a numeric 'ts' or 'dur' ignored")
        good = kept & ~bad
        if good.any():
            out.span = (float(np.min(ts[good])), float(np.max((ts + dur)[good])))
        for code, name in enumerate(_ROLES):
            index = np.flatnonzero(good & (role == code))
            if not index.size:
                continue
            index = index[np.argsort(pid[index], kind="stable")]  # process by process
            rows = _Rows(self, index, ts[index], dur[index])
            if name == "framework":
                _framework_tables(out, rows, self.shapes)
            elif name == "cann":
                out.host_ops.append(_cann_ops(rows))
            elif name == "cpu_ops":
                out.host_ops.append(_cpu_kernels(rows))
            elif name == "hardware":
                out.device_ops = _hardware_ops(rows)
                if flows is not None:
                    out.device_ops = _with_launches(out.device_ops, rows, flows)
            elif name == "comm":
                out.comm_ops, out.comm_streams = _comm_ops(rows, self.plane_tasks)
            else:
                _overlap(out, rows)
        if flows is not None:
            out.launches = flows.drop(columns=["pid", "tid"])
        if out.device_ops is not None and out.comm_streams:
            ops = out.device_ops
            out.device_ops = ops[~ops["stream"].isin(out.comm_streams)].reset_index(drop=True)
        return out


@dataclass
class _Rows:
    """The events of one role: positions in the trace's columns, times on the clock."""

    columns: _TraceColumns
    index: np.ndarray
    ts: np.ndarray
    dur: np.ndarray

    def number(self, key: str) -> np.ndarray:
        return self.columns.number[key][self.index]

    def text(self, key: str) -> pa.Array:
        return self.columns.text[key].take(pa.array(self.index))

    def tid_numbers(self) -> np.ndarray:
        """The rows' tids as numbers (NaN where not one)."""
        return _floats(self.columns.tids.values)[self.number("tid")]

    def thread_names(self, which: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
        return self.columns.thread_names(self.index if which is None else self.index[which])


def parse_trace(batches: Iterable[list[Any]], clock: Clock, warn: WarnFn,
                rel: str) -> _TraceTables:
    """Tables from one trace_view.json, its events given batch by batch (an EventStream).

    Each batch is turned into columns before the next is decoded, so memory follows the kept
    columns, not the file. Raises UnreadableInput when the file cannot be decoded at all.
    """
    columns = _TraceColumns()
    for batch in batches:
        columns.add(batch)
    if isinstance(batches, EventStream):
        if batches.truncated is not None:
            warn(rel, f"truncated trace: {batches.truncated} events recovered")
        if batches.non_finite:
            warn(rel, "the trace holds NaN or Infinity, which is not valid JSON: read with the "
                      "standard parser; those values are treated as missing")
    return columns.tables(clock, warn, rel)


def _framework_tables(out: _TraceTables, rows: _Rows, shapes: dict[int, bytes]) -> None:
    names = rows.text("name")
    ts, dur = rows.ts, rows.dur
    candidates = np.flatnonzero(pc.starts_with(names, "ProfilerStep#")
                                .to_numpy(zero_copy_only=False))
    steps = [(i, int(m.group(1))) for i in candidates.tolist()
             if (m := _STEP_NAME.match(names[i].as_py()))]
    if steps:
        index = [i for i, _ in steps]
        frame = pd.DataFrame({"step": [s for _, s in steps], "start_us": ts[index],
                              "duration_us": dur[index]})
        frame["end_us"] = frame["start_us"] + frame["duration_us"]
        frame = frame.sort_values("start_us", kind="stable").drop_duplicates("step")
        out.steps = frame.reset_index(drop=True)
    is_step = np.zeros(len(names), dtype=bool)
    is_step[[i for i, _ in steps]] = True
    name_codes, name_values = unique(names)
    cat_codes, cat_values = unique(rows.text("cat"))
    pairs = name_codes.astype(np.int64) * len(cat_values) + cat_codes
    uniques, codes = np.unique(pairs, return_inverse=True)
    kinds = np.empty(len(uniques), dtype=object)
    kinds[:] = [framework_kind(name_values[p // len(cat_values)], cat_values[p % len(cat_values)])
                for p in uniques.tolist()]
    frame = pd.DataFrame({"name": names.to_pandas(), "kind": kinds[codes.reshape(-1)],
                          "start_us": ts, "duration_us": dur,
                          "thread": rows.tid_numbers()})
    if shapes:
        frame["input_shapes"] = _input_shapes(rows.index, frame["kind"].to_numpy(), shapes)
    out.host_ops.append(frame[~is_step].reset_index(drop=True))


def _input_shapes(index: np.ndarray, kinds: np.ndarray, shapes: dict[int, bytes]
                  ) -> np.ndarray:
    """input_shapes of framework rows: their `Input Dims` as compact JSON, aten ops only."""
    found = [(i, shapes[row]) for i, row in enumerate(index.tolist()) if row in shapes]
    texts: dict[bytes, str | None] = {}
    column = np.full(len(index), None, dtype=object)
    for i, raw in found:
        if kinds[i] == "aten":
            text = texts.get(raw, raw)
            if text is raw:
                text = texts[raw] = shape_text(raw)
            column[i] = text
    return column


def _with_launches(ops: pd.DataFrame, rows: _Rows, flows: pd.DataFrame) -> pd.DataFrame:
    """Device tasks with launch_us / launch_thread of the flow that ends at them (same pid,
    tid and ts as the task)."""
    keys = pd.DataFrame({"pid": rows.number("pid").astype(np.int64),
                         "tid": rows.number("tid").astype(np.int64), "start_us": rows.ts})
    flows = flows.drop_duplicates(["pid", "tid", "start_us"])
    found = keys.merge(flows, how="left", on=["pid", "tid", "start_us"])
    return ops.assign(launch_us=found["launch_us"].to_numpy(float),
                      launch_thread=found["launch_thread"].to_numpy(float))


LAUNCH_MATCH_US = 0.13  # kernel_details may write starts as float64 (0.25 µs steps at epoch µs)


def kernels_with_launches(kernels: pd.DataFrame, launches: pd.DataFrame) -> pd.DataFrame:
    """kernel_details rows with launch_us / launch_thread of the torch_to_npu flow ending at
    the same time (the nearest within LAUNCH_MATCH_US; one kernel per flow)."""
    starts = kernels["start_us"].to_numpy(float, na_value=np.nan) if "start_us" in kernels \
        else np.full(len(kernels), np.nan)
    launch_us = np.full(len(kernels), np.nan)
    thread = np.full(len(kernels), np.nan)
    timed = np.flatnonzero(np.isfinite(starts))
    if timed.size and not launches.empty:
        left = pd.DataFrame({"start_us": starts[timed], "row": timed}).sort_values("start_us")
        right = launches.sort_values("start_us").rename(columns={"start_us": "flow_us"})
        found = pd.merge_asof(left, right, left_on="start_us", right_on="flow_us",
                              direction="nearest", tolerance=LAUNCH_MATCH_US)
        found = found.dropna(subset=["flow_us"])
        found["gap"] = (found["start_us"] - found["flow_us"]).abs()
        found = found.sort_values("gap", kind="stable").drop_duplicates("flow_us")
        rows = found["row"].to_numpy(np.int64)
        launch_us[rows] = found["launch_us"].to_numpy(float)
        thread[rows] = found["launch_thread"].to_numpy(float)
    return kernels.assign(launch_us=launch_us, launch_thread=thread)


def _cpu_kernels(rows: _Rows) -> pd.DataFrame:
    return pd.DataFrame({"name": rows.text("name").to_pandas(), "kind": CPU_KERNEL,
                         "start_us": rows.ts, "duration_us": rows.dur,
                         "thread": rows.tid_numbers()})


def _cann_ops(rows: _Rows) -> pd.DataFrame:
    codes, names = unique(rows.text("name"))
    split = [name.rpartition("@") for name in names]
    return pd.DataFrame({
        "name": expand(codes, [api for _, _, api in split]),
        "kind": expand(codes, [cann_kind(api) for _, _, api in split]),
        "level": expand(codes, [level or None for level, _, _ in split]),
        "start_us": rows.ts, "duration_us": rows.dur,
        "thread": rows.number("thread_id")})


_STREAM_THREAD = re.compile(r"^Stream (\d+)$")


def _hardware_ops(rows: _Rows) -> pd.DataFrame:
    stream = rows.number("stream")
    missing = np.flatnonzero(np.isnan(stream))
    if missing.size:  # newest msprof: the thread name `Stream N`, else the physical id
        codes, threads = rows.thread_names(missing)
        numbered = np.array([float(m.group(1)) if (m := _STREAM_THREAD.match(t)) else np.nan
                             for t in threads], dtype="float64")[codes]
        physical = np.trunc(rows.number("physical_stream")[missing])
        physical[~np.isfinite(physical)] = np.nan
        stream[missing] = np.where(np.isnan(numbered), physical, numbered)
    names = rows.text("name")
    task_types = rows.text("task_type")
    return pd.DataFrame({
        "name": names.to_pandas(), "op_type": per_row(names, _op_type_from_task),
        "core_type": task_types.to_pandas(), "category": per_row(task_types, device_category),
        "stream": stream, "task_id": rows.number("task_id"), "bytes": rows.number("bytes"),
        "start_us": rows.ts, "duration_us": rows.dur})


def _comm_ops(rows: _Rows, plane_tasks: dict[int, tuple[str, Any, Any]]
              ) -> tuple[pd.DataFrame | None, set[int]]:
    """comm_ops from the HCCL/Communication process: msprof's reading of its timeline."""
    is_task = np.isin(rows.index, np.fromiter(plane_tasks, dtype=np.int64,
                                              count=len(plane_tasks)))
    codes, threads = rows.thread_names()
    on_op_thread = np.array(["Communication" in t for t in threads], dtype=bool)[codes]
    op = np.flatnonzero(on_op_thread & ~is_task)
    task = np.flatnonzero(is_task)
    planes = [plane_tasks[i] for i in rows.index[task].tolist()]
    ops = pd.DataFrame({
        "name": rows.text("name").to_numpy(zero_copy_only=False)[op],
        "start_us": rows.ts[op], "duration_us": rows.dur[op],
        "thread": expand(codes, threads)[op]})
    tasks = pd.DataFrame({
        "start_us": rows.ts[task], "transport": [t for t, _, _ in planes],
        "stream": pd.Series([s for _, s, _ in planes], dtype="object"),
        "bytes": pd.Series([b for _, _, b in planes], dtype="object")})
    return comm_from_columns(ops, tasks)


def _overlap(out: _TraceTables, rows: _Rows) -> None:
    kinds = per_row(rows.text("name"), lambda name: name if name in _OVERLAP_KINDS else "")
    other = np.flatnonzero(kinds == "")
    if other.size:  # the track is named by its thread
        codes, threads = rows.thread_names(other)
        kinds[other] = expand(codes, threads)
    ts, dur = rows.ts, rows.dur
    for kind in _OVERLAP_KINDS:
        chosen = kinds == kind
        out.overlap[kind] = intervals.merge(ts[chosen], ts[chosen] + dur[chosen])
    every = np.isin(kinds, list(_OVERLAP_KINDS))
    if every.any():
        out.overlap_span = (float(ts[every].min()), float((ts[every] + dur[every]).max()))


def covered_in(merged: intervals.Intervals, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Time of a merged interval set inside each window [lo, hi] (vectorised)."""
    return _covered_before(merged, hi) - _covered_before(merged, lo)


def _covered_before(merged: intervals.Intervals, points: np.ndarray) -> np.ndarray:
    starts, ends = merged
    points = np.asarray(points, dtype="float64")
    if starts.size == 0:
        return np.zeros(points.shape)
    lengths = ends - starts
    before = np.concatenate([[0.0], np.cumsum(lengths)])
    k = np.searchsorted(starts, points, side="right")  # intervals starting at or before
    last = np.maximum(k - 1, 0)
    partial = np.clip(points - starts[last], 0.0, lengths[last])
    return np.where(k > 0, before[last] + partial, 0.0)


def _steps_with_breakdown(trace: _TraceTables, step_number: int) -> pd.DataFrame | None:
    """ProfilerStep windows (or one window over the Overlap Analysis span) with the time of
    each Overlap Analysis track inside them."""
    steps = trace.steps
    span = trace.overlap_span
    if steps is None:
        if span is None:
            return None
        start, end = span
        steps = pd.DataFrame({"step": [step_number], "start_us": [start], "end_us": [end],
                              "duration_us": [end - start]})
    if span is None:
        return steps
    lo, hi = steps["start_us"].to_numpy(float), steps["end_us"].to_numpy(float)
    columns = {column: covered_in(trace.overlap[kind], lo, hi)
               for kind, column in _OVERLAP_KINDS.items()}
    if trace.comm_ops is not None and not trace.comm_ops.empty:
        comm = trace.comm_ops
        receive = comm["name"].str.lower().str.contains("receive").to_numpy(dtype=bool)
        if receive.any():
            start = comm["start_us"].to_numpy(float)[receive]
            merged = intervals.merge(start, start + comm["duration_us"].to_numpy(float)[receive])
            columns["bubble_us"] = covered_in(merged, lo, hi)
    return steps.assign(**columns)


def _step_of(times: np.ndarray, steps: pd.DataFrame) -> pd.array:
    """Step whose [start, end) window holds each time (<NA> outside every step)."""
    start = steps["start_us"].to_numpy(float)
    end = steps["end_us"].to_numpy(float)
    order = np.argsort(start, kind="stable")
    pos = np.searchsorted(start[order], times, side="right") - 1
    idx = order[np.clip(pos, 0, None)]
    inside = (pos >= 0) & (times < end[idx])
    values = pd.array(steps["step"].to_numpy()[idx], dtype="Int64")
    values[~inside] = pd.NA
    return values


# ---------------------------------------------------------------------------------------------
# CSV and JSON files of ASCEND_PROFILER_OUTPUT

# kernel_details.csv header -> the op_summary header the msprof mapping reads.
_KERNEL_COLUMNS = {"Name": "Op Name", "Type": "OP Type", "Accelerator Core": "Task Type",
                   "Start Time(us)": "Task Start Time(us)", "Duration(us)": "Task Duration(us)",
                   "Wait Time(us)": "Task Wait Time(us)"}
_KERNEL_REQUIRED = ("Name", "Accelerator Core", "Duration(us)")
_SHAPE_COLUMNS = ("input_shapes", "output_shapes")
_VECTOR_CORES = ("AI_VECTOR_CORE", "MIX_AIV")
_VECTOR_PMU = {"vec_ratio": "aiv_vec_ratio", "scalar_ratio": "aiv_scalar_ratio",
               "mte2_ratio": "aiv_mte2_ratio"}


def read_kernel_details(path: Path, rel: str, clock: Clock, warn: WarnFn
                        ) -> pd.DataFrame | None:
    """device_ops from kernel_details.csv through the msprof op_summary mapping."""
    csv = open_csv(path, rel, warn, _KERNEL_REQUIRED)
    if csv is None:
        return None
    mapping = {k: v for k, v in _KERNEL_COLUMNS.items() if csv.has(k) and not csv.has(v)}
    csv.df = csv.df.rename(columns=mapping)
    csv.written = {mapping.get(c, c): w for c, w in csv.written.items()}
    ops = device_ops_from_op_summary(csv)
    if "start_us" in ops:  # the same cells again, parsed exactly (bad cells already warned)
        exact = clock.us(csv.df["Task Start Time(us)"])
        ops["start_us"] = np.where(ops["start_us"].notna(), exact, np.nan)
    codes, core_types = pd.factorize(ops["core_type"], use_na_sentinel=False)
    ops["category"] = expand(codes, [device_category(t) for t in core_types])
    # kernel_details writes 0, not N/A, in the aic_ columns of vector kernels, so the
    # aic-first choice of the op_summary mapping would give them the cube unit's 0.
    vector = ops["core_type"].isin(_VECTOR_CORES).to_numpy(dtype=bool)
    for column, source in _VECTOR_PMU.items():
        if vector.any() and column in ops and csv.has(source):
            values = pd.to_numeric(csv.df[source], errors="coerce")  # warned about above
            ops[column] = ops[column].mask(vector & values.notna().to_numpy(), values)
    for column in _SHAPE_COLUMNS:  # `"""8,3;4"""` in the file reads as `"8,3;4"`
        if column in ops:
            shapes = ops[column].str.strip('"')
            ops[column] = shapes.mask(shapes == "")
    step = csv.number("Step Id")
    if step is not None:
        ops["step"] = step
    device = csv.text("Device_id")
    if device is not None and device.notna().any():
        ops.attrs["device_id"] = str(device.dropna().iloc[0])
    return ops


CPU_KERNEL = "cpu_kernel"
_CPU_OP_FILE = re.compile(r"^cpu_op_execute_timestamp_(\d+)\.txt$")
_NS_PER_US, _US_PER_MS = 1000, 1000.0


def read_cpu_op_timestamps(path: Path, rel: str, clock: Clock, warn: WarnFn
                           ) -> pd.DataFrame | None:
    """host_ops (kind cpu_kernel) from MindSpore's `FRAMEWORK/cpu_op_execute_timestamp_{rank}.txt`.

    Each line is `full op name;op type;start,duration,thread [start,duration,thread ...]`, one
    `start,duration,thread` per execution, start in ns since the epoch and duration in ms (as
    MindSpore's own timeline conversion reads it). Lines or executions that do not parse are
    counted and reported once, with the first one's line number.
    """
    names: list[str] = []
    whole: list[float] = []
    frac: list[float] = []
    durations: list[float] = []
    threads: list[float] = []
    bad, first_bad = 0, None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh, 1):
                fields = line.strip().split(";")
                if fields == [""]:
                    continue
                runs = fields[-1].split() if len(fields) >= 3 else []
                if not runs:
                    bad, first_bad = bad + 1, first_bad or number
                    continue
                for run in runs:
                    parts = run.split(",")
                    try:
                        start_ns, duration_ms = int(parts[0]), float(parts[1])
                        thread = float(parts[2]) if len(parts) > 2 else np.nan
                    except (ValueError, IndexError):
                        bad, first_bad = bad + 1, first_bad or number
                        continue
                    if len(parts) > 3 or not np.isfinite(duration_ms) or duration_ms < 0:
                        bad, first_bad = bad + 1, first_bad or number
                        continue
                    names.append(fields[0])
                    whole.append(float(start_ns // _NS_PER_US))
                    frac.append((start_ns % _NS_PER_US) / _NS_PER_US)
                    durations.append(duration_ms * _US_PER_MS)
                    threads.append(thread)
    except OSError as exc:
        warn(rel, f"cannot read file: {exc.strerror or exc}")
        return None
    if bad:
        warn(rel, f"{bad} CPU operator executions not in the form start_ns,duration_ms,thread "
                  f"ignored (first on line {first_bad})")
    if not names:
        if not bad:
            warn(rel, "no CPU operator executions")
        return None
    return pd.DataFrame({"name": names, "kind": CPU_KERNEL,
                         "start_us": clock.from_parts(np.array(whole), np.array(frac)),
                         "duration_us": durations, "thread": threads})


_STEP_TRACE_COLUMNS = {"Computing": "computing_us", "Communication": "communication_us",
                       "Communication(Not Overlapped)": "comm_not_overlapped_us",
                       "Free": "free_us", "Bubble": "bubble_us", "Preparing": "preparing_us"}


def read_step_trace_time(path: Path, rel: str, warn: WarnFn) -> pd.DataFrame | None:
    """Per-step breakdown (µs) from step_trace_time.csv; `step` NaN where the file has none."""
    csv = open_csv(path, rel, warn, ("Computing", "Free"))
    if csv is None:
        return None
    frame = pd.DataFrame({"step": csv.number("Step") if csv.has("Step")
                          else pd.Series(np.nan, index=csv.df.index)})
    for written, column in _STEP_TRACE_COLUMNS.items():
        if csv.has(written):
            frame[column] = csv.number(written)
    if csv.has("Type"):  # cluster_step_trace_time.csv layout: keep the rank rows
        frame = frame[csv.text("Type").fillna("").str.lower().isin(["rank", ""])]
    return frame.reset_index(drop=True)


def read_memory_record(path: Path, rel: str, clock: Clock, warn: WarnFn
                       ) -> pd.DataFrame | None:
    """Allocator samples; one component's series (PTA+GE, else PTA, else every row)."""
    csv = open_csv(path, rel, warn, ("Timestamp(us)",),
                    any_of=("Total Allocated(MB)", "Total Reserved(MB)"))
    if csv is None:
        return None
    valid = csv.number("Timestamp(us)").notna().to_numpy()
    frame = pd.DataFrame({"time_us": np.where(valid, clock.us(csv.df["Timestamp(us)"]), np.nan)})
    for written, column in (("Total Allocated(MB)", "allocated_bytes"),
                            ("Total Reserved(MB)", "reserved_bytes")):
        if csv.has(written):
            frame[column] = csv.number(written) * MIB
    device = csv.text("Device Type")
    if device is not None:
        frame["device"] = device
    component = csv.text("Component")
    if component is not None:
        present = set(component.dropna())
        chosen = next((c for c in ("PTA+GE", "PTA") if c in present), None)
        if chosen is not None:
            frame = frame[(component == chosen).to_numpy(dtype=bool)]
    return frame.reset_index(drop=True)


def _op_and_group(key: str) -> tuple[str, str | None]:
    name, _, group = str(key).partition("@")
    return name, group or None


def _blocks(data: Any) -> Iterable[tuple[str, dict[str, Any]]]:
    """(`op@group` key, value) of `{step: {collective|p2p: {key: value}}}`."""
    if not isinstance(data, dict):
        return
    for per_step in data.values():
        if not isinstance(per_step, dict):
            continue
        for per_kind in per_step.values():
            if not isinstance(per_kind, dict):
                continue
            for key, value in per_kind.items():
                if isinstance(value, dict):
                    yield str(key), value


def _number(mapping: dict[str, Any], key: str) -> float:
    try:
        value = float(mapping.get(key))
    except (TypeError, ValueError):
        return float("nan")
    return value if np.isfinite(value) else float("nan")


SDMA_PARTS = ("HCCS", "PCIE", "SIO")
"""communication.json's SDMA entry is the sum of these intra-node transports (HCCS 0.0639 MB
+ PCIE 0.0214 MB = SDMA 0.0853 MB in msprof-analyze's sample): adding all would count the
bytes twice. LOCAL copies stay on one device and move nothing between ranks."""


def _moved(transports: dict[str, dict[str, Any]]) -> dict[str, float]:
    """MB each transport moved between ranks, every byte once: RDMA and the SDMA parts
    (HCCS, PCIE, SIO); SDMA itself only where the file gives no parts."""
    sizes = {t: _number(v, "Transit Size(MB)") for t, v in transports.items()
             if t.upper() != "LOCAL"}
    if any(t in sizes for t in SDMA_PARTS):
        sizes.pop("SDMA", None)
    return {t: size for t, size in sizes.items() if size > 0}


def parse_communication(data: Any, clock: Clock
                        ) -> tuple[pd.DataFrame | None, dict[str, dict[str, float]]]:
    """comm_ops from communication.json, and bandwidth per transport from its totals."""
    rows, starts = [], []
    totals: dict[str, dict[str, float]] = {}
    for key, block in _blocks(data):
        time_info = block.get("Communication Time Info")
        bandwidth = block.get("Communication Bandwidth Info")
        bandwidth = bandwidth if isinstance(bandwidth, dict) else {}
        transports = {t: v for t, v in bandwidth.items() if isinstance(v, dict)}
        if key.startswith("Total Op Info"):
            for transport, info in transports.items():
                total = totals.setdefault(transport, {"bytes": 0.0, "transit_us": 0.0})
                total["bytes"] += np.nan_to_num(_number(info, "Transit Size(MB)")) * MB
                total["transit_us"] += np.nan_to_num(_number(info, "Transit Time(ms)")) * 1e3
            continue
        if not isinstance(time_info, dict):
            continue
        name, group = _op_and_group(key)
        moved = _moved(transports)
        main = max(moved, key=moved.__getitem__) if moved else None
        starts.append(time_info.get("Start Timestamp(us)"))
        rows.append({
            "name": name, "kind": "op", "op": collective(name), "group": group,
            "duration_us": _number(time_info, "Elapse Time(ms)") * 1e3,
            "wait_us": _number(time_info, "Wait Time(ms)") * 1e3,
            "transit_us": _number(time_info, "Transit Time(ms)") * 1e3,
            "bytes": sum(moved.values()) * MB if moved else np.nan,
            "transport": main,
            "bandwidth_gbps": _number(transports[main], "Bandwidth(GB/s)") if main else np.nan,
        })
    for total in totals.values():
        total["bandwidth_gbps"] = (total["bytes"] / total["transit_us"] / 1e3
                                   if total["transit_us"] else float("nan"))
    if not rows:
        return None, totals
    return pd.DataFrame(rows).assign(start_us=clock.us(starts)), totals


def parse_communication_matrix(data: Any) -> pd.DataFrame | None:
    """comm_ops rows per link (`src->dst`) from communication_matrix.json."""
    rows = []
    for key, links in _blocks(data):
        if key.startswith("Total Op Info"):
            continue
        name, group = _op_and_group(key)
        for link, info in links.items():
            src, _, dst = str(link).partition("-")
            if not isinstance(info, dict) or not (src.isdigit() and dst.isdigit()):
                continue  # "0-top1", "0-total", ...: summaries of a rank's links, not links
            transit_us = _number(info, "Transit Time(ms)") * 1e3
            rows.append({
                "name": f"{src}->{dst}", "kind": "link",
                "op": collective(str(info.get("Op Name") or name)), "group": group,
                "duration_us": transit_us, "transit_us": transit_us,
                "bytes": _number(info, "Transit Size(MB)") * MB,
                "transport": info.get("Transport Type"),
                "bandwidth_gbps": _number(info, "Bandwidth(GB/s)"),
            })
    return pd.DataFrame(rows) if rows else None


# ---------------------------------------------------------------------------------------------
# Metadata files

_VERSION_NAMES = {"torch_npu_version": "torch_npu", "cann_version": "CANN",
                  "ms_version": "MindSpore", "mindspore_version": "MindSpore",
                  "torch_version": "torch"}
_PROFILER_INFO = re.compile(r"^profiler_info(?:_(\d+))?\.json$")


def _versions(data: dict[str, Any], depth: int = 0) -> dict[str, str]:
    """`*version*` keys of a metadata file and of its sections (not its environment)."""
    found = {}
    for key, value in data.items():
        if isinstance(value, dict):
            if depth < 1 and key not in ("ENV_VARIABLES", "config"):
                found.update(_versions(value, depth + 1))
        elif "version" in str(key).lower() and isinstance(value, (str, int, float)) \
                and str(value):
            found[_VERSION_NAMES.get(str(key), str(key))] = str(value)
    return found


def _int(value: Any) -> int | None:
    number = int_or_none(value)
    return number if number is not None and number >= 0 else None


# ---------------------------------------------------------------------------------------------
# Reading one folder


class _FolderReader:
    """One `read()` of one rank folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        inside_output = path.name == OUTPUT_DIR
        self.output = path if inside_output else path / OUTPUT_DIR
        self.root = path.parent if inside_output else path
        framework = next((fw for suffix, fw in FOLDER_SUFFIXES.items()
                          if self.root.name.endswith(suffix)), None)
        self.framework_known = framework is not None
        meta = ProfileMeta(source_format="ascend-pt", path=str(path),
                           framework=framework or "PyTorch", device_kind="NPU")
        self._set_framework(meta, meta.framework)
        self.profile = Profile(meta)
        self.clock = Clock()
        self.tables: dict[str, pd.DataFrame] = {}
        self.trace_span: tuple[float, float] | None = None

    @staticmethod
    def _set_framework(meta: ProfileMeta, framework: str) -> None:
        meta.framework = framework
        meta.source_format = "ascend-ms" if framework == "MindSpore" else "ascend-pt"

    def warn(self, file: str | Path, problem: str, *, line: int | None = None,
             column: str | None = None) -> None:
        self.profile.warn(file, problem, line=line, column=column, reader=READER)

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
        trace = self._read_trace()
        kernels = self._read_kernels()
        step_table = self._read_csv_file(
            "step_trace_time.csv", lambda path, rel: read_step_trace_time(path, rel, self.warn))
        self._build_steps(trace, step_table, kernels)
        self._build_device_ops(trace, kernels)
        self._build_host_ops(trace)
        self._read_op_statistic()
        self._build_comm_ops(trace)
        self._read_pipeline()
        memory = self._read_csv_file(
            "memory_record.csv",
            lambda path, rel: read_memory_record(path, rel, self.clock, self.warn))
        if memory is not None and not memory.empty:
            self.tables["memory"] = self._same_clock(memory, "time_us", "memory_record.csv")
        if not self.tables:
            return self._without_output()
        self._finish()
        return [self.profile]

    def _without_output(self) -> list[Profile]:
        """No table from ASCEND_PROFILER_OUTPUT: read the CANN export beside it, if any."""
        problems = "; ".join(f"{Path(w.file).name}: {w.problem}"
                             for w in self.profile.warnings[:3])
        exports = sorted(p for p in self.root.glob("PROF_*") if p.is_dir())
        looked = f"{OUTPUT_DIR}/{{{', '.join(OUTPUT_FILES)}}}"
        if not self.output.is_dir():
            what = f"no {OUTPUT_DIR} folder"
        elif problems:
            what = f"nothing readable in {OUTPUT_DIR} ({problems})"
        else:
            what = f"no profiler output found (looked for {looked})"
        if not exports:
            raise UnreadableInput(self.path, what)
        profiles: list[Profile] = []
        errors = []
        readers = _export_readers()
        for export in exports:
            reader = next((r for r in readers if _claims(r, export)), None)
            if reader is None:
                errors.append(f"{export.name}: no installed reader claims it (is the msprof "
                              "plugin blocked?)")
                continue
            try:
                profiles += reader.read(export)
            except UnreadableInput as exc:
                errors.append(f"{export.name}: {exc.problem}")
        if not profiles:
            raise UnreadableInput(self.path, f"{what}; {'; '.join(errors)}")
        meta = self.profile.meta
        for profile in profiles:
            profile.meta.framework = meta.framework
            profile.meta.rank = meta.rank if meta.rank is not None else profile.meta.rank
            profile.meta.world_size = meta.world_size
            profile.meta.versions = {**meta.versions, **profile.meta.versions}
            profile.meta.extra = {**meta.extra, **profile.meta.extra}
            profile.warnings[:0] = self.profile.warnings
            profile.warn(self.path, f"{what}; read the CANN export "
                                    f"{Path(profile.meta.path).name} instead", reader=READER)
        return profiles

    # -- metadata -----------------------------------------------------------------------------

    def _read_metadata(self) -> None:
        meta = self.profile.meta
        for path in sorted(self.root.glob("profiler_info*.json")):
            match = _PROFILER_INFO.match(path.name)
            if match is None or not path.is_file():
                continue
            info = self._load(path)
            if not isinstance(info, dict):
                continue
            rank = _int(info.get("rank_id"))
            if rank is None and match.group(1) is not None:
                rank = int(match.group(1))
            meta.rank = rank if rank is not None else meta.rank
            meta.versions.update(_versions(info))
            config = info.get("config")
            experimental = config.get("experimental_config") if isinstance(config, dict) else None
            if isinstance(experimental, dict):
                for key in ("_profiler_level", "_aic_metrics"):
                    if experimental.get(key) not in (None, ""):
                        meta.extra[key.strip("_")] = str(experimental[key])
            if not self.framework_known and ("ms_version" in info or "mindspore" in str(
                    info.get("framework", "")).lower()):
                self._set_framework(meta, "MindSpore")
            self._read(path)
        path = self.root / "profiler_metadata.json"
        if path.is_file():
            data = self._load(path)
            if isinstance(data, dict):
                self._apply_metadata(data)
                self._read(path)
        if not self.framework_known and self.output.is_dir() and any(
                self.output.glob("ascend_mindspore_profiler*.db")):
            self._set_framework(meta, "MindSpore")
        devices = sorted({d.name.removeprefix("device_") for prof in self.root.glob("PROF_*")
                          for d in prof.glob("device_*")
                          if d.is_dir() and d.name.removeprefix("device_").isdigit()})
        if len(devices) == 1:
            meta.device_id = devices[0]

    def _apply_metadata(self, data: dict[str, Any]) -> None:
        meta = self.profile.meta
        env = data.get("ENV_VARIABLES")
        if isinstance(env, dict):
            meta.extra["env"] = {str(k): "" if v is None else str(v) for k, v in env.items()}
        distributed = data.get("distributed_args")
        distributed = distributed if isinstance(distributed, dict) else {}
        world = _int(distributed.get("world_size", data.get("world_size")))
        if world:
            meta.world_size = world
        rank = _int(distributed.get("rank", data.get("rank_id")))
        if meta.rank is None and rank is not None:
            meta.rank = rank
        for name, version in _versions(data).items():
            meta.versions.setdefault(name, version)

    def _load(self, path: Path) -> Any:
        try:
            return load_json(path)
        except UnreadableInput as exc:
            self.warn(self.rel(path), exc.problem)
            return None

    # -- trace_view.json ----------------------------------------------------------------------

    def _read_trace(self) -> _TraceTables:
        path = self._file("trace_view.json")
        if path is None:
            return _TraceTables()
        rel = self.rel(path)
        progress = FileProgress(rel, path.stat().st_size)
        try:
            events = EventStream(path, progress, decode=_DECODER.decode)
            trace = parse_trace(events, self.clock, self.warn, rel)
        except UnreadableInput as exc:
            self.warn(rel, exc.problem)
            return _TraceTables()
        finally:
            progress.close()
        self.trace_span = trace.span
        if trace.span is None:
            self.warn(rel, "no timed events of a known process (Python, CANN, Ascend Hardware, "
                           "HCCL, Overlap Analysis)")
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
        paths = sorted(p for p in framework.glob("cpu_op_execute_timestamp_*.txt")
                       if _CPU_OP_FILE.match(p.name) and p.is_file()) if framework.is_dir() else []
        if self.profile.meta.rank is not None:
            own = [p for p in paths if _CPU_OP_FILE.match(p.name).group(1)
                   == str(self.profile.meta.rank)]
            paths = own or paths
        frames = []
        for path in paths[:1]:
            frame = read_cpu_op_timestamps(path, self.rel(path), self.clock, self.warn)
            if frame is not None:
                frames.append(frame)
                self._read(path)
        return frames

    # -- CSV files ----------------------------------------------------------------------------

    def _read_csv_file(self, name: str, parse: Callable[[Path, str], pd.DataFrame | None]
                       ) -> pd.DataFrame | None:
        path = self._file(name)
        if path is None:
            return None
        frame = parse(path, self.rel(path))
        if frame is not None and not frame.empty:
            self._read(path)
        return frame

    def _read_kernels(self) -> pd.DataFrame | None:
        kernels = self._read_csv_file(
            "kernel_details.csv",
            lambda path, rel: read_kernel_details(path, rel, self.clock, self.warn))
        if kernels is None or kernels.empty:
            return None
        device = kernels.attrs.get("device_id")
        if device is not None and self.profile.meta.device_id is None:
            self.profile.meta.device_id = device
        return self._same_clock(kernels, "start_us", "kernel_details.csv")

    def _same_clock(self, frame: pd.DataFrame, column: str, name: str) -> pd.DataFrame:
        """Drop a file's times when they cannot be on the trace's clock (another run)."""
        if self.trace_span is None or column not in frame or frame[column].isna().all():
            return frame
        lo, hi = frame[column].min(), frame[column].max()
        first, last = self.trace_span
        if hi >= first - CLOCK_TOLERANCE_US and lo <= last + CLOCK_TOLERANCE_US:
            return frame
        gap = max(first - hi, lo - last) / 1e6
        self.warn(self.rel(self.output / name),
                  f"times are {gap:,.0f} s away from trace_view.json's, so the files come "
                  f"from different runs or clocks; its {column} values are left out")
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

    def _build_steps(self, trace: _TraceTables, table: pd.DataFrame | None,
                     kernels: pd.DataFrame | None) -> None:
        single = (table is not None and len(table) == 1 and pd.notna(table["step"].iloc[0]))
        steps = _steps_with_breakdown(trace, int(table["step"].iloc[0]) if single else 0)
        if table is not None and not table.empty:
            steps = (_fill_breakdown(steps, table) if steps is not None
                     else _steps_from_table(table, kernels))
        if steps is not None and not steps.empty:
            self.tables["steps"] = steps.drop(columns=["preparing_us"], errors="ignore")

    def _build_device_ops(self, trace: _TraceTables, kernels: pd.DataFrame | None) -> None:
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

    def _build_host_ops(self, trace: _TraceTables) -> None:
        parts = [p for p in trace.host_ops if not p.empty]
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
            host["step"] = _step_of(host["start_us"].to_numpy(float, na_value=np.nan), steps)
        self.tables["host_ops"] = host

    def _build_comm_ops(self, trace: _TraceTables) -> None:
        parts = []
        path = self._file("communication.json")
        data = self._load(path) if path is not None else None
        if data is not None:
            comm, totals = parse_communication(data, self.clock)
            if totals:
                self.profile.meta.extra["comm_bandwidth"] = totals
            if comm is not None:
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
        times = [tables[name][c].to_numpy("float64", na_value=np.nan)
                 for name, columns in TIME_COLUMNS.items()
                 if name in tables for c in columns if c in tables[name]]
        times = np.concatenate(times) if times else np.empty(0)
        times = times[np.isfinite(times)]
        if times.size and self.clock.origin is not None:
            shift, centre = robust_origin(times)
            far = drop_far_times(tables, TIME_COLUMNS, centre)
            if far:
                self.warn(self.path.name, far_warning(far, self.clock.origin))
            self.profile.meta.extra["time_origin_us"] = self.clock.origin + shift
            for name, columns in TIME_COLUMNS.items():
                if name in tables:
                    tables[name] = tables[name].assign(
                        **{c: tables[name][c] - shift for c in columns if c in tables[name]})
        self.profile.tables = {name: conform(name, frame) for name, frame in tables.items()}


def _export_readers() -> list[Reader]:
    """The other installed readers, one of which reads a CANN export (msprof's, unless
    ADVISOR_BLOCK_PLUGINS blocks it): their code runs through the plugin host, never imported
    from here."""
    return [reader for _, reader in PluginHost().readers()
            if not isinstance(reader, AscendPtReader)]


def _claims(reader: Reader, path: Path) -> bool:
    try:
        return bool(reader.detect(path))
    except Exception:  # another plugin's reader: its failure is not this folder's
        return False


def _fill_breakdown(steps: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """Breakdown columns from step_trace_time.csv that the trace did not give, by step."""
    if len(table) == 1 and len(steps) == 1 and pd.isna(table["step"].iloc[0]):
        table = table.assign(step=steps["step"].iloc[0])
    table = table.dropna(subset=["step"]).drop_duplicates("step").set_index("step")
    filled = steps.copy()
    for column in table.columns:
        if column == "preparing_us" or (column in filled and filled[column].notna().any()):
            continue
        filled[column] = filled["step"].map(table[column]).to_numpy(dtype=float)
    return filled


def _steps_from_table(table: pd.DataFrame, kernels: pd.DataFrame | None) -> pd.DataFrame:
    """Steps from step_trace_time.csv alone: step time = Computing + Communication(Not
    Overlapped) + Free; the start is the step's first kernel less its Preparing time."""
    steps = table.assign(step=table["step"].fillna(0))
    parts = [c for c in ("computing_us", "comm_not_overlapped_us", "free_us") if c in steps]
    steps["duration_us"] = steps[parts].fillna(0.0).sum(axis=1)
    start = pd.Series(np.nan, index=steps.index)
    if kernels is not None and {"step", "start_us"} <= set(kernels.columns):
        first = kernels.dropna(subset=["start_us"]).groupby("step")["start_us"].min()
        start = steps["step"].map(first).astype(float)
        if "preparing_us" in steps:
            start = start - steps["preparing_us"].fillna(0.0)
    steps["start_us"] = start
    steps["end_us"] = steps["start_us"] + steps["duration_us"]
    return steps.reset_index(drop=True)
