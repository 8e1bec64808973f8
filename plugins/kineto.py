"""Reader for PyTorch profiler (Kineto) Chrome traces: `*.pt.trace.json[.gz]`, one per rank.

A trace is one JSON object: header keys (`schemaVersion`, `deviceProperties`,
`distributedInfo`, `baseTimeNanoseconds`, ...) and `traceEvents`, a list of Chrome trace
events whose `cat` says what they are. Current (`cpu_op`, `kernel`, `gpu_memcpy`...) and 2021
legacy (`Operator`, `Kernel`, `Memcpy`, `Runtime`, string tids) categories are both read.

`ts` and `dur` are microseconds: relative to `baseTimeNanoseconds` when the trace has it,
absolute epoch microseconds otherwise. Every table is rebased to the earliest timed event
(float64 µs); the epoch time of that origin is kept in `meta.extra["time_origin_us"]`.

The file is decoded in batches (`advisor.formats.stream.EventStream`); each batch is walked
once and freed before the next is decoded. Batches are decoded with msgspec into `TraceEvent`
structs (`advisor.formats.chrome_trace`) that hold only the fields the walk reads (the others
are skipped, never built); a batch the stream gives as dicts (the last one, NaN/Infinity, an
odd shape) is converted to them first. The
walk appends to compact per-table columns: numbers in `array('d')` / `array('q')`, names as
codes into one list of distinct names per category. Each table is built once from its columns
at the end, so memory follows the kept columns, not the file.
"""

from __future__ import annotations

import contextlib
import math
import re
import zlib
from array import array
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pandas as pd

from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.formats.chrome_trace import NO_RAW, EventDecoder, TraceEvent, raw_value, shape_text
from advisor.formats.interning import string_column
from advisor.formats.stream import (
    CHUNK_BYTES,  # the batch size, a module global for tests
    EventStream,
)
from advisor.formats.timebase import OUTLIER_US, drop_far_times, far_warning, robust_origin
from advisor.hookspecs import hookimpl
from advisor.model import Profile, ProfileMeta, conform
from advisor.progress import FileProgress

READER = "kineto"
HEAD_BYTES = 64 * 1024
MAX_OP_TYPE = 64
GZIP_CUT = "truncated or corrupt gzip data"  # EventStream's problem for a cut gzip file

# What a `*.json` file that starts with `{"traceEvents"` must also show in its first bytes to
# be taken for a PyTorch trace rather than another Chrome-trace writer's.
_KINETO_MARKERS = (b'"schemaVersion"', b'"deviceProperties"', b'"distributedInfo"',
                   b'"baseTimeNanoseconds"', b"ProfilerStep#", b'"cpu_op"', b'"Operator"',
                   b'"cuda_runtime"', b'"Runtime"', b'"kernel"', b'"Kernel"',
                   b'"user_annotation"', b'"python_function"', b'"gpu_memcpy"',
                   b'"PyTorch Profiler')
_BLANK = b" \t\r\n\xef\xbb\xbf"  # whitespace and a UTF-8 byte order mark

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
    collect = {
        "steps": "mark iterations: profile with schedule=torch.profiler.schedule(...) and call "
                 "prof.step() once per iteration (ProfilerStep#N spans)",
        "device_ops": "profile the GPU too: activities=[ProfilerActivity.CPU, "
                      "ProfilerActivity.CUDA]",
        "device_ops.start_us": "profile the GPU too: activities=[ProfilerActivity.CPU, "
                               "ProfilerActivity.CUDA]",
        "device_ops.host_memory": "profile the GPU too: activities=[ProfilerActivity.CPU, "
                                  "ProfilerActivity.CUDA] (host<->device copies)",
        **dict.fromkeys(("memory", "memory.reserved_bytes", "memory.capacity_bytes"),
                        "profile_memory=True"),
        "host_ops.input_shapes": "record_shapes=True",
        "comm_ops": "profile the distributed run itself (torch.distributed collectives)",
        "comm_ops.bytes": "record_shapes=True (collective message sizes)",
    }
    """How to make the PyTorch profiler record what a rule lacks (see Reader.collect)."""

    def detect(self, path: Path) -> bool:
        """`*.pt.trace.json[.gz]` by name; other `*.json[.gz]` by their first 64 KB."""
        path = Path(path)
        name = path.name.lower()
        if not name.endswith((".json", ".json.gz")) or not path.is_file():
            return False
        if name.endswith((".pt.trace.json", ".pt.trace.json.gz")):
            return True
        if name.endswith(".chrome_timeline.json"):
            return False  # MegEngine's profiler timeline (read by the megengine reader)
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


