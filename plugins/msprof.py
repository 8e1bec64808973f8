"""Reader for CANN msprof exports (`PROF_*` folders): one Profile per device.

Sources, in priority order for each device:

1. CANN 8.x merged summaries, `mindstudio_profiler_output/*.csv` (rows split by `Device_id`),
2. 6.3-7.x per-device summaries, `device_N/summary/*.csv`,
3. raw-export timelines, `device_N/timeline/{step_trace,task_time,hccl,msprof}_*.json`, with
   `msprof_*.json` used only for the tables the specific files do not give.

Summary CSVs read: op_summary (else task_time), step_trace, op_statistic, api_statistic, and the
data queues of TensorFlow/data-sink runs (formats.md §4.3): `aicpu_mi` (the device queue GetNext
reads: size per read, read time as the wait) and `dp` (the host's cached buffer of prepared
batches) -> queues rows `device` and `host`, numbered per device in file order.

All times are microseconds. Each profile is rebased to its earliest timestamp by a float64
subtraction after parsing: float64 keeps ~1e-5 µs at the ~1e11 µs of msprof's monotonic clock
and 0.25 µs at the ~1.7e15 µs of wall-clock (epoch) stamps in CANN 8.x CSVs. Durations always
come from their own columns, so only start times can move, by at most 0.125 µs. The original
origin is kept in `meta.extra["time_origin_us"]`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from advisor.errors import UnreadableInput
from advisor.formats.cann_comm import comm_as_device_ops, comm_from_columns
from advisor.formats.cann_csv import (
    DEVICE_COLUMN,
    CsvKind,
    SummaryCsv,
    frame_of,
    read_summary_table,
)
from advisor.formats.cann_exports import Superseded, select_exports
from advisor.formats.cann_summaries import API_STATISTIC, OP_STATISTIC, OP_SUMMARY
from advisor.formats.cann_tasks import op_type, task_categories, task_category, with_wait
from advisor.formats.chrome_trace import Trace
from advisor.formats.files import files_with_suffix, load_json
from advisor.formats.numbers import int_or_none
from advisor.formats.numbers import trace_number as _f
from advisor.formats.timebase import drop_far_times, far_warning, robust_origin
from advisor.formats.warn import WarnFn
from advisor.hookspecs import hookimpl
from advisor.model import Profile, ProfileMeta, conform

READER = "msprof"
MERGED_DIR = "mindstudio_profiler_output"
EXPORT_HINT = "run `msprof --export=on --output=<path>` first"
TIME_COLUMNS = {"steps": ("start_us", "end_us"), "device_ops": ("start_us",),
                "host_ops": ("start_us",), "comm_ops": ("start_us",), "queues": ("time_us",)}


# ---------------------------------------------------------------------------------------------
# Plugin entry points


class MsprofReader:
    """Reads a `PROF_*` folder written by msprof (CANN 6.3 to 8.x)."""

    name = "msprof"
    formats = ("CANN msprof export (PROF_XXX)",)
    collect = {
        "steps": 'training_trace "on" in the profiling options (step_trace)',
        **dict.fromkeys(("device_ops", "device_ops.start_us"),
                        'task_trace "on" in the profiling options (op_summary / task_time)'),
        **{f"device_ops.{c}": 'aic_metrics "PipeUtilization" in the profiling options'
           for c in ("aicore_time_us", "vec_ratio", "mac_ratio", "scalar_ratio", "mte2_ratio")},
        "comm_ops": "profile the distributed job (HCCL data: hccl_* files)",
    }
    """How to make msprof record what a rule lacks (see Reader.collect)."""

    def detect(self, path: Path) -> bool:
        """A PROF folder by name or by its export sub-folders; directory listings only."""
        path = Path(path)
        if not path.is_dir():
            return False
        if path.name.startswith("PROF_") or (path / MERGED_DIR).is_dir():
            return True
        return any(sub.is_dir() for device in _device_dirs(path)
                   for sub in (device / "summary", device / "timeline", device / "data"))

    def read(self, path: Path) -> list[Profile]:
        return _ExportReader(Path(path)).read()


@hookimpl
def advisor_readers() -> list[MsprofReader]:
    return [MsprofReader()]


# ---------------------------------------------------------------------------------------------
# Reading one PROF folder


@dataclass
class _Device:
    """What has been read so far for one device."""

    profile: Profile
    parts: dict[str, list[pd.DataFrame]] = field(default_factory=dict)
    kinds: set[str] = field(default_factory=set)  # summary file types read

    def add(self, table: str, frame: pd.DataFrame, files: Iterable[str]) -> None:
        if frame.empty:
            return
        self.parts.setdefault(table, []).append(frame)
        read = self.profile.meta.files_read
        read += [rel for rel in files if rel not in read]


@dataclass(frozen=True)
class _Note:
    """A warning not yet attached to a profile (merged files belong to every device)."""

    file: str
    problem: str
    line: int | None = None
    column: str | None = None


class _ExportReader:
    """One `read()` of one PROF folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.devices: dict[str, _Device] = {}
        self.shared: list[_Note] = []  # problems of merged files, reported on every device
        self.raw_only: list[str] = []  # devices with undecoded data and no export
        self.exports_found = False

    # -- orchestration ------------------------------------------------------------------------

    def read(self) -> list[Profile]:
        if not self.root.is_dir():
            raise UnreadableInput(self.root, "not a directory")
        self._read_merged()
        for folder in _device_dirs(self.root):
            self._read_device_dir(folder)
        return self._finish()

    def _finish(self) -> list[Profile]:
        if not any(dev.parts for dev in self.devices.values()):
            if self.raw_only and not self.exports_found:
                raise UnreadableInput(self.root, f"only undecoded raw data found; {EXPORT_HINT}")
            problems = "; ".join(f"{n.file}: {n.problem}" for n in self._all_notes()[:3])
            looked = (f"{MERGED_DIR}/*.csv, device_*/summary/*.csv and "
                      f"device_*/timeline/*.json")
            raise UnreadableInput(self.root, f"no readable msprof export ({problems})" if problems
                                  else f"no msprof export found (looked for {looked})")
        for device_id in self.raw_only:
            self._device(device_id).profile.warn(
                f"device_{device_id}/data", f"only undecoded raw data found; {EXPORT_HINT}",
                reader=READER)
        profiles = []
        for device_id in sorted(self.devices, key=_device_sort_key):
            dev = self.devices[device_id]
            for note in self.shared:
                dev.profile.warn(note.file, note.problem, line=note.line, column=note.column,
                                 reader=READER)
            profiles.append(_build_profile(dev))
        return profiles

    def _all_notes(self) -> list[_Note]:
        notes = list(self.shared)
        for dev in self.devices.values():
            notes += [_Note(w.file, w.problem) for w in dev.profile.warnings]
        return notes

    def _device(self, device_id: str) -> _Device:
        if device_id not in self.devices:
            meta = ProfileMeta(source_format="msprof-summary", path=str(self.root),
                               framework="CANN", device_kind="NPU", device_id=device_id)
            dev = _Device(Profile(meta))
            self.devices[device_id] = dev
            self._read_info(dev)
        return self.devices[device_id]

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # -- CANN 8.x merged summaries -------------------------------------------------------------

    def _read_merged(self) -> None:
        """Merged CSVs: every row carries its device in `Device_id` (`host` for host rows)."""
        chosen, superseded = select_exports(files_with_suffix(self.root / MERGED_DIR, ".csv"))
        self.exports_found |= bool(chosen)
        for old in superseded:
            self._shared_warn(old.ignored[0].relative_to(self.root), self._superseded(old))
        host_parts: list[tuple[str, pd.DataFrame, str]] = []
        for kind, files in _in_read_order(chosen):
            for path in files:
                rel = self._rel(path)
                frame = read_csv_table(kind, path, rel, self._shared_warn)
                if frame is None:
                    continue
                for device_id, rows in _split_devices(frame, rel, self._shared_warn):
                    if device_id == "host":
                        host_parts.append((_CSV_TABLES[kind].table, rows, rel))
                    else:
                        self._add_csv_rows(self._device(device_id), kind, rows, rel)
        self._share_host_rows(host_parts)

    def _share_host_rows(self, host_parts: list[tuple[str, pd.DataFrame, str]]) -> None:
        """Host API statistics (`Device_id` = host) belong to the process driving every device.

        Host rows of other tables have no device to go to and are left out.
        """
        for table, rows, rel in host_parts:
            if table != "host_ops":
                continue
            for dev in self.devices.values():
                dev.add(table, rows, [rel])

    def _shared_warn(self, file: str | Path, problem: str, *, line: int | None = None,
                     column: str | None = None) -> None:
        self.shared.append(_Note(str(file), problem, line, column))

    # -- per-device folders --------------------------------------------------------------------

    def _read_device_dir(self, folder: Path) -> None:
        device_id = folder.name.removeprefix("device_")
        if self._device_has_tables(device_id):
            return  # the merged summaries already cover this device
        summaries = files_with_suffix(folder / "summary", ".csv")
        timelines = files_with_suffix(folder / "timeline", ".json")
        self.exports_found |= bool(summaries or timelines)
        if summaries:
            self._read_summary_dir(self._device(device_id), summaries)
        if timelines and not self._device_has_tables(device_id):
            self._read_timeline_dir(self._device(device_id), timelines)
        if not summaries and not timelines and _has_files(folder / "data"):
            self.raw_only.append(device_id)

    def _device_has_tables(self, device_id: str) -> bool:
        return device_id in self.devices and bool(self.devices[device_id].parts)

    def _read_summary_dir(self, dev: _Device, files: list[Path]) -> None:
        """6.3-7.x per-device CSVs; the device comes from the folder name."""
        chosen, superseded = select_exports(files)
        warn = _profile_warn(dev.profile)
        for old in superseded:
            warn(self._rel(old.ignored[0]), self._superseded(old))
        for kind, paths in _in_read_order(chosen):
            for path in paths:
                rel = self._rel(path)
                frame = read_csv_table(kind, path, rel, warn)
                if frame is not None:
                    self._add_csv_rows(dev, kind, frame, rel)

    def _add_csv_rows(self, dev: _Device, kind: str, rows: pd.DataFrame, rel: str) -> None:
        if kind == "task_time" and "op_summary" in dev.kinds:
            return  # op_summary already lists the same tasks, with more columns
        dev.kinds.add(kind)
        dev.add(_CSV_TABLES[kind].table, rows, [rel])

    def _read_timeline_dir(self, dev: _Device, files: list[Path]) -> None:
        """Raw-export timeline JSONs, for a device without summary CSVs."""
        dev.profile.meta.source_format = "msprof-timeline"
        chosen, superseded = select_exports(files)
        warn = _profile_warn(dev.profile)
        for old in superseded:
            warn(self._rel(old.ignored[0]), self._superseded(old))

        def load(kind: str) -> Trace | None:
            return self._load_trace(chosen.get(kind, []), warn)

        for table, (frame, kind) in _timeline_tables(load).items():
            dev.add(table, frame, [self._rel(path) for path in chosen.get(kind, [])])

    def _load_trace(self, files: list[Path], warn: WarnFn) -> Trace | None:
        """Concatenate the events of a timeline's slices; None when no slice was readable."""
        events: list[dict[str, Any]] = []
        read_any = False
        for path in files:
            rel = self._rel(path)
            try:
                data = load_json(path)
            except UnreadableInput as exc:
                warn(rel, exc.problem)
                continue
            if isinstance(data, dict):
                data = data.get("traceEvents")
            if not isinstance(data, list):
                warn(rel, "not a list of trace events")
                continue
            events += [e for e in data if isinstance(e, dict)]
            read_any = True
        return Trace(events) if read_any else None

    def _superseded(self, old: Superseded) -> str:
        ignored = ", ".join(self._rel(p) for p in old.ignored)
        kept = ", ".join(self._rel(p) for p in old.kept)
        return f"older export of {old.type} ignored ({ignored}); read the newest ({kept})"

    # -- info.json ----------------------------------------------------------------------------

    def _read_info(self, dev: _Device) -> None:
        """Chip facts (AI Core count, frequencies) rules need, from `info.json.N`."""
        device_id = dev.profile.meta.device_id
        folder = self.root / f"device_{device_id}"
        path = next((p for p in (folder / f"info.json.{device_id}", folder / "info.json")
                     if p.is_file()), None)
        if path is None:
            return
        try:
            info = load_json(path)
        except UnreadableInput as exc:
            dev.profile.warn(self._rel(path), exc.problem, reader=READER)
            return
        if isinstance(info, dict):
            _apply_info(dev.profile.meta, info, device_id)


