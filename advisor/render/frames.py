"""Findings and tables as pandas DataFrames: what a notebook user filters, sorts and plots.

`advisor.analyze()` and `advisor.compare.compare()` results call these, so a run's findings
frame and its tables have the same columns whichever front end made them. Values come from
the same typed findings the reports are built from, never from re-parsing a report.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from advisor.engine.evaluate import Finding
from advisor.model import Profile
from advisor.render.format import profile_label

FINDING_COLUMNS = {
    "profile": "object",
    "rank": "int64",
    "rule_id": "object",
    "title": "object",
    "severity": "object",
    "impact_us": "float64",
    "impact_ratio": "float64",
    "step_time_if_fixed_us": "float64",
    "message": "object",
}
"""The findings frame's columns and dtypes: `profile` names the profile as the report does,
`rank` is the finding's place in the ranking (1: fix first), as in prof_rule JSON."""


def findings_frame(analysed: Sequence[tuple[Profile, Sequence[Finding]]]) -> pd.DataFrame:
    """One row per finding of each (profile, its findings), in the order given, each
    profile's findings most important first."""
    rows = [
        (
            profile_label(profile.meta.to_dict()),
            f.rank,
            f.rule.id,
            f.title,
            f.severity.value,
            f.impact_us,
            f.impact_ratio,
            f.step_time_if_fixed_us,
            f.message,
        )
        for profile, findings in analysed
        for f in sorted(findings, key=lambda f: f.rank)
    ]
    frame = pd.DataFrame(rows, columns=list(FINDING_COLUMNS))
    return frame.astype(FINDING_COLUMNS)


def table_names(profiles: Sequence[Profile]) -> list[str]:
    """Every table any of the profiles holds (normalized or derived), sorted."""
    return sorted({name for p in profiles for name in p.tables})


def profiles_table(profiles: Sequence[Profile], name: str, rank: int | None = None) -> pd.DataFrame:
    """Table `name` of the profile of rank `rank`; with no rank, of every profile holding it,
    one after the other, with the profile's rank as a first `rank` column (<NA> for a profile
    that records none) unless the table has one of its own (the cluster's `ranks`)."""
    holders = [p for p in profiles if name in p.tables]
    if not holders:
        raise _no_table(name, profiles)
    if rank is not None:
        for profile in holders:
            if profile.meta.rank == rank:
                return profile.tables[name]
        ranks = [p.meta.rank for p in holders if p.meta.rank is not None]
        raise KeyError(f"no profile of rank {rank} holds table {name!r} (ranks: {ranks or 'none'})")
    frames = [
        frame
        if "rank" in frame.columns
        else frame.assign(rank=pd.array([profile.meta.rank] * len(frame), dtype="Int64"))
        for profile in holders
        for frame in [profile.tables[name]]
    ]
    joined = pd.concat(frames, ignore_index=True)
    return joined[["rank", *(c for c in joined.columns if c != "rank")]]


def profile_table(profile: Profile, name: str) -> pd.DataFrame:
    """Table `name` of one profile, as it holds it."""
    if name not in profile.tables:
        raise _no_table(name, [profile])
    return profile.tables[name]


def _no_table(name: str, profiles: Sequence[Profile]) -> KeyError:
    known = ", ".join(table_names(profiles)) or "none"
    return KeyError(f"no profile holds a table {name!r} (tables: {known})")
