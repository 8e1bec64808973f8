"""One read of one trace file: its events walked batch by batch, its header keys, the time
origin, and the tables."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import UnreadableInput
from advisor.formats import trace_index
from advisor.formats.parallel import read_in_parts
from advisor.formats.stream import (
    CHUNK_BYTES,  # the batch size, a module global for tests
    EventStream,
)
from advisor.formats.timebase import drop_far_times, far_warning
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta, conform
from advisor.progress import FileProgress

from .hints import GPU_WITHOUT_COPIES, UNLABELLED_COPIES
from .metadata import execution_mode, header_metadata
from .parts import merge_walks, walk_events
from .sniff import BLANK, file_size, read_head
from .tables import frames
from .values import int_or_none, json_number
from .walk import DECODER, EventWalk

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

READER = "kineto"
GZIP_CUT = "truncated or corrupt gzip data"  # EventStream's problem for a cut gzip file
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)


UNREAD_DEVICE_CATEGORIES = frozenset({"mtia_ccp_events"})
"""Trace categories of a device's own work that advisor has no reader for: a profile of
only host events from them would otherwise read as a CPU-only run with nothing to say."""


class TraceReader:
    """One `read()` of one trace file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.profile = Profile(
            ProfileMeta(
                source_format="kineto",
                path=str(path),
                framework="PyTorch",
                device_kind="CPU",
                files_read=[path.name],
            )
        )

    def warn(self, problem: str, zh: str = "") -> None:
        self.profile.warn(self.path.name, problem, reader=READER, zh=zh)

    def read(self) -> Profile:
        path = self.path
        if path.is_dir():
            raise UnreadableInput(path, "a directory, not a trace file")
        if read_head(path).lstrip(BLANK).startswith(b"["):
            raise UnreadableInput(
                path,
                "a bare list of events, not a PyTorch profiler trace (an Ascend trace_view.json?)",
            )
        walk = EventWalk()
        progress = FileProgress(path.name, file_size(path))
        stream = EventStream(path, progress, chunk_bytes=CHUNK_BYTES, decode=DECODER.decode)
        gzip_cut = False
        try:
            parts = read_in_parts(
                path,
                DECODER.decode,
                walk_events,
                merge_walks,
                progress=progress,
                chunk_bytes=CHUNK_BYTES,
            )
            if parts is not None:  # a large file, decoded on several cores
                walk, stream.header, stream.events = parts.state, parts.header, parts.events
                stream.spans = parts.spans
            else:
                for batch in stream:
                    walk.walk(batch)
                    # The stream's generator still holds this list while it decodes the next
                    # batch: empty it so that its events are freed now.
                    batch.clear()
        except UnreadableInput as exc:
            # A cut gzip file ends the stream with an error: keep the batches walked so far.
            if exc.problem != GZIP_CUT or not stream.events:
                raise
            gzip_cut = True
        finally:
            progress.close()
        if not stream.events:
            raise UnreadableInput(path, "traceEvents is empty")
        header = stream.header
        if gzip_cut:
            self.warn("truncated gzip data: read what was written before the cut")
            self.warn(f"truncated trace: {stream.events} events recovered")
        elif stream.truncated is not None:
            self.warn(f"truncated trace: {stream.truncated} events recovered")
        if stream.non_finite:
            self.warn(
                "the trace holds NaN or Infinity, which is not valid JSON: read with "
                "the standard parser; those values are treated as missing"
            )
        self._meta(header)
        self._finish(header, walk)
        trace_index.record(self.profile.meta, path, stream.spans, walk.batch_times)
        return self.profile

    # -- header keys -----------------------------------------------------------------------

    def _meta(self, doc: dict[str, Any]) -> None:
        meta = self.profile.meta
        for key, value in doc.items():
            if key == "schemaVersion" or (key.endswith("_version") and value is not None):
                meta.versions[key] = str(value)
        info = doc.get("distributedInfo")
        if isinstance(info, dict):
            rank, world = int_or_none(info.get("rank")), int_or_none(info.get("world_size"))
            meta.rank = rank
            meta.world_size = world
            for key in ("backend", "pg_count"):
                if info.get(key) is not None:
                    meta.extra[key] = info[key]
            if info.get("nccl_version") is not None:
                meta.versions["nccl_version"] = str(info["nccl_version"])
        else:
            self.warn(
                "no distributedInfo: rank and world size unknown",
                "没有 distributedInfo：rank 和 world size 未知",
            )
        if meta.rank is None:
            match = _RANK_IN_NAME.search(self.path.name)
            if match:
                meta.rank = int(match.group(1))
                meta.extra["rank_from"] = "file name"
        for key in ("traceName", "displayTimeUnit", "trace_id", "host_name"):
            if isinstance(doc.get(key), (str, int, float)):
                meta.extra[key] = doc[key]

    def _finish(self, doc: dict[str, Any], walk: EventWalk) -> None:
        meta = self.profile.meta
        if walk.no_dur:
            self.warn(f"{walk.no_dur} complete events without a valid duration (dur) skipped")
        if walk.no_ts:
            self.warn(f"{walk.no_ts} events without a valid timestamp (ts) skipped")
        if walk.not_events:
            self.warn(f"{walk.not_events} entries of traceEvents are not event objects; skipped")
        unread = sorted({str(c) for c in walk.cats if str(c).lower() in UNREAD_DEVICE_CATEGORIES})
        if unread:
            self.warn(
                f"device activity advisor does not read ({', '.join(unread)}: Meta's MTIA "
                "accelerator): the findings leave that device's work out",
                f"advisor 不读取的设备活动（{', '.join(unread)}：Meta 的 MTIA 加速器）：各项发现"
                "不包含该设备上的工作",
            )
        properties = _device_properties(doc)
        device_pid = walk.main_device()
        if walk.device_names or properties:
            meta.device_kind = "GPU"
        if walk.device_names:  # the GPU was profiled: a gap in copies is no missing activity
            host_copies = any(kind in ("HtoD", "DtoH") for _, _, _, kind, _ in walk.device_names)
            meta.collect["device_ops.host_memory"] = (
                UNLABELLED_COPIES if host_copies else GPU_WITHOUT_COPIES
            )
        if device_pid is not None:
            meta.device_id = str(device_pid)
        chosen = properties.get(device_pid) or next(iter(properties.values()), None)
        if chosen and isinstance(chosen.get("name"), str):
            meta.device_name = chosen["name"]
        if walk.runtime_families:
            meta.extra["gpu_runtime"] = "/".join(sorted(walk.runtime_families))
        if walk.threads:
            meta.extra["threads"] = {str(k): v for k, v in walk.threads.items()}
        host_pid = next(
            (pid for pid, label in walk.process_labels.items() if label == "CPU"),
            next(iter(walk.process_names), None),
        )
        if host_pid in walk.process_names:
            meta.extra["process_name"] = walk.process_names[host_pid]

        base_ns = json_number(doc.get("baseTimeNanoseconds"))
        origin, centre = walk.earliest()
        if origin is not None:
            meta.extra["time_origin_us"] = origin + (base_ns / 1000.0 if base_ns else 0.0)
            meta.extra["trace_ts_origin"] = origin  # the file's own ts at time 0 (snippets)
            meta.extra["time_base"] = (
                "relative to baseTimeNanoseconds" if base_ns else "epoch microseconds"
            )
        tables = frames(walk, origin or 0.0, properties)
        if centre is not None:
            far = drop_far_times(tables, TIME_COLUMNS, centre - (origin or 0.0))
            if far:
                self.warn(far_warning(far, origin or 0.0))
        if "steps" not in tables and "device_ops" in tables:
            window = device_window(tables["device_ops"])
            if window is not None:
                tables["steps"] = window
                span = f"{float(window['duration_us'].iloc[0]) / 1000:,.1f} ms"
                self.warn(
                    f"no ProfilerStep in the trace: the device's span ({span}, first kernel "
                    "to last) stands in for one step, so idle and per-step figures are for "
                    "that window",
                    f"trace 中没有 ProfilerStep：以设备的时间跨度（{span}，从第一个 kernel 到"
                    "最后一个）代替一个迭代，因此空闲时间和逐迭代的数值都针对这段时间",
                )
        execution = execution_mode(tables)
        if execution is not None:
            meta.extra["execution"] = execution
        metadata = header_metadata(doc, chosen, self.path.name, meta.extra.get("execution"))
        if metadata is not None:
            tables["metadata"] = metadata
        self.profile.tables = {name: conform(name, frame) for name, frame in tables.items()}


