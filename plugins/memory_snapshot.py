"""Reader for PyTorch allocator snapshots: `torch.cuda.memory._dump_snapshot()` and torch_npu's
`torch_npu.npu.memory._dump_snapshot()` pickles (what memory_viz and MindStudio Insight open).

A snapshot is a dict of plain values: `segments` (the allocator's segments when it was taken,
each with `device`, `total_size` (reserved), `allocated_size`, `active_size`,
`requested_size`, `is_expandable` and its `blocks`) and `device_traces` (one list per device
of the allocator's recorded history, oldest first: `alloc`, `free_requested`,
`free_completed`, `segment_alloc` / `segment_free`, `segment_map` / `segment_unmap` for
expandable segments, `oom` (with `device_free`), each with `addr`, `size` and the `frames`
that made it, innermost first: Python, and C++ where recorded with stacks="all"). The
history is a ring buffer (`max_entries`), so it may start mid-run; walking it backwards from
the segments' totals gives the allocated and reserved memory at every entry, and its peaks,
without knowing where it began.

A snapshot may be gzipped (`*.pkl.gz`, inflated within `advisor.formats.files.Limits`). The
pickle is loaded by an unpickler that refuses every Python object (find_class raises):
a snapshot holds only dicts, lists, tuples, text and numbers, and a file naming a class or a
function is refused rather than run.
"""

from __future__ import annotations

import io
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.errors import UnreadableInput
from advisor.hookspecs import hookimpl
from advisor.model import Profile, ProfileMeta, conform_records

SUFFIXES = (".pickle", ".pkl", ".pickle.gz", ".pkl.gz")
_NPU_MARKS = ("torch_npu", "c10_npu::", "NPUCachingAllocator")
_GPU_MARKS = ("torch/cuda/", "c10::cuda::", "CUDACachingAllocator")
_AUTOGRAD_NODE = re.compile(r"torch::autograd::generated::(\w+)::apply")
_ATEN_OP = re.compile(r"at::_ops::(\w+)::call\b")
HEAD_BYTES = 64
PROTOCOLS = (b"\x02", b"\x03", b"\x04", b"\x05")
NO_STACK = "(no Python stack recorded)"
_LIBRARY_PARTS = ("site-packages", "dist-packages", "/lib/python", "\\lib\\python", "<frozen")
_ALLOCATOR_COLUMNS = (
    "device",
    "segments",
    "expandable_segments",
    "reserved_bytes",
    "allocated_bytes",
    "active_bytes",
    "requested_bytes",
    "largest_free_block_bytes",
    "history_entries",
    "history_from_start",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "reserved_at_allocated_peak_bytes",
)
_OOM_COLUMNS = (
    "order",
    "time_us",
    "device",
    "request_bytes",
    "allocated_bytes",
    "reserved_bytes",
    "device_free_bytes",
)
_SITE_COLUMNS = (
    "site",
    "device",
    "allocations",
    "frees",
    "held_blocks",
    "held_bytes",
    "held_share",
    "held_points",
    "held_span",
    "largest_held_bytes",
    "held_at_peak_bytes",
    "held_at_oom_bytes",
)


class _NamesObject(Exception):
    """The pickle names a class or a function: not a snapshot, and never to be run."""


