"""Raw-export timelines (`device_N/timeline/*.json`, CANN 8's merged `msprof_*.json`): steps,
device tasks, CANN API calls, HCCL communication ops and the AI Core Freq counter of one
device, built from the timeline's columns (advisor.formats.trace_columns), so a timeline of
hundreds of MB is never held as dicts."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from advisor.compat import zip_strict
from advisor.formats.aicore_freq import freq_samples
from advisor.formats.cann_comm import comm_as_device_ops, comm_from_rows
from advisor.formats.cann_tasks import op_type, task_category
from advisor.formats.interning import expand, hashable, per_row, unique
from advisor.formats.numbers import int_or_none
from advisor.formats.numbers import trace_number as _f
from advisor.formats.trace_columns import DATA_AUG_BOUND, Rows, StepArgs, TraceColumns
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")

_TRAILING_NUMBER = re.compile(r"(\d+)\D*$")
_REDUCE_NAME = re.compile(r"^Reduce_(\d+)_\d+$")
_MODEL_ID = re.compile(r"Model ID:\s*(\d+)")
_STREAM_THREAD = re.compile(r"^Stream (\d+)$")
_COMMUNICATION = ("HCCL", "Communication")

# Step-trace event categories that carry one duration of an iteration.
_STEP_DURATIONS = {
    "Iteration Time": "duration_us",
    "FP_BP Time": "fp_bp_us",
    "Iteration Refresh": "grad_refresh_us",
}
_STEP_CATEGORIES = (*_STEP_DURATIONS, "Reduce", DATA_AUG_BOUND)
_NO_STEP_ARGS: StepArgs = (msgspec.UNSET, msgspec.UNSET)


class Timeline:
    """The columns of one timeline (all of its slices), and the rows of its processes; `cut`:
    a slice ended in the middle (the events before the cut are kept)."""

    def __init__(self, columns: TraceColumns, *, cut: bool = False) -> None:
        columns.concatenate()
        self.columns = columns
        self.cut = cut
        self.ts = columns.number["whole"]  # the float values (msprof_timeline), not rebased
        self.dur = columns.number["dur"]

    def rows(self, *processes: str, thread: re.Pattern[str] | None = None) -> Rows:
        """The complete events of the processes so named (of all when none is named), on the
        threads whose name matches `thread` when given, in file order."""
        index = np.arange(self.columns.size)
        if processes:
            pids = [
                code
                for code, pid in enumerate(self.columns.pids.values)
                if self._in(pid, processes)
            ]
            index = index[np.isin(self.columns.number["pid"][index], pids)]
        rows = Rows(self.columns, index, self.ts[index], self.dur[index])
        if thread is None or not index.size:
            return rows
        codes, names = rows.thread_names()
        return rows.take(np.array([bool(thread.search(n)) for n in names], dtype=bool)[codes])

    def _in(self, pid: Any, processes: tuple[str, ...]) -> bool:
        return not processes or self.columns.processes.get(hashable(pid)) in processes

    def thread_name(self, pid: Any, tid: Any) -> str:
        return self.columns.threads.get((hashable(pid), hashable(tid)), "")

    def step_events(self, *processes: str) -> list[tuple[str, str, float, float, str, StepArgs]]:
        """The step-trace events in file order: (cat, name, ts, dur, thread name, args); the
        `Data_aug Bound` marks, which are no complete events, among them with NaN times."""
        rows = self.rows(*processes)
        cats = rows.text("cat")
        chosen = pc.fill_null(pc.is_in(cats, value_set=pa.array(_STEP_CATEGORIES)), False)
        found = rows.take(chosen.to_numpy(zero_copy_only=False))
        codes, threads = found.thread_names()
        names, cats = found.text("name").to_pylist(), found.text("cat").to_pylist()
        step_args = self.columns.step_args
        placed = [
            (row, 1, (cat, name, ts, dur, threads[code], step_args.get(row, _NO_STEP_ARGS)))
            for row, cat, name, ts, dur, code in zip_strict(
                found.index.tolist(), cats, names, found.ts.tolist(), found.dur.tolist(), codes
            )
        ]
        placed += [
            (
                m.before,
                0,
                (
                    DATA_AUG_BOUND,
                    str(m.name),
                    np.nan,
                    np.nan,
                    self.thread_name(m.pid, m.tid),
                    m.args,
                ),
            )
            for m in self.columns.step_marks
            if self._in(m.pid, processes)
        ]
        placed.sort(key=lambda p: p[:2])  # a mark before the complete event that follows it
        return [event for _, _, event in placed]


def _iteration_of(name: str, args: StepArgs, pattern: re.Pattern[str]) -> int | None:
    """The iteration an event is for: its `Iteration ID` arg, else the number in its name."""
    if args[0] is not msgspec.UNSET:
        return int_or_none(args[0])
    match = pattern.search(name)
    return int(match.group(1)) if match else None


def _steps(timeline: Timeline, *processes: str) -> pd.DataFrame | None:
    """Steps from step-trace events (`Iteration N`, `FP_BP Time N`, `Reduce_<iter>_<k>`...).

    start_us is the `Iteration N` event's ts (the previous iteration end, or FP start for the
    first), end_us = ts + dur. The first iteration's data-aug bound is undefined (there is no
    previous iteration end): the CSV writes N/A, the JSON 0; both read as missing.
    """
    rows: dict[tuple[int | None, int], dict[str, float]] = {}
    has_reduce = False
    for cat, name, ts, dur, thread, args in timeline.step_events(*processes):
        step = _iteration_of(name, args, _REDUCE_NAME if cat == "Reduce" else _TRAILING_NUMBER)
        if step is None:
            continue
        model = _MODEL_ID.search(thread)
        key = (int(model.group(1)) if model else None, step)
        if cat in _STEP_DURATIONS:
            rows.setdefault(key, {})[_STEP_DURATIONS[cat]] = dur
            if cat == "Iteration Time":
                rows[key]["start_us"] = ts
        elif cat == "Reduce":
            has_reduce = True
            row = rows.setdefault(key, {})
            row["reduce_us"] = row.get("reduce_us", 0.0) + dur
        elif cat == DATA_AUG_BOUND and args[1] is not msgspec.UNSET:
            rows.setdefault(key, {})["data_aug_bound_us"] = _f(args[1])
    steps = [
        dict(r, step=step, model_id=model) for (model, step), r in rows.items() if "start_us" in r
    ]
    if not steps:
        return None
    frame = pd.DataFrame(steps).sort_values(["model_id", "step"], kind="stable")
    frame["end_us"] = frame["start_us"] + frame["duration_us"]
    if "data_aug_bound_us" in frame:
        frame.loc[~frame["model_id"].duplicated(), "data_aug_bound_us"] = np.nan
    if has_reduce:
        frame["reduce_us"] = frame.get("reduce_us", pd.Series(0.0, index=frame.index)).fillna(0.0)
    return frame.reset_index(drop=True)


def _whole_numbers(values: np.ndarray) -> np.ndarray:
    """Numbers truncated to whole ones: int64 when every one is there, else float with NaN."""
    values = np.trunc(values)
    return values.astype(np.int64) if np.isfinite(values).all() else values


def _device_ops(
    timeline: Timeline, processes: tuple[str, ...], hccl_streams: set[int]
) -> pd.DataFrame | None:
    """Device tasks from `Stream N` threads; HCCL's own streams are left to comm_ops.

    Tasks on a stream that the HCCL timeline uses (Notify, Reduce_Inline and Memcpy of a
    collective) are dropped: the op-level communication rows added from the HCCL timeline
    stand for them, as in op_summary.
    """
    rows = timeline.rows(*processes, thread=_STREAM_THREAD)
    stream = np.trunc(rows.number("stream"))
    missing = np.flatnonzero(~np.isfinite(stream))
    if missing.size:  # no `Stream Id`: the number in the thread's name
        codes, threads = rows.thread_names(missing)
        numbered = [float(_STREAM_THREAD.search(t).group(1)) for t in threads]  # type: ignore[union-attr]
        stream[missing] = np.array(numbered, dtype="float64")[codes]
    kept = ~np.isin(stream, sorted(hccl_streams))
    rows, stream = rows.take(kept), stream[kept]
    if not rows.index.size:
        return None
    names, task_types = rows.text("name"), rows.text("task_type")
    return pd.DataFrame(
        {
            "name": names.to_pandas(),
            "op_type": per_row(names, op_type),
            "core_type": task_types.to_pandas(),
            "category": per_row(task_types, task_category),
            "start_us": rows.ts,
            "duration_us": rows.dur,
            "stream": stream.astype(np.int64),
            "task_id": _whole_numbers(rows.number("task_id")),
        }
    )


def _host_ops(timeline: Timeline) -> pd.DataFrame | None:
    """CANN API calls (`AscendCL@aclrtSynchronizeStream`, `GE@Infer`): level before the `@`."""
    rows = timeline.rows("CANN")
    if not rows.index.size:
        return None
    codes, names = unique(rows.text("name"))
    split = [name.rpartition("@") for name in names]
    return pd.DataFrame(
        {
            "name": expand(codes, [api for _, _, api in split]),
            "kind": "cann_api",
            "level": expand(codes, [level or None for level, _, _ in split]),
            "start_us": rows.ts,
            "duration_us": rows.dur,
            "thread": _whole_numbers(rows.tid_numbers()),
        }
    )


def _aicore_freq(timeline: Timeline, device_ops: pd.DataFrame | None) -> pd.DataFrame | None:
    """The `AI Core Freq` counter samples (`ph: "C"`, `args.MHz`); the last holds to the end of
    the device tasks. The rated frequency is set from info.json when the profile is built."""
    samples = timeline.columns.freq
    if not samples:
        return None
    end = None
    if device_ops is not None and not device_ops.empty:
        end = float((device_ops["start_us"] + device_ops["duration_us"]).max())
    return freq_samples(
        np.array([_f(ts) for ts, _ in samples], dtype="float64"),
        np.array([_f(mhz) for _, mhz in samples], dtype="float64"),
        end,
    )


def _comm_ops(timeline: Timeline, *processes: str) -> tuple[pd.DataFrame | None, set[int]]:
    """Communication ops, and the device streams the collectives ran on."""
    rows = timeline.rows(*processes)
    if not rows.index.size:
        return None, set()
    return comm_from_rows(rows, timeline.columns.plane_tasks)


SLICE_TABLES = {"hccl": "comm_ops", "step_trace": "steps", "task_time": "device_ops"}
"""The table each single-kind timeline file gives; `msprof_*.json` repeats all three."""


def timeline_tables(
    load: Callable[[str], Timeline | None],
) -> dict[str, tuple[pd.DataFrame, str]]:
    """Tables of one device's timeline, each with the file type it came from.

    `hccl_*`, `step_trace_*` and `task_time_*` first; `msprof_*.json`, which repeats them in
    one file, fills what they lack or replaces what a cut one gave, and is the only source of
    host (CANN API) calls. Communication ops are also appended to device_ops so overlap can
    be computed there.
    """
    tables: dict[str, tuple[pd.DataFrame, str]] = {}
    partial: set[str] = set()  # tables of a cut file, which a whole msprof json replaces

    def wanted(table: str, timeline: Timeline) -> bool:
        return table not in tables or (table in partial and not timeline.cut)

    def keep(table: str, frame: pd.DataFrame | None, kind: str, timeline: Timeline) -> None:
        if frame is not None and wanted(table, timeline):
            tables[table] = (frame, kind)
            (partial.add if timeline.cut else partial.discard)(table)

    streams: set[int] = set()
    if (timeline := load("hccl")) is not None:
        comm, streams = _comm_ops(timeline)
        keep("comm_ops", comm, "hccl", timeline)
    if (timeline := load("step_trace")) is not None:
        keep("steps", _steps(timeline), "step_trace", timeline)
    if (timeline := load("task_time")) is not None:
        keep("device_ops", _device_ops(timeline, (), streams), "task_time", timeline)
    if (timeline := load("msprof")) is not None:
        if wanted("comm_ops", timeline):
            comm, more = _comm_ops(timeline, *_COMMUNICATION)
            streams |= more
            keep("comm_ops", comm, "msprof", timeline)
        if wanted("steps", timeline):
            keep("steps", _steps(timeline, "Ascend Hardware"), "msprof", timeline)
        if wanted("device_ops", timeline):
            ops = _device_ops(timeline, ("Ascend Hardware",), streams)
            keep("device_ops", ops, "msprof", timeline)
        keep("host_ops", _host_ops(timeline), "msprof", timeline)
        ops = tables["device_ops"][0] if "device_ops" in tables else None
        keep("aicore_freq", _aicore_freq(timeline, ops), "msprof", timeline)
    if "comm_ops" in tables and "device_ops" in tables:
        ops, kind = tables["device_ops"]
        comm_rows = comm_as_device_ops(tables["comm_ops"][0])
        tables["device_ops"] = (pd.concat([ops, comm_rows], ignore_index=True), kind)
    return tables
