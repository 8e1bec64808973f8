"""What fixing a finding would make of the step: savings bounded by the critical path.

A finding's impact says how much time its problem takes; it does not say the step gets that
much shorter. Fixing slow kernels cannot shorten a step that waits for the host, and three
findings about the same idle interval cannot save it three times. So every finding's saving
is limited by the time its kind of work holds on the critical path (the `step_bounds` table:
compute, exposed communication, host, data loading, other idle), and the "fix these first"
summary takes findings one after another from the largest saving, each getting only the
critical-path time the earlier ones left.

Without `step_bounds` (no device breakdown), each finding is bounded by the profile time only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from advisor import intervals, steady
from advisor.engine.functions import float_column, float_sum
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from advisor.engine.evaluate import Finding

BOUNDS = ("compute", "communication", "host", "data", "idle")
"""The step_bounds categories (see plugins/critical_path.py)."""
UNATTRIBUTED = "unattributed"
"""Profile time no step breakdown covers: a finding of any kind may be saving it."""
HIDDEN_COMPUTE = "hidden_compute"
"""Device compute the host's own work in the same step hides (step_bounds.compute_savable_us
leaves it out): no finding of one kind can save it, since the host's work would remain."""
RECORDED = ("compute", HIDDEN_COMPUTE, "communication", "host", "data")
"""The categories of recorded work: device tasks (hidden behind the host's work or not),
collectives, host calls, data loading."""
MIN_RECORDED_SHARE = 0.01
"""Below this share of the steps spent in recorded work, the profile does not say what the
steps spent their time on (a trace cut to a few events: one 45 µs kernel in a 413 ms step),
so a step time if fixed would promise nearly all of it back: none is given (our choice)."""

IDLE = ("host", "idle", "data")
POOL_BOUNDS: Mapping[str, tuple[str, ...]] = {
    "device_idle": IDLE,
    "startup": IDLE,  # one-time start-up calls: idle device time the device_idle pool leaves out
    "data_wait": ("data",),
    "communication": ("communication",),
    "tuning": ("compute",),
}
"""Critical-path categories a time pool's time lies in; the order is the order a saving uses
them up (data last for device idle, so a data finding keeps its own time longest)."""
TAG_BOUNDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("communication", ("communication",)),
    ("data", ("data",)),
    ("host-bound", IDLE),
    ("launch", ("host", "idle")),
    ("sync", ("host", "idle")),
    ("compile", ("host", "idle")),
    ("host", ("host", "idle")),
    ("schedule", ("host", "idle")),
    ("operator", ("compute",)),
    ("compute", ("compute",)),
    ("efficiency", ("compute",)),
    ("aoe", ("compute",)),
    ("memory", ("compute",)),
)
"""For rules without a mapped time pool: the first of their tags found here, in this order
(host-side tags before operator ones: a compile finding on an operator idles the device)."""

MAX_FIRST = 3
"""At most this many findings in "fix these first"."""
MIN_FIRST_SHARE = 0.01
"""A finding joins "fix these first" only when it adds at least this share of step time."""


@dataclass(frozen=True)
class CriticalPath:
    """The profile's time by critical-path category, and how many steps it spans."""

    steps: int
    total_us: float
    by_bound: dict[str, float] = field(default_factory=dict)
    """Time per category over all steps (between-step time included), plus UNATTRIBUTED."""
    covered: tuple[float, float] | None = None
    """(time of the steps with a breakdown, time of all steps) when the breakdown covers only
    some steps (a device timeline of the first 15 of 322): a finding measured over exactly
    those steps is taken to stand for all of them, so its saving is scaled up by the ratio,
    as the share of step time its message gives."""
    recorded_us: float | None = None
    """Without steps nor a breakdown (all of it UNATTRIBUTED): the time the device tasks, or
    the host calls where they cover more, fill, each timeline's overlaps counted once; None
    otherwise."""

    @property
    def step_us(self) -> float:
        """Mean step time: the profile time over the steps (gaps between steps included)."""
        return self.total_us / self.steps

    def recorded_share(self) -> float | None:
        """The share of the time with a breakdown that recorded work fills (RECORDED); None
        without a breakdown."""
        broken_down = self.total_us - self.by_bound.get(UNATTRIBUTED, 0.0)
        if broken_down <= 0:
            if self.recorded_us is None:
                return None
            return min(self.recorded_us / self.total_us, 1.0)
        return sum(self.by_bound.get(b, 0.0) for b in RECORDED) / broken_down


