"""Reader for MegEngine profiles: dynamic-graph Chrome timelines and static-graph profile JSON.

Dynamic graph (`megengine.utils.profiler.Profiler`) writes `<pid>.chrome_timeline.json`: Chrome
trace events, mostly `B`/`E` pairs that are matched here per (pid, tid), last-in first-out.
Threads are named by `thread_name` metadata: `channel` / `interpreter` (the Python side that
dispatches), `worker` (the async worker that launches kernels) and one per device (`gpu0:0`,
CUPTI streams) where kernels really run. `StopStep` instants (`Profiler.step()`) bound the
steps. The v1.0-1.2 layout (a bare list with `tid: "host"` or a device string) is read too.

Static graph (`trace(profiling=True).get_profile()`, saved by the user) is one JSON object
with `graph_exec` (operators, vars) and `profiler` (per-operator device and host
`start`/`kern`/`end` times in SECONDS, and `opr_footprint` with FLO and bytes). As MegEngine's
profile_analyze does, an operator's time is the longest `end - start` over its comp nodes (host
threads), and its wait before the kernel (`--top-end-key kern`) the longest `kern - start`.
"""

from __future__ import annotations

import re
from collections import defaultdict
from operator import attrgetter
from pathlib import Path
from sys import intern
from typing import TYPE_CHECKING, Any, NamedTuple

from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.formats.interning import hashable
from advisor.hookspecs import hookimpl
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta, conform

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

HEAD_BYTES = 64 * 1024
TIMELINE_SUFFIX = ".chrome_timeline.json"
_DEVICE_THREAD = re.compile(r"^(?:[a-z]+\d+:\d+|.*cupti.*|.*stream.*)$", re.IGNORECASE)
_HOST_THREAD_NAMES = {"host", "channel", "interpreter", "worker"}
_SKIP = {"StartProfile", "StopProfile", "TensorGetProp"}
_DTYPE_BYTES = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "uint16": 2,
    "bool": 1,
    "byte": 1,
    "quantizeds8": 1,
    "quantizeds32": 4,
    "quantizeds16": 2,
    "quantized8asymm": 1,
    "float64": 8,
}
_MEMORY_COMMANDS = ("Put", "Drop", "Del", "RecFree", "ReGen", "AutoEvict")
_COPY_ENDS = {"host": "H", "device": "D", "pinned": "H", "pageable": "H"}


PYTORCH_TRACE_SUFFIX = ".pt.trace.json"
"""What torch.profiler's tensorboard_trace_handler names its traces."""


def _head(path: Path) -> bytes:
    with path.open("rb") as handle:
        return handle.read(HEAD_BYTES)


def _core_type(thread: str) -> str:
    """Device kind from a comp-node or thread name (`gpu0:0`, `cpu0:0`, `cupti stream 7`)."""
    low = thread.lower()
    if low.startswith(("gpu", "cuda")) or "cupti" in low:
        return "GPU"
    if low.startswith(("cpu", "xpu", "multithread")):
        return "CPU"
    match = re.match(r"[a-z]+", low)
    return match.group(0).upper() if match else "DEVICE"


class MegEngineReader:
    """Reads one MegEngine profile file (dynamic timeline or static-graph profile JSON)."""

    name = "megengine"
    formats = (
        "MegEngine profiler timeline (*.chrome_timeline.json)",
        "MegEngine static-graph profile (get_profile() JSON with graph_exec/profiler)",
    )

    def detect(self, path: Path) -> bool:
        """Timelines by name; static profiles by a `graph_exec` key in the first 64 KB. A
        PyTorch profiler trace (*.pt.trace.json) is never opened: a run of many ranks has
        hundreds of them, and reading each one's head cost 1.5 ms."""
        path = Path(path)
        name = path.name.lower()
        if not name.endswith(".json") or name.endswith(PYTORCH_TRACE_SUFFIX):
            return False
        if not path.is_file():
            return False
        if name.endswith(TIMELINE_SUFFIX):
            return True
        head = _head(path).lstrip(b" \t\r\n\xef\xbb\xbf")
        return head.startswith(b"{") and b'"graph_exec"' in head and b'"node_type"' in head

    def read(self, path: Path) -> list[Profile]:
        path = Path(path)
        if path.name.lower().endswith(TIMELINE_SUFFIX):
            return [_read_timeline(path)]
        return [_read_static(path)]


