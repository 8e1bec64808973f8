"""MindSpore's GPU profiler files: the timeline, else the per-kernel, per-operator and per-type
tables.

- `gpu_timeline_display_{N}.json` (a Chrome-trace list, ts and dur in µs on the GPU clock):
  CUDA activities (events whose args name the `op_full_name` that launched them, tid the
  stream, written `17` or `Stream #17`) -> device_ops on core GPU; the operators (tid `Ops` in
  MindSpore 1.x, `GpuOps` / 100002 later) -> host_ops kind aten, as MindSpore times them on
  the host; host CPU operators (pid 11000, tid `HostCpuOps` / 100003) -> host_ops kind
  cpu_kernel; `Steps` (100000) -> steps. Scope-name bars and the overlap-analysis process
  (pid 12000: merged computation, communication, free time) are views of the same events and
  are skipped.
- Without timeline kernels, `gpu_activity_data_{N}.csv` gives one device_ops row per kernel
  (its total time, no start); without timeline operators, `gpu_op_detail_info_{N}.csv` one
  host_ops row per operator (count and total); with no kernel at all,
  `gpu_op_type_info_{N}.csv` gives op_stats.
- `dynamic_shape_info_{N}.json` (module `dynamic_shape`): each timeline row gets the step its
  start falls in and its operator's input shapes in that step; without a timeline, the file's
  own rows (step and time, no start) are the device_ops and host_ops.
"""

from __future__ import annotations

import re
from pathlib import Path
from sys import intern
from typing import TYPE_CHECKING, Any

from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.formats.cann_tasks import op_type
from advisor.formats.numbers import finite_float
from advisor.lazy import lazy_module

from .dynamic_shape import StepShapes, dims_product

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from .context import Rank

GPU_KINDS = ("gpu_timeline", "gpu_activity", "gpu_op_detail", "gpu_op_type")
_OVERLAP_PID = 12000  # MindSpore's "Op Overlap Analyse" process
_HOST_CPU_PID = 11000
_STEPS_TIDS = ("Steps", 100000)
_SCOPE_TIDS = ("Scope Name", 100001)
_HOST_CPU_TIDS = ("HostCpuOps", 100003)
_STREAM = re.compile(r"(?:Stream #)?(\d+)")


def read_gpu(rank: Rank, dynamic: StepShapes | None) -> None:
    """device_ops, host_ops, steps and op_stats of the GPU files and the GPU layout of
    `dynamic_shape_info` (`dynamic`), each only where the Ascend files gave none, their
    device-clock columns registered for rebasing."""
    if dynamic is None and not any(kind in rank.files for kind in GPU_KINDS):
        return
    rank.profile.meta.device_kind = "GPU"
    tables = rank.profile.tables
    kernels = ops = steps = None
    path = rank.files.get("gpu_timeline")
    if path is not None:
        rank.profile.meta.files_read.append(path.name)
        kernels, ops, steps = _timeline(rank, path)
    if dynamic is not None:
        kernels, ops = _with_step_shapes(kernels, ops, steps, dynamic)
    if kernels is None and "gpu_activity" in rank.files:
        kernels = _activity_totals(rank, rank.files["gpu_activity"])
    if ops is None and "gpu_op_detail" in rank.files:
        ops = _op_totals(rank, rank.files["gpu_op_detail"])
    for table, frame, clock in (
        ("device_ops", kernels, ("start_us",)),
        ("host_ops", ops, ("start_us",)),
        ("steps", steps, ("start_us", "end_us")),
    ):
        if frame is None or frame.empty or table in tables:
            continue
        tables[table] = frame.drop(columns=["op_name"], errors="ignore")
        if "start_us" in frame and frame["start_us"].notna().any():
            rank.clocked[table] = clock
    if "device_ops" not in tables and "op_stats" not in tables and "gpu_op_type" in rank.files:
        _op_stats(rank, rank.files["gpu_op_type"])


