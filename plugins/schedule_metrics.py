"""Schedule metric providers: why the device sat idle, how long launches took to reach it,
which GPU kernels ran on Tensor Cores, the long device gaps the host spent doing nothing or
blocked in a synchronisation, and the host calls that are one-time start-up rather than
training, which implementation (fused, foreach or a loop over the parameters) each optimizer
step ran, and the device idle time each optimizer step and synchronisation costs.

These follow the analyses of Holistic Trace Analysis (idle time breakdown, kernel launch
statistics) and of the PyTorch profiler's TensorBoard plugin (Tensor Core kernels), with one
difference that matters for the time at stake: idle time is also measured for the device as
a whole (all streams together), since one stream idling while another runs costs nothing.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from advisor import intervals
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.launches import KERNEL_WAIT_US, queued_after_launch
from advisor.lazy import lazy_module
from advisor.model import Profile, conform
from advisor.text_codes import coded, isin_mask

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    from pandas.api.extensions import ExtensionArray
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
    pa = lazy_module("pyarrow")

# Device gaps kept in quiet_gaps: shorter ones cannot hide a garbage collection worth naming
# (msprof-analyze counts a recorded GC from 1 ms, gc.yaml gc_threshold).
QUIET_GAP_MIN_US = 1000.0
# host_ops kinds that are no host work of their own: Python frames and annotations span
# whatever runs inside them, the training loop included.
_FRAME_KINDS = ("python", "annotation")
# host_ops kinds whose calls idle_host_ops places the device's idle time in: framework
# operators, and the optimizer steps and data loading that call them.
_IDLE_OWNER_KINDS = ("aten", "optimizer", "dataloader")
# A runtime call, kernel launch or CANN API call of half a second while the device ran nothing is
# one-time start-up: creating the device context, loading libraries (cuDNN, cuBLAS, HCCL) and
# kernel modules on first use. No steady-state call takes that long with the device idle: an
# allocation takes milliseconds, and a call that waits for the device has it busy.
STARTUP_CALL_US = 500_000.0
STARTUP_KINDS = ("runtime", "launch", "cann_api")
# ... "while the device ran nothing": it computed or copied for at most this share of the call
STARTUP_DEVICE_SHARE = 0.01

# Kernels on Tensor Cores by name. The TensorBoard plugin's list (after NVIDIA PyProf):
_TB_TENSOR_CORE = (
    "h884|s884|h1688|s1688|hmma|i8816|16816|c1688|dgrad_1x1_stride_2x2|"
    "first_layer_wgrad_kernel|conv1x1|conv2d_c1_k1|direct_group|xmma_implicit_gemm|"
    "xmma_sparse_conv|xmma_warp_specialized_implicit_gemm|xmma_gemm|xmma_sparse_gemm"
)
# ... and what it misses: CUTLASS tensor-op and WMMA kernels (cutlass_80_tensorop_*,
# OpClassTensorOp), TF32 convolutions (sm80_xmma_fprop_implicit_gemm_*tf32*), Ampere int8
# (16832), Hopper warpgroup MMA (wgmma / gmma) and cuBLASLt's nvjet kernels, Blackwell's
# tcgen05/UMMA, GEMMs in FP8 (e4m3, e5m2) or MX-FP4 (e2m1), formats only Tensor Cores compute
# in (DeepSeek's fp8 grouped GEMMs, TensorRT-LLM's bmm_MxE4m3_MxE2m1..., Triton's
# matmul_ogs_..._mxfp4), AMD matrix cores (rocBLAS/Tensile `_MI16x16x1_` tiles, MFMA,
# MIOpen's xdlops convolutions igemm_*_gtcx*), and cuDNN's Hopper convolutions in 16-bit
# types (sm90_xmma_{fprop,dgrad,wgrad}_..._bf16bf16_..., of our H200 ResNet run: GPU-002 told
# that bf16 run to train in bf16).
_TENSOR_CORE = re.compile(
    _TB_TENSOR_CORE
    + r"|tensorop|wmma|tf32|16832|gmma|nvjet|tcgen05|umma|fp8|e4m3|e5m2|e2m1|mxfp4"
    + r"|mfma|_MI\d+x\d+x\d+|xdlops|gtcx"
    + r"|xmma\w*?_(?:bf16|f16|fp16|e4m3|e5m2|i8|int8)",
    re.I,
)
# Sources whose device_ops names are the kernels' own (cuBLAS, cuDNN, CUTLASS symbols).
KERNEL_NAMED_FORMATS = ("kineto",)
# FP32/FP64 SIMT kernels whose names would otherwise match (an xmma kernel doing FFMA).
_NOT_TENSOR_CORE = re.compile(r"ffma|sgemm|dgemm|gcgemm|gemv|simt", re.I)


def launch_delays(profile: Profile) -> None:
    """device_ops.launch_delay_us: task start minus the end of its launching call, at least
    0 (HTA's launch delay); missing where the launching call is unknown, and for all but the
    first task of a call that launched several (a CUDA graph's replay, one cudaGraphLaunch for
    all its kernels): that call is one launch, and its later kernels wait for the earlier
    ones, not in the launch queue. device_ops.launch_work_us, on the same rows: the device
    time of all the tasks the call launched, what its host time bought (one launch of a graph
    starts tens of kernels)."""
    ops = profile.tables["device_ops"]
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    launch = ops["launch_us"].to_numpy("float64", na_value=np.nan)
    launch_dur = ops["launch_dur_us"].to_numpy("float64", na_value=np.nan)
    duration = ops["duration_us"].to_numpy("float64", na_value=0.0)
    with np.errstate(invalid="ignore"):
        delay = np.clip(start - (launch + launch_dur), 0.0, None)
    rows = np.flatnonzero(~np.isnan(launch))
    order = rows[np.lexsort((start[rows], launch_dur[rows], launch[rows]))]
    same_call = (launch[order][1:] == launch[order][:-1]) & (
        launch_dur[order][1:] == launch_dur[order][:-1]
    )
    work = np.full(len(ops), np.nan)
    if len(order):
        firsts = np.flatnonzero(np.concatenate(([True], ~same_call)))
        work[order[firsts]] = np.add.reduceat(duration[order], firsts)
    delay[order[1:][same_call]] = np.nan
    profile.tables["device_ops"] = ops.assign(launch_delay_us=delay, launch_work_us=work)


def tensor_cores(profile: Profile) -> None:
    """device_ops.tensor_core: whether each GPU kernel's name marks a Tensor Core kernel;
    false for tasks of other devices. Judged once per distinct name.

    Only PyTorch profiler (Kineto) traces name the CUDA/HIP kernels themselves; other GPU
    profiles (MegEngine) name operators, which say nothing of the kernel chosen, so the
    column is left absent for them."""
    if profile.meta.source_format not in KERNEL_NAMED_FORMATS:
        return
    ops = profile.tables["device_ops"]
    names = ops["name"].astype("string")
    codes, uniques = pd.factorize(names)
    judged = np.array(
        [
            bool(_TENSOR_CORE.search(n)) and not _NOT_TENSOR_CORE.search(n)
            for n in uniques.astype(str)
        ],
        dtype=bool,
    )
    values = np.where(codes >= 0, judged[np.clip(codes, 0, None)], False)
    values &= (ops["core_type"] == "GPU").fillna(False).to_numpy(bool)
    profile.tables["device_ops"] = ops.assign(tensor_core=values)


def sm_fill(profile: Profile) -> None:
    """device_ops.sm_time_us and sm_filled_us of the GPU kernels with a launch configuration
    (compute and communication): how much of the GPU's wall-clock time each accounts for and
    how much of it the SMs were filled. A kernel alone on the GPU accounts for its duration,
    filled to min(1, blocks per SM). Kernels running at once on several streams fill the
    SMs to min(1, their blocks per SM summed), as the TensorBoard plugin counts it, and share
    each instant by their blocks per SM: SMs a kernel leaves empty while another (a GEMM
    beside DeepEP's all-to-all, which keeps SMs for itself) uses them are not lost, and the
    figures never add up to more time than the GPU had (summed per kernel, DeepSeek's
    three-stream trace made 134 ms of "filled" SM time in a 112 ms step)."""
    ops = profile.tables["device_ops"]
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    duration = ops["duration_us"].to_numpy("float64", na_value=np.nan)
    blocks = ops["blocks_per_sm"].to_numpy("float64", na_value=np.nan)
    rows = np.flatnonzero(np.isfinite(blocks) & np.isfinite(start) & np.isfinite(duration))
    time = np.full(len(ops), np.nan)
    filled = np.full(len(ops), np.nan)
    begin, length, weight = start[rows], duration[rows], np.clip(blocks[rows], 0.0, 1.0)
    time[rows], filled[rows] = length, length * weight
    by_start = np.argsort(begin, kind="stable")
    ends = (begin + length)[by_start]
    if len(rows) > 1 and (begin[by_start][1:] < np.maximum.accumulate(ends)[:-1]).any():
        time[rows], filled[rows] = _shared_sm_time(begin, begin + length, weight)
    profile.tables["device_ops"] = ops.assign(sm_time_us=time, sm_filled_us=filled)


def _shared_sm_time(
    start: np.ndarray, end: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each kernel's share of the wall-clock time and of the filled SM time where kernels
    overlap: weight times the integrals over its run of 1 / W and of min(1, W) / W (W: the
    running kernels' weights summed), from prefix sums over the instants a kernel starts or
    ends."""
    times = np.concatenate([start, end])
    order = np.argsort(times, kind="stable")
    times = times[order]
    load = np.cumsum(np.concatenate([weight, -weight])[order])[:-1]
    span = np.diff(times)
    loaded = load > 1e-12  # rounding leaves a few ulps where no kernel runs
    share = np.where(loaded, span / np.where(loaded, load, 1.0), 0.0)
    per_time = np.concatenate([[0.0], np.cumsum(share)])
    per_fill = np.concatenate([[0.0], np.cumsum(share * np.minimum(load, 1.0))])
    first, last = np.searchsorted(times, start), np.searchsorted(times, end)
    return (
        weight * (per_time[last] - per_time[first]),
        weight * (per_fill[last] - per_fill[first]),
    )


def _task_steps(profile: Profile, ops: pd.DataFrame) -> pd.Series:
    """The step of every task: device_ops.step where present, else from the step windows
    (missing outside them, and for all tasks of a profile without steps)."""
    if "step" in ops:
        return ops["step"].astype("Int64")
    steps = profile.tables.get("steps")
    out = pd.Series(pd.NA, index=ops.index, dtype="Int64")
    if steps is None or steps.empty:
        return out
    lo = steps["start_us"].to_numpy("float64")
    hi = steps["end_us"].to_numpy("float64")
    order = np.argsort(lo, kind="stable")
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    pos = np.searchsorted(lo[order], start, side="right") - 1
    ok = pos >= 0
    idx = order[np.clip(pos, 0, None)]
    ok &= start < hi[idx]
    numbers = steps["step"].to_numpy("int64")[idx]
    out[ok] = numbers[ok]
    return out


def _classify(
    idle: np.ndarray, prev_end: np.ndarray, launch: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(host wait, kernel wait) masks of idle intervals, HTA's rules: the host waited when the
    call launching the next task started after the device went idle; otherwise a gap under
    KERNEL_WAIT_US is the overhead of back-to-back launches; the rest is other."""
    with np.errstate(invalid="ignore"):
        host = launch > prev_end
        kernel = ~host & (idle < KERNEL_WAIT_US)
    return host, kernel


def _breakdown_rows(
    level: str,
    stream: ExtensionArray,
    step: ExtensionArray,
    idle: np.ndarray,
    host: np.ndarray,
    kernel: np.ndarray,
    startup: np.ndarray,
    queued: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per step (and stream) of the idle intervals' sums by class; `startup`: the
    part of each interval a start-up call ran in, taken out of its class; `queued`: the part
    of a host-wait interval after the launching call returned, moved to other."""
    rest = idle - startup
    moved = np.where(host, np.minimum(queued, rest), 0.0) if queued is not None else 0.0
    frame = pd.DataFrame(
        {
            "step": step.to_numpy(),
            "stream": stream.to_numpy(),
            "idle_us": idle,
            "host_wait_us": np.where(host, rest - moved, 0.0),
            "kernel_wait_us": np.where(kernel, rest, 0.0),
            "other_us": np.where(~host & ~kernel, rest, 0.0) + moved,
            "startup_us": startup,
            "intervals": 1,
        }
    )
    grouped = frame.groupby(["step", "stream"], dropna=False, sort=True).sum().reset_index()
    grouped.insert(1, "level", level)
    return grouped


def idle_breakdown(profile: Profile) -> None:
    """idle_breakdown: per step, the device's idle time (all streams together) and each
    stream's (as HTA measures it) split into host wait, kernel wait, other and one-time
    start-up.

    An interval belongs to the step of the task that ends it; with steps, intervals ending
    in a task outside every step are left out, as that time is no step's. The part of an
    interval during which a start-up call ran (host_ops.startup: context creation, first
    loads) is start-up, taken out of the interval's class: HTA counts it as host wait, but
    no change to the training loop removes it. The tasks are taken, ordered and paired by
    position (a pandas selection, sort or grouping of the table costs more than a small
    profile's figures)."""
    ops = profile.tables["device_ops"]
    rows = np.flatnonzero(~(ops["start_us"].array.isna() | ops["duration_us"].array.isna()))
    step = _task_steps(profile, ops).array[rows]
    has_steps = "steps" in profile.tables and not profile.tables["steps"].empty
    in_step = ~pd.isna(step) if has_steps else np.ones(len(rows), dtype=bool)
    start = ops["start_us"].to_numpy("float64")[rows]
    end = start + ops["duration_us"].to_numpy("float64")[rows]
    launch = _column(ops, "launch_us", rows)
    startup = _startup_calls(profile)
    parts = []
    # the device: gap_us before each task is idle time of all streams together; a task
    # launched late but held back after its call returned waited for the host only until then
    gap = ops["gap_us"].to_numpy("float64", na_value=np.nan)[rows]
    keep = (gap > 0) & in_step
    idle_from, idle_to = (start - gap)[keep], start[keep]
    host, kernel = _classify(gap[keep], idle_from, launch[keep])
    queued = queued_after_launch(idle_to, (launch + _column(ops, "launch_dur_us", rows))[keep])
    no_stream = pd.array([pd.NA] * int(keep.sum()), dtype="Int64")
    spent = intervals.covered_between(startup, idle_from, idle_to)
    parts.append(
        _breakdown_rows("device", no_stream, step[keep], gap[keep], host, kernel, spent, queued)
    )
    # each stream, as HTA: the gap after the previous task of the same stream
    streams = ops["stream"].array[rows] if "stream" in ops else pd.array([], dtype="Int64")
    number = streams.to_numpy("float64", na_value=np.nan)
    present = np.flatnonzero(~np.isnan(number))
    if len(present):
        order = present[np.lexsort((start[present], number[present]))]  # stable, as sort_values
        same = np.zeros(len(order), dtype=bool)
        same[1:] = number[order][1:] == number[order][:-1]
        prev_end = np.where(same, np.concatenate(([np.nan], end[order][:-1])), np.nan)
        idle = start[order] - prev_end
        keep = (idle > 0) & in_step[order]
        taken = order[keep]
        host, kernel = _classify(idle[keep], prev_end[keep], launch[taken])
        spent = intervals.covered_between(startup, prev_end[keep], start[taken])
        parts.append(
            _breakdown_rows("stream", streams[taken], step[taken], idle[keep], host, kernel, spent)
        )
    table = pd.concat(parts, ignore_index=True)
    profile.tables["idle_breakdown"] = conform("idle_breakdown", table)


def _column(ops: pd.DataFrame, name: str, rows: np.ndarray) -> np.ndarray:
    """A float column's values at `rows`, NaN where missing or where the table lacks it."""
    if name not in ops:
        return np.full(len(rows), np.nan)
    return ops[name].to_numpy("float64", na_value=np.nan)[rows]


def quiet_gaps(profile: Profile) -> None:
    """quiet_gaps: device gaps of at least QUIET_GAP_MIN_US with the host calls inside them.

    A gap with hardly any host call is time the whole process stood still: with nothing
    recorded, Python's garbage collector is the usual suspect (msprof-analyze's conjectured
    GC check looks for the same). A gap the host spent in a synchronising call is time both
    sides waited: the device for something the profile does not record."""
    ops = profile.tables["device_ops"]
    ops = ops[ops["gap_us"].to_numpy("float64", na_value=0.0) >= QUIET_GAP_MIN_US]
    step = _task_steps(profile, ops)
    lo = (ops["start_us"] - ops["gap_us"]).to_numpy("float64")
    hi = ops["start_us"].to_numpy("float64")
    calls = np.zeros(len(ops), dtype=np.int64)
    busy = np.zeros(len(ops))
    gc_us = np.zeros(len(ops))
    sync_us = np.zeros(len(ops))
    sync_call = np.full(len(ops), None, dtype=object)
    host = profile.tables.get("host_ops")
    if host is not None and "start_us" in host and len(ops):
        kind = host["kind"].astype("string")
        h_start = host["start_us"].to_numpy("float64", na_value=np.nan)
        h_end = h_start + host["duration_us"].to_numpy("float64", na_value=0.0)
        work = ~isin_mask(kind, _FRAME_KINDS) & ~np.isnan(h_start)
        is_gc = isin_mask(kind, ("gc",)) & ~np.isnan(h_start)
        is_sync = np.flatnonzero(isin_mask(kind, ("sync",)) & ~np.isnan(h_start))
        sync_us = intervals.covered_between(
            intervals.merge(h_start[is_sync], h_end[is_sync]), lo, hi
        )
        call, _ = intervals.longest_overlap(lo, hi, h_start[is_sync], h_end[is_sync])
        found = call >= 0
        if found.any():  # the names of those calls only: a trace holds millions of others
            named = host["name"].iloc[is_sync[call[found]]]
            sync_call[found] = named.to_numpy(object, na_value=None)
        # calls overlapping [lo, hi): those starting before hi, less those ended by lo
        # (a call ended by lo started before hi too). Timsort ("stable"): a trace's calls
        # are nearly in order, which it sorts about 9x faster than the default quicksort
        # (231,250 calls: 2 against 20 ms each); the sorted values are the same.
        starts, ends = np.sort(h_start[work], kind="stable"), np.sort(h_end[work], kind="stable")
        calls = np.searchsorted(starts, hi, side="left") - np.searchsorted(ends, lo, "right")
        merged = intervals.merge(h_start[work], h_end[work])
        busy = intervals.covered_between(merged, lo, hi)
        merged_gc = intervals.merge(h_start[is_gc], h_end[is_gc])
        gc_us = intervals.covered_between(merged_gc, lo, hi)
    table = pd.DataFrame(
        {
            "step": step.to_numpy(),
            "start_us": lo,
            "duration_us": hi - lo,
            "host_calls": calls,
            "host_busy_us": busy,
            "gc_us": gc_us,
            "sync_us": sync_us,
            "sync_call": pd.array(sync_call, dtype="string"),
        }
    )
    if "steps" in profile.tables and not profile.tables["steps"].empty:
        table = table[table["step"].notna()]
    profile.tables["quiet_gaps"] = conform("quiet_gaps", table.reset_index(drop=True))


def idle_host_ops(profile: Profile) -> None:
    """idle_host_ops: by framework operator name, the device idle time (no task on any stream,
    between the device's first task and its last; one-time start-up calls, warm-up steps and
    the host's waits in synchronising calls left out) during its calls: what the host ran
    while the device waited for it.

    A call inside another framework operator, optimizer step or data-loading call of its
    thread is its caller's time, so only the outermost calls count (aten::addmm inside
    aten::linear is aten::linear's). Optimizer steps and data loading have rules of their own
    (HOST-004, HOST-001), so their rows are not kept, nor those of the operators inside them."""
    ops = profile.tables["device_ops"]
    host = profile.tables["host_ops"]
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    gap = ops["gap_us"].to_numpy("float64", na_value=np.nan)
    waits = gap > 0
    idle = intervals.merge(start[waits] - gap[waits], start[waits])
    h_start = host["start_us"].to_numpy("float64", na_value=np.nan)
    h_end = h_start + host["duration_us"].to_numpy("float64", na_value=0.0)
    kind = host["kind"]
    # one-time start-up, and the host's waits in synchronising calls (HOST-007: it waited for
    # the device then, not the other way round)
    left_out = isin_mask(kind, ("sync",)) & ~np.isnan(h_start)
    if "startup" in host:
        left_out |= host["startup"].to_numpy(bool, na_value=False)
    idle = intervals.subtract(idle, intervals.merge(h_start[left_out], h_end[left_out]))
    steps = profile.tables["steps"]  # and the warm-up steps (steps.warmup), as STEP-003 does
    warm = steps["warmup"].to_numpy(bool, na_value=False)
    if warm.any() and {"start_us", "end_us"} <= set(steps):
        lo = steps["start_us"].to_numpy("float64", na_value=np.nan)[warm]
        hi = steps["end_us"].to_numpy("float64", na_value=np.nan)[warm]
        timed = ~np.isnan(lo) & ~np.isnan(hi)
        idle = intervals.subtract(idle, intervals.merge(lo[timed], hi[timed]))
    calls = np.flatnonzero(isin_mask(kind, _IDLE_OWNER_KINDS) & ~np.isnan(h_start))
    thread = (
        host["thread"].to_numpy("float64", na_value=-1.0)
        if "thread" in host
        else np.zeros(len(host))
    )
    outer = calls[~intervals.nested(h_start[calls], h_end[calls], thread[calls])]
    outer = outer[isin_mask(kind, ("aten",))[outer]]
    held = intervals.covered_between(idle, h_start[outer], h_end[outer])
    # the names' codes of the column (kept for every caller: advisor.text_codes), renumbered
    # over the rows kept in order of first sight; a missing name (code -1) is ""
    name_codes, texts = coded(host["name"])
    codes, distinct = pd.factorize(name_codes[outer])
    labels = np.append(pd.array(texts, dtype="string").to_numpy(object, na_value=""), "")
    names = labels[distinct]
    idle_us = np.bincount(codes, weights=held, minlength=len(names))
    table = pd.DataFrame(
        {
            "name": pd.array(names, dtype="string"),
            "calls": np.bincount(codes, minlength=len(names)).astype("int64"),
            "duration_us": np.bincount(
                codes, weights=(h_end - h_start)[outer], minlength=len(names)
            ),
            "idle_us": idle_us,
        }
    )
    table = table[table["idle_us"].to_numpy() > 0].sort_values(
        "idle_us", ascending=False, kind="stable"
    )
    profile.tables["idle_host_ops"] = conform("idle_host_ops", table.reset_index(drop=True))


def startup_calls(profile: Profile) -> None:
    """host_ops.startup: a runtime call, kernel launch or CANN API call of at least
    STARTUP_CALL_US during which the device was busy for at most STARTUP_DEVICE_SHARE of it.
    False where the call has no start (no timeline to place it on) or the row sums several
    calls."""
    host = profile.tables["host_ops"]
    startup = _startup_mask(host, profile.tables.get("device_ops"))
    profile.tables["host_ops"] = host.assign(startup=startup)


def _startup_mask(host: pd.DataFrame, ops: pd.DataFrame | None) -> np.ndarray:
    """Which host calls are one-time start-up calls (see startup_calls); all False without
    host calls placed on the timeline."""
    if "start_us" not in host:
        return np.zeros(len(host), dtype=bool)
    start = host["start_us"].to_numpy("float64", na_value=np.nan)
    duration = host["duration_us"].to_numpy("float64", na_value=np.nan)
    long_call = (
        isin_mask(host["kind"], STARTUP_KINDS) & (duration >= STARTUP_CALL_US) & ~np.isnan(start)
    )
    if "count" in host:  # an aggregated row's duration is the total of its calls
        long_call &= host["count"].fillna(1).to_numpy("int64") <= 1
    if long_call.any() and ops is not None and "start_us" in ops:
        d_start = ops["start_us"].to_numpy("float64", na_value=np.nan)
        d_end = d_start + ops["duration_us"].to_numpy("float64", na_value=np.nan)
        busy = intervals.merge(d_start, d_end)
        lo, hi = start[long_call], start[long_call] + duration[long_call]
        device_us = intervals.covered_between(busy, lo, hi)
        long_call[long_call] = device_us <= STARTUP_DEVICE_SHARE * (hi - lo)
    return long_call


def _startup_calls(profile: Profile) -> intervals.Intervals:
    """The time the start-up calls ran, as merged intervals (none without such calls); read
    from host_ops.startup where startup_calls has run."""
    host = profile.tables.get("host_ops")
    if host is None:
        mask = np.zeros(0, dtype=bool)
    elif "startup" in host:
        mask = host["startup"].to_numpy(bool, na_value=False)
    else:
        mask = _startup_mask(host, profile.tables.get("device_ops"))
    if host is None or not mask.any():
        return intervals.merge(np.zeros(0), np.zeros(0))
    start = host["start_us"].to_numpy("float64", na_value=np.nan)[mask]
    duration = host["duration_us"].to_numpy("float64", na_value=np.nan)[mask]
    return intervals.merge(start, start + duration)


def optimizer_impls(profile: Profile) -> None:
    """host_ops.optimizer_impl and optimizer_ops: how each PyTorch optimizer step
    (`Optimizer.step#<Class>.step`) updated the parameters, told by the framework operators
    recorded inside it on its thread. Its name is the same for every implementation, and on
    GPUs torch.optim takes the multi-tensor (foreach) path by default, so advice to fuse the
    step needs to know which one ran: an `aten::_fused_*` operator is fused=True,
    `aten::_foreach_*` operators the foreach path, other operators one small update per
    parameter. torch_npu's fused optimizers (`Optimizer.step#NpuFusedAdamW.step`...) are fused
    whatever operators they run: they update flattened parameter buffers in a few operators.

    Each operator is placed in the step window of its thread that starts last before it, so
    the operators are neither sorted nor looped over in Python, and only the names of the
    optimizer records and of the operators inside a step are read: a trace holds millions of
    operators, a handful of steps. Steps follow one another; where a wrapper's step holds
    another optimizer's, the inner step gets the operators it holds and the wrapper only
    those before it."""
    host = profile.tables["host_ops"]
    count = len(host)
    impl = np.full(count, -1, dtype="int8")  # a code of _OPTIMIZER_IMPLS, -1 for none
    inside = np.zeros(count, dtype="int64")
    kind = host["kind"]
    names = host["name"].array
    start = host["start_us"].to_numpy("float64", na_value=np.nan)
    end = start + host["duration_us"].to_numpy("float64", na_value=np.nan)
    optimizer = np.flatnonzero(isin_mask(kind, ("optimizer",)) & ~np.isnan(end))
    steps = optimizer[
        pd.Series(names.take(optimizer))
        .str.startswith("Optimizer.step#")
        .to_numpy(bool, na_value=False)
    ]
    threads = (
        pd.factorize(host["thread"], use_na_sentinel=False)[0]
        if "thread" in host and len(steps)
        else np.zeros(count, dtype="int64")
    )
    ops = np.flatnonzero(isin_mask(kind, ("aten",)) & ~np.isnan(start))
    for thread in np.unique(threads[steps]).tolist():
        rows = steps[threads[steps] == thread]
        rows = rows[np.argsort(start[rows], kind="stable")]
        mine = ops[threads[ops] == thread]
        window = np.searchsorted(start[rows], start[mine], side="right") - 1
        within = window >= 0
        within[within] = start[mine[within]] < end[rows[window[within]]]
        held, window = mine[within], window[within]
        counts = np.bincount(window, minlength=len(rows))
        held_names = pd.Series(names.take(held))
        fused, foreach = (
            np.bincount(
                window,
                held_names.str.startswith(prefix).to_numpy(bool, na_value=False),
                len(rows),
            )
            > 0
            for prefix in ("aten::_fused_", "aten::_foreach_")
        )
        npu_fused = (
            pd.Series(names.take(rows))
            .str.startswith(_NPU_FUSED_STEP)
            .to_numpy(bool, na_value=False)
        )
        inside[rows] = counts
        impl[rows] = np.where(
            fused | npu_fused, 0, np.where(foreach, 1, np.where(counts > 0, 2, -1))
        )
    labels = pa.DictionaryArray.from_arrays(
        pa.array(impl, mask=impl < 0), pa.array(_OPTIMIZER_IMPLS)
    ).cast(pa.large_string())
    recorded = np.zeros(count, dtype=bool)
    recorded[steps] = True
    profile.tables["host_ops"] = host.assign(
        optimizer_impl=pd.array(labels, dtype="string"),
        optimizer_ops=pd.arrays.IntegerArray(inside, ~recorded),
    )


def calls_device_idle(profile: Profile) -> None:
    """host_ops.device_idle_us: the device idle time a host call costs, for the calls whose
    advice is to shorten or remove them; missing on other rows and, where the device recorded
    no task (a CPU-only profile), on every row, since the host's time is then the work.

    - An optimizer record (kind optimizer): the part of its time during which the device ran
      no task on any stream. A slow host-side step costs step time only where the device
      waited for it: an SGD step run while the device still drains the backward pass, or
      waits in an all-reduce, is hidden, and fusing it saves nothing (MindStudio Insight's
      AlexNet DDP run: a 10.4 ms step, the device busy throughout).
    - A synchronising call (kind sync): the device idle gap in which it returned, from the
      later of the call's start and the gap's start to the device's next task, and at most
      the time the call blocked. The host waited for the device's queue to drain, and the
      device then waits for the host to launch more; without the wait the host would have
      run ahead by the time it blocked, no more (a 99 µs cudaDeviceSynchronize followed by
      2.4 s of other host work costs 99 µs). Idle time while the call still waited on
      earlier work (the device waiting for an event or a peer) is no sync's doing, and a
      call returning while the device still runs something costs nothing (HTA's TorchRec
      rank 0 blocks 758 ms in 30 `.item()` copies, which are charged 3.0 ms).
      Calls returning in one gap share it, each moment counted once.

    Before the device's first task and after its last it ran nothing; a sync returning after
    the last task is charged until it returned."""
    host = profile.tables["host_ops"]
    ops = profile.tables["device_ops"]
    idle = np.full(len(host), np.nan)
    optimizer = np.flatnonzero(isin_mask(host["kind"], ("optimizer",)))
    syncs = np.flatnonzero(isin_mask(host["kind"], ("sync",)))
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    timed = ~np.isnan(start)
    if not (len(optimizer) + len(syncs)) or not timed.any():
        profile.tables["host_ops"] = host.assign(device_idle_us=idle)
        return
    gap = ops["gap_us"].to_numpy("float64", na_value=np.nan)
    end = start + ops["duration_us"].to_numpy("float64", na_value=0.0)
    lo = host["start_us"].to_numpy("float64", na_value=np.nan)
    hi = lo + host["duration_us"].to_numpy("float64", na_value=np.nan)
    calls = np.concatenate((optimizer, syncs))
    first, last = float(start[timed].min()), float(np.nanmax(end[timed]))
    before = min(first, np.nanmin(lo[calls], initial=first))
    after = max(last, np.nanmax(hi[calls], initial=last)) + 1.0  # past every call's return
    waits = gap > 0
    quiet_from, quiet_to = intervals.merge(
        np.concatenate(([before], start[waits] - gap[waits], [last])),
        np.concatenate(([first], start[waits], [after])),
    )
    idle[optimizer] = intervals.covered_between(
        (quiet_from, quiet_to), lo[optimizer], hi[optimizer]
    )
    if len(syncs):
        back = hi[syncs]
        gap_of = np.searchsorted(quiet_from, back, side="right") - 1
        inside = (gap_of >= 0) & (back < quiet_to[np.clip(gap_of, 0, None)])
        gap_of = np.clip(gap_of, 0, None)
        charged_from = np.where(inside, np.maximum(lo[syncs], quiet_from[gap_of]), back)
        charged_to = np.where(inside, quiet_to[gap_of], back)
        charged_to = np.where(charged_to == after, back, charged_to)  # no next task
        # at most the time the call blocked: had it not waited, the host would have run
        # ahead by that much and launched the next work sooner, no more
        charged_to = np.minimum(charged_to, charged_from + (back - lo[syncs]))
        order = np.argsort(charged_from, kind="stable")
        reach = np.maximum.accumulate(charged_to[order])
        taken = np.concatenate(([-np.inf], reach[:-1]))  # what earlier calls charged
        cost = np.empty(len(syncs))
        cost[order] = np.clip(charged_to[order] - np.maximum(charged_from[order], taken), 0, None)
        idle[syncs] = np.where(np.isnan(back), np.nan, cost)
    profile.tables["host_ops"] = host.assign(device_idle_us=idle)


_NPU_FUSED_STEP = "Optimizer.step#NpuFused"
"""The step of a torch_npu fused optimizer (torch_npu.optim.NpuFusedAdamW, NpuFusedSGD...)."""
_OPTIMIZER_IMPLS = ("fused", "foreach", "for-loop")
"""host_ops.optimizer_impl's values, in the order of its codes in optimizer_impls."""


_BREAKDOWN = ("step", "level", "stream", "idle_us", "host_wait_us", "kernel_wait_us")
_IDLE_HOST = ("name", "calls", "duration_us", "idle_us")
_QUIET = (
    "step",
    "start_us",
    "duration_us",
    "host_calls",
    "host_busy_us",
    "gc_us",
    "sync_us",
    "sync_call",
)

PROVIDERS = [
    MetricProvider(
        "launch_delay",
        (
            "device_ops.start_us",
            "device_ops.duration_us",
            "device_ops.launch_us",
            "device_ops.launch_dur_us",
        ),
        ("device_ops.launch_delay_us", "device_ops.launch_work_us"),
        launch_delays,
        "device_ops.launch_delay_us: task start after its launching call returned; "
        "launch_work_us: the device time of the tasks the call launched",
    ),
    MetricProvider(
        "tensor_core",
        ("device_ops.name", "device_ops.core_type"),
        ("device_ops.tensor_core",),
        tensor_cores,
        "device_ops.tensor_core from GPU kernel names",
    ),
    MetricProvider(
        "sm_fill",
        ("device_ops.start_us", "device_ops.duration_us", "device_ops.blocks_per_sm"),
        ("device_ops.sm_time_us", "device_ops.sm_filled_us"),
        sm_fill,
        "device_ops.sm_time_us and sm_filled_us: the GPU's time each kernel accounts for, "
        "shared by blocks per SM among kernels on several streams, and how much of it filled "
        "the SMs",
    ),
    MetricProvider(
        "idle_breakdown",
        ("device_ops.start_us", "device_ops.duration_us", "device_ops.gap_us"),
        ("idle_breakdown",)
        + tuple(
            f"idle_breakdown.{c}" for c in (*_BREAKDOWN, "other_us", "startup_us", "intervals")
        ),
        idle_breakdown,
        "idle_breakdown: device and stream idle time split into host wait, kernel wait, other "
        "and start-up",
    ),
    MetricProvider(
        "quiet_gaps",
        ("device_ops.start_us", "device_ops.gap_us"),
        ("quiet_gaps",) + tuple(f"quiet_gaps.{c}" for c in _QUIET),
        quiet_gaps,
        "quiet_gaps: device gaps of 1 ms or more with the host calls inside them",
    ),
    MetricProvider(
        "idle_host_ops",
        (
            "device_ops.start_us",
            "device_ops.gap_us",
            "host_ops.kind",
            "host_ops.start_us",
            "host_ops.duration_us",
            "host_ops.startup",
            "steps.warmup",
        ),
        ("idle_host_ops",) + tuple(f"idle_host_ops.{c}" for c in _IDLE_HOST),
        idle_host_ops,
        "idle_host_ops: device idle time during each framework operator's outermost calls",
    ),
    MetricProvider(
        "startup_calls",
        ("host_ops.kind", "host_ops.duration_us"),
        ("host_ops.startup",),
        startup_calls,
        "host_ops.startup: runtime calls of 0.5 s or more while the device ran nothing",
    ),
    MetricProvider(
        "calls_device_idle",
        (
            "host_ops.kind",
            "host_ops.start_us",
            "host_ops.duration_us",
            "device_ops.start_us",
            "device_ops.gap_us",
        ),
        ("host_ops.device_idle_us",),
        calls_device_idle,
        "host_ops.device_idle_us: the device idle time each optimizer record and "
        "synchronising call costs",
    ),
    MetricProvider(
        "optimizer_impls",
        ("host_ops.kind", "host_ops.name", "host_ops.start_us", "host_ops.duration_us"),
        ("host_ops.optimizer_impl", "host_ops.optimizer_ops"),
        optimizer_impls,
        "host_ops.optimizer_impl: fused, foreach or for-loop, from the operators inside each "
        "optimizer step",
    ),
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