TIME_COLUMNS = {
    "steps": ("start_us", "end_us"),
    "device_ops": ("start_us",),
    "host_ops": ("start_us",),
    "comm_ops": ("start_us",),
    "memory": ("time_us",),
}


def device_window(device_ops: pd.DataFrame) -> pd.DataFrame | None:
    """One step from the first device task's start to the last one's end: the window a trace
    without ProfilerStep (inference, eager decoding, a custom loop) is judged over, so that a
    GPU busy 12% of the time still gets its idle and host-bound findings."""
    start = device_ops["start_us"]
    end = (start + device_ops["duration_us"]).max()
    if start.isna().all() or not end > start.min():
        return None
    return pd.DataFrame(
        {
            "step": [1],
            "start_us": [float(start.min())],
            "end_us": [float(end)],
            "duration_us": [float(end - start.min())],
        }
    )


def _device_properties(doc: dict[str, Any]) -> dict[Any, dict[str, Any]]:
    """deviceProperties (or the 2021 computeProperties) by device id."""
    found: dict[Any, dict[str, Any]] = {}
    for key in ("deviceProperties", "computeProperties"):
        entries = doc.get(key)
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            if isinstance(entry, dict):
                device = int_or_none(entry.get("id"))
                found.setdefault(index if device is None else device, entry)
    return found