# ---------------------------------------------------------------------------------------------
# Small helpers of the folder walk


def _device_dirs(root: Path) -> list[Path]:
    return sorted((p for p in root.glob("device_*")
                   if p.is_dir() and p.name.removeprefix("device_").isdigit()),
                  key=lambda p: int(p.name.removeprefix("device_")))


def _device_sort_key(device_id: str) -> tuple[int, str]:
    return (int(device_id), "") if device_id.isdigit() else (1 << 30, device_id)


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(p.is_file() for p in folder.iterdir())


def _profile_warn(profile: Profile) -> WarnFn:
    def warn(file: str | Path, problem: str, *, line: int | None = None,
             column: str | None = None) -> None:
        profile.warn(file, problem, line=line, column=column, reader=READER)

    return warn


def _apply_info(meta: ProfileMeta, info: dict[str, Any], device_id: str | None) -> None:
    devices = info.get("DeviceInfo")
    devices = devices if isinstance(devices, list) else []
    entry = next((d for d in devices if isinstance(d, dict) and str(d.get("id")) == device_id),
                 devices[0] if devices and isinstance(devices[0], dict) else {})
    for key in ("ai_core_num", "aiv_num", "ai_cpu_core_num", "aic_frequency", "aiv_frequency",
                "hwts_frequency"):
        if key in entry:
            meta.extra[key] = _number_or_text(entry[key])
    for key, name in (("platform_version", "platform"), ("version", "info_json")):
        if info.get(key) not in (None, ""):
            meta.versions[name] = str(info[key])
    rank = info.get("rank_id")
    if isinstance(rank, int) and rank >= 0:
        meta.rank = rank


