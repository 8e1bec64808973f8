"""Reader for PyTorch profiler (Kineto) Chrome traces: `*.pt.trace.json[.gz]`, one per rank.

A trace is one JSON object: header keys (`schemaVersion`, `deviceProperties`,
`distributedInfo`, `baseTimeNanoseconds`, ...) and `traceEvents`, a list of Chrome trace
events whose `cat` says what they are. Current (`cpu_op`, `kernel`, `gpu_memcpy`...) and 2021
legacy (`Operator`, `Kernel`, `Memcpy`, `Runtime`, string tids) categories are both read.

`ts` and `dur` are microseconds: relative to `baseTimeNanoseconds` when the trace has it,
absolute epoch microseconds otherwise. Every table is rebased to the earliest timed event
(float64 µs); the epoch time of that origin is kept in `meta.extra["time_origin_us"]`.

The event list is walked once, appending to per-table column lists; each table is built once
from its lists. Nothing per event is kept beyond those lists.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pandas as pd

from advisor.errors import UnreadableInput
from advisor.hookspecs import hookimpl
from advisor.io import load_json, read_bytes
from advisor.model import Profile, ProfileMeta, conform
from advisor.progress import FileProgress

READER = "kineto"
HEAD_BYTES = 64 * 1024
SALVAGE_TRIES = 64  # candidate cut points tried when recovering a truncated trace
MAX_OP_TYPE = 64

# What a `*.json` file that starts with `{"traceEvents"` must also show in its first bytes to
# be taken for a PyTorch trace rather than another Chrome-trace writer's.
_KINETO_MARKERS = (b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"',
                   b'"baseTimeNanoseconds"', b"ProfilerStep#", b'"cpu_op"', b'"Operator"',
                   b'"cuda_runtime"', b'"Runtime"', b'"kernel"', b'"Kernel"',
                   b'"user_annotation"', b'"python_function"', b'"gpu_memcpy"',
                   b'"PyTorch Profiler')

# ---------------------------------------------------------------------------------------------
# Event categories (current names and the 2021 legacy ones, see formats.md 1.4)

KERNEL, MEMCPY, MEMSET, OPERATOR, PYTHON, RUNTIME, SYNC, ANNOTATION, OTHER = range(9)
_CATEGORIES = {
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY, "memcpy": MEMCPY,
    "gpu_memset": MEMSET, "memset": MEMSET,
    "cpu_op": OPERATOR, "operator": OPERATOR,
    "python_function": PYTHON, "python": PYTHON,
    "cuda_runtime": RUNTIME, "cuda_driver": RUNTIME, "runtime": RUNTIME,
    "mtia_runtime": RUNTIME, "glow_runtime": RUNTIME, "xpu_runtime": RUNTIME,
    "xpu_driver": RUNTIME, "privateuse1_runtime": RUNTIME, "privateuse1_driver": RUNTIME,
    "cuda_sync": SYNC, "xpu_sync": SYNC,
    "user_annotation": ANNOTATION,
}


def _category(cat: Any, cache: dict[Any, int]) -> int:
    """The event family of a `cat` value, case-insensitively (cached per distinct value)."""
    kind = cache.get(cat)
    if kind is None:
        kind = _CATEGORIES.get(cat.lower(), OTHER) if isinstance(cat, str) else OTHER
        cache[cat] = kind
    return kind


_STEP = re.compile(r"ProfilerStep#(\d+)")
_LAUNCH = re.compile(r"^(?:cuda|cu|hip)\w*Launch")  # cudaLaunchKernel, hipExtModuleLaunchKernel,
#                                                     cudaGraphLaunch, cuLaunchKernelEx...
_SYNC = re.compile(
    r"^(?:cuda|cu|hip)\w*Synchronize$"  # device / stream / event / context synchronisation
    r"|^(?:cuda|hip)Memcpy(?:2D|3D|Peer|ToSymbol|FromSymbol)?$"  # blocking copies
    r"|^cuMemcpy(?:[A-Z]to[A-Z]|Peer|2D|3D)?$"
    # ROCm PyTorch does blocking (non_blocking=False) copies with hipMemcpyWithStream, which
    # returns once the copy is done.
    r"|^hipMemcpyWithStream$")
_NCCL = re.compile(r"^nccl|ncclKernel|ncclDevKernel|rccl", re.IGNORECASE)
_NCCL_OP = re.compile(r"nccl(?:Dev)?Kernel_([A-Za-z]+)")
_MEMCPY_KIND = re.compile(r"Memcpy\s+([A-Za-z]to[A-Za-z])\b")
_COPY_ENDS = re.compile(r"\(\s*(\w+)\s*->\s*(\w+)\s*\)")
_RANK_IN_NAME = re.compile(r"rank[-_]?(\d+)", re.IGNORECASE)
_DIGITS = re.compile(r"-?\d+")
_NAN_TOKEN = re.compile(rb"-?(?:NaN|Infinity)")
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')

# Collective names, normalised (lowercase, no underscores) and matched by prefix, in order.
_COLLECTIVES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "sendrecv",
                "send", "recv", "reduce", "gather", "scatter", "barrier")

# Element sizes by c10 ScalarType name (`dtype` of NCCL kernels) and by C++ type name
# (`Input type` of record_function events).
_DTYPE_BYTES = {
    "float": 4, "half": 2, "bfloat16": 2, "double": 8, "int": 4, "int32": 4, "long": 8,
    "int64": 8, "short": 2, "int16": 2, "byte": 1, "uint8": 1, "char": 1, "int8": 1,
    "bool": 1, "complexhalf": 4, "complexfloat": 8, "complexdouble": 16, "qint8": 1,
    "quint8": 1, "qint32": 4, "quint4x2": 1, "quint2x4": 1, "uint16": 2, "uint32": 4,
    "uint64": 8, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1, "float8_e8m0fnu": 1,
    "c10::half": 2, "c10::bfloat16": 2, "long int": 8, "short int": 2, "signed char": 1,
    "unsigned char": 1, "c10::complex<float>": 8, "c10::complex<double>": 16,
    "c10::complex<c10::half>": 4, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
}

# c10::DeviceType numbers used by `[memory]` events.
_DEVICE_TYPES = {0: "cpu", 1: "cuda", 6: "hip", 12: "xpu", 13: "mps", 19: "mtia",
                 20: "privateuseone"}
_GPU_DEVICE_TYPES = {1, 6}


# ---------------------------------------------------------------------------------------------
# Plugin entry points


class KinetoReader:
    """Reads one PyTorch profiler trace file (Kineto Chrome trace JSON, optionally gzipped)."""

    name = "kineto"
    formats = ("PyTorch profiler / Kineto trace (*.pt.trace.json[.gz])",)

    def detect(self, path: Path) -> bool:
        """`*.pt.trace.json[.gz]` by name; other `*.json[.gz]` by their first 64 KB."""
        path = Path(path)
        name = path.name.lower()
        if not name.endswith((".json", ".json.gz")) or not path.is_file():
            return False
        if name.endswith((".pt.trace.json", ".pt.trace.json.gz")):
            return True
        head = _head(path)
        if not head.lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"{"):
            return False  # Ascend trace_view.json and msprof timelines are bare lists
        if b'"schemaVersion"' in head:
            return True
        return b'"traceEvents"' in head and any(m in head for m in _KINETO_MARKERS)

    def read(self, path: Path) -> list[Profile]:
        return [_TraceReader(Path(path)).read()]


@hookimpl
def advisor_readers() -> list[KinetoReader]:
    return [KinetoReader()]


def _head(path: Path) -> bytes:
    try:
        with open(path, "rb") as raw:
            if path.name.lower().endswith(".gz"):
                with gzip.GzipFile(fileobj=raw) as gz:
                    return gz.read(HEAD_BYTES)
            return raw.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return b""


# ---------------------------------------------------------------------------------------------
# Loading: fast path through load_json, repairs only when it fails


def _loads_nan(data: bytes) -> Any:
    """Strict JSON first; the standard library (which accepts NaN/Infinity) where needed."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if not _NAN_TOKEN.match(data, exc.pos):
            raise
    return json.loads(data)


