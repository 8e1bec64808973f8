"""trace_view.json as tables: each process's role (framework, CANN, hardware, communication,
Overlap Analysis, MindSpore's CPU operators) decides which table its events fill."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor import intervals
from advisor.compat import zip_strict
from advisor.formats.aicore_freq import freq_samples
from advisor.formats.cann_comm import comm_from_rows
from advisor.formats.cann_tasks import device_category
from advisor.formats.chrome_trace import shape_text
from advisor.formats.decimal_clock import Clock
from advisor.formats.interning import expand, per_row, unique
from advisor.formats.python_frames import split_stack
from advisor.formats.trace_columns import Rows, TraceColumns, floats
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

from .cpu_ops import CPU_KERNEL
from .kinds import cann_kind, framework_kind, op_type_from_task

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow.compute as pc
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
    pc = lazy_module("pyarrow.compute")

STEP_NAME = re.compile(r"^ProfilerStep#(\d+)$")


# torch_npu writes the garbage collections it records (gc_detect_threshold) as a process of
# their own: their events (cat GC) are host_ops of kind gc
_FRAMEWORK_PROCESSES = {"Python", "CPU", "MindSpore", "PyTorch", "GC", "Python GC"}
_OTHER_CPU_PROCESSES = {"CANN", "CPU Usage", "Memory Usage", "OS Runtime API"}
OVERLAP_KINDS = {
    "Computing": "computing_us",
    "Communication": "communication_us",
    "Communication(Not Overlapped)": "comm_not_overlapped_us",
    "Free": "free_us",
}
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
    if process in _FRAMEWORK_PROCESSES or (
        labels == "CPU" and process and process not in _OTHER_CPU_PROCESSES
    ):
        return "framework"
    return None


@dataclass
class TraceTables:
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
    aicore_freq: pd.DataFrame | None = None  # AI Core Freq counter samples


_ROLE_CODES = {role: code for code, role in enumerate(_ROLES)}


def _framework_tables(
    out: TraceTables, rows: Rows, shapes: dict[int, bytes], stacks: dict[int, str]
) -> None:
    names = rows.text("name")
    ts, dur = rows.ts, rows.dur
    candidates = np.flatnonzero(
        pc.starts_with(names, "ProfilerStep#").to_numpy(zero_copy_only=False)
    )
    steps = [
        (i, int(m.group(1)))
        for i in candidates.tolist()
        if (m := STEP_NAME.match(names[i].as_py()))
    ]
    if steps:
        index = [i for i, _ in steps]
        frame = pd.DataFrame(
            {"step": [s for _, s in steps], "start_us": ts[index], "duration_us": dur[index]}
        )
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
    kinds[:] = [
        framework_kind(name_values[p // len(cat_values)], cat_values[p % len(cat_values)])
        for p in uniques.tolist()
    ]
    frame = pd.DataFrame(
        {
            "name": names.to_pandas(),
            "kind": kinds[codes.reshape(-1)],
            "start_us": ts,
            "duration_us": dur,
            "thread": rows.tid_numbers(),
        }
    )
    if shapes:
        frame["input_shapes"] = _input_shapes(rows.index, frame["kind"].to_numpy(), shapes)
    if stacks:
        frame["call_stack"] = _call_stacks(rows.index, stacks)
    out.host_ops.append(frame[~is_step].reset_index(drop=True))


def role_tables(columns: TraceColumns, clock: Clock, warn: WarnFn, rel: str) -> TraceTables:
    """The tables of each process role, on the clock of the trace's earliest kept event."""
    out = TraceTables()
    if not columns.size:
        return out
    columns.concatenate()
    number = columns.number
    pid = number["pid"]
    roles = [
        _role(columns.processes.get(p, ""), columns.labels.get(p, "")) for p in columns.pids.values
    ]
    role = np.array([-1 if r is None else _ROLE_CODES[r] for r in roles], dtype=np.int8)[pid]
    kept = role >= 0
    if not kept.any():
        return out
    # One origin for all events: the clock's origin is the trace's earliest kept event.
    ts = clock.from_parts(number.pop("whole"), number.pop("frac"), among=kept)
    flows = columns.launch_flows(clock)
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
        rows = Rows(columns, index, ts[index], dur[index])
        if name == "framework":
            _framework_tables(out, rows, columns.shapes, columns.stacks)
        elif name == "cann":
            out.host_ops.append(_cann_ops(rows))
        elif name == "cpu_ops":
            out.host_ops.append(_cpu_kernels(rows))
        elif name == "hardware":
            out.device_ops = _hardware_ops(rows)
            if flows is not None:
                out.device_ops = _with_launches(out.device_ops, rows, flows)
        elif name == "comm":
            out.comm_ops, out.comm_streams = comm_from_rows(rows, columns.plane_tasks)
        else:
            _overlap(out, rows)
    if flows is not None:
        out.launches = flows.drop(columns=["pid", "tid"])
    if columns.freq:
        out.aicore_freq = _aicore_freq(columns, clock, out.device_ops, warn, rel)
    if out.device_ops is not None and out.comm_streams:
        ops = out.device_ops
        out.device_ops = ops[~ops["stream"].isin(out.comm_streams)].reset_index(drop=True)
    return out