def _head(path: Path, size: int = HEAD_BYTES) -> bytes:
    """The first `size` bytes of the (decompressed) file; what there is of a cut gzip file;
    nothing when it cannot be read."""
    try:
        with open(path, "rb") as raw:
            data = raw.read(size)
        if path.name.lower().endswith(".gz"):
            data = zlib.decompressobj(wbits=31).decompress(data, size)
        return data
    except (OSError, zlib.error):
        return b""


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


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


def _num_or_nan(value: Any) -> float:
    number = _num(value)
    return math.nan if number is None else number


NO_ID = -(2**63)  # a missing stream or thread id in the int64 columns
MAX_ID = 2**63 - 1


def _tid(value: Any, cache: dict[Any, int]) -> int:
    """Thread or stream id: ints as is (made positive), legacy strings like `stream 7`; NO_ID
    when there is none."""
    if value.__class__ is int:
        return -value if value < 0 else value
    try:
        return cache[value]
    except KeyError:
        pass
    except TypeError:  # unhashable: a list or an object
        return NO_ID
    number = NO_ID
    if isinstance(value, str):
        match = _DIGITS.search(value)
        number = abs(int(match.group())) if match else NO_ID
    elif isinstance(value, float) and value.is_integer():
        number = abs(int(value))
    cache[value] = number
    return number


_GENERIC_KERNELS = {"kernel", "kernel2", "device_kernel", "global_kernel"}
_TEMPLATED_KERNELS = {"elementwise_kernel", "vectorized_elementwise_kernel",
                      "unrolled_elementwise_kernel", "index_elementwise_kernel",
                      "elementwise_kernel_with_index", "reduce_kernel"}
"""PyTorch's kernel templates: one of them runs every element-wise op or reduction, so the
template's name says how, and only its functor argument says what it computes."""
_COMPUTES = re.compile(r"\b(\w*Functor\w*|\w+Ops|\w+_functor|\w+_kernel_cuda|"
                       r"\w+_cuda_kernel|\w+_kernel_impl|launch_\w+)\b")
_WRAPPERS = {"AUnaryFunctor", "BUnaryFunctor", "BinaryFunctor", "UnaryFunctor",
             "gpu_kernel_impl", "gpu_kernel_impl_nocast"}


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
    if short in _TEMPLATED_KERNELS:
        return _clip(_with_functor(short, text[cut:]))
    return _clip(short or name.strip())


def _with_functor(short: str, arguments: str) -> str:
    """`vectorized_elementwise_kernel<MulFunctor>`: the template named after what it computes
    (its functor, or the kernel function whose lambda it runs), so an add and a multiply are
    two operator types, not one; the template alone when no functor is named."""
    found = [(m.start(), m.group(1)) for m in _COMPUTES.finditer(arguments)]
    found += _lambda_owners(arguments)
    named = sorted((at, what) for at, what in found if what not in _WRAPPERS)
    return f"{short}<{named[0][1]}>" if named else short


