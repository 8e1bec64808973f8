"""The pass over traceEvents, one batch at a time, into compact per-table columns."""

from __future__ import annotations

import contextlib
import math
from array import array
from typing import TYPE_CHECKING, Any

import msgspec

from advisor.formats.chrome_trace import NO_RAW, EventDecoder, TraceEvent, raw_value
from advisor.formats.timebase import OUTLIER_US, robust_origin
from advisor.formats.trace_index import UNBOUNDED, BatchTimes
from advisor.lazy import lazy_module

from .categories import (
    ANNOTATION,
    CATEGORIES,
    DEVICE_TYPES,
    MEMSET,
    NCCL_OP,
    OPERATOR,
    OTHER,
    RUNTIME,
    STEP_NAME,
    SYNC,
    collective,
    device_op_facts,
    dtype_bytes,
    host_kind,
)
from .values import MAX_ID, NO_ID, id_number, int_or_none, json_number, json_number_or_nan

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_module("numpy")

# Host name codes that are no host_ops row; a gloo annotation is row `GLOO - code`.
STEP, SKIP, GLOO = -1, -2, -3


class WalkArgs(msgspec.Struct, gc=False):
    """The `args` keys the walk reads. `Any`: a value of any JSON type is taken as it is and
    checked where it is used. The gloo shapes (lists on every operator) stay raw JSON until a
    gloo event needs them (args converted from a dict re-encode them as raw JSON)."""

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
    alloc_bytes: Any = msgspec.field(default=None, name="Bytes")  # [memory]: + allocated, - freed
    addr: Any = msgspec.field(default=None, name="Addr")  # [memory]: the block, to pair its free
    name: Any = None
    labels: Any = None
    # a kernel's launch configuration and CUPTI's occupancy estimate
    blocks_per_sm: Any = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Any = msgspec.field(default=None, name="warps per SM")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    grid: Any = None
    block: Any = None


DECODER = EventDecoder(WalkArgs)
_NO_ARGS = DECODER.no_args
_ENCODE = msgspec.json.encode


def _device_row(code: int) -> int:
    return ~code if code < 0 else code  # communication kernels' codes are complemented


def _host_row(code: int) -> int:
    return code if code >= 0 else GLOO - code  # gloo annotations' codes are offset


_TYPECODES = {"i": "int32", "q": "int64", "d": "float64"}  # names: numpy is imported lazily


def _append(column: array, values: np.ndarray) -> None:
    """Append numpy values to an array column (of its own type)."""
    column.frombytes(values.astype(_TYPECODES[column.typecode], copy=False).tobytes())