class MemorySnapshotReader:
    """Reads one allocator snapshot pickle into `allocator_state` and `allocation_sites`."""

    name = "memory_snapshot"
    formats = (
        "PyTorch / torch_npu memory snapshot (_dump_snapshot() *.pickle, *.pkl; gzipped too)",
    )
    collect = {
        "allocation_sites": "record the allocator's history before taking the snapshot: "
        "torch.cuda.memory._record_memory_history() (torch_npu.npu.memory."
        "_record_memory_history() on Ascend)"
    }
    collect_zh = {
        collect["allocation_sites"]: "在取快照之前记录分配器历史："
        "torch.cuda.memory._record_memory_history()（昇腾上用 torch_npu.npu.memory."
        "_record_memory_history()）"
    }

    def detect(self, path: Path) -> bool:
        """A .pickle / .pkl file with a pickle protocol 2-5 header whose first key is
        `segments` (torch pickles the snapshot dict in that order): other pickles lying in a
        profile's folder (a dataset, a checkpoint) are left alone."""
        path = Path(path)
        if not path.name.lower().endswith(SUFFIXES) or not path.is_file():
            return False
        from advisor.formats.files import read_head  # not for `rules list`

        head = read_head(path, HEAD_BYTES)  # b"" for a .gz that is not gzip data
        return head[:1] == b"\x80" and head[1:2] in PROTOCOLS and b"segments" in head

    def read(self, path: Path) -> list[Profile]:
        path = Path(path)
        snapshot = _load(path)
        segments, traces = _parts(path, snapshot)
        meta = ProfileMeta(
            "memory-snapshot",
            str(path),
            framework="PyTorch",
            device_kind=_device_kind(segments, traces),
            files_read=[str(path)],
        )
        profile = Profile(meta)
        devices = sorted({_device(s) for s in segments} | {d for d, t in enumerate(traces) if t})
        states: list[dict[str, Any]] = []
        sites: list[dict[str, Any]] = []
        ooms: list[dict[str, Any]] = []
        for device in devices:
            own = [s for s in segments if _device(s) == device]
            history = traces[device] if device < len(traces) else []
            replay = _Replay.of(own, history)
            states.append(_allocator_row(device, own, history, replay))
            sites.extend(replay.site_rows(device))
            ooms.extend(replay.oom_rows(device, history))
        profile.tables["allocator_state"] = conform_records(
            "allocator_state", states, _ALLOCATOR_COLUMNS
        )
        if any(traces):  # the history records every out-of-memory error: none is none
            profile.tables["oom_events"] = conform_records(
                "oom_events", [{"order": k, **row} for k, row in enumerate(ooms)], _OOM_COLUMNS
            )
        if any(traces):  # a history was recorded, even one of no allocation
            profile.tables["allocation_sites"] = conform_records(
                "allocation_sites", sites, _SITE_COLUMNS
            )
        if len(devices) == 1:
            meta.device_id = str(devices[0])
        return [profile]


@hookimpl
def advisor_readers() -> list[MemorySnapshotReader]:
    return [MemorySnapshotReader()]


def _load(path: Path) -> Any:
    """The pickle's dicts, lists, tuples, text and numbers; any class or function it names is
    refused (find_class raises), so nothing in the file runs. pickle is imported here, when a
    snapshot is read: every command loads this plugin."""
    import pickle

    class DataOnly(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> Any:
            raise _NamesObject(f"it names the Python object {module}.{name}")

    from advisor.formats.files import read_bytes

    content = read_bytes(path)  # a .gz inflated within Limits; its own errors name the file
    try:
        return DataOnly(io.BytesIO(content)).load()
    except _NamesObject as exc:
        raise UnreadableInput(path, f"not a memory snapshot: {exc}") from None
    except Exception as exc:  # a damaged stream fails in many ways: a wrong opcode's
        # AttributeError, a length read as gigabytes' MemoryError, UnpicklingError, EOFError ...
        raise UnreadableInput(path, f"a damaged pickle ({type(exc).__name__}: {exc})") from None


def _parts(path: Path, snapshot: Any) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """The snapshot's segments and per-device histories, their entries checked for shape."""
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("segments"), list):
        raise UnreadableInput(
            path, "a pickle without the 'segments' list of a PyTorch memory snapshot"
        )
    segments = [s for s in snapshot["segments"] if isinstance(s, dict)]
    traces_in = snapshot.get("device_traces")
    traces = [
        [e for e in t if isinstance(e, dict)] if isinstance(t, list) else []
        for t in (traces_in if isinstance(traces_in, list) else [])
    ]
    return segments, traces


def _device(segment: Mapping[str, Any]) -> int:
    device = segment.get("device")
    return device if isinstance(device, int) else 0


def _size(item: Mapping[str, Any], key: str = "size") -> int:
    value = item.get(key)
    return value if isinstance(value, int) else 0


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _device_kind(segments: Iterable[Mapping[str, Any]], traces: Sequence[list[Any]]) -> str:
    """NPU when a recorded stack passes through torch_npu or its C++ allocator, GPU when it
    passes through torch.cuda or the CUDA caching allocator; else unknown (a snapshot does
    not name its device type, and stacks may be Python only)."""
    found = "unknown"
    # PyTorch shares one dict per distinct frame and often one list per distinct stack, which
    # the pickle keeps: each is looked at once (48,190 frames are 63 dicts in a torch_npu
    # snapshot), the objects staying alive, so their ids unique, while the snapshot is held
    seen: set[int] = set()
    for entries in (*traces, [{"frames": s.get("frames")} for s in segments]):
        for entry in entries:
            frames = entry.get("frames") or ()
            if id(frames) in seen:
                continue
            seen.add(id(frames))
            for frame in frames:
                if not isinstance(frame, dict) or id(frame) in seen:
                    continue
                seen.add(id(frame))
                where = f"{frame.get('filename', '')} {frame.get('name', '')}".replace("\\", "/")
                if any(mark in where for mark in _NPU_MARKS):
                    return "NPU"
                if any(mark in where for mark in _GPU_MARKS):
                    found = "GPU"
    return found