def _lambda_owners(text: str) -> list[tuple[int, str]]:
    """(position, name) of each function whose lambda a template runs:
    `masked_fill_kernel(at::TensorIterator&, ...)::{lambda()#1}` -> masked_fill_kernel."""
    owners = []
    for match in re.finditer(r"\)::\{lambda", text):
        depth, pos = 0, match.start()
        while pos >= 0:  # back to the "(" that opens this parameter list
            depth += {")": 1, "(": -1}.get(text[pos], 0)
            if depth == 0:
                break
            pos -= 1
        head = text[:max(pos, 0)]
        if head.endswith(">"):  # a function template: compare_scalar_kernel<float>(...)
            depth, cut = 0, len(head) - 1
            while cut >= 0:
                depth += {">": 1, "<": -1}.get(head[cut], 0)
                if depth == 0:
                    break
                cut -= 1
            head = head[:max(cut, 0)]
        ident = re.search(r"(\w+)$", head)
        if ident:
            owners.append((ident.start(), ident.group(1)))
    return owners


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
    if short in _TEMPLATED_KERNELS:
        return _clip(_with_functor(short, " ".join(_length_prefixed(text[pos:]))))
    if short.lower() in _GENERIC_KERNELS:
        if pos < len(text) and text[pos] == "I":
            argument, _ = _mangled_name(text, pos + 1)
            if argument:
                return _clip(argument[-1])
        return "::".join(idents[-2:])
    return _clip(short)


def _length_prefixed(text: str) -> list[str]:
    """The identifiers of a mangled name's remainder (`13MulFunctorIfE` -> MulFunctor)."""
    found, pos = [], 0
    for match in re.finditer(r"(\d+)(?=[A-Za-z_])", text):
        if match.start() < pos:
            continue
        start = match.end()
        ident = text[start:start + int(match.group(1))]
        if ident.isidentifier():
            found.append(ident)
            pos = start + len(ident)
    return found


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
        path = self.path
        if path.is_dir():
            raise UnreadableInput(path, "a directory, not a trace file")
        if _head(path).lstrip(_BLANK).startswith(b"["):
            raise UnreadableInput(path, "a bare list of events, not a PyTorch profiler "
                                        "trace (an Ascend trace_view.json?)")
        walk = _EventWalk()
        progress = FileProgress(path.name, _size(path))
        stream = EventStream(path, progress, chunk_bytes=CHUNK_BYTES, decode=_DECODER.decode)
        gzip_cut = False
        try:
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
            self.warn("the trace holds NaN or Infinity, which is not valid JSON: read with "
                      "the standard parser; those values are treated as missing")
        self._meta(header)
        self._finish(header, walk)
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
            if isinstance(doc.get(key), (str, int, float)):
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
        if walk.device_names or properties:
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
        origin, centre = walk.earliest()
        if origin is not None:
            meta.extra["time_origin_us"] = origin + (base_ns / 1000.0 if base_ns else 0.0)
            meta.extra["time_base"] = ("relative to baseTimeNanoseconds" if base_ns
                                       else "epoch microseconds")
        tables = walk.frames(origin or 0.0, properties)
        if centre is not None:
            far = drop_far_times(tables, TIME_COLUMNS, centre - (origin or 0.0))
            if far:
                self.warn(far_warning(far, origin or 0.0))
        if "steps" not in tables and "device_ops" in tables:
            window = device_window(tables["device_ops"])
            if window is not None:
                tables["steps"] = window
                span = float(window["duration_us"].iloc[0])
                self.warn(f"no ProfilerStep in the trace: the device's span ({span / 1000:,.1f} "
                          "ms, first kernel to last) stands in for one step, so idle and "
                          "per-step figures are for that window")
        self.profile.tables = {name: conform(name, frame) for name, frame in tables.items()}




TIME_COLUMNS = {"steps": ("start_us", "end_us"), "device_ops": ("start_us",),
                "host_ops": ("start_us",), "comm_ops": ("start_us",), "memory": ("time_us",)}


