"""The critical path of each step: what the step's time went to, one category per instant.

A step's wall-clock window is split into five disjoint parts that add up to its duration:

- ``compute_us``: the device computes (steps.computing_us: the union of non-communication
  tasks, copies included);
- ``communication_us``: communication no computation hides (steps.comm_not_overlapped_us);
- ``data_us``: the device is idle while the host is in a data-loader call (host_ops kind
  ``dataloader``);
- ``host_us``: the device is idle, not for data, while the host holds it up: the task that
  ends the idle interval was launched only after the device ran out of work
  (device_ops.launch_us later than the interval's start; until the call returned, where the
  task then waited longer on the device; before the device's first task, the host calls
  that ran and ended before it), or the host was compiling or launching
  (host_ops kinds ``compile``, ``compile_execute``, ``launch``) during it. Not while it
  was synchronising: a sync waits for the device, so device idle time during it is the
  device waiting on something else (an event, another stream, a peer); the gap after the
  sync returned is the host's through the late launch that ends it;
- ``idle_us``: the rest of the idle time, which no recorded host work, data loading or
  communication explains (dependencies on other streams, ranks or pipeline stages, a
  pipeline bubble among them; host work the profiler did not record).

``host_leading_us`` is the part of ``host_us`` before the step's first device task: the host
prepared the step (decoded or preprocessed its input, ran Python at the step's start) before it
launched anything, which a graph or faster launches do not shorten, as they do the host time
between launches.

Compute and exposed communication come from the steps table as every other report figure
does; the idle remainder (duration minus both) is split by the device timeline. Where the
timeline measures more of a kind than the remainder holds (a profiler's step figures and its
task timeline can disagree), the measured kind is cut to what is left, data first, then
host, so the five parts always add up to the step.

``compute_savable_us`` is the part of the compute time that faster device work could save.
The host runs its own part of the step alongside the device: where it synchronised in the
step, the step cannot get shorter than the host's work outside its waits for the device, so
a faster device saves at most those waits (a float32 step on an H200 of 4.40 ms, whose host
waited 1.6 ms of it, took 2.98 ms with TF32, not the 2.50 ms that halving its GEMMs would
give; tests/fixtures/kineto_gpu_own).

The same split, instant by instant rather than summed, is the `timeline_lanes` table the
report's timeline draws: over a few consecutive steps around the slowest (and the gaps between
them) each moment is in one lane, compute (any non-communication task runs), communication
(only communication runs), or, when nothing runs, data, host or idle as above (between steps,
data is the profiler's data wait where it reports one). The lanes come from the device
timeline, so their sums can differ from step_bounds where a profiler's step figures and its
tasks disagree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor import intervals, steady
from advisor.compat import zip_strict
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.launches import queued_after_launch
from advisor.lazy import lazy_module
from advisor.model import Profile, conform
from advisor.text_codes import coded

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

BOUNDS = ("compute", "communication", "host", "data", "idle")
"""The categories, in the order ties are broken (compute first: a step evenly split between
computing and something else is not called bound by the something else)."""
TIMELINE_STEPS = 8
"""Consecutive steps the timeline_lanes table covers at most (the slowest among them)."""
TIMELINE_RESOLUTION = 500
"""Stretches of a lane closer than this fraction of the covered span are joined (their
busy_us keeps the lane's exact time), so the table stays small however many tasks ran."""
_TIMES = ("start_us", "end_us", "busy_us")
HOST_KINDS = ("compile", "compile_execute", "launch")
"""host_ops kinds during which device idle time is the host's (not ``sync``: the host then
waits for the device, which, idle, waits on something else: SGLang's decode trace idles
463 ms while the host sits in a blocking copy queued behind an event wait)."""
BLOCKED_LAUNCH_US = 50.0
"""A launch call longer than this waited for room in the device's full launch queue (our
choice; a launch takes a few µs, and this is SCHED-002's runtime cutoff, HTA's): time the
host waited for the device, as a synchronisation does."""


def _empty() -> intervals.Intervals:
    return np.empty(0), np.empty(0)


class _HostCalls:
    """The timed host calls of a profile, as arrays, for the merged spans of some kinds of
    them: the kinds coded once (a selection of the text column for each set of kinds cost
    a tiny rank more than the spans)."""

    def __init__(self, profile: Profile) -> None:
        host = profile.tables.get("host_ops")
        self.timed = host is not None and not host.empty and "start_us" in host
        if host is None or not self.timed:
            return
        self.kind_code, names = coded(host["kind"])  # missing: -1; coded once a column
        self.kind_names = names.to_numpy(object)
        self.start = host["start_us"].to_numpy("float64", na_value=np.nan)
        self.duration = host["duration_us"].to_numpy("float64", na_value=0.0)

    def spans(self, kinds: tuple[str, ...], longer_than_us: float = 0.0) -> intervals.Intervals:
        """The merged spans of the calls of `kinds` (those longer than `longer_than_us`,
        where given; empty without timed host calls)."""
        if not self.timed:
            return _empty()
        wanted = np.append(np.isin(self.kind_names, kinds), False)  # code -1: the False at the end
        rows = wanted[self.kind_code]
        start, duration = self.start[rows], self.duration[rows]
        if longer_than_us > 0:
            start, duration = start[duration > longer_than_us], duration[duration > longer_than_us]
        return intervals.merge(start, start + duration)

    def within(self, lo: float, hi: float) -> intervals.Intervals:
        """The merged spans of the calls, synchronisations aside, that start and end
        between `lo` and `hi` (a sync waits for the device: its time is not the host's)."""
        if not self.timed:
            return _empty()
        sync = np.append(self.kind_names == "sync", False)[self.kind_code]
        end = self.start + self.duration
        rows = ~sync & (self.start >= lo) & (end <= hi) & (self.duration > 0)
        return intervals.merge(self.start[rows], end[rows])


def _savable(
    compute: float, lo: float, hi: float, syncs: intervals.Intervals, waits: intervals.Intervals
) -> float:
    """The part of a step's compute time faster device work could save: where the host
    synchronised in the step, at most the time it waited for the device (the rest of the
    step is the host's own work, which a faster device leaves as it is); else all of it."""
    if intervals.total(intervals.clip(syncs, lo, hi)) <= 0:
        return compute
    return min(compute, intervals.total(intervals.clip(waits, lo, hi)))


def _device(profile: Profile, calls: _HostCalls) -> tuple[intervals.Intervals, intervals.Intervals]:
    """(busy time of the device, the idle time in which the host held it up).

    An idle interval runs from the end of one busy block to the start of the next; the task
    starting that block was launched late when its launch_us lies after the interval began:
    the device had run dry and waited for the host, until the launching call returned where
    the task then waited longer on the device (advisor.launches). Before its first block the
    device had nothing to run yet: where the first step began before the first task was
    launched, the host calls that ran and ended in between held it up (TraceLens' MI300
    TimeSformer: 267 ms of video decoding and preprocessing before the step's first copy);
    the rest of that time no recorded work explains (HTA's backward_thread sample: no call
    but a 10 µs launch in the 331 ms before its one kernel)."""
    ops = profile.tables.get("device_ops")
    if ops is None or ops.empty or "start_us" not in ops:
        return _empty(), _empty()
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    end = start + ops["duration_us"].to_numpy("float64", na_value=np.nan)
    busy = intervals.merge(start, end)
    if "launch_us" not in ops or busy[0].size == 0:
        return busy, _empty()
    timed = ~(np.isnan(start) | np.isnan(end)) & (end > start)
    order = np.argsort(start[timed], kind="stable")
    starts = start[timed][order]
    launch = ops["launch_us"].to_numpy("float64", na_value=np.nan)[timed][order]
    # the first task (in stable order) starting at each block start
    first = np.searchsorted(starts, busy[0], side="left")
    gap_start = np.append(_first_step_start(profile), busy[1][:-1])
    gap_end = busy[0]
    late = launch[first] > gap_start  # NaN (launch unknown) compares False
    if "launch_dur_us" in ops:
        duration = ops["launch_dur_us"].to_numpy("float64", na_value=np.nan)[timed][order]
        gap_end = gap_end - queued_after_launch(gap_end, (launch + duration)[first])
    late &= gap_end > gap_start
    between = (gap_start[1:][late[1:]], gap_end[1:][late[1:]])
    if not late[0]:
        return busy, between
    return busy, intervals.union(between, calls.within(gap_start[0], gap_end[0]))


def _first_step_start(profile: Profile) -> float:
    """Where the first step starts (infinity without one: the device then has no leading
    idle time to judge)."""
    steps = profile.tables.get("steps")
    if steps is None or "start_us" not in steps:
        return np.inf
    starts = steps["start_us"].to_numpy("float64", na_value=np.nan)
    return float(np.nanmin(starts)) if np.isfinite(starts).any() else np.inf


def _first_busy(idle: intervals.Intervals, lo: float) -> float:
    """Where the device first works in the step starting at `lo`, given its idle intervals
    in the step: the end of the first one where the step starts idle, else `lo`."""
    starts, ends = idle
    return float(ends[0]) if starts.size and starts[0] <= lo else lo


def _between(steps: pd.DataFrame, data: intervals.Intervals) -> tuple[np.ndarray, np.ndarray]:
    """Per step, the time since the previous step ended that lies in no step window, and the
    part of it that is data loading: what the profiler reports as a data wait (msprof's Data
    Aug Bound), else the time the host spent in data-loader calls."""
    start = steps["start_us"].to_numpy("float64")
    end = steps["end_us"].to_numpy("float64")
    order = np.argsort(start, kind="stable")
    prev_end = np.full(len(start), np.nan)
    prev_end[order[1:]] = np.fmax.accumulate(end[order])[:-1]
    between = np.clip(np.nan_to_num(start - prev_end, nan=0.0), 0.0, None)
    reported = (
        steps["data_aug_bound_us"].to_numpy("float64", na_value=np.nan)
        if "data_aug_bound_us" in steps
        else np.full(len(start), np.nan)
    )
    measured = np.array(
        [
            intervals.total(intervals.clip(data, lo - gap, lo)) if gap > 0 else 0.0
            for lo, gap in zip_strict(start, between)
        ]
    )
    data_between = np.where(np.isnan(reported), measured, reported)
    return between, np.clip(data_between, 0.0, between)


def step_bounds(profile: Profile) -> None:
    """The step_bounds table: per step, its time on the critical path by category."""
    steps = profile.tables["steps"]
    calls = _HostCalls(profile)
    busy, late = _device(profile, calls)
    data_set = calls.spans(("dataloader",))
    host_set = intervals.union(calls.spans(HOST_KINDS), late)
    # the times the host waited for the device: its synchronising calls, and its launch
    # calls that waited for room in the launch queue
    syncs = calls.spans(("sync",))
    waits = intervals.union(syncs, calls.spans(("launch",), BLOCKED_LAUNCH_US))
    rows = []
    for lo, hi, computing, exposed in zip_strict(
        steps["start_us"].to_numpy("float64"),
        steps["end_us"].to_numpy("float64"),
        steps["computing_us"].to_numpy("float64", na_value=np.nan),
        steps["comm_not_overlapped_us"].to_numpy("float64", na_value=np.nan),
    ):
        duration = max(hi - lo, 0.0)
        if np.isnan(computing) or np.isnan(exposed) or np.isnan(duration):
            rows.append((duration, *(np.nan,) * 7))
            continue
        compute = min(computing, duration)
        comm = min(exposed, duration - compute)
        rest = duration - compute - comm
        idle = intervals.complement(busy, lo, hi) if busy[0].size else _empty()
        data = min(intervals.total(intervals.intersect(idle, data_set)), rest)
        not_data = intervals.subtract(idle, data_set)
        held = intervals.intersect(not_data, host_set)
        host = min(intervals.total(held), rest - data)
        leading = min(intervals.total(intervals.clip(held, lo, _first_busy(idle, lo))), host)
        savable = _savable(compute, lo, hi, syncs, waits)
        rows.append((duration, compute, comm, host, data, rest - data - host, leading, savable))
    # a step's figures as one row of an array: a DataFrame of a few steps costs more
    figures = np.array(rows, dtype="float64").reshape(len(rows), 3 + len(BOUNDS))
    duration, parts = figures[:, 0], figures[:, 1 : 1 + len(BOUNDS)]
    leading, savable = figures[:, -2], figures[:, -1]
    known = ~np.isnan(parts).any(axis=1)
    top = np.where(np.isnan(parts), -1.0, parts).argmax(axis=1)
    bound = pd.array(np.asarray(BOUNDS, dtype=object)[top], dtype="string")
    bound[~known] = pd.NA
    between, data_between = _between(steps, data_set)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(known & (duration > 0), parts.max(axis=1) / duration, np.nan)
    table = pd.DataFrame(
        {
            "step": steps["step"].to_numpy(),
            "start_us": steps["start_us"].to_numpy("float64"),
            "end_us": steps["end_us"].to_numpy("float64"),
            "duration_us": duration,
            **{f"{b}_us": parts[:, i] for i, b in enumerate(BOUNDS)},
            "host_leading_us": leading,
            "bound": bound,
            "bound_share": share,
            "between_us": between,
            "between_data_us": data_between,
            "compute_savable_us": savable,
        }
    )
    profile.tables["step_bounds"] = conform("step_bounds", table)


def _shown_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps the timeline shows, in time order: all of them up to TIMELINE_STEPS, else
    that many consecutive ones with the slowest steady step (a warm-up step stands for the
    start-up, not the training) among the first half."""
    placed = steps.dropna(subset=["start_us", "end_us"])
    placed = placed[placed["end_us"] > placed["start_us"]]
    placed = placed.sort_values("start_us", kind="stable").reset_index(drop=True)
    if len(placed) <= TIMELINE_STEPS:
        return placed
    durations = (placed["end_us"] - placed["start_us"]).to_numpy("float64")
    warm = steady.warmup_mask(placed).to_numpy(bool)
    slowest = int(np.where(warm, -np.inf, durations).argmax())
    first = min(max(slowest - TIMELINE_STEPS // 2 + 1, 0), len(placed) - TIMELINE_STEPS)
    return placed.iloc[first : first + TIMELINE_STEPS]


def _coarse(
    merged: intervals.Intervals, resolution: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, time inside) of a merged set's stretches, those closer than
    `resolution` joined: a lane of thousands of kernels becomes a few stretches per pixel."""
    starts, ends = merged
    if starts.size == 0:
        return starts, ends, np.empty(0)
    new = np.empty(starts.size, dtype=bool)
    new[0] = True
    new[1:] = starts[1:] - ends[:-1] >= resolution
    first = np.flatnonzero(new)
    last = np.append(first[1:] - 1, starts.size - 1)
    busy = np.bincount(np.cumsum(new) - 1, weights=ends - starts)
    return starts[first], ends[last], busy


def _segments(shown: pd.DataFrame) -> list[tuple[float, float, int | None, float]]:
    """(start, end, step, data wait) of each shown step and of the gaps between them (step
    None, with the data wait the profiler reports for the step after it, else NaN); a step
    overlapping the one before starts where that one ended."""
    out: list[tuple[float, float, int | None, float]] = []
    waits = (
        shown["data_aug_bound_us"].to_numpy("float64", na_value=np.nan)
        if "data_aug_bound_us" in shown
        else np.full(len(shown), np.nan)
    )
    reached = -np.inf
    for (step, lo, hi), wait in zip_strict(
        shown[["step", "start_us", "end_us"]].itertuples(index=False), waits
    ):
        if np.isfinite(reached) and lo > reached:
            out.append((reached, float(lo), None, float(wait)))
        lo = max(float(lo), reached)
        if hi > lo:
            out.append((lo, float(hi), int(step), np.nan))
        reached = max(reached, float(hi))
    return out


def _leading(merged: intervals.Intervals, amount: float) -> intervals.Intervals:
    """The first `amount` µs of a merged set."""
    starts, ends = merged
    lengths = ends - starts
    before = np.concatenate(([0.0], np.cumsum(lengths)[:-1]))
    take = np.clip(amount - before, 0.0, lengths)
    keep = take > 0
    return starts[keep], (starts + take)[keep]


def timeline_lanes(profile: Profile) -> None:
    """The timeline_lanes table: which lane the device is in, instant by instant, over a few
    steps (the report draws it; TIMELINE_STEPS, TIMELINE_RESOLUTION bound its size)."""
    shown = _shown_steps(profile.tables["steps"])
    ops = profile.tables["device_ops"]
    start = ops["start_us"].to_numpy("float64", na_value=np.nan)
    end = start + ops["duration_us"].to_numpy("float64", na_value=np.nan)
    comm = (ops["category"] == "communication").fillna(False).to_numpy(bool)
    compute_set = intervals.merge(start[~comm], end[~comm])
    comm_set = intervals.subtract(intervals.merge(start[comm], end[comm]), compute_set)
    busy = intervals.union(compute_set, comm_set)
    calls = _HostCalls(profile)
    data_set = calls.spans(("dataloader",))
    host_set = intervals.union(calls.spans(HOST_KINDS), _device(profile, calls)[1])
    segments = _segments(shown)
    span = segments[-1][1] - segments[0][0] if segments else 0.0
    resolution = span / TIMELINE_RESOLUTION
    columns: dict[str, list[np.ndarray]] = {c: [] for c in ("lane", "step", *_TIMES)}
    for lo, hi, step, wait in segments:
        idle = intervals.complement(busy, lo, hi)
        # between steps the profiler's own data wait wins, as in step_bounds.between_data_us
        data = intervals.intersect(idle, data_set) if np.isnan(wait) else _leading(idle, wait)
        not_data = intervals.subtract(idle, data)
        lanes = (
            ("compute", intervals.clip(compute_set, lo, hi)),
            ("communication", intervals.clip(comm_set, lo, hi)),
            ("data", data),
            ("host", intervals.intersect(not_data, host_set)),
            ("idle", intervals.subtract(not_data, host_set)),
        )
        for lane, merged in lanes:
            parts = _coarse(merged, resolution)
            columns["lane"].append(np.full(parts[0].size, lane, dtype=object))
            columns["step"].append(np.full(parts[0].size, step, dtype=object))
            for name, values in zip_strict(_TIMES, parts):
                columns[name].append(values)
    table = pd.DataFrame({c: np.concatenate(v) if v else np.empty(0) for c, v in columns.items()})
    profile.tables["timeline_lanes"] = conform("timeline_lanes", table)


PROVIDERS = [
    MetricProvider(
        "step_bounds",
        (
            "steps.start_us",
            "steps.end_us",
            "steps.computing_us",
            "steps.comm_not_overlapped_us",
        ),
        ("step_bounds",)
        + tuple(
            f"step_bounds.{c}"
            for c in (
                "step",
                "duration_us",
                *(f"{b}_us" for b in BOUNDS),
                "host_leading_us",
                "bound",
                "bound_share",
                "between_us",
                "between_data_us",
                "compute_savable_us",
            )
        ),
        step_bounds,
        "step_bounds: each step's time on the critical path by what bounds it",
    ),
    MetricProvider(
        "timeline_lanes",
        ("steps.start_us", "steps.end_us", "device_ops.start_us"),
        ("timeline_lanes", *(f"timeline_lanes.{c}" for c in ("lane", "step", *_TIMES))),
        timeline_lanes,
        "timeline_lanes: the device's lane (compute, communication, data, host, idle) over "
        "a few steps, for the report's timeline",
    ),
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
