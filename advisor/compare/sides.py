"""What each side of a comparison is: one step of one rank.

A side may be a folder of several ranks: a distributed job is as slow as its slowest rank, so
that rank stands for the side (and, when one multi-rank folder is given as both sides, its
fastest rank is the baseline and its slowest the comparison: what makes the slow rank slow).
A side may also be narrowed to one step (`--base-step` / `--comparison-step`), as the compare
tool's users profile several steps and compare one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from advisor import steady
from advisor.compat import zip_strict
from advisor.errors import AdvisorError
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


class StepError(AdvisorError):
    """A chosen step that a side does not record (a usage error: exit 2)."""


@dataclass(frozen=True)
class RankChoice:
    """Which rank of a multi-rank side was compared, and how it ranks among the others."""

    picked: str  # slowest or fastest
    label: str
    ranks: int
    mean_step_us: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "picked": self.picked,
            "label": self.label,
            "of_ranks": self.ranks,
            "mean_step_us": {k: round(v, 3) for k, v in self.mean_step_us.items()},
        }


def mean_step_us(profile: Profile) -> float:
    """Mean step time of a profile over its steady steps (a rank's warm-up step must not make
    it the slowest); its whole span when it records no steps."""
    steps = profile.tables.get("steps")
    if steps is not None and not steps.empty and steps["duration_us"].notna().any():
        return float(steady.steady_steps(steps)["duration_us"].mean())
    spans = [
        (frame["start_us"].min(), (frame["start_us"] + frame["duration_us"]).max())
        for name, frame in profile.tables.items()
        if name in ("device_ops", "host_ops") and {"start_us", "duration_us"} <= set(frame)
    ]
    spans = [(a, b) for a, b in spans if pd.notna(a) and pd.notna(b)]
    if not spans:
        return float("nan")
    return float(max(b for _, b in spans) - min(a for a, _ in spans))


def pick_rank(profiles: Sequence[Profile], slowest: bool = True) -> tuple[Profile, RankChoice]:
    """The slowest (or fastest) profile by mean step time; ties go to the first listed."""
    times = [mean_step_us(p) for p in profiles]
    missing = -np.inf if slowest else np.inf  # a rank without a time is never picked
    keyed = [missing if np.isnan(t) else t for t in times]
    index = int(np.argmax(keyed) if slowest else np.argmin(keyed))
    chosen = profiles[index]
    choice = RankChoice(
        "slowest" if slowest else "fastest",
        chosen.label,
        len(profiles),
        {p.label: t for p, t in zip_strict(profiles, times)},
    )
    return chosen, choice


def recorded_steps(profile: Profile) -> list[int]:
    steps = profile.tables.get("steps")
    if steps is None or steps.empty:
        return []
    return sorted(int(s) for s in steps["step"].dropna().unique())


def _in_step(frame: pd.DataFrame, step: int, start: float, end: float) -> pd.Series:
    """Rows of a table belonging to the step: by their step column where they carry one,
    else by time (a kernel by the time its launch was called, when recorded, as a step ends
    on the host before its kernels on the device)."""
    keep = pd.Series(True, index=frame.index)
    at = None
    for column in ("launch_us", "start_us", "time_us"):
        if column in frame:
            at = frame[column] if at is None else at.fillna(frame[column])
    if at is not None:
        keep = (at >= start) & (at < end)
    if "step" in frame and frame["step"].notna().any():
        numbered = frame["step"].notna()
        keep = keep.where(~numbered, frame["step"] == step)
    return keep.fillna(False).astype(bool)


def select_step(profile: Profile, step: int, which: str) -> Profile:
    """The profile narrowed to one step: timed rows inside it; untimed tables (summaries of
    the whole run) stay whole. StepError names the steps it records when it lacks `step`."""
    have = recorded_steps(profile)
    if step not in have:
        listed = ", ".join(map(str, have[:20])) + (" ..." if len(have) > 20 else "")
        known = f"it records steps {listed}" if have else "it records no steps"
        raise StepError(
            f"{which} {profile.meta.path} ({profile.label}) has no step {step}: {known}"
        )
    steps = profile.tables["steps"]
    row = steps[steps["step"] == step].iloc[0]
    start, end = float(row["start_us"]), float(row["end_us"])
    tables = {}
    for name, frame in profile.tables.items():
        if name == "steps":
            tables[name] = frame[frame["step"] == step].reset_index(drop=True)
        elif any(c in frame for c in ("launch_us", "start_us", "time_us", "step")):
            tables[name] = frame[_in_step(frame, step, start, end)].reset_index(drop=True)
        else:
            tables[name] = frame
    meta = replace(profile.meta, extra={**profile.meta.extra, "compared_step": step})
    return replace(profile, meta=meta, tables=tables, providers_run=set())