def site_of(frames: Any) -> str:
    """Where an allocation was made, for a person to look at: the innermost Python frame
    outside installed packages and the standard library ('function (file:line)'); without
    one, the autograd node whose backward made it (the autograd engine's threads run no
    Python), else the innermost Python frame, else the ATen operator, else the innermost
    frame."""
    usable = [f for f in frames if isinstance(f, dict)] if isinstance(frames, list) else []
    if not usable:
        return NO_STACK
    python = [f for f in usable if str(f.get("filename", "")).endswith(".py")]
    for frame in python:
        if not any(part in str(frame["filename"]) for part in _LIBRARY_PARTS):
            return _frame_text(frame)
    names = [str(f.get("name", "")) for f in usable]
    for name in names:
        node = _AUTOGRAD_NODE.search(name)
        if node:
            return f"{node.group(1)} (autograd backward)"
    if python:
        return _frame_text(python[0])
    for name in names:
        op = _ATEN_OP.search(name)
        if op:
            return f"aten::{op.group(1)}"
    return _frame_text(usable[0])


def _frame_text(frame: Mapping[str, Any]) -> str:
    filename = str(frame.get("filename", "")).replace("\\", "/").rsplit("/", 1)[-1]
    if filename in ("", "??"):  # a C++ frame without its source
        return str(frame.get("name", "?"))
    return f"{frame.get('name', '?')} ({filename}:{frame.get('line', '?')})"