def device_window(device_ops: pd.DataFrame) -> pd.DataFrame | None:
    """One step from the first device task's start to the last one's end: the window a trace
    without ProfilerStep (inference, eager decoding, a custom loop) is judged over, so that a
    GPU busy 12% of the time still gets its idle and host-bound findings."""
    start = device_ops["start_us"]
    end = (start + device_ops["duration_us"]).max()
    if start.isna().all() or not end > start.min():
        return None
    return pd.DataFrame({"step": [1], "start_us": [float(start.min())],
                         "end_us": [float(end)], "duration_us": [float(end - start.min())]})


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


# Host name codes that are no host_ops row; a gloo annotation is row `GLOO - code`.
STEP, SKIP, GLOO = -1, -2, -3




class _Args(msgspec.Struct, gc=False):
    """The `args` keys the walk reads. `Any`: a value of any JSON type is taken as it is and
    checked where it is used. The gloo shapes (lists on every operator) stay raw JSON until a
    gloo event needs them; in args converted from a dict, `Input Dims` is re-encoded as raw
    JSON and `Input type` is the decoded value."""

    stream: Any = None
    bytes: Any = None
    correlation: Any = None  # shared by a kernel/copy/memset and the runtime call launching it
    collective: Any = msgspec.field(default=None, name="Collective name")
    group_name: Any = msgspec.field(default=None, name="Process Group Name")
    group_desc: Any = msgspec.field(default=None, name="Process Group Description")
    dtype: Any = None
    nelems: Any = msgspec.field(default=None, name="In msg nelems")
    input_dims: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=NO_RAW, name="Input type")
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")
    allocated: Any = msgspec.field(default=None, name="Total Allocated")
    reserved: Any = msgspec.field(default=None, name="Total Reserved")
    name: Any = None
    labels: Any = None


_DECODER = EventDecoder(_Args)
_NO_ARGS = _DECODER.no_args


