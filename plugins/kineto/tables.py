"""The tables of a walked trace, each built once from the walk's columns."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from advisor.compat import zip_strict
from advisor.formats.chrome_trace import shape_text
from advisor.formats.interning import string_column
from advisor.lazy import lazy_module

from .categories import GPU_DEVICE_TYPES, named_collective
from .values import MAX_ID, NO_ID, int_or_none, json_number, json_number_or_nan
from .walk import EventWalk

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


def frames(
    walk: EventWalk, origin: float, properties: dict[Any, dict[str, Any]]
) -> dict[str, pd.DataFrame]:
    """The tables of a walked trace, times relative to `origin`."""
    tables: dict[str, pd.DataFrame] = {}
    if walk.steps:
        numbers = sorted(walk.steps)
        start = np.array([walk.steps[n][0] for n in numbers], dtype=np.float64) - origin
        duration = np.array([walk.steps[n][1] for n in numbers], dtype=np.float64)
        tables["steps"] = pd.DataFrame(
            {
                "step": numbers,
                "start_us": start,
                "end_us": start + duration,
                "duration_us": duration,
            }
        )
    blocking = np.zeros(0, dtype=bool)  # host rows (walk order) that block as a sync does
    if walk.d_code:
        codes = as_numpy(walk.d_code, np.int32)
        name, op_type, category, memcpy_kind, host_memory = (
            string_column(column, codes) for column in zip_strict(*walk.device_names)
        )
        nbytes = as_numpy(walk.d_bytes)
        launch_us, launch_thread, launch_dur, launch_name, call_row = _launches(walk, origin)
        blocking = _blocking_copies(len(walk.h_code), call_row, memcpy_kind, host_memory)
        tables["device_ops"] = pd.DataFrame(
            {
                "name": name,
                "op_type": op_type,
                "core_type": "GPU",
                "start_us": as_numpy(walk.d_start) - origin,
                "duration_us": as_numpy(walk.d_dur),
                "stream": as_ids(walk.d_stream),
                "category": category,
                "memcpy_kind": memcpy_kind,
                "host_memory": host_memory,
                "bytes": np.where(np.isfinite(nbytes), nbytes, np.nan),
                "launch_us": launch_us,
                "launch_thread": launch_thread,
                "launch_dur_us": launch_dur,
                "launch_name": launch_name,
                **_kernel_args(walk),
            }
        )
    if walk.h_code:
        kept = _host_rows(walk)
        codes = kept(as_numpy(walk.h_code, np.int32))
        name, kind = (string_column(column, codes) for column in zip_strict(*walk.host_names))
        if blocking.any():
            kind[kept(blocking)] = "sync"
        host = {
            "name": name,
            "kind": kind,
            "start_us": kept(as_numpy(walk.h_start)) - origin,
            "duration_us": kept(as_numpy(walk.h_dur)),
            "thread": kept(as_ids(walk.h_thread)),
        }
        if walk.s_row_code:
            packed = as_numpy(walk.s_row_code, np.int64)
            shape_codes = np.full(len(walk.h_code), -1, dtype=np.intp)
            shape_codes[packed >> 32] = packed & 0xFFFFFFFF
            shape_codes = kept(shape_codes)
            shape_codes[(kind != "aten").to_numpy(dtype=bool)] = -1  # aten operators only
            texts = pd.array([*map(shape_text, walk.shapes), None], dtype="string")
            host["input_shapes"] = texts.take(shape_codes)  # -1: the None at the end
        tables["host_ops"] = pd.DataFrame(host)
    if walk.comm:
        name, op, group, start, duration, nbytes = zip_strict(*walk.comm)
        duration = np.asarray(duration, dtype=np.float64)
        nbytes = np.asarray(nbytes, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            bandwidth = np.where(duration > 0, nbytes / duration / 1e3, np.nan)
        tables["comm_ops"] = pd.DataFrame(
            {  # text as the contract's string dtype: conform keeps what is already cast
                "name": pd.array(name, dtype="string"),
                "op": pd.array(op, dtype="string"),
                "group": pd.array(group, dtype="string"),
                "start_us": np.asarray(start, dtype=np.float64) - origin,
                "duration_us": duration,
                "bytes": nbytes,
                "bandwidth_gbps": bandwidth,
            }
        )
    if walk.m_code:
        codes = as_numpy(walk.m_code, np.int32)
        capacity = np.array(
            [memory_capacity(t, i, properties) for _, t, i in walk.memory_devices], dtype=np.float64
        )
        tables["memory"] = pd.DataFrame(
            {
                "time_us": as_numpy(walk.m_time) - origin,
                "allocated_bytes": as_numpy(walk.m_allocated),
                "reserved_bytes": as_numpy(walk.m_reserved),
                "device": string_column([d for d, _, _ in walk.memory_devices], codes),
                "capacity_bytes": capacity[codes],
                "bytes": as_numpy(walk.m_bytes),
                "address": as_ids(walk.m_addr),
                "thread": as_ids(walk.m_thread),
            }
        )
    if walk.ooms or walk.m_code:  # memory was profiled: no row is no out-of-memory error
        time, code, request, allocated, reserved = list(zip_strict(*walk.ooms)) or [()] * 5
        tables["oom_events"] = pd.DataFrame(
            {
                "order": np.arange(len(walk.ooms), dtype=np.int64),
                "time_us": np.asarray(time, dtype=np.float64) - origin,
                "device": pd.array([walk.memory_devices[c][0] for c in code], dtype="string"),
                "request_bytes": np.asarray(request, dtype=np.float64),
                "allocated_bytes": np.asarray(allocated, dtype=np.float64),
                "reserved_bytes": np.asarray(reserved, dtype=np.float64),
            }
        )
    _collectives_from_annotations(tables)
    return tables


def _collectives_from_annotations(tables: dict[str, pd.DataFrame]) -> None:
    """comm_ops.op of the NCCL kernels whose name tells no collective apart, from the
    ProcessGroup's annotation around their launch (`nccl:all_to_all`, `nccl:send`, ...).
    NCCL runs an all-to-all as grouped sends and receives, so its kernels are `SendRecv`
    ones, as a pipeline's point-to-point transfers are, and `ncclDevKernel_Generic` names no
    collective at all; traces without the kernels' "Collective name" argument (PyTorch
    before 2.x) tell them apart only this way: HTA's TorchRec traces run their embeddings'
    all-to-all as SendRecv kernels inside `nccl:all_to_all`."""
    comm, device, host = (tables.get(n) for n in ("comm_ops", "device_ops", "host_ops"))
    if comm is None or device is None or host is None:
        return
    vague = np.flatnonzero(
        comm["op"].isna().to_numpy(bool) | (comm["op"] == "sendrecv").fillna(False).to_numpy(bool)
    )
    marked = np.flatnonzero(
        (host["kind"] == "annotation").fillna(False).to_numpy(bool)
        & host["name"].str.startswith("nccl:").fillna(False).to_numpy(bool)
    )
    if not len(vague) or not len(marked):
        return
    # each vague row's kernel: the communication kernel with its start, duration and name
    # (two streams may start kernels of one name at the same time)
    key = ["start_us", "duration_us", "name"]
    kernels = device.loc[
        (device["category"] == "communication").fillna(False).to_numpy(bool),
        [*key, "launch_us", "launch_thread"],
    ].drop_duplicates(key)
    launched = comm.iloc[vague][key].merge(kernels, how="left", on=key)
    at = launched["launch_us"].to_numpy("float64", na_value=np.nan)
    thread = launched["launch_thread"].to_numpy("float64", na_value=np.nan)
    start = host["start_us"].to_numpy("float64")[marked]
    end = start + host["duration_us"].to_numpy("float64")[marked]
    host_thread = host["thread"].to_numpy("float64", na_value=np.nan)[marked]
    names = host["name"].array.take(marked)
    named = np.full(len(vague), None, dtype=object)
    for number in np.unique(host_thread[~np.isnan(host_thread)]).tolist():
        mine = np.flatnonzero(host_thread == number)
        mine = mine[np.argsort(start[mine], kind="stable")]
        calls = np.flatnonzero(thread == number)
        inside = np.searchsorted(start[mine], at[calls], side="right") - 1
        found = inside >= 0
        found[found] = at[calls[found]] < end[mine[inside[found]]]
        for call, annotation in zip(calls[found].tolist(), mine[inside[found]].tolist()):
            named[call] = named_collective(names[annotation].split(":", 1)[1])
    known = np.array([op is not None for op in named], dtype=bool)
    if known.any():
        op = comm["op"].array.copy()
        op[vague[known]] = named[known]
        tables["comm_ops"] = comm.assign(op=op)


def _blocking_copies(
    calls: int,
    call_row: np.ndarray,
    memcpy_kind: pd.api.extensions.ExtensionArray,
    host_memory: pd.api.extensions.ExtensionArray,
) -> np.ndarray:
    """The host rows (walk order) of the calls that launched a copy from the device to
    pageable host memory. CUDA stages such a copy and returns only once it is done, so even
    cudaMemcpyAsync waits for all the stream's queued work, as a synchronisation does: it is
    what `tensor.item()` or `.cpu()` runs (HTA's TorchRec rank 0 blocks 758 ms in 30 of them,
    80 µs of copying). A copy to pinned memory returns at once."""
    copy = (
        (memcpy_kind == "DtoH").fillna(False).to_numpy(bool)
        & (host_memory == "pageable").fillna(False).to_numpy(bool)
        & (call_row >= 0)
    )
    blocking = np.zeros(calls, dtype=bool)
    blocking[call_row[copy]] = True
    return blocking


def _launches(
    walk: EventWalk, origin: float
) -> tuple[
    np.ndarray,
    pd.api.extensions.ExtensionArray,
    np.ndarray,
    pd.api.extensions.ExtensionArray,
    np.ndarray,
]:
    """launch_us, launch_thread, launch_dur_us and launch_name of each device row: the
    runtime call with its correlation id (the first one, should an id repeat); missing where
    none has it. Last, the call's host row in walk order (-1 for none)."""
    rows = len(walk.d_corr)
    launch_us = np.full(rows, np.nan)
    launch_dur = np.full(rows, np.nan)
    thread = np.full(rows, NO_ID, dtype=np.int64)
    name_code = np.full(rows, -1, dtype=np.intp)
    call_row = np.full(rows, -1, dtype=np.int64)
    if walk.r_corr:
        ids, first = np.unique(as_numpy(walk.r_corr, np.int64), return_index=True)
        wanted = as_numpy(walk.d_corr, np.int64)
        at = np.minimum(np.searchsorted(ids, wanted), len(ids) - 1)
        found = (ids[at] == wanted) & (wanted != NO_ID)
        call = first[at[found]]
        row = as_numpy(walk.r_row, np.int64)[call]
        call_row[found] = row
        launch_us[found] = as_numpy(walk.h_start)[row] - origin
        launch_dur[found] = as_numpy(walk.h_dur)[row]
        thread[found] = as_numpy(walk.h_thread, np.int64)[row]
        name_code[found] = as_numpy(walk.h_code, np.int32)[row]
    names = pd.array([*(name for name, _ in walk.host_names), None], dtype="string")
    return (
        launch_us,
        pd.arrays.IntegerArray(thread, thread == NO_ID),
        launch_dur,
        names.take(name_code),  # -1: the None at the end
        call_row,
    )