class EventWalk:
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
        # CUPTI's synchronisation records (cuda_sync): correlation and host row, to tell those
        # of a recorded runtime call (cudaStreamSynchronize...) from those standing alone
        self.y_corr, self.y_row = array("q"), array("q")
        # kernel launch configurations (sparse, kernels only): the device row and the code of
        # its configuration (blocks and warps per SM, occupancy, shared memory, registers,
        # grid, block, as written) in `launches`, each distinct one kept once and told apart
        # by its JSON text (1, 1.0 and true convert differently but compare equal)
        self.k_row, self.k_code = array("q"), array("i")
        self.launches: dict[bytes, int] = {}
        self.launch_values: list[tuple[Any, ...]] = []
        # comm_ops (few rows): (name, op, group, start_us, duration_us, bytes)
        self.comm: list[tuple[str, str | None, str | None, float, float, float | None]] = []
        # memory: (device, device type, device id) per code
        self.memory_devices: list[tuple[str | None, int | None, int | None]] = []
        self.memory_codes: dict[tuple[Any, Any], int] = {}
        self.m_code = array("i")
        self.m_time, self.m_allocated, self.m_reserved = array("d"), array("d"), array("d")
        self.m_bytes, self.m_addr, self.m_thread = array("d"), array("q"), array("q")
        # [OutOfMemory] instants (few): (ts, memory device code, request, allocated, reserved)
        self.ooms: list[tuple[float, int, float, float, float]] = []
        self.threads: dict[int, str] = {}
        self.process_names: dict[Any, str] = {}
        self.process_labels: dict[Any, str] = {}
        self.runtime_families: set[str] = set()
        self.no_dur = self.no_ts = self.not_events = 0
        self.other_min = math.inf  # earliest event that is in no table (spans, instants)
        self.batch_times: list[BatchTimes] = []  # per batch walked (advisor.formats.trace_index)

    def walk(self, events: list[Any]) -> None:
        """Add one batch of events: `TraceEvent`s, or dicts from the stream's fallbacks."""
        events = DECODER.events(events)
        cats, tids, tid_of = self.cats, self.tids, id_number
        num, num_or_nan = json_number, json_number_or_nan
        d_code, d_stream = self.d_code.append, self.d_stream.append
        d_start, d_dur, d_bytes = self.d_start.append, self.d_dur.append, self.d_bytes.append
        h_code, h_thread = self.h_code.append, self.h_thread.append
        h_start, h_dur = self.h_start.append, self.h_dur.append
        h_rows, shapes = self.h_code, self.shapes
        s_row_code = self.s_row_code.append
        d_corr = self.d_corr.append
        r_corr, r_row = self.r_corr.append, self.r_row.append
        y_corr, y_row = self.y_corr.append, self.y_row.append
        k_row, k_code = self.k_row.append, self.k_code.append
        launches, launch_values, encode = self.launches, self.launch_values, _ENCODE
        pids = self.device_pids
        no_ts = no_dur = not_events = 0
        other_min = self.other_min
        first, last, names_lanes = math.inf, -math.inf, False
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
                if ts < first:
                    first = ts
                end = ts + dur
                if end > last:
                    last = end
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
                        elif family in (RUNTIME, SYNC):
                            args = ev.args
                            if args is not None:
                                corr = args.correlation
                                if corr.__class__ is int and NO_ID < corr <= MAX_ID:
                                    if family == RUNTIME:
                                        r_corr(corr)
                                        r_row(len(h_rows))
                                    else:
                                        y_corr(corr)
                                        y_row(len(h_rows))
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
                if args.blocks_per_sm is not None:
                    launch = (
                        args.blocks_per_sm,
                        args.warps_per_sm,
                        args.occupancy,
                        args.shared_memory,
                        args.registers,
                        args.grid,
                        args.block,
                    )
                    key = encode(launch)
                    known = launches.get(key)
                    if known is None:
                        known = launches[key] = len(launch_values)
                        launch_values.append(launch)
                    k_row(len(self.d_code))
                    k_code(known)
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
                    self._memory(ts, ev.args, ev.tid)
                else:
                    if ev.name == "[OutOfMemory]":
                        self._oom(ts, ev.args)
                    if ts < other_min:
                        other_min = ts
            elif ph == "M":
                names_lanes = True
                self._metadata(ev)
        self.other_min = other_min
        # an event skipped here may still be placed by a snippet's reading: read it always
        unplaced = no_ts or no_dur or not_events
        self.batch_times.append(UNBOUNDED if unplaced else BatchTimes(first, last, names_lanes))
        self.no_ts += no_ts
        self.no_dur += no_dur
        self.not_events += not_events

    # -- the walk of the events that follow, made elsewhere (a part of the file) -----------

    def extend(self, later: EventWalk) -> None:
        """Take in the walk of the events that follow this walk's in the file, so that this
        walk ends as one pass over all of them would: codes numbered in order of first sight,
        rows appended, the later event winning where it does in one pass (names, the longest
        run of a step)."""
        device, host = self._translate(later)
        d_rows, h_rows = len(self.d_code), len(self.h_code)
        for number, (ts, dur) in later.steps.items():
            if number not in self.steps or dur > self.steps[number][1]:
                self.steps[number] = (ts, dur)
        for key, value in later.tids.items():
            self.tids.setdefault(key, value)
        _append(self.d_code, device[np.asarray(later.d_code)])
        _append(self.h_code, host[np.asarray(later.h_code)])
        for mine, theirs in (
            (self.d_stream, later.d_stream),
            (self.d_start, later.d_start),
            (self.d_dur, later.d_dur),
            (self.d_bytes, later.d_bytes),
            (self.d_corr, later.d_corr),
            (self.h_thread, later.h_thread),
            (self.h_start, later.h_start),
            (self.h_dur, later.h_dur),
            (self.r_corr, later.r_corr),
            (self.y_corr, later.y_corr),
            (self.m_time, later.m_time),
            (self.m_allocated, later.m_allocated),
            (self.m_reserved, later.m_reserved),
            (self.m_bytes, later.m_bytes),
            (self.m_addr, later.m_addr),
            (self.m_thread, later.m_thread),
        ):
            mine.extend(theirs)
        self.batch_times += later.batch_times
        for pid, count in later.device_pids.items():
            self.device_pids[pid] = self.device_pids.get(pid, 0) + count
        if later.s_row_code:
            shapes = self.shapes
            shape = np.array([shapes.setdefault(k, len(shapes)) for k in later.shapes], np.int64)
            packed = np.asarray(later.s_row_code)
            _append(self.s_row_code, (packed >> 32) + h_rows << 32 | shape[packed & 0xFFFFFFFF])
        _append(self.r_row, np.asarray(later.r_row) + h_rows)
        _append(self.y_row, np.asarray(later.y_row) + h_rows)
        _append(self.k_row, np.asarray(later.k_row) + d_rows)
        launch = []
        for key, code in later.launches.items():  # in order of their codes
            if key not in self.launches:
                self.launches[key] = len(self.launch_values)
                self.launch_values.append(later.launch_values[code])
            launch.append(self.launches[key])
        _append(self.k_code, np.array(launch, dtype=np.int64)[np.asarray(later.k_code)])
        self.comm += later.comm
        memory_codes = self._memory_codes(later)
        _append(self.m_code, memory_codes[np.asarray(later.m_code)])
        self.ooms += [(ts, int(memory_codes[code]), *rest) for ts, code, *rest in later.ooms]
        self.threads.update(later.threads)
        self.process_names.update(later.process_names)
        self.process_labels.update(later.process_labels)
        self.runtime_families |= later.runtime_families
        self.no_dur += later.no_dur
        self.no_ts += later.no_ts
        self.not_events += later.not_events
        self.other_min = min(self.other_min, later.other_min)

    def _translate(self, later: EventWalk) -> tuple[np.ndarray, np.ndarray]:
        """This walk's code of each of `later`'s device and host names, the new ones appended
        in `later`'s order (their order of first sight); `later`'s categories taken in."""
        device_key: dict[int, tuple[Any, str]] = {}  # later's code -> (cat, name)
        host_key: dict[int, tuple[Any, str]] = {}
        for cat, (family, codes) in later.cats.items():
            for name, code in codes.items():
                if family <= MEMSET:
                    device_key[~code if code < 0 else code] = (cat, name)
                elif code >= 0 or code <= GLOO:
                    host_key[code if code >= 0 else GLOO - code] = (cat, name)
        device = [
            self._code(device_key.get(c), self.device_names, n, _device_row)
            for c, n in enumerate(later.device_names)
        ]
        host = [
            self._code(host_key.get(c), self.host_names, n, _host_row)
            for c, n in enumerate(later.host_names)
        ]
        for cat, (family, codes) in later.cats.items():
            mine = self.cats.setdefault(cat, (family, {}))[1]
            for name, code in codes.items():
                if name not in mine:
                    if family <= MEMSET:
                        mine[name] = ~device[~code] if code < 0 else device[code]
                    elif code >= 0:
                        mine[name] = host[code]
                    else:
                        mine[name] = GLOO - host[GLOO - code] if code <= GLOO else code
        return np.array(device, dtype=np.int64), np.array(host, dtype=np.int64)

    def _code(
        self,
        key: tuple[Any, str] | None,
        names: list[Any],
        facts: Any,
        row: Any,
    ) -> int:
        """The code of (cat, name) `key` here, or a new one for `facts`."""
        entry = None if key is None else self.cats.get(key[0])
        code = None if entry is None else entry[1].get(key[1])
        if code is None:
            names.append(facts)
            return len(names) - 1
        return row(code)

    def _memory_codes(self, later: EventWalk) -> np.ndarray:
        """This walk's code of each of `later`'s memory devices (new ones appended)."""
        keys = {code: key for key, code in later.memory_codes.items()}
        codes = np.empty(len(later.memory_devices), dtype=np.int64)
        for code, facts in enumerate(later.memory_devices):
            found = self.memory_codes.get(keys[code]) if code in keys else None
            if found is None:
                found = len(self.memory_devices)
                self.memory_devices.append(facts)
                if code in keys:
                    self.memory_codes[keys[code]] = found
            codes[code] = found
        return codes

    # -- first sight of a category or name -------------------------------------------------

    def _category(self, cat: Any) -> tuple[int, dict[str, int]]:
        """The event family of a `cat` value (case-insensitive) and its name codes."""
        family = CATEGORIES.get(cat.lower(), OTHER) if isinstance(cat, str) else OTHER
        entry: tuple[int, dict[str, int]] = (family, {})
        with contextlib.suppress(TypeError):  # an unhashable cat is looked at every time
            self.cats[cat] = entry
        return entry

    def _host_code(self, family: int, name: str, codes: dict[str, int]) -> int:
        if family in (OPERATOR, ANNOTATION) and STEP_NAME.match(name):
            code = STEP
        else:
            kind = host_kind(family, name)
            if family == RUNTIME:
                self.runtime_families.add(
                    "ROCm"
                    if name.startswith("hip")
                    else "CUDA"
                    if name.startswith("cu")
                    else "other"
                )
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
        facts = device_op_facts(name, family)
        code = len(self.device_names)
        self.device_names.append((name, *facts))
        if facts[1] == "communication":
            code = ~code
        codes[name] = code
        return code

    # -- per-event helpers (for the rarer events) --------------------------------------------

    def _host_special(
        self, code: int, name: str, ts: float, dur: float, ev: TraceEvent[WalkArgs]
    ) -> None:
        """A ProfilerStep (a step, no host op), a gloo collective (a host op and a comm op)."""
        if code == STEP:
            number = int(STEP_NAME.match(name).group(1))
            steps = self.steps
            if number not in steps or dur > steps[number][1]:
                steps[number] = (ts, dur)
        elif code <= GLOO:
            self._gloo(name, ts, dur, ev.args)
            self.h_code.append(GLOO - code)
            self.h_start.append(ts)
            self.h_dur.append(dur)
            self.h_thread.append(id_number(ev.tid, self.tids))

    def _comm(self, name: str, ts: float, dur: float, args: WalkArgs) -> None:
        op = collective(args.collective)
        if op is None:
            match = NCCL_OP.search(name)
            if match:
                op = "alltoall" if match.group(3) else collective(match.group(1) or match.group(2))
        group_name = args.group_name
        group_desc = args.group_desc
        group = None
        if group_name not in (None, "") and group_desc not in (None, "", group_name):
            group = f"{group_name} ({group_desc})"
        elif group_name not in (None, "") or group_desc not in (None, ""):
            group = str(group_name if group_name not in (None, "") else group_desc)
        size = dtype_bytes(args.dtype)
        count = json_number(args.nelems)
        self.comm.append(
            (
                name,
                op,
                group,
                ts,
                dur,
                count * size if size is not None and count is not None else None,
            )
        )

    def _gloo(self, name: str, ts: float, dur: float, args: WalkArgs | None) -> None:
        """CPU collectives (gloo) run on the host: their annotations are the comm ops."""
        args = _NO_ARGS if args is None else args
        total = None
        dims, types = raw_value(args.input_dims), raw_value(args.input_type)
        if isinstance(dims, list) and isinstance(types, list):
            total = 0.0
            for shape, dtype in zip(dims, types):
                size = dtype_bytes(dtype)
                if not isinstance(shape, list) or size is None or not shape:
                    continue
                elements = 1.0
                for extent in shape:
                    elements *= json_number(extent) or 0.0
                total += elements * size
            total = total or None
        self.comm.append((name, collective(name.split(":", 1)[1]), None, ts, dur, total))

    def _memory(self, ts: float, args: WalkArgs | None, tid: Any) -> None:
        if args is None:
            args = _NO_ARGS
        self.m_code.append(self._memory_code(args))
        self.m_time.append(ts)
        self.m_allocated.append(json_number_or_nan(args.allocated))
        self.m_reserved.append(json_number_or_nan(args.reserved))
        self.m_bytes.append(json_number_or_nan(args.alloc_bytes))
        addr = args.addr
        self.m_addr.append(addr if addr.__class__ is int and 0 <= addr <= MAX_ID else NO_ID)
        self.m_thread.append(id_number(tid, self.tids))

    def _oom(self, ts: float, args: WalkArgs | None) -> None:
        """An allocation the allocator could not make: its request and the device's
        allocated and reserved memory then."""
        if args is None:
            args = _NO_ARGS
        self.ooms.append(
            (
                ts,
                self._memory_code(args),
                json_number_or_nan(args.alloc_bytes),
                json_number_or_nan(args.allocated),
                json_number_or_nan(args.reserved),
            )
        )

    def _memory_code(self, args: WalkArgs) -> int:
        """The code of the device a memory event names (Device Type, Device Id)."""
        key = (args.device_type, args.device_id)
        try:
            return self.memory_codes[key]
        except (KeyError, TypeError):
            return self._memory_device(key)

    def _memory_device(self, key: tuple[Any, Any]) -> int:
        device_type, device_id = int_or_none(key[0]), int_or_none(key[1])
        if device_type is None:
            device = None
        else:
            device = DEVICE_TYPES.get(device_type, f"device_type_{device_type}")
            if device_id is not None and device_id >= 0:
                device = f"{device}:{device_id}"
        code = len(self.memory_devices)
        self.memory_devices.append((device, device_type, device_id))
        with contextlib.suppress(TypeError):
            self.memory_codes[key] = code
        return code

    def _metadata(self, ev: TraceEvent[WalkArgs]) -> None:
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
            tid = id_number(ev.tid, self.tids)
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
        columns = [
            np.asarray(c, dtype=np.float64)
            for c in (
                self.d_start,
                self.h_start,
                self.m_time,
                [row[3] for row in self.comm],
                [start for start, _ in self.steps.values()],
            )
            if len(c)
        ]
        times = np.concatenate(columns) if columns else np.empty(0)
        times = times[np.isfinite(times)]
        if not len(times):
            return (None if self.other_min == math.inf else float(self.other_min)), None
        origin, centre = robust_origin(times)
        if abs(self.other_min - centre) <= OUTLIER_US:
            origin = min(origin, float(self.other_min))
        return origin, centre
