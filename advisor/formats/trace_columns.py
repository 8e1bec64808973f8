"""CANN-style Chrome traces (torch_npu's trace_view.json, msprof's timeline JSONs) taken batch
by batch into columns: of each complete event only the fields the tables need (numbers, codes
of pids and tids, arrow strings), plus the metadata, the torch_to_npu flows and the step-trace
marks, so memory follows the kept columns, not the file."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from sys import intern
from typing import TYPE_CHECKING, Any

import msgspec

from advisor.formats.aicore_freq import COUNTER as FREQ_COUNTER
from advisor.formats.chrome_trace import NO_RAW, EventDecoder, TraceEvent
from advisor.formats.decimal_clock import Clock, exact_parts
from advisor.formats.interning import Codes, arrow_strings, hashable
from advisor.formats.numbers import trace_number as _float
from advisor.formats.parallel import read_in_parts
from advisor.formats.stream import EventStream, Span
from advisor.formats.trace_index import UNBOUNDED, BatchTimes
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module
from advisor.progress import FileProgress

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
    pa = lazy_module("pyarrow")


def floats(values: Iterable[Any]) -> np.ndarray:
    """Numbers (None -> NaN); other text also NaN.

    Arrow first: it takes None and numbers without a Python call per value, where NumPy
    calls one per None (a trace's host calls have no stream, task id or size: those columns,
    mostly None, convert 4-9x faster). It refuses what it cannot convert exactly (text, an
    integer a float64 does not hold), which NumPy then converts as before, so the values are
    NumPy's either way."""
    values = values if isinstance(values, list) else list(values)
    try:
        return pa.array(values, type=pa.float64()).to_numpy(zero_copy_only=False, writable=True)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):  # any refusal
        pass
    try:
        return np.array(values, dtype="float64")
    except (TypeError, ValueError):
        pass
    try:
        return pd.to_numeric(pd.Series(values, dtype="object"), errors="coerce").to_numpy(
            "float64", na_value=np.nan
        )
    except (TypeError, ValueError):  # lists or objects among the values
        return np.array([_float(v) for v in values], dtype="float64")


class PlaneTasks:
    """The per-plane communication tasks (HCCL's Notify_Wait, Memcpy ... on `Plane k`
    threads) as columns: their rows, transport type, stream id, size(Byte), task type, link
    type (the texts as written, "None" when missing), src rank and dst rank (the task's own
    rank and its peer's, numbered in the communication group; None when missing). Lists, not
    a tuple per row: a large HCCL timeline holds 100,000s of tasks."""

    FIELDS = ("transport", "stream", "bytes", "task_type", "link_type", "src_rank", "dst_rank")

    def __init__(self) -> None:
        self.rows: list[int] = []  # ascending: tasks are taken in file order
        self.columns: dict[str, list[Any]] = {f: [] for f in self.FIELDS}

    def extend(self, later: PlaneTasks, offset: int) -> None:
        """Take in the tasks of a part that follows, its rows numbered on from `offset`."""
        self.rows += [row + offset for row in later.rows]
        for name, values in later.columns.items():
            self.columns[name] += values


class TraceArgs(msgspec.Struct, gc=False):
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
    plane_task_type: Any = msgspec.field(default=None, name="task type")  # Memcpy, Notify_Wait
    link_type: Any = msgspec.field(default=None, name="link type")  # HCCS, PCIE, ON_CHIP
    src_rank: Any = msgspec.field(default=None, name="src rank")  # of an HCCL task: its rank
    dst_rank: Any = msgspec.field(default=None, name="dst rank")  # and its peer's
    mhz: Any = msgspec.field(default=None, name="MHz")  # of the AI Core Freq counter
    name: Any = None  # of process_name / thread_name metadata
    labels: Any = None  # of process_labels metadata
    # of cpu_op events recorded with shapes: raw JSON, decoded once per distinct value
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    # of cpu_op events recorded with with_stack=True: frames joined by ";\r\n"
    call_stack: Any = msgspec.field(default=None, name="Call stack")