class _EventWalk:
    """The pass over traceEvents, one batch at a time, filling compact per-table columns.

    Names are kept once: a row holds the code of its (category, name) in `device_names` /
    `host_names`, which also carry what is derived from the name (op_type, kind...).
    """

    def __init__(self) -> None:
        self.steps: dict[int, tuple[float, float]] = {}
        self.cats: dict[Any, tuple[int, dict[str, int]]] = {}  # cat -> (family, name codes)
        self.tids: dict[Any, int] = {}
        # device_ops: (name, op_type, category, memcpy_kind, host_memory) per code
        self.device_names: list[tuple[str, str, str, str | None, str | None]] = []
        self.d_code, self.d_stream = array("i"), array("q")
        self.d_start, self.d_dur, self.d_bytes = array("d"), array("d"), array("d")
        self.device_pids: dict[int, int] = {}  # device events per int pid
        # host_ops: (name, kind) per code
        self.host_names: list[tuple[str, str]] = []
        self.h_code, self.h_thread = array("i"), array("q")
        self.h_start, self.h_dur = array("d"), array("d")
        # host_ops.input_shapes of operators (sparse): host row << 32 | code into `shapes`
        # (raw JSON), one append per operator in the hot loop
        self.shapes: dict[bytes, int] = {}
        self.s_row_code = array("q")
        # launches: correlation of each device row (NO_ID: none); runtime calls' correlation
        # and host row (their start and thread are the host row's)
        self.d_corr = array("q")
        self.r_corr, self.r_row = array("q"), array("q")
        # comm_ops (few rows): (name, op, group, start_us, duration_us, bytes)
        self.comm: list[tuple[str, str | None, str | None, float, float, float | None]] = []
        # memory: (device, device type, device id) per code
        self.memory_devices: list[tuple[str | None, int | None, int | None]] = []
        self.memory_codes: dict[tuple[Any, Any], int] = {}
        self.m_code = array("i")
        self.m_time, self.m_allocated, self.m_reserved = array("d"), array("d"), array("d")
        self.threads: dict[int, str] = {}
        self.process_names: dict[Any, str] = {}
        self.process_labels: dict[Any, str] = {}
        self.runtime_families: set[str] = set()
        self.no_dur = self.no_ts = self.not_events = 0
        self.other_min = math.inf  # earliest event that is in no table (spans, instants)

    def walk(self, events: list[Any]) -> None:
        """Add one batch of events: `TraceEvent`s, or dicts from the stream's fallbacks."""
        events = _DECODER.events(events)
        cats, tids, num, num_or_nan, tid_of = self.cats, self.tids, _num, _num_or_nan, _tid
        d_code, d_stream = self.d_code.append, self.d_stream.append
        d_start, d_dur, d_bytes = self.d_start.append, self.d_dur.append, self.d_bytes.append
        h_code, h_thread = self.h_code.append, self.h_thread.append
        h_start, h_dur = self.h_start.append, self.h_dur.append
        h_rows, shapes = self.h_code, self.shapes
        s_row_code = self.s_row_code.append
        d_corr = self.d_corr.append
        r_corr, r_row = self.r_corr.append, self.r_row.append
        pids = self.device_pids
        no_ts = no_dur = not_events = 0
        other_min = self.other_min
        nan = math.nan
        for ev in events:
            if ev.__class__ is not TraceEvent:
                not_events += 1
                continue
            ph = ev.ph
            if ph == "X":
                ts = ev.ts
                if ts.__class__ is not float and ts.__class__ is not int:
                    ts = num(ts)
                    if ts is None:
                        no_ts += 1
                        continue
                dur = ev.dur
                if dur.__class__ is not float and dur.__class__ is not int:
                    dur = num(dur)
                    if dur is None:
                        no_dur += 1
                        continue
                if dur < 0:
                    no_dur += 1
                    continue
                cat = ev.cat
                try:
                    family, codes = cats[cat]
                except (KeyError, TypeError):
                    family, codes = self._category(cat)
                if family == OTHER:
                    if ts < other_min:
                        other_min = ts
                    continue
                name = ev.name
                if name.__class__ is not str:
                    name = "" if name is None else str(name)
                code = codes.get(name)
                if family > MEMSET:  # a host event
                    if code is None:
                        code = self._host_code(family, name, codes)
                    if code >= 0:
                        tid = ev.tid
                        if tid.__class__ is not int:
                            tid = tid_of(tid, tids)
                        elif tid < 0:
                            tid = -tid
                        if family == OPERATOR:
                            args = ev.args
                            if args is not None and args.input_dims:
                                key = bytes(args.input_dims)
                                shape = shapes.get(key)
                                if shape is None:
                                    shape = shapes[key] = len(shapes)
                                s_row_code(len(h_rows) << 32 | shape)
                        elif family == RUNTIME:
                            args = ev.args
                            if args is not None:
                                corr = args.correlation
                                if corr.__class__ is int and NO_ID < corr <= MAX_ID:
                                    r_corr(corr)
                                    r_row(len(h_rows))
                        h_code(code)
                        h_start(ts)
                        h_dur(dur)
                        h_thread(tid)
                    else:
                        self._host_special(code, name, ts, dur, ev)
                    continue
                # kernel, memcpy, memset
                if code is None:
                    code = self._device_code(family, name, codes)
                args = ev.args
                if args is None:
                    args = _NO_ARGS
                stream = args.stream
                if stream.__class__ is not int:
                    stream = tid_of(ev.tid, tids)
                nbytes = args.bytes
                if nbytes.__class__ is not float and nbytes.__class__ is not int:
                    nbytes = nan if nbytes is None else num_or_nan(nbytes)
                corr = args.correlation
                d_corr(corr if corr.__class__ is int and NO_ID < corr <= MAX_ID else NO_ID)
                pid = ev.pid
                if pid.__class__ is int:
                    pids[pid] = pids.get(pid, 0) + 1
                if code < 0:  # an NCCL/RCCL kernel
                    code = ~code
                    self._comm(name, ts, dur, args)
                d_code(code)
                d_start(ts)
                d_dur(dur)
                d_stream(stream)
                d_bytes(nbytes)
            elif ph == "i" or ph == "I":
                ts = num(ev.ts)
                if ts is None:
                    no_ts += 1
                elif ev.name == "[memory]":
                    self._memory(ts, ev.args)
                elif ts < other_min:
                    other_min = ts
            elif ph == "M":
                self._metadata(ev)
        self.other_min = other_min
        self.no_ts += no_ts
        self.no_dur += no_dur
        self.not_events += not_events

    # -- first sight of a category or name -------------------------------------------------

    def _category(self, cat: Any) -> tuple[int, dict[str, int]]:
        """The event family of a `cat` value (case-insensitive) and its name codes."""
        family = _CATEGORIES.get(cat.lower(), OTHER) if isinstance(cat, str) else OTHER
        entry: tuple[int, dict[str, int]] = (family, {})
        with contextlib.suppress(TypeError):  # an unhashable cat is looked at every time
            self.cats[cat] = entry
        return entry

    def _host_code(self, family: int, name: str, codes: dict[str, int]) -> int:
        if family in (OPERATOR, ANNOTATION) and _STEP.match(name):
            code = STEP
        else:
            kind = _host_kind(family, name)
            if family == RUNTIME:
                self.runtime_families.add("ROCm" if name.startswith("hip")
                                          else "CUDA" if name.startswith("cu") else "other")
            if kind is None:
                code = SKIP
            else:
                code = len(self.host_names)
                self.host_names.append((name, kind))
                if family == ANNOTATION and name.startswith("gloo:"):
                    code = GLOO - code
        codes[name] = code
        return code

    def _device_code(self, family: int, name: str, codes: dict[str, int]) -> int:
        facts = _device_op_facts(name, family)
        code = len(self.device_names)
        self.device_names.append((name, *facts))
        if facts[1] == "communication":
            code = ~code
        codes[name] = code
        return code

    # -- per-event helpers (for the rarer events) --------------------------------------------

    def _host_special(self, code: int, name: str, ts: float, dur: float,
                      ev: TraceEvent[_Args]) -> None:
        """A ProfilerStep (a step, no host op), a gloo collective (a host op and a comm op)."""
        if code == STEP:
            number = int(_STEP.match(name).group(1))
            steps = self.steps
            if number not in steps or dur > steps[number][1]:
                steps[number] = (ts, dur)
        elif code <= GLOO:
            self._gloo(name, ts, dur, ev.args)
            self.h_code.append(GLOO - code)
            self.h_start.append(ts)
            self.h_dur.append(dur)
            self.h_thread.append(_tid(ev.tid, self.tids))

    def _comm(self, name: str, ts: float, dur: float, args: _Args) -> None:
        op = _collective(args.collective)
        if op is None:
            match = _NCCL_OP.search(name)
            op = _collective(match.group(1)) if match else None
        group_name = args.group_name
        group_desc = args.group_desc
        group = None
        if group_name not in (None, "") and group_desc not in (None, "", group_name):
            group = f"{group_name} ({group_desc})"
        elif group_name not in (None, "") or group_desc not in (None, ""):
            group = str(group_name if group_name not in (None, "") else group_desc)
        size = _dtype_bytes(args.dtype)
        count = _num(args.nelems)
        self.comm.append((name, op, group, ts, dur,
                          count * size if size is not None and count is not None else None))

    def _gloo(self, name: str, ts: float, dur: float, args: _Args | None) -> None:
        """CPU collectives (gloo) run on the host: their annotations are the comm ops."""
        args = _NO_ARGS if args is None else args
        total = None
        dims, types = raw_value(args.input_dims), raw_value(args.input_type)
        if isinstance(dims, list) and isinstance(types, list):
            total = 0.0
            for shape, dtype in zip(dims, types):
                size = _dtype_bytes(dtype)
                if not isinstance(shape, list) or size is None or not shape:
                    continue
                elements = 1.0
                for extent in shape:
                    elements *= _num(extent) or 0.0
                total += elements * size
            total = total or None
        self.comm.append((name, _collective(name.split(":", 1)[1]), None, ts, dur, total))

    def _memory(self, ts: float, args: _Args | None) -> None:
        if args is None:
            args = _NO_ARGS
        key = (args.device_type, args.device_id)
        try:
            code = self.memory_codes[key]
        except (KeyError, TypeError):
            code = self._memory_device(key)
        self.m_code.append(code)
        self.m_time.append(ts)
        self.m_allocated.append(_num_or_nan(args.allocated))
        self.m_reserved.append(_num_or_nan(args.reserved))

    def _memory_device(self, key: tuple[Any, Any]) -> int:
        device_type, device_id = _int_or_none(key[0]), _int_or_none(key[1])
        if device_type is None:
            device = None
        else:
            device = _DEVICE_TYPES.get(device_type, f"device_type_{device_type}")
            if device_id is not None and device_id >= 0:
                device = f"{device}:{device_id}"
        code = len(self.memory_devices)
        self.memory_devices.append((device, device_type, device_id))
        with contextlib.suppress(TypeError):
            self.memory_codes[key] = code
        return code

    def _metadata(self, ev: TraceEvent[_Args]) -> None:
        """process/thread names; a later event for the same process or thread wins."""
        args = ev.args
        if args is None:
            return
        kind, label = ev.name, args.name
        if kind == "process_labels" and isinstance(args.labels, str):
            self.process_labels[ev.pid] = args.labels
        if not isinstance(label, str):
            return
        if kind == "thread_name":
            tid = _tid(ev.tid, self.tids)
            if tid != NO_ID and isinstance(ev.pid, int) and "stream" not in label:
                self.threads[tid] = label.strip()
        elif kind == "process_name":
            self.process_names[ev.pid] = label

    # -- after the pass ------------------------------------------------------------------------

    def main_device(self) -> int | None:
        """The device (pid of device events) most device ops ran on (the lowest of a tie)."""
        pids = self.device_pids
        return min(pids, key=lambda pid: (-pids[pid], pid)) if pids else None

    def earliest(self) -> tuple[float | None, float | None]:
        """(the time origin, the centre of the trace's times): the earliest time within
        OUTLIER_US of the median of all event times. One event at ts = -1e18 must not become
        the origin: every other time would then lose its precision in float64."""
        columns = [np.asarray(c, dtype=np.float64) for c in (
            self.d_start, self.h_start, self.m_time, [row[3] for row in self.comm],
            [start for start, _ in self.steps.values()]) if len(c)]
        times = np.concatenate(columns) if columns else np.empty(0)
        times = times[np.isfinite(times)]
        if not len(times):
            return (None if self.other_min == math.inf else float(self.other_min)), None
        origin, centre = robust_origin(times)
        if abs(self.other_min - centre) <= OUTLIER_US:
            origin = min(origin, float(self.other_min))
        return origin, centre

    def _launches(self, origin: float) -> tuple[np.ndarray, pd.api.extensions.ExtensionArray]:
        """launch_us and launch_thread of each device row: the runtime call with its
        correlation id (the first one, should an id repeat); NaN / <NA> where none has it."""
        rows = len(self.d_corr)
        launch_us = np.full(rows, np.nan)
        thread = np.full(rows, NO_ID, dtype=np.int64)
        if self.r_corr:
            ids, first = np.unique(_floats(self.r_corr, np.int64), return_index=True)
            wanted = _floats(self.d_corr, np.int64)
            at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
            found = (ids[at] == wanted) & (wanted != NO_ID)
            call = first[at[found]]
            row = _floats(self.r_row, np.int64)[call]
            launch_us[found] = _floats(self.h_start)[row] - origin
            thread[found] = _floats(self.h_thread, np.int64)[row]
        return launch_us, pd.arrays.IntegerArray(thread, thread == NO_ID)

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
        if self.d_code:
            codes = _floats(self.d_code, np.int32)
            name, op_type, category, memcpy_kind, host_memory = (
                string_column(column, codes) for column in zip_strict(*self.device_names))
            nbytes = _floats(self.d_bytes)
            launch_us, launch_thread = self._launches(origin)
            tables["device_ops"] = pd.DataFrame({
                "name": name, "op_type": op_type, "core_type": "GPU",
                "start_us": _floats(self.d_start) - origin,
                "duration_us": _floats(self.d_dur),
                "stream": _ids(self.d_stream), "category": category,
                "memcpy_kind": memcpy_kind, "host_memory": host_memory,
                "bytes": np.where(np.isfinite(nbytes), nbytes, np.nan),
                "launch_us": launch_us, "launch_thread": launch_thread,
            })
        if self.h_code:
            codes = _floats(self.h_code, np.int32)
            name, kind = (string_column(column, codes)
                          for column in zip_strict(*self.host_names))
            host = pd.DataFrame({
                "name": name, "kind": kind,
                "start_us": _floats(self.h_start) - origin,
                "duration_us": _floats(self.h_dur),
                "thread": _ids(self.h_thread),
            })
            if self.s_row_code:
                packed = _floats(self.s_row_code, np.int64)
                shape_codes = np.full(len(codes), -1, dtype=np.intp)
                shape_codes[packed >> 32] = packed & 0xFFFFFFFF
                shape_codes[(kind != "aten").to_numpy(dtype=bool)] = -1  # aten operators only
                texts = pd.array([*map(shape_text, self.shapes), None], dtype="string")
                host["input_shapes"] = texts.take(shape_codes)  # -1: the None at the end
            tables["host_ops"] = host
        if self.comm:
            name, op, group, start, duration, nbytes = zip_strict(*self.comm)
            duration = np.asarray(duration, dtype=np.float64)
            nbytes = np.asarray(nbytes, dtype=np.float64)
            with np.errstate(divide="ignore", invalid="ignore"):
                bandwidth = np.where(duration > 0, nbytes / duration / 1e3, np.nan)
            tables["comm_ops"] = pd.DataFrame({
                "name": name, "op": op, "group": group,
                "start_us": np.asarray(start, dtype=np.float64) - origin,
                "duration_us": duration, "bytes": nbytes, "bandwidth_gbps": bandwidth,
            })
        if self.m_code:
            codes = _floats(self.m_code, np.int32)
            capacity = np.array([_capacity(t, i, properties) for _, t, i in self.memory_devices],
                                dtype=np.float64)
            tables["memory"] = pd.DataFrame({
                "time_us": _floats(self.m_time) - origin,
                "allocated_bytes": _floats(self.m_allocated),
                "reserved_bytes": _floats(self.m_reserved),
                "device": string_column([d for d, _, _ in self.memory_devices], codes),
                "capacity_bytes": capacity[codes],
            })
        return tables


def _floats(column: array, dtype: type = np.float64) -> np.ndarray:
    """An array column seen as a NumPy array, without a copy (the frame copies it)."""
    return np.frombuffer(column, dtype=dtype)


def _ids(column: array) -> pd.api.extensions.ExtensionArray:
    """An int64 column with NO_ID for missing as a nullable Int64 array."""
    values = np.frombuffer(column, dtype=np.int64)
    return pd.arrays.IntegerArray(values, values == NO_ID)


def _capacity(device_type: int | None, device_id: int | None,
              properties: dict[Any, dict[str, Any]]) -> float | None:
    if device_type not in _GPU_DEVICE_TYPES or device_id is None:
        return None
    entry = properties.get(device_id)
    return _num(entry.get("totalGlobalMem")) if entry else None
