"""Built-in metric providers: statistics, step assignment, overlap breakdown, compute classes,
nesting of host calls, the user's code around each host operator, task waits behind
collectives, device gaps before tasks.

These derive what most profiles lack on disk: per-step computing / communication / uncovered
communication / free time from device task intervals (without them, the first three from host
operators and CPU collectives), per-type statistics from tasks, and the compute class of every
device task (the compare tool's cube/vector/flash-attention/... split).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor import intervals, op_classes, steady
from advisor.compat import zip_strict
from advisor.formats.aicore_freq import task_frequency
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.lazy import lazy_module
from advisor.model import Profile, conform
from advisor.text_codes import isin_mask, passing_mask

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from advisor.formats import python_frames
    from advisor.formats.python_frames import Frame
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
    # imported when a profile's stacks are read: listing plugins and rules never does
    python_frames = lazy_module("advisor.formats.python_frames")


def op_stats_from_device_ops(profile: Profile) -> None:
    """Aggregate compute tasks by (op type, core type) like msprof's op_statistic."""
    ops = profile.tables["device_ops"]
    ops = ops[(ops["category"] == "compute").fillna(False)] if "category" in ops else ops
    op_type = ops["op_type"] if "op_type" in ops else ops["name"]
    frame = pd.DataFrame(
        {
            "op_type": op_type.fillna(ops["name"]),
            "core_type": ops["core_type"].fillna("unknown"),
            "duration_us": ops["duration_us"],
        }
    )
    grouped = (
        frame.groupby(["op_type", "core_type"], sort=False)["duration_us"]
        .agg(count="count", total_us="sum", avg_us="mean", min_us="min", max_us="max")
        .reset_index()
    )
    total = grouped["total_us"].sum()
    grouped["ratio"] = grouped["total_us"] / total if total else 0.0
    grouped = grouped.sort_values("total_us", ascending=False, kind="stable")
    profile.tables["op_stats"] = conform("op_stats", grouped)


def _step_index(starts: np.ndarray, step_start: np.ndarray, step_end: np.ndarray) -> np.ndarray:
    """Position of the step window containing each start, or -1."""
    order = np.argsort(step_start, kind="stable")
    pos = np.searchsorted(step_start[order], starts, side="right") - 1
    valid = pos >= 0
    idx = np.full(starts.shape, -1)
    idx[valid] = order[pos[valid]]
    inside = np.zeros(starts.shape, dtype=bool)
    inside[valid] = starts[valid] < step_end[idx[valid]]
    idx[~inside] = -1
    return idx


def _assign_steps(profile: Profile, table: str) -> None:
    """Give every row the step whose [start, end) window contains its start."""
    rows, steps = profile.tables[table], profile.tables["steps"]
    idx = _step_index(
        rows["start_us"].to_numpy("float64", na_value=np.nan),
        steps["start_us"].to_numpy("float64"),
        steps["end_us"].to_numpy("float64"),
    )
    step_numbers = steps["step"].to_numpy("int64")
    values = pd.array(
        step_numbers[np.clip(idx, 0, None)] if len(step_numbers) else idx, dtype="Int64"
    )
    values[idx < 0] = pd.NA
    profile.tables[table] = rows.assign(step=values)


def assign_device_steps(profile: Profile) -> None:
    _assign_steps(profile, "device_ops")


def assign_host_steps(profile: Profile) -> None:
    _assign_steps(profile, "host_ops")


def compute_classes(profile: Profile) -> None:
    """device_ops.compute_class: cube, vector, flash_attention, conv, matmul, other_compute,
    aicpu, memcpy, communication or other (first match wins, in that order of specificity).

    Classified once per distinct (op type, name, core type, category): a trace has millions
    of tasks and a few hundred kernels, and the name patterns are regexes."""
    ops = profile.tables["device_ops"]
    keys = [c for c in ("op_type", "name", "core_type", "category") if c in ops]
    group = _groups([ops[c] for c in keys])
    firsts = np.unique(group, return_index=True)[1]
    values = {c: ops[c].iloc[firsts].tolist() for c in keys}
    classes = np.array(
        [
            _compute_class(op_type, name, core, category)
            for op_type, name, core, category in zip_strict(
                values.get("op_type", [None] * len(firsts)),
                values["name"],
                values["core_type"],
                values["category"],
            )
        ],
        dtype=object,
    )
    profile.tables["device_ops"] = ops.assign(
        compute_class=pd.array(classes[group], dtype="string")
    )