class StepTraceArgs(TraceArgs, gc=False):
    """TraceArgs and the keys of msprof's step-trace events (`Iteration 3`, `Reduce_3_0`,
    `Data_aug Bound 3`): UNSET when the key is missing, which differs from a null value."""

    iteration: Any = msgspec.field(default=msgspec.UNSET, name="Iteration ID")
    data_aug_bound: Any = msgspec.field(default=msgspec.UNSET, name="Data_aug Bound(us)")


DECODER = EventDecoder(TraceArgs)
STEP_TRACE_DECODER = EventDecoder(StepTraceArgs)  # for msprof's timelines
_NO_ARGS = DECODER.no_args


_LAUNCH_FLOW = "torch_to_npu"  # the flow from a framework op to the device task it launched
DATA_AUG_BOUND = "Data_aug Bound"  # msprof's step-trace mark (ph s/t) of an iteration's bound

StepArgs = tuple[Any, Any]
"""A step-trace event's `Iteration ID` and `Data_aug Bound(us)` (msgspec.UNSET when missing)."""


@dataclass(frozen=True)
class StepMark:
    """A step-trace event that is no complete event (msprof's `Data_aug Bound N`, ph s/t),
    and `before`, the row of the complete event that follows it in the file."""

    before: int
    pid: Any
    tid: Any
    name: Any
    args: StepArgs


# The numbers and texts kept of each complete event; `thread_id` is CANN's `Thread Id` (else
# the tid), `stream` ... `bytes` the arguments of device tasks.
_NUMBER_COLUMNS = (
    "pid",
    "tid",
    "whole",
    "frac",
    "dur",
    "thread_id",
    "stream",
    "physical_stream",
    "task_id",
    "bytes",
)
_TEXT_COLUMNS = ("name", "cat", "task_type")