def _with_step_shapes(
    kernels: pd.DataFrame | None,
    ops: pd.DataFrame | None,
    steps: pd.DataFrame | None,
    dynamic: StepShapes,
) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """Timeline rows with the step their start falls in and their operator's input shapes
    in that step; without timeline rows, the dynamic-shape file's own (untimed) rows."""
    shapes = dynamic.shapes()
    out: list[pd.DataFrame | None] = []
    for frame, own, key in (
        (kernels, dynamic.kernels, "op_name"),
        (ops, dynamic.operators, "name"),
    ):
        if frame is None:
            if own.empty:
                out.append(None)
                continue
            frame = own
            if key == "op_name":  # a kernel takes the shapes of the operator that launched it
                frame = frame.assign(input_shapes=_lookup(frame["step"], frame[key], shapes))
        elif steps is not None:
            step = _step_of(frame["start_us"], steps)
            names = frame[key].astype(str).str.rsplit("/", n=1).str[-1]
            frame = frame.assign(step=step, input_shapes=_lookup(step, names, shapes))
        out.append(frame)
    return out[0], out[1]


def _step_of(start: pd.Series, steps: pd.DataFrame) -> pd.Series:
    """The step whose [start, end) window holds each start; missing outside every step."""
    order = steps.sort_values("start_us")
    begin = order["start_us"].to_numpy(float)
    pos = np.searchsorted(begin, start.to_numpy(float), side="right") - 1
    inside = (pos >= 0) & (start.to_numpy(float) < order["end_us"].to_numpy(float)[pos.clip(0)])
    numbers = order["step"].to_numpy()[pos.clip(0)]
    return pd.Series(pd.array(np.where(inside, numbers, 0), dtype="Int64"), index=start.index).mask(
        ~inside
    )


def _lookup(step: pd.Series, names: pd.Series, shapes: dict[tuple[int, str], str]) -> pd.Series:
    """The input shapes of each row's operator in the row's step, where recorded."""
    found = [shapes.get((int(s), str(n))) if pd.notna(s) else None for s, n in zip(step, names)]
    return pd.Series(found, index=step.index, dtype="string")


def _timeline(
    rank: Rank, path: Path
) -> tuple[pd.DataFrame | None, pd.DataFrame | None, pd.DataFrame | None]:
    """The kernels, operators and steps of the timeline, read a batch of events at a time
    into column lists (a timeline of a long run is hundreds of MB)."""
    from advisor.formats.stream import EventStream  # the decoder loads with a timeline

    rows = _TimelineRows()
    stream = EventStream(path)
    try:
        for batch in stream:
            rows.add(batch)
    except UnreadableInput as exc:
        rank.warn(path, exc.problem, unread=True)
        return None, None, None
    if stream.truncated is not None:
        rank.warn(path, f"truncated timeline: {stream.truncated} events recovered")
    if rows.bad:
        rank.warn(path, f"{rows.bad} events without a name, ts or dur skipped")
    step_frame = None
    if rows.steps["step"]:
        step_frame = pd.DataFrame(rows.steps).drop_duplicates("step").sort_values("step")
        step_frame["end_us"] = step_frame["start_us"] + step_frame["duration_us"]
    kernels = rows.kernels
    if kernels["name"]:
        full = kernels.pop("op_full_name")  # split and typed once per operator, not per launch
        known = {
            name: (name.rsplit("/", 1)[-1], op_type(name) if name else None) for name in set(full)
        }
        kernels["op_name"] = [known[name][0] for name in full]
        kernels["op_type"] = [known[name][1] for name in full]
        kernels = {key: kernels[key] for key in _KERNEL_COLUMNS}
    return (
        _categorised(pd.DataFrame(kernels)) if kernels["name"] else None,
        pd.DataFrame(rows.ops) if rows.ops["name"] else None,
        step_frame,
    )


_KERNEL_COLUMNS = (
    "name",
    "op_name",
    "op_type",
    "core_type",
    "start_us",
    "duration_us",
    "stream",
    "kernel_kind",
    "block_threads",
    "grid_blocks",
)