def _groups(columns: list[pd.Series]) -> np.ndarray:
    """Each row's group of equal values in every column (a missing value equal to another),
    numbered from 0 in order of first appearance."""
    group = np.zeros(len(columns[0]), dtype="int64")
    for column in columns:
        codes, uniques = pd.factorize(column, use_na_sentinel=False)
        group, _ = pd.factorize(group * max(len(uniques), 1) + codes)
    return group


def _compute_class(op_type: object, name: object, core: object, category: object) -> str:
    """The compute class of one (op type, name, core type, category)."""
    category = "other" if pd.isna(category) else str(category)
    core = "" if pd.isna(core) else str(core).upper()
    name = "" if pd.isna(name) else str(name)
    text = f"{name if pd.isna(op_type) else op_type} {name}"
    if category == "communication":
        return "communication"
    if category in ("memcpy", "memset"):
        return "memcpy"
    if core == "AI_CPU":
        return "aicpu"
    if category != "compute":
        return "other"
    for pattern, found in (
        (op_classes.ATTENTION, "flash_attention"),
        (op_classes.CONVOLUTION, "conv"),
        (op_classes.MATMUL, "matmul"),
    ):
        if pattern.search(text):
            return found
    if core in ("AI_CORE", "MIX_AIC", "CUBE"):
        return "cube"
    if core in ("AI_VECTOR_CORE", "MIX_AIV", "VECTOR"):
        return "vector"
    return "other_compute"


def mark_first_in_step(profile: Profile) -> None:
    """Flag the first task of every step (all False when the profile has no steps)."""
    ops = profile.tables["device_ops"]
    first = np.zeros(len(ops), dtype=bool)
    steps = profile.tables.get("steps")
    if steps is not None and not steps.empty:
        starts = ops["start_us"].to_numpy("float64", na_value=np.nan)
        idx = _step_index(
            starts, steps["start_us"].to_numpy("float64"), steps["end_us"].to_numpy("float64")
        )
        frame = pd.DataFrame({"step": idx, "start": starts})
        in_step = frame[frame["step"] >= 0]
        first[in_step.groupby("step")["start"].idxmin().to_numpy()] = True
    profile.tables["device_ops"] = ops.assign(first_in_step=first)


def step_overlap(profile: Profile) -> None:
    """Per step: computing, communication, uncovered communication and free time (µs)."""
    ops, steps = profile.tables["device_ops"], profile.tables["steps"]
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    end = start + ops["duration_us"].to_numpy("float64", na_value=np.nan)
    is_comm = (ops["category"] == "communication").fillna(False).to_numpy()
    compute = intervals.merge(start[~is_comm], end[~is_comm])
    comm = intervals.merge(start[is_comm], end[is_comm])
    span = (np.nanmin(start, initial=np.inf), np.nanmax(end, initial=-np.inf))
    profile.tables["steps"] = steps.assign(**_overlap_per_step(steps, compute, comm, span))


HOST_COMPUTE_KINDS = ("aten", "optimizer", "cpu_kernel")
"""host_ops kinds that compute on a CPU-only profile: operators and the optimizer's step.
Python frames, annotations and data loading are left out: a Python frame (`backward`) or a
user's span can last through the wait for a collective, which is not computation."""
_COMM_CALLS = ("c10d::", "record_param_comms", "gloo:", "nccl:")
"""Operators that start or wait for a collective (c10d::allreduce_ queues it for gloo's
threads): communication's calls, whose time is not computation."""