def _number_or_text(value: Any) -> Any:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return int(number) if number.is_integer() else number


def _in_read_order(chosen: dict[str, list[Path]]) -> list[tuple[str, list[Path]]]:
    """op_summary before task_time: task_time is read only for devices lacking op_summary."""
    return [(kind, chosen[kind]) for kind in _CSV_TABLES if kind in chosen]


# ---------------------------------------------------------------------------------------------
# Summary CSVs: one function per file type


def _steps_from_step_trace(csv: SummaryCsv) -> pd.DataFrame:
    end = csv.number("Iteration End(us)")
    duration = csv.number("Iteration Time(us)")
    reduces = [csv.number(c) for c in csv.copies("Reduce Duration(us)")]
    return frame_of({
        "step": csv.number("Iteration ID"),
        "start_us": end - duration,
        "end_us": end,
        "duration_us": duration,
        "fp_bp_us": csv.number("FP to BP Time(us)"),
        "grad_refresh_us": csv.number(csv.first("Iteration Refresh(us)",
                                                "Grad Refresh Bound(us)")),
        "data_aug_bound_us": csv.number("Data Aug Bound(us)"),
        # `N/A` in a reduce group means the iteration had fewer groups: it adds nothing.
        "reduce_us": pd.concat(reduces, axis=1).sum(axis=1) if reduces else None,
        "model_id": csv.number("Model ID"),
    })