@hookimpl
def advisor_readers() -> list[MegEngineReader]:
    return [MegEngineReader()]


# ---------------------------------------------------------------------------------------------
# Dynamic graph: Chrome timeline


def _new_profile(path: Path, source_format: str) -> Profile:
    meta = ProfileMeta(source_format, str(path), framework="MegEngine", files_read=[str(path)])
    return Profile(meta)


def _number(value: Any) -> float | None:
    """A finite float, or None for anything else (strings, NaN, missing)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None


def _read_timeline(path: Path) -> Profile:
    # the decoders load when a timeline is read: listing plugins or rules never needs them
    from advisor.formats.stream import EventStream

    profile = _new_profile(path, "megengine_timeline")
    stream = EventStream(path)
    timeline = _Timeline(profile, path)
    for batch in stream:
        timeline.take(batch)
    if not timeline.entries:
        raise UnreadableInput(path, "no trace events")
    if stream.truncated is not None:
        profile.warn(
            path, f"truncated timeline: {stream.truncated} events recovered", reader="megengine"
        )
    meta_obj = stream.header.get("metadata")
    if isinstance(meta_obj, dict) and "localTime" in meta_obj:
        profile.meta.extra["local_time"] = str(meta_obj["localTime"])
    timeline.build()
    return profile


class _Event(NamedTuple):
    """What pairing and the tables use of one timed event (a tuple, not the decoded dict)."""

    ts: float
    ph: str
    name: str
    cat: str
    pid: Any
    tid: Any
    dur: Any
    args: dict[str, Any] | None  # None when missing, empty or no object


def _arguments(event: _Event) -> dict[str, Any]:
    return {} if event.args is None else event.args


_TIMED = frozenset(("B", "E", "X", "i", "I", "C"))


class _Timeline:
    """Pairs B/E events per thread and sorts them into the normalized tables."""

    def __init__(self, profile: Profile, path: Path) -> None:
        self.profile, self.path = profile, path
        self.threads: dict[tuple[Any, Any], str] = {}
        self.timed: list[_Event] = []
        self.entries = 0  # event objects seen
        self.ids: dict[Any, Any] = {}  # one object per pid and tid value, not one per event
        # name, cat, tid, start, end, args, thread name
        self.spans: list[tuple[str, str, Any, float, float, dict[str, Any], str]] = []
        self.stops: list[float] = []
        self.counters: list[tuple[str, float, float]] = []
        self.bad_ts = 0

    def take(self, batch: list[Any]) -> None:
        """Keep a batch's thread names and its timed events as `_Event`s, their texts
        interned and their pids and tids shared (a few values repeated over the whole run)."""
        ids = self.ids
        for event in batch:
            if not isinstance(event, dict):
                continue
            self.entries += 1
            ph = event.get("ph")
            if ph == "M":
                if event.get("name") == "thread_name":
                    args = event.get("args")
                    name = args.get("name") if isinstance(args, dict) else None
                    key = (hashable(event.get("pid")), hashable(event.get("tid")))
                    self.threads[key] = str(name)
                continue
            if ph not in _TIMED:
                continue
            ts = _number(event.get("ts"))
            if ts is None:
                self.bad_ts += 1
                continue
            self.timed.append(
                _Event(
                    ts,
                    ph,
                    intern(str(event.get("name", ""))),
                    intern(str(event.get("cat", ""))),
                    ids.setdefault(pid := hashable(event.get("pid")), pid),
                    ids.setdefault(tid := hashable(event.get("tid")), tid),
                    event.get("dur"),
                    args if isinstance(args := event.get("args"), dict) and args else None,
                )
            )

    def build(self) -> None:
        self._pair()
        times = [s[3] for s in self.spans] + self.stops + [c[1] for c in self.counters]
        if not times:
            raise UnreadableInput(self.path, "no timed events (no B/E pairs, steps or counters)")
        origin = min(times)
        self.profile.meta.extra["time_origin_us"] = origin
        if self.bad_ts:
            self.profile.warn(
                self.path, f"{self.bad_ts} events without a numeric ts skipped", reader="megengine"
            )
        self._tables(origin)

    def _thread(self, event: _Event) -> str:
        return self.threads.get((event.pid, event.tid), str(event.tid))

    def _pair(self) -> None:
        """Match B with E per (pid, tid), LIFO; count what stays unmatched."""
        timed, self.timed = self.timed, []
        timed.sort(key=attrgetter("ts"))  # stable: events of the same time in file order
        stacks: dict[tuple[Any, Any], list[_Event]] = defaultdict(list)
        lone_begin = lone_end = 0
        for event in timed:
            ph, name, ts = event.ph, event.name, event.ts
            if ph in ("i", "I"):
                if name == "StopStep":
                    self.stops.append(ts)
            elif ph == "C":
                value = _number(_arguments(event).get("value"))
                if value is not None:
                    self.counters.append((name, ts, value))
            elif ph == "X":
                dur = _number(event.dur)
                if dur is not None and dur > 0:
                    self._span(event, ts, ts + dur, _arguments(event))
            elif ph == "B":
                stacks[(event.pid, event.tid)].append(event)
            else:
                stack = stacks[(event.pid, event.tid)]
                names = [begin.name for begin in stack]
                if name and name in names:
                    depth = len(names) - 1 - names[::-1].index(name)
                    lone_begin += len(stack) - 1 - depth
                    del stack[depth + 1 :]
                if not stack or (name and stack[-1].name != name):
                    lone_end += 1
                    continue
                begin = stack.pop()
                args = _arguments(begin)
                if event.args is not None:  # the end's args complete the begin's
                    args = {**args, **event.args}
                self._span(begin, begin.ts, ts, args)
        lone_begin += sum(len(s) for s in stacks.values())
        if lone_begin or lone_end:
            self.profile.warn(
                self.path,
                f"{lone_begin + lone_end} unmatched B/E events skipped "
                f"({lone_begin} begin without end, {lone_end} end without begin)",
                reader="megengine",
            )

    def _span(self, event: _Event, start: float, end: float, args: dict[str, Any]) -> None:
        if event.name in _SKIP:
            return
        self.spans.append((event.name, event.cat, event.tid, start, end, args, self._thread(event)))

    def _tables(self, origin: float) -> None:
        device: defaultdict[str, list[Any]] = defaultdict(list)
        host: defaultdict[str, list[Any]] = defaultdict(list)
        rows = 0
        for name, cat, tid, start, end, args, thread in self.spans:
            if thread.lower() not in _HOST_THREAD_NAMES and _DEVICE_THREAD.match(thread):
                fields = _device_fields(name, cat, thread, args)
                for key in _OPTIONAL_DEVICE_FIELDS:  # None where absent, as rows of dicts read
                    device[key].append(fields.pop(key, None))
                _append(device, name=name, start_us=start - origin, duration_us=end - start)
                _append(device, **fields)
                rows += 1
            else:
                kind = _host_kind(name, cat, thread)
                if kind is not None:
                    tid_number = _number(tid)
                    _append(
                        host,
                        name=name,
                        start_us=start - origin,
                        duration_us=end - start,
                        kind=kind,
                        thread=None if tid_number is None else int(tid_number),
                    )
        self.spans = []
        tables = self.profile.tables
        if rows:
            present = {k: v for k, v in device.items() if any(x is not None for x in v)}
            frame = pd.DataFrame(present).sort_values("start_us", kind="stable")
            tables["device_ops"] = conform("device_ops", frame)
            self.profile.meta.device_kind = "GPU" if (frame["core_type"] == "GPU").any() else "CPU"
            names = sorted(set(frame["thread"]))
            devices = [n for n in names if re.fullmatch(r"[a-z]+\d+:\d+", n, re.IGNORECASE)]
            self.profile.meta.device_name = ",".join(devices or names)
        if host:
            frame = pd.DataFrame(dict(host)).sort_values("start_us", kind="stable")
            tables["host_ops"] = conform("host_ops", frame)
        if self.stops:
            bounds = sorted({origin, *self.stops})
            tables["steps"] = conform(
                "steps",
                pd.DataFrame(
                    {
                        "step": range(1, len(bounds)),
                        "start_us": [b - origin for b in bounds[:-1]],
                        "end_us": [b - origin for b in bounds[1:]],
                        "duration_us": [b - a for a, b in zip_strict(bounds[:-1], bounds[1:])],
                    }
                ),
            )
        memory = [
            (t - origin, v, n[: -len("_alloc_mem")])
            for n, t, v in self.counters
            if n.endswith("_alloc_mem")
        ]
        if memory:
            tables["memory"] = conform(
                "memory", pd.DataFrame(memory, columns=["time_us", "allocated_bytes", "device"])
            )
        for name, _, value in self.counters:
            if name in ("gpu_usgae_ratio", "gpu_usage_ratio", "train_time_ratio"):
                key = "gpu_usage_ratio" if name.startswith("gpu_us") else name
                self.profile.meta.extra[key] = value  # the last sample is the whole run's


_OPTIONAL_DEVICE_FIELDS = ("memcpy_kind", "bytes", "input_shapes", "input_dtypes")
"""The device_ops fields an event has only where its name or args give them."""


def _append(columns: defaultdict[str, list[Any]], **values: Any) -> None:
    for key, value in values.items():
        columns[key].append(value)


def _device_fields(name: str, cat: str, thread: str, args: dict[str, Any]) -> dict[str, Any]:
    """core_type, category, bytes and copy direction of one device event."""
    fields: dict[str, Any] = {
        "op_type": name.split(" ")[0],
        "core_type": _core_type(thread),
        "category": "compute",
        "thread": thread,
    }
    low = name.lower()
    if low == "hosttodevice" or low.startswith("memcpy") or cat.lower() == "memcpy":
        fields["category"] = "memcpy"
        if low == "hosttodevice":
            fields["memcpy_kind"] = "HtoD"
        else:
            src = _COPY_ENDS.get(str(args.get("src_kind", "")).lower())
            dst = _COPY_ENDS.get(str(args.get("dst_kind", "")).lower())
            if src and dst:
                fields["memcpy_kind"] = f"{src}to{dst}"
    elif low.startswith("memset") or cat.lower() == "memset":
        fields["category"] = "memset"
    size = _number(args.get("bytes"))
    if size is None:
        count = _number(args.get("nr_elements"))
        width = _DTYPE_BYTES.get(str(args.get("dtype", "")).lower())
        size = count * width if count is not None and width else None
    if size is not None:
        fields["bytes"] = size
    if "shape" in args:
        fields["input_shapes"] = str(args["shape"])
    if "dtype" in args:
        fields["input_dtypes"] = str(args["dtype"])
    return fields


def _host_kind(name: str, cat: str, thread: str) -> str | None:
    """host_ops kind of a host-thread event; None for bookkeeping events not worth a row."""
    if name == "OpDispatch" or cat == "OpDispatch":
        return "aten"
    if name.startswith("GetValue"):
        return "sync"  # the Python side waits for a device value
    if name.startswith(_MEMORY_COMMANDS):
        return "memory"
    if name.startswith(("Input ", "Output ")):
        return None
    if thread.lower() == "worker":
        return "launch"  # operator execution on the worker: the kernel launches
    return "annotation"  # user scopes and module boundaries on the Python thread


# ---------------------------------------------------------------------------------------------
# Static graph: get_profile() JSON


def _read_static(path: Path) -> Profile:
    import orjson  # here: `rules list` loads this plugin, not its decoders

    profile = _new_profile(path, "megengine_static")
    try:
        doc = orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise UnreadableInput(path, f"not valid JSON ({exc})") from None
    graph = doc.get("graph_exec") if isinstance(doc, dict) else None
    prof = doc.get("profiler") if isinstance(doc, dict) else None
    if not isinstance(graph, dict) or not isinstance(prof, dict):
        raise UnreadableInput(path, "no 'graph_exec' and 'profiler' objects")
    operators = graph.get("operator")
    if not isinstance(operators, dict):
        raise UnreadableInput(path, "graph_exec.operator is missing or not an object")
    variables, device_times, host_times = (
        _object(graph.get("var")),
        _object(prof.get("device")),
        _object(prof.get("host")),
    )
    footprints = prof.get("opr_footprint")
    if not isinstance(footprints, dict):
        footprints = {}
        profile.warn(
            path, "profiler.opr_footprint missing: no FLOPS or bandwidth", reader="megengine"
        )
    device, host, bad = [], [], 0
    for opr_id, opr in operators.items():
        if not isinstance(opr, dict):
            bad += 1
            continue
        name, typ = str(opr.get("name", opr_id)), str(opr.get("type", ""))
        times = _opr_times(device_times.get(opr_id))
        if times is None:
            if opr_id in device_times:
                bad += 1
        else:
            start, duration, comp_node, wait = times
            row = {
                "name": name,
                "op_type": typ,
                "core_type": _core_type(_node_name(comp_node)),
                "start_us": start * 1e6,
                "duration_us": duration * 1e6,
                "kernel_wait_us": None if wait is None else wait * 1e6,
                "category": "memcpy" if "copy" in typ.lower() else "compute",
                "input_dtypes": ";".join(
                    _dtype(variables.get(str(v))) for v in opr.get("input") or []
                ),
            }
            device.append({**row, **_footprint(footprints.get(opr_id))})
        host_time = _opr_times(host_times.get(opr_id))
        if host_time is not None:
            host.append(
                {
                    "name": name,
                    "kind": "launch",
                    "start_us": host_time[0] * 1e6,
                    "duration_us": host_time[1] * 1e6,
                    "kernel_wait_us": None if host_time[3] is None else host_time[3] * 1e6,
                }
            )
    if bad:
        noun = "operator" if bad == 1 else "operators"
        profile.warn(
            path, f"{bad} {noun} with unreadable profiler times skipped", reader="megengine"
        )
    if not device and not host:
        raise UnreadableInput(path, "no operator has profiler device or host times")
    origin = min(r["start_us"] for r in device + host)
    profile.meta.extra["time_origin_us"] = origin
    if device:
        frame = pd.DataFrame(device).sort_values("start_us", kind="stable")
        frame["start_us"] -= origin
        profile.tables["device_ops"] = conform("device_ops", frame)
        profile.meta.device_kind = "GPU" if (frame["core_type"] == "GPU").any() else "CPU"
    if host:
        frame = pd.DataFrame(host).sort_values("start_us", kind="stable")
        frame["start_us"] -= origin
        profile.tables["host_ops"] = conform("host_ops", frame)
    return profile


def _object(value: Any) -> dict[str, Any]:
    """A JSON object of the profile, or an empty one where the file has something else."""
    return value if isinstance(value, dict) else {}


def _node_name(comp_node: str) -> str:
    """`CompNode("gpu0:0" from "xpux:0")` -> `gpu0:0`."""
    match = re.search(r'"([^"]+)"', comp_node)
    return match.group(1) if match else comp_node


def _opr_times(entry: Any) -> tuple[float, float, str, float | None] | None:
    """(earliest start s, longest end - start s, its comp node, longest kern - start s or None
    where no entry has a `kern`) over an operator's entries (comp nodes or host threads)."""
    if not isinstance(entry, dict):
        return None
    found, waits = [], []
    for where, t in entry.items():
        if isinstance(t, dict):
            start, end = _number(t.get("start")), _number(t.get("end"))
            if start is not None and end is not None and end >= start:
                found.append((start, end - start, str(where)))
                kern = _number(t.get("kern"))
                if kern is not None and start <= kern <= end:
                    waits.append(kern - start)
    if not found:
        return None
    longest = max(found, key=lambda f: f[1])
    return min(f[0] for f in found), longest[1], longest[2], max(waits, default=None)


def _footprint(entry: Any) -> dict[str, Any]:
    """flops (FLO), bytes and shapes from an opr_footprint entry."""
    if not isinstance(entry, dict):
        return {}
    out: dict[str, Any] = {
        "flops": _number(entry.get("computation")),
        "bytes": _number(entry.get("memory")),
    }
    for key, col in (("in_shapes", "input_shapes"), ("out_shapes", "output_shapes")):
        if isinstance(entry.get(key), list):
            out[col] = ";".join(
                str(list(s)) if isinstance(s, list) else str(s) for s in entry[key]
            ).replace(" ", "")
    return out


def _dtype(var: Any) -> str:
    if not isinstance(var, dict):
        return ""
    plan = var.get("mem_plan")
    layout = plan.get("layout") if isinstance(plan, dict) else None
    return str(layout.get("dtype", "")) if isinstance(layout, dict) else ""