def _host_rows(walk: EventWalk) -> Callable[[Any], Any]:
    """What selects a host column's rows (each column taken once, not a whole frame made and
    then copied to drop rows): all but those of CUPTI synchronisation records (Stream/Event/
    Context Sync, Stream Wait Event) whose runtime call is in the trace: PyTorch 2.2+ traces
    hold both, the call on the host thread and the record on the device's timeline, and the
    call says what the host did: a cudaStreamSynchronize is one host sync (counted twice with
    its record), a cudaEventQuery returns at once though CUPTI records an Event Sync for it.
    A record alone (its call not recorded) stays what it stands for."""
    if not walk.y_corr or not walk.r_corr:
        return lambda column: column
    records = as_numpy(walk.y_row, np.int64)
    called = records[np.isin(as_numpy(walk.y_corr, np.int64), as_numpy(walk.r_corr, np.int64))]
    keep = np.ones(len(walk.h_code), dtype=bool)
    keep[called] = False
    rows = np.flatnonzero(keep)
    return lambda column: column[rows]


def _kernel_args(walk: EventWalk) -> dict[str, Any]:
    """The launch configuration columns of device_ops (missing for rows without one).

    Kineto writes them on kernels as CUPTI reports them: 'est. achieved occupancy %' is
    CUPTI's occupancy calculator estimate for the launch, limited by the grid size."""
    if not walk.k_row:
        return {}
    rows = len(walk.d_code)
    index = as_numpy(walk.k_row, np.int64)
    codes = as_numpy(walk.k_code, np.int32)
    converted = [_launch(*values) for values in walk.launch_values]  # each distinct one once
    numbers = np.array([f for f, _ in converted], dtype=np.float64).reshape(-1, 4)[codes]
    counts = np.array([i for _, i in converted], dtype=np.int64).reshape(-1, 3)[codes]
    columns = {}
    for k, key in enumerate(("occ", "bps", "wps", "smem")):
        columns[key] = np.full(rows, np.nan)
        columns[key][index] = numbers[:, k]
    for k, key in enumerate(("regs", "grid", "block")):
        columns[key] = np.full(rows, NO_ID, dtype=np.int64)
        columns[key][index] = counts[:, k]
    return {
        "est_occupancy": columns["occ"],
        "blocks_per_sm": columns["bps"],
        "warps_per_sm": columns["wps"],
        "registers_per_thread": _ids(columns["regs"]),
        "shared_memory_bytes": columns["smem"],
        "grid_blocks": _ids(columns["grid"]),
        "block_threads": _ids(columns["block"]),
    }