class _Loaded:
    """The decoded document and what had to be repaired to get it."""

    def __init__(self, doc: Any, *, non_finite: bool = False, truncated: int | None = None,
                 gzip_cut: bool = False) -> None:
        self.doc = doc
        self.non_finite = non_finite
        self.truncated = truncated  # events recovered from a cut file
        self.gzip_cut = gzip_cut


def _load(path: Path) -> _Loaded:
    progress = FileProgress(path.name, _size(path))
    try:
        try:
            doc = load_json(path, progress)
        except UnreadableInput as exc:
            if not exc.problem.startswith(("truncated JSON", "invalid JSON", "truncated gzip")):
                raise
            loaded = _repair(path, exc)
        else:
            loaded = _Loaded(doc)
        events = loaded.doc.get("traceEvents") if isinstance(loaded.doc, dict) else None
        progress.decoded(len(events) if isinstance(events, list) else 0)
    finally:
        progress.close()
    return loaded


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _repair(path: Path, first_error: UnreadableInput) -> _Loaded:
    """Second read of a file load_json rejected: NaN/Infinity, a cut file or cut gzip data."""
    gzip_cut = first_error.problem.startswith("truncated gzip")
    data = _partial_gunzip(path) if gzip_cut else read_bytes(path)
    non_finite = False
    try:
        return _Loaded(orjson.loads(data), gzip_cut=gzip_cut)
    except orjson.JSONDecodeError as exc:
        error_at, message = exc.pos, exc.msg
        if _NAN_TOKEN.match(data, exc.pos):
            non_finite = True
            try:
                return _Loaded(json.loads(data), non_finite=True, gzip_cut=gzip_cut)
            except json.JSONDecodeError as std:
                error_at, message = std.pos, std.msg
                if len(data) - std.pos > HEAD_BYTES:  # an error well before the end: not a cut
                    raise UnreadableInput(path, f"invalid JSON at byte {std.pos}: {std.msg}") \
                        from None
        elif not exc.msg.startswith("unexpected end of data"):
            raise UnreadableInput(path, f"invalid JSON at byte {exc.pos}: {exc.msg}") from None
    salvaged = _salvage(data, _loads_nan if non_finite else orjson.loads)
    if salvaged is None:
        raise UnreadableInput(path, f"truncated JSON and no complete event before the cut "
                                    f"(error at byte {error_at}: {message})")
    header, events = salvaged
    if not events:
        raise UnreadableInput(path, "truncated JSON: cut before the first complete event")
    header["traceEvents"] = events
    return _Loaded(header, non_finite=non_finite, truncated=len(events), gzip_cut=gzip_cut)