@dataclass(frozen=True)
class FixFirst:
    """The findings to fix first and what they would make of the mean step time together."""

    rules: tuple[str, ...]
    step_us: float
    step_time_if_fixed_us: float | None
    """None where they hold all of the steps' time (left_us): the steps recorded no other
    work, and a step of 0 ms is no estimate."""

    @property
    def saving_ratio(self) -> float | None:
        """The share of the mean step time they save together (0..1); None without an
        estimate."""
        if self.step_time_if_fixed_us is None:
            return None
        return 1.0 - self.step_time_if_fixed_us / self.step_us if self.step_us else 0.0


def bounds_of(tags: Sequence[str], time_pool: str | None) -> tuple[str, ...] | None:
    """The critical-path categories a rule's time lies in; None when nothing says."""
    if time_pool is not None and time_pool in POOL_BOUNDS:
        return POOL_BOUNDS[time_pool]
    for tag, bounds in TAG_BOUNDS:
        if tag in tags:
            return bounds
    return None


def _step_count(profile: Profile) -> int:
    """Steps of the profile (the most any rank profiled for a cluster); 1 without steps, when
    the profile's span stands for one step."""
    ranks = profile.tables.get("ranks")
    if ranks is not None and not ranks.empty and "steps" in ranks:
        return max(int(ranks["steps"].max()), 1)
    steps = profile.tables.get("steps")
    return max(len(steps), 1) if steps is not None else 1


def _column_sum(table: pd.DataFrame, column: str, rows: np.ndarray | None = None) -> float:
    """pandas' sum of the column (of the `rows` a bool mask keeps), 0 without it; a float
    one's from its array (ten sums a profile, each 45 us in pandas' reductions)."""
    if column not in table:
        return 0.0
    values = table[column]
    array = float_column(values)
    if array is not None:
        return float_sum(array if rows is None else array[rows])
    return float((values if rows is None else values[rows]).sum())


def _warmup(profile: Profile) -> tuple[set[int], float]:
    """The warm-up steps (advisor.steady) and the profile time up to the first steady step:
    a one-off cost a fix to the training steps does not shorten."""
    steps = profile.tables.get("steps")
    if steps is None or steps.empty or "duration_us" not in steps:
        return set(), 0.0
    mask = steady.warmup_mask(steps)
    if not mask.any():
        return set(), 0.0
    warm, rest = steps[mask], steps[~mask]
    if "start_us" in steps and rest["start_us"].notna().any():
        cut = float(rest["start_us"].min() - steps["start_us"].min())
    else:
        cut = float(warm["duration_us"].sum())
    return {int(s) for s in warm["step"]}, cut