def _launch(
    blocks_per_sm: Any,
    warps_per_sm: Any,
    occupancy: Any,
    shared_memory: Any,
    registers: Any,
    grid: Any,
    block: Any,
) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """(occupancy as a fraction, blocks and warps per SM, shared memory bytes; registers per
    thread, grid blocks, block threads, NO_ID where missing) of one launch configuration."""
    counts = (_extent(registers), _extent(grid), _extent(block))
    return (
        (
            json_number_or_nan(occupancy) / 100.0,
            json_number_or_nan(blocks_per_sm),
            json_number_or_nan(warps_per_sm),
            json_number_or_nan(shared_memory),
        ),
        tuple(NO_ID if c is None else c for c in counts),
    )


def _extent(value: Any) -> int | None:
    """A count from a number or a list of dimensions ([x, y, z] -> x*y*z); None otherwise."""
    if isinstance(value, list):
        total = 1
        for dim in value:
            number = int_or_none(dim)
            if number is None or number < 0:
                return None
            total *= number
        return total if total < MAX_ID else None
    number = int_or_none(value)
    return number if number is not None and 0 <= number < MAX_ID else None


def _ids(values: np.ndarray) -> pd.api.extensions.ExtensionArray:
    return pd.arrays.IntegerArray(values, values == NO_ID)


def as_numpy(column: array, dtype: str | type = "float64") -> np.ndarray:
    """An array column seen as a NumPy array, without a copy (the frame copies it)."""
    return np.frombuffer(column, dtype=dtype)


def as_ids(column: array) -> pd.api.extensions.ExtensionArray:
    """An int64 column with NO_ID for missing as a nullable Int64 array."""
    values = np.frombuffer(column, dtype=np.int64)
    return pd.arrays.IntegerArray(values, values == NO_ID)


def memory_capacity(
    device_type: int | None, device_id: int | None, properties: dict[Any, dict[str, Any]]
) -> float | None:
    if device_type not in GPU_DEVICE_TYPES or device_id is None:
        return None
    entry = properties.get(device_id)
    return json_number(entry.get("totalGlobalMem")) if entry else None