class TraceColumns:
    """The fields the tables need of each complete (`X`) event, taken batch by batch.

    Only these columns (codes, numbers, arrow strings) and the metadata outlive a batch. Which
    process, hence which table, an event belongs to is settled at the end, by pid, since the
    metadata may come after the events it names.
    """

    def __init__(self, *, msprof_timeline: bool = False) -> None:
        # msprof_timeline: each ts as its float value (absolute µs, never rebased) with a zero
        # fraction, and the step-trace arguments kept; else each ts as whole µs and fraction,
        # to the digit written (for a clock rebased later)
        self.msprof_timeline = msprof_timeline
        self.decoder = STEP_TRACE_DECODER if msprof_timeline else DECODER
        self.pids, self.tids = Codes(), Codes()
        self.processes: dict[Any, str] = {}
        self.labels: dict[Any, str] = {}
        self.threads: dict[tuple[Any, Any], str] = {}
        self.size = 0
        self.entries = 0  # what the batches held, events or not
        self.skipped = 0  # entries that are no event object
        self.number_chunks: dict[str, list[np.ndarray]] = {k: [] for k in _NUMBER_COLUMNS}
        self.text_chunks: dict[str, list[pa.Array]] = {k: [] for k in _TEXT_COLUMNS}
        self.plane_tasks = PlaneTasks()
        # `Input Dims` of events that have it (row -> raw JSON)
        self.shapes: dict[int, bytes] = {}
        # `Call stack` of events that have it (row -> text)
        self.stacks: dict[int, str] = {}
        # torch_to_npu flow events: (ph, id, pid, tid, ts)
        self.flows: list[tuple[str, Any, Any, Any, Any]] = []
        # AI Core Freq counter samples: (ts, MHz)
        self.freq: list[tuple[Any, Any]] = []
        # step-trace args of the complete events that have an `Iteration ID` (row -> args)
        self.step_args: dict[int, StepArgs] = {}
        self.step_marks: list[StepMark] = []
        self.number: dict[str, np.ndarray] = {}
        self.text: dict[str, pa.Array] = {}
        self.batch_times: list[BatchTimes] = []  # per batch (advisor.formats.trace_index)

    def add(self, batch: list[Any]) -> None:
        """Take the fields of one batch's complete events, and its metadata.

        One loop reads every field of an event while its dict is in the CPU cache: one pass
        per field costs several times more on a large trace (a cache miss per event and pass).
        """
        pid, tid, ts, dur, name, cat = [], [], [], [], [], []
        thread_id, stream, physical, task_id, size, task_type = [], [], [], [], [], []
        planes = self.plane_tasks
        plane_rows = planes.rows
        transports, plane_streams, plane_bytes, plane_types, links, srcs, dsts = (
            planes.columns[f] for f in PlaneTasks.FIELDS
        )
        shapes = self.shapes
        flows = self.flows
        row = self.size
        unread = names_lanes = False
        self.entries += len(batch)
        no_args, steps, unset = self.decoder.no_args, self.msprof_timeline, msgspec.UNSET
        for e in self.decoder.events(batch):
            if e.__class__ is not TraceEvent:
                unread = True
                self.skipped += 1
                continue
            ph = e.ph
            if ph != "X":
                if ph == "M":
                    names_lanes = True
                    self._metadata(e)
                elif (ph == "s" or ph == "f") and (e.name == _LAUNCH_FLOW or e.cat == _LAUNCH_FLOW):
                    flows.append((ph, e.id, e.pid, e.tid, e.ts))  # made hashable once, later
                elif ph == "C" and e.name == FREQ_COUNTER:
                    self.freq.append((e.ts, (e.args or no_args).mhz))
                elif steps and e.cat == DATA_AUG_BOUND:
                    a = e.args or no_args
                    mark = StepMark(row, e.pid, e.tid, e.name, (a.iteration, a.data_aug_bound))
                    self.step_marks.append(mark)
                continue
            pid.append(e.pid)
            tid.append(t := e.tid)
            ts.append(e.ts)
            dur.append(e.dur)
            name.append(e.name)
            cat.append(e.cat)
            a = e.args or no_args
            thread_id.append(t if a.thread_id is None else a.thread_id)
            stream.append(a.stream)
            physical.append(a.physical_stream)
            task_id.append(a.task_id)
            size.append(a.size_byte if a.size_b is None else a.size_b)
            task_type.append(a.task_type or "UNKNOWN")
            if a.transport is not None:
                plane_rows.append(row)  # the texts interned: a few names for 100,000s of tasks
                transports.append(intern(str(a.transport)))
                plane_streams.append(a.plane_stream)
                plane_bytes.append(a.size_byte)
                plane_types.append(intern(str(a.plane_task_type)))
                links.append(intern(str(a.link_type)))
                srcs.append(a.src_rank)
                dsts.append(a.dst_rank)
            if a.input_dims:
                shapes[row] = bytes(a.input_dims)
            if a.call_stack.__class__ is str and a.call_stack:
                self.stacks[row] = a.call_stack
            if steps and a.iteration is not unset:
                self.step_args[row] = (a.iteration, a.data_aug_bound)
            row += 1
        if row == self.size:
            self.batch_times.append(UNBOUNDED if unread else BatchTimes(names_lanes=names_lanes))
            return
        self.size = row
        if self.msprof_timeline:  # numbers as they are, no text made of them
            whole = floats(ts)
            frac = np.zeros(len(whole))
        else:
            whole, frac = exact_parts(ts)
        del ts
        numbers = {
            "pid": self.pids.encode(pid),
            "tid": self.tids.encode(tid),
            "whole": whole,
            "frac": frac,
            "dur": floats(dur),
            "thread_id": floats(thread_id),
            "stream": floats(stream),
            "physical_stream": floats(physical),
            "task_id": floats(task_id),
            "bytes": floats(size),
        }
        self.batch_times.append(_times(whole + frac, numbers["dur"], names_lanes, unread))
        for key, values in numbers.items():
            self.number_chunks[key].append(values)
        for key, texts in (("name", name), ("cat", cat), ("task_type", task_type)):
            self.text_chunks[key].append(arrow_strings(texts))

    def _metadata(self, e: TraceEvent[TraceArgs]) -> None:
        kind, value = e.name, e.args or _NO_ARGS
        if kind == "process_name":
            self.processes[hashable(e.pid)] = str(value.name or "")
        elif kind == "process_labels":
            self.labels[hashable(e.pid)] = str(value.labels or "")
        elif kind == "thread_name":
            self.threads[(hashable(e.pid), hashable(e.tid))] = str(value.name or "")

    def extend(self, later: TraceColumns) -> None:
        """Take in the columns of the events that follow in the file (a part read elsewhere),
        as one pass over all of them would have: pid and tid codes numbered in order of first
        sight, rows numbered on, later metadata winning."""
        rows = self.size
        pids, tids = self.pids.encode(later.pids.values), self.tids.encode(later.tids.values)
        for key, chunks in later.number_chunks.items():
            codes = pids if key == "pid" else tids if key == "tid" else None
            self.number_chunks[key] += chunks if codes is None else [codes[c] for c in chunks]
        for key, texts in later.text_chunks.items():
            self.text_chunks[key] += texts
        self.processes.update(later.processes)
        self.labels.update(later.labels)
        self.threads.update(later.threads)
        self.plane_tasks.extend(later.plane_tasks, rows)
        self.shapes.update({row + rows: shape for row, shape in later.shapes.items()})
        self.stacks.update({row + rows: stack for row, stack in later.stacks.items()})
        self.step_args.update({row + rows: args for row, args in later.step_args.items()})
        self.step_marks += [
            StepMark(m.before + rows, m.pid, m.tid, m.name, m.args) for m in later.step_marks
        ]
        self.flows += later.flows
        self.freq += later.freq
        self.size += later.size
        self.entries += later.entries
        self.skipped += later.skipped
        self.batch_times += later.batch_times

    def concatenate(self) -> None:
        """One array per column (empty ones when no complete event was read)."""
        for key, chunks in self.number_chunks.items():
            self.number[key] = np.concatenate(chunks) if chunks else np.empty(0, np.int64)
            chunks.clear()
        for key, chunks in self.text_chunks.items():
            # one array: `take` on chunks is slow
            self.text[key] = pa.concat_arrays(chunks) if chunks else pa.array([], pa.string())
            chunks.clear()

    def launch_flows(self, clock: Clock) -> pd.DataFrame | None:
        """The torch_to_npu flows whose start (`s`, at the launching framework op) and end
        (`f`, at the device task) are both there: the end's pid and tid (as codes of the
        trace's columns) and start_us, the start's time (launch_us) and thread."""
        if not self.flows:
            return None
        # a tuple per field: zip(*flows) passes every flow as an argument, 4x the time
        ph, ident, pid, tid, ts = (tuple(map(itemgetter(i), self.flows)) for i in range(5))
        ident, pid, tid = _hashables(ident), _hashables(pid), _hashables(tid)
        flows = pd.DataFrame(
            {
                "ph": ph,
                "id": pd.Series(ident, dtype=object),
                "pid": pd.Series(pid, dtype=object),
                "tid": pd.Series(tid, dtype=object),
                "ts": clock.us(list(ts)),
            }
        )
        flows = flows[np.isfinite(flows["ts"].to_numpy(float))]
        starts = flows[flows["ph"] == "s"].drop_duplicates("id")
        ends = flows[flows["ph"] == "f"].drop_duplicates("id")
        pairs = ends.merge(starts, on="id", suffixes=("", "_s"))
        if pairs.empty:
            return None
        pids, tids = self.pids.index, self.tids.index
        return pd.DataFrame(
            {
                "pid": _codes(pairs["pid"], pids),
                "tid": _codes(pairs["tid"], tids),
                "start_us": pairs["ts"].to_numpy(float),
                "launch_us": pairs["ts_s"].to_numpy(float),
                "launch_thread": floats(pairs["tid_s"].tolist()),
            }
        )

    def thread_names(self, rows: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """(code of each row, the distinct names) of the rows' threads ("" when unnamed)."""
        pairs = (
            self.number["pid"][rows].astype(np.int64) * len(self.tids.values)
            + self.number["tid"][rows]
        )
        uniques, codes = np.unique(pairs, return_inverse=True)
        width, pids, tids = len(self.tids.values), self.pids.values, self.tids.values
        names = [
            self.threads.get((pids[p // width], tids[p % width]), "") for p in uniques.tolist()
        ]
        return codes.reshape(-1), names


@dataclass
class Rows:
    """The events of one role: positions in the trace's columns, times on the clock."""

    columns: TraceColumns
    index: np.ndarray
    ts: np.ndarray
    dur: np.ndarray

    def take(self, which: np.ndarray) -> Rows:
        """The rows at these positions (or where this mask is true)."""
        return Rows(self.columns, self.index[which], self.ts[which], self.dur[which])

    def number(self, key: str) -> np.ndarray:
        return self.columns.number[key][self.index]

    def text(self, key: str) -> pa.Array:
        return self.columns.text[key].take(pa.array(self.index))

    def tid_numbers(self) -> np.ndarray:
        """The rows' tids as numbers (NaN where not one)."""
        return floats(self.columns.tids.values)[self.number("tid")]

    def thread_names(self, which: np.ndarray | None = None) -> tuple[np.ndarray, list[str]]:
        return self.columns.thread_names(self.index if which is None else self.index[which])


def _codes(values: pd.Series, index: dict[Any, int]) -> np.ndarray:
    """The code of each value in `index`, -1 for one it lacks (a dict lookup per value, made by
    pandas, not a Python call per value)."""
    return values.map(index).fillna(-1).to_numpy(np.int64)


def _hashables(values: tuple[Any, ...]) -> tuple[Any, ...] | list[Any]:
    """Values usable as keys (interning.hashable), checked at once: a tuple hashes all its
    items, and a flow's id, pid and tid are numbers or text in every trace seen."""
    try:
        hash(values)
    except TypeError:
        return [hashable(v) for v in values]
    return values


def _times(ts: np.ndarray, dur: np.ndarray, names_lanes: bool, unread: bool) -> BatchTimes:
    """A batch's times; unbounded when an entry or a time could not be read (a snippet's own
    reading of the event might still place it)."""
    end = ts + dur
    if unread or not (np.isfinite(end).all() and (dur >= 0).all()):
        return UNBOUNDED
    return BatchTimes(float(ts.min()), float(end.max()), names_lanes)


@dataclass
class FoldedTrace:
    """One trace file as columns, where its batches lie (advisor.formats.trace_index), and
    whether it was cut short (its events up to the cut were kept)."""

    columns: TraceColumns
    spans: list[Span]
    truncated: bool = False


def fold_trace(path: Path, warn: WarnFn, rel: str, *, msprof_timeline: bool = False) -> FoldedTrace:
    """The columns of one trace file (TraceColumns' `msprof_timeline`), a large one decoded
    on several cores; what decoding noticed (a cut file, NaN or Infinity) is told through
    `warn`. UnreadableInput when the file cannot be read."""
    fold, decoder = (
        (read_msprof_columns, STEP_TRACE_DECODER) if msprof_timeline else (read_columns, DECODER)
    )
    progress = FileProgress(rel, path.stat().st_size)
    try:
        parts = read_in_parts(path, decoder.decode, fold, merge_columns, progress=progress)
        if parts is not None:
            return FoldedTrace(parts.state, parts.spans)
        events = EventStream(path, progress, decode=decoder.decode)
        columns = fold(events)
    finally:
        progress.close()
    if events.truncated is not None:
        warn(rel, f"truncated trace: {events.truncated} events recovered")
    if events.non_finite:
        warn(
            rel,
            "the trace holds NaN or Infinity, which is not valid JSON: read with the "
            "standard parser; those values are treated as missing",
        )
    return FoldedTrace(columns, events.spans, events.truncated is not None)


def read_columns(batches: Iterable[list[Any]]) -> TraceColumns:
    """The columns of batches of events (a stream of a whole file or of one part of it)."""
    return _filled(TraceColumns(), batches)


def read_msprof_columns(batches: Iterable[list[Any]]) -> TraceColumns:
    """read_columns of an msprof timeline (TraceColumns' `msprof_timeline`)."""
    return _filled(TraceColumns(msprof_timeline=True), batches)


def _filled(columns: TraceColumns, batches: Iterable[list[Any]]) -> TraceColumns:
    for batch in batches:
        columns.add(batch)
    return columns


def merge_columns(parts: list[TraceColumns]) -> TraceColumns:
    """The columns of consecutive parts of a file, in file order, as those of the whole."""
    first = parts[0]
    for later in parts[1:]:
        first.extend(later)
    return first
