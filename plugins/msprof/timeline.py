"""Raw-export timelines (`device_N/timeline/*.json`, Chrome trace lists): steps, device
tasks, CANN API calls and HCCL communication ops of one device."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from advisor.formats.aicore_freq import COUNTER, freq_samples
from advisor.formats.cann_comm import comm_as_device_ops, comm_from_columns
from advisor.formats.cann_tasks import op_type, task_category
from advisor.formats.numbers import int_or_none
from advisor.formats.numbers import trace_number as _f
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from advisor.formats.chrome_trace import Trace
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

_TRAILING_NUMBER = re.compile(r"(\d+)\D*$")
_MODEL_ID = re.compile(r"Model ID:\s*(\d+)")
_STREAM_THREAD = re.compile(r"^Stream (\d+)$")


def _iteration_of(event: dict[str, Any], pattern: re.Pattern[str]) -> int | None:
    """The iteration an event is for: its `Iteration ID` arg, else the number in its name."""
    args = event.get("args") or {}
    if "Iteration ID" in args:
        return int_or_none(args["Iteration ID"])
    match = pattern.search(str(event.get("name", "")))
    return int(match.group(1)) if match else None


_REDUCE_NAME = re.compile(r"^Reduce_(\d+)_\d+$")


# Step-trace event categories that carry one duration of an iteration.
_STEP_DURATIONS = {
    "Iteration Time": "duration_us",
    "FP_BP Time": "fp_bp_us",
    "Iteration Refresh": "grad_refresh_us",
}
_STEP_CATEGORIES = {*_STEP_DURATIONS, "Reduce", "Data_aug Bound"}


def _steps_from_trace(trace: Trace) -> pd.DataFrame | None:
    """Steps from step-trace events (`Iteration N`, `FP_BP Time N`, `Reduce_<iter>_<k>`...).

    start_us is the `Iteration N` event's ts (the previous iteration end, or FP start for the
    first), end_us = ts + dur. The first iteration's data-aug bound is undefined (there is no
    previous iteration end): the CSV writes N/A, the JSON 0; both read as missing.
    """
    rows: dict[tuple[int | None, int], dict[str, float]] = {}
    has_reduce = False
    for e in trace.events:
        cat, args = e.get("cat"), e.get("args") or {}
        if cat not in _STEP_CATEGORIES:
            continue
        step = _iteration_of(e, _REDUCE_NAME if cat == "Reduce" else _TRAILING_NUMBER)
        if step is None:
            continue
        model = _MODEL_ID.search(trace.thread_name(e))
        key = (int(model.group(1)) if model else None, step)
        if e.get("ph") == "X" and cat in _STEP_DURATIONS:
            rows.setdefault(key, {})[_STEP_DURATIONS[cat]] = _f(e.get("dur"))
            if cat == "Iteration Time":
                rows[key]["start_us"] = _f(e.get("ts"))
        elif e.get("ph") == "X" and cat == "Reduce":
            has_reduce = True
            row = rows.setdefault(key, {})
            row["reduce_us"] = row.get("reduce_us", 0.0) + _f(e.get("dur"))
        elif cat == "Data_aug Bound" and "Data_aug Bound(us)" in args:
            rows.setdefault(key, {})["data_aug_bound_us"] = _f(args["Data_aug Bound(us)"])
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


def _device_ops_from_trace(trace: Trace, hccl_streams: set[int]) -> pd.DataFrame | None:
    """Device tasks from `Stream N` threads; HCCL's own streams are left to comm_ops.

    Tasks on a stream that the HCCL timeline uses (Notify, Reduce_Inline and Memcpy of a
    collective) are dropped: the op-level communication rows added from the HCCL timeline
    stand for them, as in op_summary.
    """
    rows = []
    for e in trace.complete(_STREAM_THREAD):
        args = e.get("args") or {}
        stream = int_or_none(args.get("Stream Id"))
        if stream is None:
            stream = int(_STREAM_THREAD.search(trace.thread_name(e)).group(1))
        if stream in hccl_streams:
            continue
        core_type = str(args.get("Task Type") or "UNKNOWN")
        rows.append(
            {
                "name": str(e.get("name", "")),
                "op_type": op_type(e.get("name", "")),
                "core_type": core_type,
                "category": task_category(core_type),
                "start_us": _f(e.get("ts")),
                "duration_us": _f(e.get("dur")),
                "stream": stream,
                "task_id": int_or_none(args.get("Task Id")),
            }
        )
    return pd.DataFrame(rows) if rows else None


def comm_from_trace(trace: Trace) -> tuple[pd.DataFrame | None, set[int]]:
    """Communication ops, and the device streams the collectives ran on.

    Op-level events sit on the communication-op thread (`Communication Kernel`, or `Group
    <name> Communication` in newer exports); the per-plane tasks (`Plane k` threads: Notify,
    Memcpy, Reduce_Inline) are not ops, they only give the transport and the streams.
    """
    tasks = [e for e in trace.complete() if "transport type" in (e.get("args") or {})]
    ops = [
        e
        for e in trace.complete(re.compile("Communication"))
        if "transport type" not in (e.get("args") or {})
    ]
    return comm_from_columns(
        pd.DataFrame(
            {
                "name": pd.Series([str(e.get("name", "")) for e in ops], dtype=object),
                "start_us": pd.Series([e.get("ts") for e in ops], dtype=object),
                "duration_us": pd.Series([e.get("dur") for e in ops], dtype=object),
                "thread": pd.Series([trace.thread_name(e) for e in ops], dtype=object),
            }
        ),
        pd.DataFrame(
            {
                "start_us": pd.Series([e.get("ts") for e in tasks], dtype=object),
                "transport": pd.Series(
                    [str(e["args"]["transport type"]) for e in tasks], dtype=object
                ),
                "stream": pd.Series([e["args"].get("stream id") for e in tasks], dtype=object),
                "bytes": pd.Series([e["args"].get("size(Byte)") for e in tasks], dtype=object),
                "duration_us": pd.Series([e.get("dur") for e in tasks], dtype=object),
                "task_type": [str(e["args"].get("task type")) for e in tasks],
                "link_type": [str(e["args"].get("link type")) for e in tasks],
            }
        ),
    )


def _host_ops_from_trace(trace: Trace) -> pd.DataFrame | None:
    """CANN API calls (`AscendCL@aclrtSynchronizeStream`, `GE@Infer`): level before the `@`."""
    rows = []
    for e in trace.complete():
        level, _, api = str(e.get("name", "")).rpartition("@")
        rows.append(
            {
                "name": api,
                "kind": "cann_api",
                "level": level or None,
                "start_us": _f(e.get("ts")),
                "duration_us": _f(e.get("dur")),
                "thread": int_or_none(e.get("tid")),
            }
        )
    return pd.DataFrame(rows) if rows else None


def _aicore_freq_from_trace(trace: Trace, device_ops: pd.DataFrame | None) -> pd.DataFrame | None:
    """The `AI Core Freq` counter samples (`ph: "C"`, `args.MHz`); the last holds to the end of
    the device tasks. The rated frequency is set from info.json when the profile is built."""
    samples = [e for e in trace.events if e.get("ph") == "C" and e.get("name") == COUNTER]
    if not samples:
        return None
    end = None
    if device_ops is not None and not device_ops.empty:
        end = float((device_ops["start_us"] + device_ops["duration_us"]).max())
    return freq_samples(
        np.array([_f(e.get("ts")) for e in samples], dtype="float64"),
        np.array([_f((e.get("args") or {}).get("MHz")) for e in samples], dtype="float64"),
        end,
    )


def timeline_tables(load: Callable[[str], Trace | None]) -> dict[str, tuple[pd.DataFrame, str]]:
    """Tables of one device's timeline, each with the file type it came from.

    `hccl_*`, `step_trace_*` and `task_time_*` first; `msprof_*.json`, which repeats them in
    one file, fills only what they lack, and is the only source of host (CANN API) calls.
    Communication ops are also appended to device_ops so overlap can be computed there.
    """
    tables: dict[str, tuple[pd.DataFrame, str]] = {}

    def keep(table: str, frame: pd.DataFrame | None, kind: str) -> None:
        if frame is not None and table not in tables:
            tables[table] = (frame, kind)

    streams: set[int] = set()
    if (trace := load("hccl")) is not None:
        comm, streams = comm_from_trace(trace)
        keep("comm_ops", comm, "hccl")
    if (trace := load("step_trace")) is not None:
        keep("steps", _steps_from_trace(trace), "step_trace")
    if (trace := load("task_time")) is not None:
        keep("device_ops", _device_ops_from_trace(trace, streams), "task_time")
    if (trace := load("msprof")) is not None:
        hardware = trace.process("Ascend Hardware")
        if "comm_ops" not in tables:
            comm, more = comm_from_trace(trace.process("HCCL", "Communication"))
            streams |= more
            keep("comm_ops", comm, "msprof")
        if "steps" not in tables:
            keep("steps", _steps_from_trace(hardware), "msprof")
        if "device_ops" not in tables:
            keep("device_ops", _device_ops_from_trace(hardware, streams), "msprof")
        keep("host_ops", _host_ops_from_trace(trace.process("CANN")), "msprof")
        ops = tables["device_ops"][0] if "device_ops" in tables else None
        keep("aicore_freq", _aicore_freq_from_trace(trace, ops), "msprof")
    if "comm_ops" in tables and "device_ops" in tables:
        ops, kind = tables["device_ops"]
        comm_rows = comm_as_device_ops(tables["comm_ops"][0])
        tables["device_ops"] = (pd.concat([ops, comm_rows], ignore_index=True), kind)
    return tables