def critical_path(profile: Profile, total_us: float | None) -> CriticalPath | None:
    """The profile's time budget per category over its steady steps (warm-up steps left out);
    None without a profile time."""
    if total_us is None or not math.isfinite(total_us) or total_us <= 0:
        return None
    steps = _step_count(profile)
    warm, cut = _warmup(profile)
    if warm and 0 < cut < total_us:
        total_us -= cut
        steps = max(steps - len(warm), 1)
    ranks = profile.tables.get("ranks")
    if ranks is not None and not ranks.empty:
        return CriticalPath(steps, total_us, _slowest_rank_budget(ranks, steps, total_us))
    bounds = profile.tables.get("step_bounds")
    if bounds is None or bounds.empty or "bound" not in bounds:
        return CriticalPath(steps, total_us, {UNATTRIBUTED: total_us}, None, _recorded_us(profile))
    if warm:
        bounds = _steady_bounds(bounds, warm)
    known = bounds["bound"].notna().to_numpy()  # the steps whose bound is known
    by_bound = {b: _column_sum(bounds, f"{b}_us", known) for b in BOUNDS}
    if "compute_savable_us" in bounds:
        savable = _column_sum(bounds, "compute_savable_us", known)
        by_bound[HIDDEN_COMPUTE] = max(by_bound["compute"] - savable, 0.0)
        by_bound["compute"] = min(savable, by_bound["compute"])
    between = _column_sum(bounds, "between_us")
    between_data = _column_sum(bounds, "between_data_us")
    by_bound["data"] += between_data
    by_bound["idle"] += max(between - between_data, 0.0)
    by_bound[UNATTRIBUTED] = max(total_us - sum(by_bound.values()), 0.0)
    covered = (_column_sum(bounds, "duration_us", known), _column_sum(bounds, "duration_us"))
    partly = not known.all() and 0 < covered[0] < covered[1]
    return CriticalPath(steps, total_us, by_bound, covered if partly else None)


def _recorded_us(profile: Profile) -> float | None:
    """For a profile without steps, whose time is its timeline's span: the time the device
    tasks fill, or the host calls where they fill more (each timeline merged on its own: the
    two may run on different clocks); None without either timeline, or with steps (a step
    trace's own figures, such as MindSpore's data-aug bound, say where the time went). A
    trace cut to three kernels 14 ms apart says nothing of what the rest went to."""
    steps = profile.tables.get("steps")
    if steps is not None and not steps.empty:
        return None
    filled = []
    for table in (profile.tables.get("device_ops"), profile.tables.get("host_ops")):
        if table is None or table.empty or not {"start_us", "duration_us"} <= set(table):
            continue
        start = table["start_us"].to_numpy("float64", na_value=math.nan)
        end = start + table["duration_us"].to_numpy("float64", na_value=math.nan)
        filled.append(intervals.total(intervals.merge(start, end)))
    return max(filled) if filled else None


RANK_BOUNDS = (
    ("compute", "computing_us"),
    ("communication", "comm_not_overlapped_us"),
    ("idle", "free_us"),
)
"""A cluster's budget: the slowest rank's step breakdown (per-step means of the ranks table)."""


def _slowest_rank_budget(ranks: pd.DataFrame, steps: int, total_us: float) -> dict[str, float]:
    """The budget of a cluster profile, whose time is the slowest rank's mean step times the
    steps: that rank's computing, exposed communication and free time per step, times the
    steps, the rest unattributed: a slow link cannot save more than the communication no
    computation hides."""
    durations = ranks["duration_us"].to_numpy("float64", na_value=-math.inf)
    slowest = ranks.iloc[int(durations.argmax())]
    by_bound: dict[str, float] = {}
    for bound, column in RANK_BOUNDS:
        value = slowest.get(column)
        if value is not None and not pd.isna(value):
            by_bound[bound] = min(float(value) * steps, total_us - sum(by_bound.values()))
    by_bound[UNATTRIBUTED] = max(total_us - sum(by_bound.values()), 0.0)
    return by_bound


def _steady_bounds(bounds: pd.DataFrame, warm: set[int]) -> pd.DataFrame:
    """step_bounds without the warm-up steps, the gap before the first steady step (time
    after the warm-up) left out too."""
    steady_rows = bounds[~bounds["step"].isin(warm).to_numpy(bool)].copy()
    if "start_us" in steady_rows and steady_rows["start_us"].notna().any():
        first = steady_rows["start_us"].idxmin()
        steady_rows.loc[first, ["between_us", "between_data_us"]] = 0.0
    return steady_rows


def _room(path: CriticalPath, bounds: tuple[str, ...] | None, left: Mapping[str, float]) -> float:
    """The critical-path time still available to a finding of `bounds`."""
    if bounds is None:
        return sum(left.values())
    return sum(left.get(b, 0.0) for b in bounds) + left.get(UNATTRIBUTED, 0.0)