def host_step_overlap(profile: Profile) -> None:
    """Per step: computing, communication and uncovered communication (µs) of a profile
    without device tasks whose collectives ran on host threads (gloo on CPU): the operators
    compute, the collectives' spans on gloo's threads communicate. A data-parallel CPU run
    otherwise gets no overlap figure, while its training thread may wait most of each step
    for the gradients' all-reduce (nothing is recorded on that thread while it waits).
    Profiles with device tasks use step_overlap; free time stays a device figure."""
    if profile.has("device_ops", "start_us"):
        return
    host, steps = profile.tables["host_ops"], profile.tables["steps"]
    start = host["start_us"].to_numpy("float64", na_value=np.nan)
    duration = host["duration_us"].to_numpy("float64", na_value=np.nan)
    collective = _host_collectives(start, duration, profile.tables["comm_ops"])
    if not collective.any():
        return  # the collectives ran on a device: host calls are not their computation
    end = start + duration
    calls = passing_mask(host["name"], lambda name: name.startswith(_COMM_CALLS))
    calls = calls & ~collective  # a collective communicates: computation may hide it
    operators = isin_mask(host["kind"], HOST_COMPUTE_KINDS)
    thread = (
        host["thread"].to_numpy("float64", na_value=-1.0)
        if "thread" in host
        else np.zeros(len(host))
    )
    compute = _host_computation(start, end, thread, operators & ~calls, calls)
    comm = intervals.merge(start[collective], end[collective])
    busy = intervals.union(compute, comm)
    span = (busy[0][0], busy[1][-1]) if len(busy[0]) else (np.inf, -np.inf)
    columns = _overlap_per_step(steps, compute, comm, span)
    del columns["free_us"]
    profile.tables["steps"] = steps.assign(**columns)


def _host_computation(
    start: np.ndarray,
    end: np.ndarray,
    thread: np.ndarray,
    operators: np.ndarray,
    calls: np.ndarray,
) -> intervals.Intervals:
    """The time some thread runs an operator while not inside a communication call: DDP's
    hook calls c10d::allreduce_ inside autograd's AccumulateGrad, whose span covers the
    call's time without computing in it."""
    parts = [
        intervals.subtract(
            intervals.merge(start[operators & on], end[operators & on]),
            intervals.merge(start[calls & on], end[calls & on]),
        )
        for on in (thread == t for t in np.unique(thread[operators]))
    ]
    return intervals.merge(
        np.concatenate([p[0] for p in parts] or [np.zeros(0)]),
        np.concatenate([p[1] for p in parts] or [np.zeros(0)]),
    )


def _host_collectives(start: np.ndarray, duration: np.ndarray, comm: pd.DataFrame) -> np.ndarray:
    """Which host operations are also collectives of comm_ops (the same start and duration:
    a gloo collective is read as both)."""
    comm_start = comm["start_us"].to_numpy("float64", na_value=np.nan)
    comm_duration = comm["duration_us"].to_numpy("float64", na_value=np.nan)
    pairs = set(zip_strict(comm_start.tolist(), comm_duration.tolist()))
    found = np.zeros(len(start), dtype=bool)
    rows = np.flatnonzero(np.isin(start, comm_start))
    found[rows] = [p in pairs for p in zip_strict(start[rows].tolist(), duration[rows].tolist())]
    return found


def _overlap_per_step(
    steps: pd.DataFrame,
    compute: intervals.Intervals,
    comm: intervals.Intervals,
    span: tuple[float, float],
) -> dict[str, pd.Series]:
    """computing_us, communication_us, comm_not_overlapped_us and free_us of each step, from
    the merged computation and communication and the `span` the recording covers."""
    # Steps outside the recorded task timeline get no breakdown: no data is not idle time.
    # Nor does a step the timeline starts or stops early in, covering less than half of it,
    # while steps before or after it have no task at all (a device timeline of the first 15
    # of 322 steps ending 1 ms into the 15th): the rest of it was not recorded, not idle.
    first_task, last_task = span
    starts = steps["start_us"].to_numpy("float64", na_value=np.nan)
    ends = steps["end_us"].to_numpy("float64", na_value=np.nan)
    stops_early = bool((starts >= last_task).any())
    starts_late = bool((ends <= first_task).any())
    rows = []
    for lo, hi in zip_strict(starts.tolist(), ends.tolist()):
        half = (hi - lo) / 2
        cut = (stops_early and last_task - lo < half) or (starts_late and hi - first_task < half)
        if cut or not (lo < last_task and hi > first_task):
            rows.append((np.nan,) * 4)
            continue
        c = intervals.clip(compute, lo, hi)
        m = intervals.clip(comm, lo, hi)
        computing = intervals.total(c)
        communication = intervals.total(m)
        hidden = intervals.total(intervals.intersect(c, m))
        busy = intervals.total(intervals.union(c, m))
        rows.append((computing, communication, communication - hidden, max(hi - lo - busy, 0.0)))
    cols = ["computing_us", "communication_us", "comm_not_overlapped_us", "free_us"]
    # columns of one array, not a frame made of the rows (which costs a tiny rank more)
    values = np.array(rows, dtype="float64").reshape(len(rows), len(cols))
    return {c: pd.Series(values[:, k], index=steps.index, name=c) for k, c in enumerate(cols)}