_KERNEL_TYPES = {"KERNEL_AICORE": "AI_CORE", "KERNEL_AICPU": "AI_CPU"}


def _device_ops_from_task_time(csv: SummaryCsv) -> pd.DataFrame:
    kernel_type = csv.text("kernel_type").fillna("UNKNOWN")
    core_type = kernel_type.map(lambda t: _KERNEL_TYPES.get(t, t))
    return frame_of({
        "name": csv.text("kernel_name").fillna(kernel_type),  # N/A names: non-kernel tasks
        "core_type": core_type,
        "start_us": csv.number("task_start(us)"),
        "duration_us": csv.number("task_time(us)"),
        "stream": csv.number("stream_id"),
        "task_id": csv.number("task_id"),
        "category": task_categories(core_type),
    })


def _sample_numbers(csv: SummaryCsv) -> pd.Series:
    """1, 2, ... per device in file order: a merged CSV interleaves the rows of devices."""
    devices = csv.text("Device_id")
    key = devices.fillna("") if devices is not None else pd.Series("", index=csv.df.index)
    return key.groupby(key).cumcount() + 1


def _queues_from_aicpu_mi(csv: SummaryCsv) -> pd.DataFrame:
    """Data-preparation queue read by GetNext on the device (data sink with AI CPU): one row
    per read, as MindSpore's `minddata_aicpu` samples, so DATA-002/004 apply."""
    start = csv.number("Start Time(us)")
    size = csv.number("Queue Size")
    return frame_of({"queue": pd.Series("device", index=csv.df.index),
                   "step": _sample_numbers(csv), "size": size, "empty": size == 0,
                   "time_us": start, "wait_us": csv.number("End Time(us)") - start})