class _TimelineRows:
    """The timeline's complete events sorted into kernels, operators and steps, as column
    lists: only these outlive a batch of decoded events."""

    def __init__(self) -> None:
        # op_name and op_type are made of op_full_name once all are read
        intake = ("name", "op_full_name", *_KERNEL_COLUMNS[3:])
        self.kernels: dict[str, list[Any]] = {key: [] for key in intake}
        self.ops: dict[str, list[Any]] = {"name": [], "kind": [], "start_us": [], "duration_us": []}
        self.steps: dict[str, list[Any]] = {"step": [], "start_us": [], "duration_us": []}
        self.bad = 0

    def add(self, events: list[Any]) -> None:
        for event in events:
            if not isinstance(event, dict) or event.get("ph") != "X":
                continue  # metadata (process and thread names)
            start, duration = finite_float(event.get("ts")), finite_float(event.get("dur"))
            name, tid, pid = event.get("name"), event.get("tid"), event.get("pid")
            if not isinstance(name, str) or start != start or duration != duration:
                self.bad += 1
                continue
            raw_args = event.get("args")
            args: dict[str, Any] = raw_args if isinstance(raw_args, dict) else {}
            if pid == _OVERLAP_PID or tid in _SCOPE_TIDS or "scope_level" in event:
                continue
            if tid in _STEPS_TIDS:
                if name.strip().isdigit():
                    _append(self.steps, int(name), start, duration)
                continue
            if "op_full_name" in args:
                match = _STREAM.fullmatch(str(tid))
                _append(  # the texts interned: a few kernels launched 100,000s of times
                    self.kernels,
                    intern(name),
                    intern(str(args.get("op_full_name") or "")),
                    "GPU",
                    start,
                    duration,
                    int(match[1]) if match else None,
                    intern(str(args.get("type") or "")),
                    dims_product(args.get("block_dim")),
                    dims_product(args.get("grid_dim")),
                )
            else:
                cpu = pid == _HOST_CPU_PID or tid in _HOST_CPU_TIDS
                _append(self.ops, intern(name), "cpu_kernel" if cpu else "aten", start, duration)


def _append(columns: dict[str, list[Any]], *values: Any) -> None:
    """One row's values, in the columns' order."""
    for column, value in zip_strict(columns.values(), values):
        column.append(value)


def _categorised(kernels: pd.DataFrame) -> pd.DataFrame:
    """category by CUDA activity: NCCL kernels communicate, memcpy/memset activities copy."""
    kind = kernels.pop("kernel_kind").str.lower()
    name = kernels["name"].str.lower()
    kernels["category"] = np.select(
        [name.str.startswith("nccl"), kind.str.contains("memcpy"), kind.str.contains("memset")],
        ["communication", "memcpy", "memset"],
        "compute",
    )
    return kernels


def _activity_totals(rank: Rank, path: Path) -> pd.DataFrame | None:
    """One row per kernel with its total time (MindSpore sums the kernel's launches)."""
    rank.profile.meta.files_read.append(path.name)
    read = rank.csv(path, ("name", "op_full_name", "total_duration(us)"))
    if read is None:
        return None
    _, df = read
    frame = pd.DataFrame(
        {
            "name": df["name"],
            "op_type": df["op_full_name"].map(op_type),
            "core_type": "GPU",
            "duration_us": rank.numbers(path, df, "total_duration(us)"),
            "category": np.where(
                df["name"].str.lower().str.startswith("nccl"), "communication", "compute"
            ),
        }
    )
    if "stream_id" in df.columns:
        frame["stream"] = rank.numbers(path, df, "stream_id")
    return frame


def _op_totals(rank: Rank, path: Path) -> pd.DataFrame | None:
    """One aggregated host_ops row per operator (count and total host time)."""
    rank.profile.meta.files_read.append(path.name)
    read = rank.csv(path, ("op_full_name", "op_occurrences", "op_total_time(us)"))
    if read is None:
        return None
    _, df = read
    return pd.DataFrame(
        {
            "name": df["op_full_name"],
            "kind": "aten",
            "duration_us": rank.numbers(path, df, "op_total_time(us)"),
            "count": rank.numbers(path, df, "op_occurrences"),
        }
    )


def _op_stats(rank: Rank, path: Path) -> None:
    rank.profile.meta.files_read.append(path.name)
    read = rank.csv(path, ("op_type", "type_occurrences", "total_time(us)"))
    if read is None:
        return
    _, df = read
    total = rank.numbers(path, df, "total_time(us)")
    count = rank.numbers(path, df, "type_occurrences")
    frame = pd.DataFrame(
        {
            "op_type": df["op_type"],
            "core_type": "GPU",
            "count": count,
            "total_us": total,
            "avg_us": total / count.where(count > 0),
            "ratio": total / total.sum() if total.sum() > 0 else np.nan,
        }
    )
    rank.profile.tables["op_stats"] = frame.dropna(subset=["count", "total_us"])