def _partial_gunzip(path: Path) -> bytes:
    """What a cut gzip file decompresses to before the cut."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UnreadableInput(path, f"cannot read file: {exc.strerror or exc}") from None
    try:
        return zlib.decompressobj(wbits=31).decompress(raw)
    except zlib.error as exc:
        raise UnreadableInput(path, f"corrupt gzip data: {exc}") from None


def _salvage(data: bytes, loads: Callable[[bytes], Any]
             ) -> tuple[dict[str, Any], list[Any]] | None:
    """The header keys and the complete events of a trace cut short, or None.

    Kineto writes the header, then events one by one, and closes the list only at the end,
    so a crashed run or a cut copy leaves `{header..., "traceEvents": [ev, ev, ev, {partial`.
    The events list is closed after the last `}` that ends a complete event; candidates are
    tried from the end, each checked by the JSON parser.
    """
    key = _EVENTS_KEY.search(data)
    if key is None:
        return None
    head = data[:key.start()].rstrip().rstrip(b",").rstrip()
    try:
        header = loads(head + b"}") if head != b"{" else {}
    except ValueError:
        header = {}
    header = header if isinstance(header, dict) else {}
    body = key.end()
    end, tries = len(data), 0
    while tries < SALVAGE_TRIES:
        end = data.rfind(b"}", body, end)
        if end < 0:
            return header, []
        after = data[end + 1:end + 65].lstrip()[:1]
        if after in (b",", b"]", b""):
            tries += 1
            try:
                events = loads(b"[" + data[body:end + 1] + b"]")
            except ValueError:
                pass
            else:
                return header, events
    return None


# ---------------------------------------------------------------------------------------------
# Small parsers with per-name caches


def _num(value: Any) -> float | None:
    """A finite number from a JSON value (numbers and numeric strings), else None."""
    if value.__class__ is int:
        return float(value)
    if value.__class__ is float:
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _tid(value: Any, cache: dict[Any, int | None]) -> int | None:
    """Thread or stream id: ints as is (made positive), legacy strings like `stream 7`."""
    if value.__class__ is int:
        return -value if value < 0 else value
    if value in cache:
        return cache[value]
    number = None
    if isinstance(value, str):
        match = _DIGITS.search(value)
        number = abs(int(match.group())) if match else None
    elif isinstance(value, float) and value.is_integer():
        number = abs(int(value))
    cache[value] = number
    return number


_GENERIC_KERNELS = {"kernel", "kernel2", "device_kernel", "global_kernel"}


def kernel_op_type(name: str) -> str:
    """A short operator type for a kernel: its function name without return type, namespaces,
    template arguments or parameters (`void at::native::vectorized_elementwise_kernel<4, ...>
    (...)` -> `vectorized_elementwise_kernel`). Generic wrappers (`cutlass::Kernel<Op>`) take
    the name of their first template argument. Itanium-mangled names are read the same way."""
    text = name.strip()
    if text.startswith("_Z"):
        short = _mangled_op_type(text)
        if short:
            return short
    for prefix in ("__global__ ", "static ", "void "):
        text = text.removeprefix(prefix)
    text = text.replace("(anonymous namespace)::", "").replace("(anonymous namespace)", "")
    cut = min((i for i in (text.find("("), text.find("<")) if i >= 0), default=len(text))
    qualified = text[:cut].strip().rsplit(" ", 1)[-1]
    parts = [p for p in qualified.split("::") if p]
    short = parts[-1] if parts else ""
    if short.lower() in _GENERIC_KERNELS:
        if cut < len(text) and text[cut] == "<":
            argument = re.split(r"[<>,(]", text[cut + 1:], maxsplit=1)[0].strip()
            argument = argument.rsplit(" ", 1)[-1].split("::")[-1]
            if argument and not argument[0].isdigit():
                short = argument
        if short.lower() in _GENERIC_KERNELS and len(parts) > 1:
            short = "::".join(parts[-2:])
    return _clip(short or name.strip())


def _clip(text: str) -> str:
    if len(text) <= MAX_OP_TYPE:
        return text
    cut = text.rfind("_", 0, MAX_OP_TYPE)
    return text[:cut] if cut > MAX_OP_TYPE // 2 else text[:MAX_OP_TYPE]


def _mangled_op_type(text: str) -> str | None:
    idents, pos = _mangled_name(text, 2)
    if not idents:
        return None
    short = idents[-1]
    if short.lower() in _GENERIC_KERNELS:
        if pos < len(text) and text[pos] == "I":
            argument, _ = _mangled_name(text, pos + 1)
            if argument:
                return _clip(argument[-1])
        return "::".join(idents[-2:])
    return _clip(short)


def _mangled_name(text: str, pos: int) -> tuple[list[str], int]:
    """Identifiers of an Itanium-mangled (nested) name starting at pos, and where it ends."""
    idents: list[str] = []
    nested = pos < len(text) and text[pos] == "N"
    pos += nested
    while pos < len(text):
        char = text[pos]
        if char.isdigit():
            digits = re.match(r"\d+", text[pos:]).group()
            start = pos + len(digits)
            idents.append(text[start:start + int(digits)])
            pos = start + int(digits)
        elif char == "S":  # substitution: S_, S0_, SA_, St, Sa ...
            match = re.match(r"S[0-9A-Z]*_|S[a-z]", text[pos:])
            pos += len(match.group()) if match else 1
        elif char in "KVrL":
            pos += 1
        else:
            break
        if not nested:
            break
    return idents, pos


def _device_op_facts(name: str, family: int) -> tuple[str, str, str | None, str | None]:
    """(op_type, category, memcpy_kind, host_memory) of a kernel, copy or memset name."""
    if family == KERNEL:
        category = "communication" if _NCCL.search(name) else "compute"
        return kernel_op_type(name), category, None, None
    op_type = name.split("(", 1)[0].strip() or name
    if family == MEMSET:
        return op_type, "memset", None, None
    kind = _MEMCPY_KIND.search(name)
    host = None
    ends = _COPY_ENDS.search(name)
    if ends:
        sides = {ends.group(1).lower(), ends.group(2).lower()}
        host = "pageable" if "pageable" in sides else "pinned" if "pinned" in sides else None
    return op_type, "memcpy", kind.group(1) if kind else None, host


def _collective(text: Any) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    flat = text.strip().lower().replace("_", "").replace(" ", "")
    return next((c for c in _COLLECTIVES if flat.startswith(c)), flat)


def _dtype_bytes(dtype: Any) -> int | None:
    return _DTYPE_BYTES.get(dtype.strip().lower()) if isinstance(dtype, str) else None


def _host_kind(family: int, name: str) -> str | None:
    """host_ops.kind of a host event (None: not a host op, e.g. a ProfilerStep)."""
    if family in (OPERATOR, ANNOTATION):
        if name.startswith("ProfilerStep#"):
            return None
        if name.startswith("Optimizer."):
            return "optimizer"
        if family == OPERATOR:
            return "dataloader" if name.startswith("enumerate(DataLoader)") else "aten"
        return "dataloader" if "DataLoader" in name else "annotation"
    if family == PYTHON:
        return "python"
    if family == SYNC:
        return "sync"
    if _LAUNCH.match(name):
        return "launch"
    if _SYNC.match(name):
        return "sync"
    return "runtime"


# ---------------------------------------------------------------------------------------------
# One trace file


class _Columns(dict):
    """Column name -> list of values, appended in step."""

    def __init__(self, *names: str) -> None:
        super().__init__((n, []) for n in names)


class _TraceReader:
    """One `read()` of one trace file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.profile = Profile(ProfileMeta(source_format="kineto", path=str(path),
                                           framework="PyTorch", device_kind="CPU",
                                           files_read=[path.name]))

    def warn(self, problem: str) -> None:
        self.profile.warn(self.path.name, problem, reader=READER)

    def read(self) -> Profile:
        if self.path.is_dir():
            raise UnreadableInput(self.path, "a directory, not a trace file")
        loaded = _load(self.path)
        doc = loaded.doc
        if isinstance(doc, list):
            raise UnreadableInput(self.path, "a bare list of events, not a PyTorch profiler "
                                             "trace (an Ascend trace_view.json?)")
        if not isinstance(doc, dict):
            raise UnreadableInput(self.path, "not a JSON object with traceEvents")
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            raise UnreadableInput(self.path, "no traceEvents list")
        if not events:
            raise UnreadableInput(self.path, "traceEvents is empty")
        if loaded.gzip_cut:
            self.warn("truncated gzip data: read what was written before the cut")
        if loaded.truncated is not None:
            self.warn(f"truncated trace: {loaded.truncated} events recovered")
        if loaded.non_finite:
            self.warn("the trace holds NaN or Infinity, which is not valid JSON: read with "
                      "the standard parser; those values are treated as missing")
        self._meta(doc)
        self._finish(doc, _EventWalk().walk(events))
        return self.profile

    # -- header keys -----------------------------------------------------------------------

    def _meta(self, doc: dict[str, Any]) -> None:
        meta = self.profile.meta
        for key, value in doc.items():
            if key == "schemaVersion" or (key.endswith("_version") and value is not None):
                meta.versions[key] = str(value)
        info = doc.get("distributedInfo")
        if isinstance(info, dict):
            rank, world = _int_or_none(info.get("rank")), _int_or_none(info.get("world_size"))
            meta.rank = rank
            meta.world_size = world
            for key in ("backend", "pg_count"):
                if info.get(key) is not None:
                    meta.extra[key] = info[key]
            if info.get("nccl_version") is not None:
                meta.versions["nccl_version"] = str(info["nccl_version"])
        else:
            self.warn("no distributedInfo: rank and world size unknown")
        if meta.rank is None:
            match = _RANK_IN_NAME.search(self.path.name)
            if match:
                meta.rank = int(match.group(1))
                meta.extra["rank_from"] = "file name"
        for key in ("traceName", "displayTimeUnit", "trace_id", "host_name"):
            if isinstance(doc.get(key), str | int | float):
                meta.extra[key] = doc[key]

    def _finish(self, doc: dict[str, Any], walk: _EventWalk) -> None:
        meta = self.profile.meta
        if walk.no_dur:
            self.warn(f"{walk.no_dur} complete events without a valid duration (dur) skipped")
        if walk.no_ts:
            self.warn(f"{walk.no_ts} events without a valid timestamp (ts) skipped")
        if walk.not_events:
            self.warn(f"{walk.not_events} entries of traceEvents are not event objects; skipped")
        properties = _device_properties(doc)
        device_pid = walk.main_device()
        if walk.device["name"] or properties:
            meta.device_kind = "GPU"
        if device_pid is not None:
            meta.device_id = str(device_pid)
        chosen = properties.get(device_pid) or next(iter(properties.values()), None)
        if chosen and isinstance(chosen.get("name"), str):
            meta.device_name = chosen["name"]
        if walk.runtime_families:
            meta.extra["gpu_runtime"] = "/".join(sorted(walk.runtime_families))
        if walk.threads:
            meta.extra["threads"] = {str(k): v for k, v in walk.threads.items()}
        host_pid = next((pid for pid, label in walk.process_labels.items() if label == "CPU"),
                        next(iter(walk.process_names), None))
        if host_pid in walk.process_names:
            meta.extra["process_name"] = walk.process_names[host_pid]

        base_ns = _num(doc.get("baseTimeNanoseconds"))
        origin = walk.earliest()
        if origin is not None:
            meta.extra["time_origin_us"] = origin + (base_ns / 1000.0 if base_ns else 0.0)
            meta.extra["time_base"] = ("relative to baseTimeNanoseconds" if base_ns
                                       else "epoch microseconds")
        tables = walk.frames(origin or 0.0, properties)
        self.profile.tables = {name: conform(name, frame) for name, frame in tables.items()}