def mark_nested_host_ops(profile: Profile) -> None:
    """host_ops.nested: true for a call inside an earlier, longer call of the same kind on
    the same thread. Profilers record every level of a call stack (DataLoader.__next__, then
    the calls it makes, all named after the DataLoader), so summing a kind over all levels
    counts the same time several times."""
    ops = profile.tables["host_ops"]
    profile.tables["host_ops"] = ops.assign(nested=intervals.nested_calls(ops))


_UNSTACKED_KINDS = ("python", "runtime", "launch", "cann_api")
"""host_ops kinds op_stacks leaves out: Python frames are the stack itself; runtime calls,
kernel launches and CANN API calls are too many to list, and their work reaches a finding
through the operator around them."""


def op_stacks(profile: Profile) -> None:
    """op_stacks: the innermost frame of the user's code around each host operator, from the
    stack the profiler wrote with the operator (host_ops.call_stack), else from the Python
    frames (host_ops kind python, Kineto's python_function events) that enclose the operator
    on its thread. No table when the profile recorded neither."""
    host = profile.tables["host_ops"]
    kind = host["kind"].astype("string")
    if "call_stack" not in host and not isin_mask(kind, ("python",)).any():
        return  # no stacks recorded: nothing to look up, row by row
    rows = np.flatnonzero(~isin_mask(kind, _UNSTACKED_KINDS))
    chosen: list[Frame | None] = [None] * len(rows)
    stacks: list[str | None] = [None] * len(rows)
    if "call_stack" in host:
        texts = host["call_stack"].to_numpy(object, na_value=None)[rows]
        for k, text in enumerate(texts.tolist()):
            if text:
                frames = python_frames.split_stack(text)
                stacks[k] = "\n".join(frames)
                chosen[k] = next(
                    (
                        f
                        for f in map(python_frames.parse_frame, frames)
                        if f is not None and python_frames.is_user_file(f.file)
                    ),
                    None,
                )
    missing = np.array([frame is None for frame in chosen], dtype=bool)
    if missing.any() and "start_us" in host:
        for k, frame in zip_strict(
            np.flatnonzero(missing).tolist(), _enclosing_user_frames(host, rows[missing])
        ):
            chosen[k] = frame
    found = [(k, frame) for k, frame in enumerate(chosen) if frame is not None]
    if not found:
        return
    keep = [k for k, _ in found]
    picked = host.iloc[rows[keep]]
    columns = {
        "host_row": rows[keep],
        "name": picked["name"].to_numpy(object),
        "file": [frame.file for _, frame in found],
        "line": [frame.line for _, frame in found],
        "function": [frame.function or None for _, frame in found],
        "stack": [stacks[k] for k in keep],
    }
    for column in ("thread", "start_us", "duration_us"):
        if column in picked:
            columns[column] = picked[column].to_numpy()
    profile.tables["op_stacks"] = conform("op_stacks", pd.DataFrame(columns))