def _queues_from_dp(csv: SummaryCsv) -> pd.DataFrame:
    """TensorFlow data-preprocess offload: the host's cached buffer of prepared batches, one
    sample per event; an empty buffer means the host pipeline had nothing ready (DATA-001)."""
    size = csv.number("Cached Buffer Size")
    return frame_of({"queue": pd.Series("host", index=csv.df.index),
                   "step": _sample_numbers(csv), "size": size, "empty": size == 0,
                   "time_us": csv.number("Timestamp(us)")})


# Read order matters: op_summary before task_time (see `_add_csv_rows`).
_CSV_TABLES: dict[str, CsvKind] = {
    "op_summary": OP_SUMMARY,
    "task_time": CsvKind("device_ops", ("kernel_name", "kernel_type", "task_time(us)"),
                          _device_ops_from_task_time),
    "step_trace": CsvKind("steps", ("Iteration ID", "Iteration End(us)", "Iteration Time(us)"),
                           _steps_from_step_trace),
    "op_statistic": OP_STATISTIC,
    "api_statistic": API_STATISTIC,
    "aicpu_mi": CsvKind("queues", ("Start Time(us)", "End Time(us)", "Queue Size"),
                         _queues_from_aicpu_mi),
    "dp": CsvKind("queues", ("Timestamp(us)", "Cached Buffer Size"), _queues_from_dp),
}


def read_csv_table(kind: str, path: Path, rel: str, warn: WarnFn) -> pd.DataFrame | None:
    """Read one summary CSV of a known kind; warn and return None when it is unusable."""
    return read_summary_table(_CSV_TABLES[kind], path, rel, warn)


def _split_devices(frame: pd.DataFrame, rel: str,
                   warn: WarnFn) -> Iterable[tuple[str, pd.DataFrame]]:
    """Rows of a merged CSV per `Device_id`; rows without one are reported and dropped."""
    if DEVICE_COLUMN not in frame:
        warn(rel, "missing column 'Device_id' (needed to split merged summaries per device)",
             column="Device_id")
        return []
    ids = frame[DEVICE_COLUMN]
    # a cell that is neither a number nor `host` (a corrupt row) names no device either
    ids = ids.where(ids.astype("string").str.fullmatch(r"\d{1,9}|host").fillna(False))
    frame = frame.assign(**{DEVICE_COLUMN: ids})
    if ids.isna().any():
        warn(rel, f"{int(ids.isna().sum())} rows without a Device_id ignored",
             line=int(np.argmax(ids.isna().to_numpy())) + 2, column="Device_id")
    return [(str(device_id), rows.reset_index(drop=True))
            for device_id, rows in frame.groupby(DEVICE_COLUMN, sort=False)]


# ---------------------------------------------------------------------------------------------
# Timeline JSONs (Chrome trace lists)


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
_STEP_DURATIONS = {"Iteration Time": "duration_us", "FP_BP Time": "fp_bp_us",
                   "Iteration Refresh": "grad_refresh_us"}
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
    steps = [dict(r, step=step, model_id=model) for (model, step), r in rows.items()
             if "start_us" in r]
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
        rows.append({"name": str(e.get("name", "")), "op_type": op_type(e.get("name", "")),
                     "core_type": core_type, "category": task_category(core_type),
                     "start_us": _f(e.get("ts")), "duration_us": _f(e.get("dur")),
                     "stream": stream, "task_id": int_or_none(args.get("Task Id"))})
    return pd.DataFrame(rows) if rows else None