def _int_or_none(value: Any) -> int | None:
    number = _num(value)
    return int(number) if number is not None and number.is_integer() else None


def _device_properties(doc: dict[str, Any]) -> dict[Any, dict[str, Any]]:
    """deviceProperties (or the 2021 computeProperties) by device id."""
    found: dict[Any, dict[str, Any]] = {}
    for key in ("deviceProperties", "computeProperties"):
        entries = doc.get(key)
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            if isinstance(entry, dict):
                device = _int_or_none(entry.get("id"))
                found.setdefault(index if device is None else device, entry)
    return found


class _EventWalk:
    """The single pass over traceEvents, filling per-table column lists."""

    def __init__(self) -> None:
        self.steps: dict[int, tuple[float, float]] = {}
        self.device = _Columns("name", "op_type", "start_us", "duration_us", "stream",
                               "category", "memcpy_kind", "host_memory", "bytes", "_pid")
        self.host = _Columns("name", "kind", "start_us", "duration_us", "thread")
        self.comm = _Columns("name", "op", "group", "start_us", "duration_us", "bytes")
        self.memory = _Columns("time_us", "allocated_bytes", "reserved_bytes", "device",
                               "_type", "_id")
        self.threads: dict[int, str] = {}
        self.process_names: dict[Any, str] = {}
        self.process_labels: dict[Any, str] = {}
        self.runtime_families: set[str] = set()
        self.no_dur = self.no_ts = self.not_events = 0
        self.other_min = math.inf  # earliest event that is in no table (spans, instants)

    def walk(self, events: list[Any]) -> _EventWalk:
        cats: dict[Any, int] = {}
        tids: dict[Any, int | None] = {}
        facts: dict[str, tuple[str, str, str | None, str | None]] = {}
        kinds: dict[tuple[int, str], str | None] = {}
        steps = self.steps
        dev, host = self.device, self.host
        d_name, d_type, d_start, d_dur, d_stream, d_cat, d_kind, d_host, d_bytes, d_pid = (
            dev[c] for c in dev)
        h_name, h_kind, h_start, h_dur, h_thread = (host[c] for c in host)
        num = _num
        for ev in events:
            if ev.__class__ is not dict:
                self.not_events += 1
                continue
            ph = ev.get("ph")
            if ph == "X":
                ts = ev.get("ts")
                ts = ts if ts.__class__ is float and ts - ts == 0 else num(ts)
                dur = ev.get("dur")
                dur = dur if dur.__class__ is float and dur - dur == 0 else num(dur)
                if ts is None:
                    self.no_ts += 1
                    continue
                if dur is None or dur < 0:
                    self.no_dur += 1
                    continue
                family = _category(ev.get("cat"), cats)
                name = ev.get("name")
                if not isinstance(name, str):
                    name = "" if name is None else str(name)
                if family <= MEMSET:  # kernel, memcpy, memset
                    fact = facts.get(name)
                    if fact is None:
                        fact = facts[name] = _device_op_facts(name, family)
                    args = ev.get("args")
                    args = args if args.__class__ is dict else {}
                    stream = args.get("stream")
                    d_name.append(name)
                    d_type.append(fact[0])
                    d_start.append(ts)
                    d_dur.append(dur)
                    d_stream.append(stream if stream.__class__ is int
                                    else _tid(ev.get("tid"), tids))
                    d_cat.append(fact[1])
                    d_kind.append(fact[2])
                    d_host.append(fact[3])
                    d_bytes.append(num(args.get("bytes")))
                    d_pid.append(ev.get("pid"))
                    if fact[1] == "communication":
                        self._comm(name, ts, dur, args)
                elif family == OTHER:
                    if ts < self.other_min:
                        self.other_min = ts
                else:
                    if family in (OPERATOR, ANNOTATION):
                        step = _STEP.match(name)
                        if step is not None:
                            number = int(step.group(1))
                            if number not in steps or dur > steps[number][1]:
                                steps[number] = (ts, dur)
                            continue
                        if family == ANNOTATION and name.startswith("gloo:"):
                            self._gloo(name, ts, dur, ev.get("args"))
                    key = (family, name)
                    kind = kinds.get(key, "")
                    if kind == "":
                        kind = kinds[key] = _host_kind(family, name)
                        if family == RUNTIME:
                            self.runtime_families.add("ROCm" if name.startswith("hip")
                                                      else "CUDA" if name.startswith("cu")
                                                      else "other")
                    if kind is None:
                        continue
                    h_name.append(name)
                    h_kind.append(kind)
                    h_start.append(ts)
                    h_dur.append(dur)
                    h_thread.append(_tid(ev.get("tid"), tids))
            elif ph == "i" or ph == "I":
                ts = num(ev.get("ts"))
                if ts is None:
                    self.no_ts += 1
                    continue
                if ev.get("name") == "[memory]":
                    self._memory(ts, ev.get("args"))
                elif ts < self.other_min:
                    self.other_min = ts
            elif ph == "M":
                self._metadata(ev)
        return self

    # -- per-event helpers (for the rarer events) --------------------------------------------

    def _comm(self, name: str, ts: float, dur: float, args: dict[str, Any]) -> None:
        op = _collective(args.get("Collective name"))
        if op is None:
            match = _NCCL_OP.search(name)
            op = _collective(match.group(1)) if match else None
        group_name = args.get("Process Group Name")
        group_desc = args.get("Process Group Description")
        group = None
        if group_name not in (None, "") and group_desc not in (None, "", group_name):
            group = f"{group_name} ({group_desc})"
        elif group_name not in (None, "") or group_desc not in (None, ""):
            group = str(group_name if group_name not in (None, "") else group_desc)
        size = _dtype_bytes(args.get("dtype"))
        count = _num(args.get("In msg nelems"))
        self._comm_row(name, op, group, ts, dur,
                       count * size if size is not None and count is not None else None)

    def _gloo(self, name: str, ts: float, dur: float, args: Any) -> None:
        """CPU collectives (gloo) run on the host: their annotations are the comm ops."""
        args = args if isinstance(args, dict) else {}
        total = None
        dims, types = args.get("Input Dims"), args.get("Input type")
        if isinstance(dims, list) and isinstance(types, list):
            total = 0.0
            for shape, dtype in zip(dims, types, strict=False):
                size = _dtype_bytes(dtype)
                if not isinstance(shape, list) or size is None or not shape:
                    continue
                elements = 1.0
                for extent in shape:
                    elements *= _num(extent) or 0.0
                total += elements * size
            total = total or None
        self._comm_row(name, _collective(name.split(":", 1)[1]), None, ts, dur, total)

    def _comm_row(self, name: str, op: str | None, group: str | None, ts: float, dur: float,
                  nbytes: float | None) -> None:
        comm = self.comm
        comm["name"].append(name)
        comm["op"].append(op)
        comm["group"].append(group)
        comm["start_us"].append(ts)
        comm["duration_us"].append(dur)
        comm["bytes"].append(nbytes)

    def _memory(self, ts: float, args: Any) -> None:
        args = args if isinstance(args, dict) else {}
        device_type = _int_or_none(args.get("Device Type"))
        device_id = _int_or_none(args.get("Device Id"))
        if device_type is None:
            device = None
        else:
            device = _DEVICE_TYPES.get(device_type, f"device_type_{device_type}")
            if device_id is not None and device_id >= 0:
                device = f"{device}:{device_id}"
        memory = self.memory
        memory["time_us"].append(ts)
        memory["allocated_bytes"].append(_num(args.get("Total Allocated")))
        memory["reserved_bytes"].append(_num(args.get("Total Reserved")))
        memory["device"].append(device)
        memory["_type"].append(device_type)
        memory["_id"].append(device_id)

    def _metadata(self, ev: dict[str, Any]) -> None:
        """process/thread names; a later event for the same process or thread wins."""
        args = ev.get("args")
        if not isinstance(args, dict):
            return
        kind, label = ev.get("name"), args.get("name")
        if kind == "process_labels" and isinstance(args.get("labels"), str):
            self.process_labels[ev.get("pid")] = args["labels"]
        if not isinstance(label, str):
            return
        if kind == "thread_name":
            tid = _tid(ev.get("tid"), {})
            if tid is not None and isinstance(ev.get("pid"), int) and "stream" not in label:
                self.threads[tid] = label.strip()
        elif kind == "process_name":
            self.process_names[ev.get("pid")] = label

    # -- after the pass ------------------------------------------------------------------------

    def main_device(self) -> Any:
        """The device (pid of device events) most device ops ran on."""
        pids = [p for p in self.device["_pid"] if p.__class__ is int]
        if not pids:
            return None
        values, counts = np.unique(np.asarray(pids, dtype=np.int64), return_counts=True)
        return int(values[int(np.argmax(counts))])

    def earliest(self) -> float | None:
        starts = [self.other_min]
        for column in (self.device["start_us"], self.host["start_us"], self.comm["start_us"],
                       self.memory["time_us"]):
            if column:
                starts.append(float(np.min(np.asarray(column, dtype=np.float64))))
        starts += [start for start, _ in self.steps.values()]
        origin = min(starts)
        return None if origin == math.inf else origin

    def frames(self, origin: float, properties: dict[Any, dict[str, Any]]
               ) -> dict[str, pd.DataFrame]:
        tables: dict[str, pd.DataFrame] = {}
        if self.steps:
            numbers = sorted(self.steps)
            start = np.array([self.steps[n][0] for n in numbers], dtype=np.float64) - origin
            duration = np.array([self.steps[n][1] for n in numbers], dtype=np.float64)
            tables["steps"] = pd.DataFrame({"step": numbers, "start_us": start,
                                            "end_us": start + duration,
                                            "duration_us": duration})
        if self.device["name"]:
            dev = self.device
            tables["device_ops"] = pd.DataFrame({
                "name": dev["name"], "op_type": dev["op_type"], "core_type": "GPU",
                "start_us": _times(dev["start_us"], origin),
                "duration_us": np.asarray(dev["duration_us"], dtype=np.float64),
                "stream": pd.array(dev["stream"], dtype="Int64"),
                "category": dev["category"], "memcpy_kind": dev["memcpy_kind"],
                "host_memory": dev["host_memory"],
                "bytes": np.asarray(dev["bytes"], dtype=np.float64),
            })
        if self.host["name"]:
            host = self.host
            tables["host_ops"] = pd.DataFrame({
                "name": host["name"], "kind": host["kind"],
                "start_us": _times(host["start_us"], origin),
                "duration_us": np.asarray(host["duration_us"], dtype=np.float64),
                "thread": pd.array(host["thread"], dtype="Int64"),
            })
        if self.comm["name"]:
            comm = self.comm
            duration = np.asarray(comm["duration_us"], dtype=np.float64)
            nbytes = np.asarray(comm["bytes"], dtype=np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                bandwidth = np.where(duration > 0, nbytes / duration / 1e3, np.nan)
            tables["comm_ops"] = pd.DataFrame({
                "name": comm["name"], "op": comm["op"], "group": comm["group"],
                "start_us": _times(comm["start_us"], origin), "duration_us": duration,
                "bytes": nbytes, "bandwidth_gbps": bandwidth,
            })
        if self.memory["time_us"]:
            memory = self.memory
            capacity = [_capacity(t, i, properties)
                        for t, i in zip(memory["_type"], memory["_id"], strict=True)]
            tables["memory"] = pd.DataFrame({
                "time_us": _times(memory["time_us"], origin),
                "allocated_bytes": np.asarray(memory["allocated_bytes"], dtype=np.float64),
                "reserved_bytes": np.asarray(memory["reserved_bytes"], dtype=np.float64),
                "device": memory["device"],
                "capacity_bytes": np.asarray(capacity, dtype=np.float64),
            })
        return tables


def _times(values: list[float], origin: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float64) - origin


def _capacity(device_type: int | None, device_id: int | None,
              properties: dict[Any, dict[str, Any]]) -> float | None:
    if device_type not in _GPU_DEVICE_TYPES or device_id is None:
        return None
    entry = properties.get(device_id)
    return _num(entry.get("totalGlobalMem")) if entry else None