@dataclass
class _Replay:
    """The history replayed: per site its allocations, frees and the blocks still held at the
    snapshot; the allocated and reserved memory walked back from the snapshot's totals."""

    entries: int
    allocated_end: int
    reserved_end: int
    allocated_start: int = 0
    reserved_start: int = 0
    peak_allocated: int = 0
    peak_reserved: int = 0
    reserved_at_allocated_peak: int = 0
    allocations: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    frees: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    held: dict[str, list[tuple[int, int, int]]] = field(default_factory=lambda: defaultdict(list))
    """site -> (entry index, size, frees before it) of each block still held at the end."""
    ooms: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Entry index of each out-of-memory entry -> allocated and reserved memory then."""
    held_at_oom: dict[str, int] | None = None
    """site -> bytes of the history's blocks it held at the last out-of-memory entry."""
    peak_before: int = 0
    """The entry before which allocated memory peaked (len(history): at the snapshot)."""
    held_at_peak: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """site -> bytes of the history's blocks it held when allocated memory peaked."""

    @classmethod
    def of(cls, segments: Sequence[Mapping[str, Any]], history: Sequence[Any]) -> _Replay:
        replay = cls(
            len(history),
            sum(_size(s, "allocated_size") for s in segments),
            sum(_size(s, "total_size") for s in segments),
        )
        replay._backward(history)  # first: the forward pass takes the holders at the peak
        replay._forward(history)
        return replay

    def _forward(self, history: Sequence[Mapping[str, Any]]) -> None:
        live: dict[int, tuple[str, int, int, int]] = {}
        freed = 0
        sites: dict[int, str] = {}  # by the stack list's id: entries share their stacks
        for index, entry in enumerate(history):
            if index == self.peak_before:
                self.held_at_peak = _by_site(live.values())
            action, address = entry.get("action"), _size(entry, "addr")
            if action == "alloc":
                frames = entry.get("frames")
                site = sites.get(id(frames))
                if site is None:
                    site = sites[id(frames)] = site_of(frames)
                self.allocations[site] += 1
                live[address] = (site, index, _size(entry), freed)
            elif action == "free_completed":
                freed += 1
                block = live.pop(address, None)
                if block is not None:
                    self.frees[block[0]] += 1
            elif action == "oom":
                self.held_at_oom = _by_site(live.values())  # the last one's stays
        if self.peak_before == len(history):
            self.held_at_peak = _by_site(live.values())
        for site, index, size, frees_before in live.values():
            self.held[site].append((index, size, frees_before))

    def _backward(self, history: Sequence[Mapping[str, Any]]) -> None:
        """Allocated and reserved memory before each entry, from the snapshot's totals back:
        their peaks, and where the history began (0 and 0: it holds the allocator's life)."""
        allocated, reserved = self.allocated_end, self.reserved_end
        self.peak_allocated, self.peak_reserved = allocated, reserved
        self.reserved_at_allocated_peak = reserved
        self.peak_before = len(history)
        for index in range(len(history) - 1, -1, -1):
            entry = history[index]
            action, size = entry.get("action"), _size(entry)
            if action == "alloc":
                allocated -= size
            elif action == "free_completed":
                allocated += size
            elif action in ("segment_alloc", "segment_map"):
                reserved -= size
            elif action in ("segment_free", "segment_unmap"):
                reserved += size
            elif action == "oom":
                self.ooms[index] = (allocated, reserved)
            if allocated > self.peak_allocated:
                self.peak_allocated, self.reserved_at_allocated_peak = allocated, reserved
                self.peak_before = index  # the state before this entry
            self.peak_reserved = max(self.peak_reserved, reserved)
        self.allocated_start, self.reserved_start = allocated, reserved

    def oom_rows(self, device: int, history: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """One row per out-of-memory entry, in the history's order."""
        rows = []
        for index, (allocated, reserved) in sorted(self.ooms.items()):
            entry = history[index]
            time_us = entry.get("time_us")
            rows.append(
                {
                    "time_us": time_us if isinstance(time_us, (int, float)) else None,
                    "device": str(device),
                    "request_bytes": float(_size(entry)),
                    "allocated_bytes": float(allocated),
                    "reserved_bytes": float(reserved),
                    "device_free_bytes": _whole(entry.get("device_free")),
                }
            )
        return rows

    def site_rows(self, device: int) -> list[dict[str, Any]]:
        rows = []
        for site in sorted(set(self.allocations) | set(self.held)):
            held = sorted(self.held.get(site, ()))
            held_bytes = sum(size for _, size, _ in held)
            rows.append(
                {
                    "site": site,
                    "device": str(device),
                    "allocations": self.allocations.get(site, 0),
                    "frees": self.frees.get(site, 0),
                    "held_blocks": len(held),
                    "held_bytes": float(held_bytes),
                    "held_share": held_bytes / self.allocated_end if self.allocated_end else None,
                    "held_points": _points(held),
                    "held_span": (
                        (held[-1][0] - held[0][0]) / self.entries if held and self.entries else 0.0
                    ),
                    "largest_held_bytes": float(max((s for _, s, _ in held), default=0)),
                    "held_at_peak_bytes": float(self.held_at_peak.get(site, 0)),
                    "held_at_oom_bytes": (
                        None if self.held_at_oom is None else float(self.held_at_oom.get(site, 0))
                    ),
                }
            )
        return rows


def _by_site(blocks: Iterable[tuple[str, int, int, int]]) -> dict[str, int]:
    """Bytes per site of live blocks (site, entry index, size, frees before it)."""
    sizes: dict[str, int] = defaultdict(int)
    for site, _, size, _ in blocks:
        sizes[site] += size
    return sizes


def _points(held: Sequence[tuple[int, int, int]]) -> int:
    """Separate points of the history at which a site's held blocks were made: two blocks
    are one point unless the allocator freed a block between them (the program moved on, as
    a step that ends frees its activations). Parameters moved to the device, or an
    optimizer's state made on its first step, are one point; a block kept every step, one
    point per step."""
    return sum(1 for k, block in enumerate(held) if k == 0 or block[2] > held[k - 1][2])


def _allocator_row(
    device: int,
    segments: Sequence[Mapping[str, Any]],
    history: Sequence[Any],
    replay: _Replay,
) -> dict[str, Any]:
    free_blocks = [
        _size(b)
        for s in segments
        for b in (s.get("blocks") or ())
        if isinstance(b, dict) and b.get("state") == "inactive"
    ]
    return {
        "device": str(device),
        "segments": len(segments),
        "expandable_segments": sum(1 for s in segments if s.get("is_expandable") is True),
        "reserved_bytes": float(replay.reserved_end),
        "allocated_bytes": float(replay.allocated_end),
        "active_bytes": float(sum(_size(s, "active_size") for s in segments)),
        "requested_bytes": float(sum(_size(s, "requested_size") for s in segments)),
        "largest_free_block_bytes": float(max(free_blocks, default=0)),
        "history_entries": len(history),
        "history_from_start": bool(history)
        and replay.allocated_start == 0
        and replay.reserved_start == 0,
        "peak_allocated_bytes": float(replay.peak_allocated),
        "peak_reserved_bytes": float(replay.peak_reserved),
        "reserved_at_allocated_peak_bytes": float(replay.reserved_at_allocated_peak),
    }