def at_stake_us(finding: Finding, path: CriticalPath | None) -> float | None:
    """The finding's impact over the whole profile: for a finding measured over only the
    steps with a breakdown (CriticalPath.covered), scaled to all steps, as the share its
    message gives; else the impact as measured."""
    impact = finding.impact_us
    if impact is None or path is None or path.covered is None or finding.measured_us is None:
        return impact
    measured, whole = path.covered
    if math.isclose(finding.measured_us, measured, rel_tol=1e-6):
        return impact * whole / measured
    return impact


def saving_us(finding: Finding, path: CriticalPath) -> float | None:
    """Profile time a fix would save: the time at stake (at_stake_us), at most the time its
    categories hold."""
    impact = at_stake_us(finding, path)
    if impact is None:
        return None
    bounds = bounds_of(finding.rule.tags, finding.rule.time_pool)
    room = min(_room(path, bounds, path.by_bound), path.total_us)
    return max(min(impact, room), 0.0)


ROUNDING_US = 0.01
"""Time at stake and the critical path's budget for it come from different columns of the
profiler's output, each rounded to its µs decimals: a saving this close to the time at stake
saves all of it."""


def bounded_by(finding: Finding, path: CriticalPath, saved: float) -> list[str]:
    """The categories of the critical path that held the finding's saving below its time at
    stake (BOUNDS order); empty when it saves all of it or nothing names its categories."""
    impact = at_stake_us(finding, path)
    bounds = bounds_of(finding.rule.tags, finding.rule.time_pool)
    if impact is None or bounds is None or saved >= impact - max(impact * 1e-9, ROUNDING_US):
        return []
    return [b for b in BOUNDS if b in bounds]


def _take(left: dict[str, float], bounds: tuple[str, ...] | None, amount: float) -> None:
    """Use up `amount` of the categories' remaining time, in their order, then unattributed."""
    order = [*(bounds if bounds is not None else (*BOUNDS, HIDDEN_COMPUTE)), UNATTRIBUTED]
    for name in order:
        used = min(left.get(name, 0.0), amount)
        left[name] = left.get(name, 0.0) - used
        amount -= used


def apply(findings: Sequence[Finding], path: CriticalPath | None) -> FixFirst | None:
    """Set each finding's step_time_if_fixed_us and pick the findings to fix first."""
    if path is None:
        return None
    savings: dict[int, float] = {}
    for finding in findings:
        saved = saving_us(finding, path)
        if saved is None:
            continue
        savings[id(finding)] = saved
        finding.step_time_if_fixed_us = left_us(path, saved)
        finding.if_fixed_bounded_by = bounded_by(finding, path, saved)
    left = dict(path.by_bound)
    pools: set[str] = set()
    chosen: list[str] = []
    combined = 0.0
    ranked = sorted(
        (f for f in findings if id(f) in savings), key=lambda f: (-savings[id(f)], f.rank)
    )
    for finding in ranked:
        if len(chosen) == MAX_FIRST:
            break
        pool = finding.rule.time_pool
        if pool and pool in pools:
            continue  # the pool's largest finding already holds this time
        bounds = bounds_of(finding.rule.tags, pool)
        added = min(savings[id(finding)], _room(path, bounds, left))
        if added < MIN_FIRST_SHARE * path.total_us:
            continue
        _take(left, bounds, added)
        combined += added
        chosen.append(finding.rule.id)
        if pool:
            pools.add(pool)
    if not chosen:
        return None
    return FixFirst(tuple(chosen), path.step_us, left_us(path, combined))


def left_us(path: CriticalPath, saved: float) -> float | None:
    """The mean step time were `saved` of the profile's time fixed; None where that leaves
    nothing (a trace of a rank's collectives alone, no computation recorded): a step still
    does the work the profile did not record, so 0 ms would be a promise, not an estimate."""
    left = path.total_us - min(saved, path.total_us)
    if left <= ROUNDING_US * path.steps:
        return None
    return left / path.steps