def _enclosing_user_frames(host: pd.DataFrame, rows: np.ndarray) -> list[Frame | None]:
    """For each host_ops row, the innermost Python frame of the user's code on its thread
    that encloses the whole row (None: none does). vLLM's step annotation, 26 ms, took the
    frame of an attention layer's forward that ran in its middle, and the kernels its CUDA
    graphs replayed were charged to that line."""
    python = isin_mask(host["kind"], ("python",))
    python &= host["start_us"].notna().to_numpy(bool)
    if not python.any():
        return [None] * len(rows)
    thread = (
        host["thread"].fillna(-1).to_numpy("int64")
        if "thread" in host
        else np.full(len(host), -1, dtype=np.int64)
    )
    start = host["start_us"].to_numpy("float64", na_value=np.nan)
    duration = host["duration_us"].to_numpy("float64", na_value=0.0)
    frames = np.flatnonzero(python)
    order = frames[np.lexsort((-duration[frames], start[frames], thread[frames]))]
    f_thread, f_start = thread[order], start[order]
    f_end = f_start + duration[order]
    parent = intervals.nest(f_thread, f_start, f_end)
    parsed: dict[str, Frame | None] = {}
    names = host["name"].to_numpy(object, na_value="")[order]
    user_of = np.full(len(order), -1, dtype=np.int64)
    frame_of: list[Frame | None] = []
    for i, name in enumerate(names.tolist()):
        if name not in parsed:
            frame = python_frames.parse_frame(name)
            user = frame is not None and python_frames.is_user_file(frame.file)
            parsed[name] = frame if user else None
        frame_of.append(parsed[name])
        if parsed[name] is not None:
            user_of[i] = i
        elif parent[i] >= 0:  # parents come before their children
            user_of[i] = user_of[parent[i]]
    row_start = start[rows]
    row_end = row_start + np.nan_to_num(duration[rows])
    inner = intervals.innermost(
        f_thread, f_start, f_end, parent, thread[rows], (row_start + row_end) / 2
    )
    # the frame at the midpoint may lie inside the row (a step annotation or an optimizer
    # step holds frames of its own): the row's frame is the first one out that holds it all
    outside = _outside(inner, f_start, f_end, row_start, row_end)
    while outside.any():
        inner[outside] = parent[inner[outside]]
        outside = _outside(inner, f_start, f_end, row_start, row_end)
    found: list[Frame | None] = []
    for position in inner.tolist():
        user = user_of[position] if position >= 0 else -1
        found.append(frame_of[user] if user >= 0 else None)
    return found


def _outside(
    frame: np.ndarray, f_start: np.ndarray, f_end: np.ndarray, start: np.ndarray, end: np.ndarray
) -> np.ndarray:
    """Where `frame` (a position into the frames, -1 for none) does not hold [start, end]."""
    at = np.maximum(frame, 0)
    return (frame >= 0) & ((f_start[at] > start) | (f_end[at] < end))


def comm_waits(profile: Profile) -> None:
    """device_ops.comm_wait_us: the part of each task's wait during which a collective ran.

    A task queued behind an all-reduce waits for communication, not for the host: counting
    that as dispatch starvation sends the user to the wrong fix. Without start times the wait
    cannot be placed, and the column stays empty."""
    ops = profile.tables["device_ops"]
    if "start_us" not in ops:
        profile.tables["device_ops"] = ops.assign(comm_wait_us=np.nan)
        return
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    duration = ops["duration_us"].to_numpy("float64", na_value=np.nan)
    wait = ops["wait_us"].to_numpy("float64", na_value=np.nan)
    comm = (ops["category"] == "communication").fillna(False).to_numpy(bool)
    merged = intervals.merge(start[comm], start[comm] + duration[comm])
    during = intervals.covered_between(merged, start - wait, start)
    profile.tables["device_ops"] = ops.assign(comm_wait_us=np.clip(during, 0.0, wait))


def device_gaps(profile: Profile) -> None:
    """device_ops.gap_us: how long the device (all its streams together) sat idle right
    before each task started; empty for the first task and for tasks without a start.

    A kernel's launch overhead costs device time only where the device had nothing else to
    run, so this bounds what faster launching can save."""
    ops = profile.tables["device_ops"]
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    end = start + ops["duration_us"].to_numpy("float64", na_value=0.0)
    order = np.argsort(start, kind="stable")  # tasks without a start sort last
    reach = np.fmax.accumulate(np.where(np.isnan(end[order]), -np.inf, end[order]))
    before = np.concatenate(([np.nan], reach[:-1]))
    gap = np.empty(len(order))
    gap[order] = np.clip(start[order] - before, 0.0, None)
    profile.tables["device_ops"] = ops.assign(gap_us=gap)


def mark_warmup_steps(profile: Profile) -> None:
    """steps.warmup: the leading steps far slower than the rest (advisor.steady)."""
    steps = profile.tables["steps"]
    profile.tables["steps"] = steps.assign(warmup=steady.warmup_mask(steps))


def task_frequencies(profile: Profile) -> None:
    """device_ops.aicore_mhz: the AI Core frequency over each task's span, from the AI Core
    Freq samples, so a frequency drop is charged to the operators it slowed."""
    ops = profile.tables["device_ops"]
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    end = start + ops["duration_us"].to_numpy("float64", na_value=np.nan)
    mhz = task_frequency(start, end, profile.tables["aicore_freq"])
    profile.tables["device_ops"] = ops.assign(aicore_mhz=mhz)