def _aicore_freq(
    columns: TraceColumns,
    clock: Clock,
    device_ops: pd.DataFrame | None,
    warn: WarnFn,
    rel: str,
) -> pd.DataFrame | None:
    """The AI Core Freq samples; the last holds to the end of the device tasks. The trace does
    not name the rated frequency: the highest sample stands for it."""
    ts, mhz = zip_strict(*columns.freq)
    times, values = clock.us(list(ts)), floats(mhz)
    bad = int((~(np.isfinite(times) & np.isfinite(values) & (values > 0))).sum())
    if bad:
        warn(rel, f"{bad} 'AI Core Freq' samples without a numeric time or MHz ignored")
    end = None
    if device_ops is not None and not device_ops.empty:
        end = float((device_ops["start_us"] + device_ops["duration_us"]).max())
    return freq_samples(times, values, end)


def _input_shapes(index: np.ndarray, kinds: np.ndarray, shapes: dict[int, bytes]) -> np.ndarray:
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


def _call_stacks(index: np.ndarray, stacks: dict[int, str]) -> pd.arrays.StringArray:
    """host_ops.call_stack of framework rows: their `Call stack` (frames joined by `;\\r\\n`,
    innermost first), one frame per line."""
    texts: dict[str, str] = {}
    column = np.full(len(index), None, dtype=object)
    for i, row in enumerate(index.tolist()):
        raw = stacks.get(row)
        if raw is not None:
            text = texts.get(raw)
            if text is None:
                text = texts[raw] = "\n".join(split_stack(raw))
            column[i] = text or None
    return pd.array(column, dtype="string")


def _with_launches(ops: pd.DataFrame, rows: Rows, flows: pd.DataFrame) -> pd.DataFrame:
    """Device tasks with launch_us / launch_thread of the flow that ends at them (same pid,
    tid and ts as the task)."""
    keys = pd.DataFrame(
        {
            "pid": rows.number("pid").astype(np.int64),
            "tid": rows.number("tid").astype(np.int64),
            "start_us": rows.ts,
        }
    )
    flows = flows.drop_duplicates(["pid", "tid", "start_us"])
    found = keys.merge(flows, how="left", on=["pid", "tid", "start_us"])
    return ops.assign(
        launch_us=found["launch_us"].to_numpy(float),
        launch_thread=found["launch_thread"].to_numpy(float),
    )


def _cpu_kernels(rows: Rows) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": rows.text("name").to_pandas(),
            "kind": CPU_KERNEL,
            "start_us": rows.ts,
            "duration_us": rows.dur,
            "thread": rows.tid_numbers(),
        }
    )


def _cann_ops(rows: Rows) -> pd.DataFrame:
    codes, names = unique(rows.text("name"))
    split = [name.rpartition("@") for name in names]
    return pd.DataFrame(
        {
            "name": expand(codes, [api for _, _, api in split]),
            "kind": expand(codes, [cann_kind(api) for _, _, api in split]),
            "level": expand(codes, [level or None for level, _, _ in split]),
            "start_us": rows.ts,
            "duration_us": rows.dur,
            "thread": rows.number("thread_id"),
        }
    )


_STREAM_THREAD = re.compile(r"^Stream (\d+)$")


def _hardware_ops(rows: Rows) -> pd.DataFrame:
    stream = rows.number("stream")
    missing = np.flatnonzero(np.isnan(stream))
    if missing.size:  # newest msprof: the thread name `Stream N`, else the physical id
        codes, threads = rows.thread_names(missing)
        numbered = np.array(
            [float(m.group(1)) if (m := _STREAM_THREAD.match(t)) else np.nan for t in threads],
            dtype="float64",
        )[codes]
        physical = np.trunc(rows.number("physical_stream")[missing])
        physical[~np.isfinite(physical)] = np.nan
        stream[missing] = np.where(np.isnan(numbered), physical, numbered)
    names = rows.text("name")
    task_types = rows.text("task_type")
    return pd.DataFrame(
        {
            "name": names.to_pandas(),
            "op_type": per_row(names, op_type_from_task),
            "core_type": task_types.to_pandas(),
            "category": per_row(task_types, device_category),
            "stream": stream,
            "task_id": rows.number("task_id"),
            "bytes": rows.number("bytes"),
            "start_us": rows.ts,
            "duration_us": rows.dur,
        }
    )


def _overlap(out: TraceTables, rows: Rows) -> None:
    kinds = per_row(rows.text("name"), lambda name: name if name in OVERLAP_KINDS else "")
    other = np.flatnonzero(kinds == "")
    if other.size:  # the track is named by its thread
        codes, threads = rows.thread_names(other)
        kinds[other] = expand(codes, threads)
    ts, dur = rows.ts, rows.dur
    for kind in OVERLAP_KINDS:
        chosen = kinds == kind
        out.overlap[kind] = intervals.merge(ts[chosen], ts[chosen] + dur[chosen])
    every = np.isin(kinds, list(OVERLAP_KINDS))
    if every.any():
        out.overlap_span = (float(ts[every].min()), float((ts[every] + dur[every]).max()))