def comm_from_trace(trace: Trace) -> tuple[pd.DataFrame | None, set[int]]:
    """Communication ops, and the device streams the collectives ran on.

    Op-level events sit on the communication-op thread (`Communication Kernel`, or `Group
    <name> Communication` in newer exports); the per-plane tasks (`Plane k` threads: Notify,
    Memcpy, Reduce_Inline) are not ops, they only give the transport and the streams.
    """
    tasks = [e for e in trace.complete() if "transport type" in (e.get("args") or {})]
    ops = [e for e in trace.complete(re.compile("Communication"))
           if "transport type" not in (e.get("args") or {})]
    return comm_from_columns(
        pd.DataFrame({"name": pd.Series([str(e.get("name", "")) for e in ops], dtype=object),
                      "start_us": pd.Series([e.get("ts") for e in ops], dtype=object),
                      "duration_us": pd.Series([e.get("dur") for e in ops], dtype=object),
                      "thread": pd.Series([trace.thread_name(e) for e in ops], dtype=object)}),
        pd.DataFrame({"start_us": pd.Series([e.get("ts") for e in tasks], dtype=object),
                      "transport": pd.Series([str(e["args"]["transport type"]) for e in tasks],
                                             dtype=object),
                      "stream": pd.Series([e["args"].get("stream id") for e in tasks],
                                          dtype=object),
                      "bytes": pd.Series([e["args"].get("size(Byte)") for e in tasks],
                                         dtype=object)}))


def _host_ops_from_trace(trace: Trace) -> pd.DataFrame | None:
    """CANN API calls (`AscendCL@aclrtSynchronizeStream`, `GE@Infer`): level before the `@`."""
    rows = []
    for e in trace.complete():
        level, _, api = str(e.get("name", "")).rpartition("@")
        rows.append({"name": api, "kind": "cann_api", "level": level or None,
                     "start_us": _f(e.get("ts")), "duration_us": _f(e.get("dur")),
                     "thread": int_or_none(e.get("tid"))})
    return pd.DataFrame(rows) if rows else None


def _timeline_tables(load: Callable[[str], Trace | None]
                     ) -> dict[str, tuple[pd.DataFrame, str]]:
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
    if "comm_ops" in tables and "device_ops" in tables:
        ops, kind = tables["device_ops"]
        comm_rows = comm_as_device_ops(tables["comm_ops"][0])
        tables["device_ops"] = (pd.concat([ops, comm_rows], ignore_index=True), kind)
    return tables


# ---------------------------------------------------------------------------------------------
# Building the normalized profile


def _build_profile(dev: _Device) -> Profile:
    """Concatenate the parts, fill derived columns, rebase time, cast to the contract."""
    profile = dev.profile
    tables = {name: pd.concat(parts, ignore_index=True) for name, parts in dev.parts.items()}
    origin = None
    times = [tables[name][c].to_numpy("float64", na_value=np.nan)
             for name, columns in TIME_COLUMNS.items() if name in tables
             for c in columns if c in tables[name]]
    times = np.concatenate(times) if times else np.empty(0)
    times = times[np.isfinite(times)]
    if times.size:  # one broken far-off time must not become the origin
        origin, centre = robust_origin(times)
        far = drop_far_times(tables, TIME_COLUMNS, centre)
        if far:
            profile.warn(Path(profile.meta.path).name, far_warning(far, 0.0), reader=READER)
    if "device_ops" in tables:
        tables["device_ops"] = with_wait(tables["device_ops"])
    if origin is not None:
        profile.meta.extra["time_origin_us"] = origin
        for name, columns in TIME_COLUMNS.items():
            if name in tables:
                tables[name] = tables[name].assign(
                    **{c: tables[name][c] - origin for c in columns if c in tables[name]})
    profile.tables = {name: conform(name, frame) for name, frame in tables.items()}
    return profile