PROVIDERS = [
    MetricProvider(
        "warmup_steps",
        ("steps.duration_us",),
        ("steps.warmup",),
        mark_warmup_steps,
        "steps.warmup: leading steps slower than twice the median of the later steps",
    ),
    MetricProvider(
        "op_stacks",
        ("host_ops.kind", "host_ops.name"),
        ("op_stacks", *(f"op_stacks.{c}" for c in ("host_row", "file", "line", "function"))),
        op_stacks,
        "op_stacks: the user's code line around each host operator, from recorded Python stacks",
    ),
    MetricProvider(
        "op_stats",
        ("device_ops.duration_us", "device_ops.core_type"),
        ("op_stats",)
        + tuple(
            f"op_stats.{c}"
            for c in (
                "op_type",
                "core_type",
                "count",
                "total_us",
                "avg_us",
                "min_us",
                "max_us",
                "ratio",
            )
        ),
        op_stats_from_device_ops,
        "op_stats aggregated from device tasks when the source has no statistics",
    ),
    MetricProvider(
        "device_op_steps",
        ("device_ops.start_us", "steps.start_us", "steps.end_us"),
        ("device_ops.step",),
        assign_device_steps,
        "device_ops.step from the step windows",
    ),
    MetricProvider(
        "host_op_steps",
        ("host_ops.start_us", "steps.start_us", "steps.end_us"),
        ("host_ops.step",),
        assign_host_steps,
        "host_ops.step from the step windows",
    ),
    MetricProvider(
        "host_op_nesting",
        ("host_ops.kind", "host_ops.duration_us"),
        ("host_ops.nested",),
        mark_nested_host_ops,
        "host_ops.nested from the call intervals of each kind and thread",
    ),
    MetricProvider(
        "comm_wait",
        ("device_ops.wait_us", "device_ops.category", "device_ops.duration_us"),
        ("device_ops.comm_wait_us",),
        comm_waits,
        "device_ops.comm_wait_us: task wait while a collective ran",
    ),
    MetricProvider(
        "device_gaps",
        ("device_ops.start_us", "device_ops.duration_us"),
        ("device_ops.gap_us",),
        device_gaps,
        "device_ops.gap_us: device idle time before each task",
    ),
    MetricProvider(
        "compute_class",
        ("device_ops.name", "device_ops.core_type", "device_ops.category"),
        ("device_ops.compute_class",),
        compute_classes,
        "device_ops.compute_class from names, op types and core types",
    ),
    MetricProvider(
        "aicore_mhz",
        (
            "device_ops.start_us",
            "device_ops.duration_us",
            "aicore_freq.start_us",
            "aicore_freq.end_us",
            "aicore_freq.freq_mhz",
        ),
        ("device_ops.aicore_mhz",),
        task_frequencies,
        "device_ops.aicore_mhz: AI Core frequency over each task (time-weighted mean)",
    ),
    MetricProvider(
        "first_in_step",
        ("device_ops.start_us",),
        ("device_ops.first_in_step",),
        mark_first_in_step,
        "device_ops.first_in_step from the step windows",
    ),
    MetricProvider(
        "step_overlap",
        (
            "device_ops.start_us",
            "device_ops.duration_us",
            "device_ops.category",
            "steps.start_us",
            "steps.end_us",
        ),
        (
            "steps.computing_us",
            "steps.communication_us",
            "steps.comm_not_overlapped_us",
            "steps.free_us",
        ),
        step_overlap,
        "per-step compute/communication overlap from device task intervals",
    ),
    MetricProvider(
        "host_step_overlap",
        (
            "host_ops.start_us",
            "host_ops.duration_us",
            "host_ops.kind",
            "host_ops.name",
            "comm_ops.start_us",
            "comm_ops.duration_us",
            "steps.start_us",
            "steps.end_us",
        ),
        ("steps.computing_us", "steps.communication_us", "steps.comm_not_overlapped_us"),
        host_step_overlap,
        "per-step compute/communication overlap from host operators and collectives run on "
        "host threads (gloo), where there are no device tasks",
    ),
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
