"""The advisor hooks of this package: reader, metric provider, rules, function, report section."""

from __future__ import annotations

import html
from collections.abc import Callable
from numbers import Real
from pathlib import Path

import pandas as pd

from advisor import hookimpl
from advisor.api import ProfileAnalysis
from advisor.hookspecs import MetricProvider, ReportSection
from advisor.model import Profile, conform
from advisor_optiming.reader import OpTimingReader

RULES_DIR = Path(__file__).parent / "rules"


def steps_from_ops(profile: Profile) -> None:
    """The format has no step table: a step spans from its first op start to its last op end."""
    ops = profile.tables["device_ops"]
    ends = ops["start_us"] + ops["duration_us"]
    steps = (pd.DataFrame({"step": ops["step"], "start_us": ops["start_us"], "end_us": ends})
             .dropna().groupby("step", sort=True)
             .agg(start_us=("start_us", "min"), end_us=("end_us", "max")).reset_index())
    steps["duration_us"] = steps["end_us"] - steps["start_us"]
    profile.tables["steps"] = conform("steps", steps)


STEPS = MetricProvider(
    name="optiming_steps",
    inputs=("device_ops.step", "device_ops.start_us", "device_ops.duration_us"),
    outputs=("steps", "steps.step", "steps.start_us", "steps.end_us", "steps.duration_us"),
    compute=steps_from_ops,
    doc="steps from the step number, start and duration of every device task",
)


def excess_over(values: pd.Series | float, limit: float) -> float:
    """Total by which the values exceed limit (0 when none does); missing values are skipped."""
    series = values if isinstance(values, pd.Series) else pd.Series([values])
    if not isinstance(limit, Real):
        raise TypeError("excess_over: limit must be a number")
    return float((pd.to_numeric(series, errors="coerce") - limit).clip(lower=0).sum())


def step_section(profile: Profile) -> ReportSection | None:
    """Per-step time and longest operator, for the profiles this package's reader produced."""
    ops = profile.tables.get("device_ops")
    if profile.meta.source_format != "optiming-csv" or ops is None or "step" not in ops:
        return None
    longest = ops.loc[ops.groupby("step")["duration_us"].idxmax()]
    steps = profile.tables.get("steps")
    spans = {} if steps is None else dict(zip(steps["step"], steps["duration_us"]))
    rows = "".join(
        f"<tr><td>{step}</td><td>{spans.get(step, float('nan')):,.1f}</td>"
        f"<td>{html.escape(str(name))}</td><td>{us:,.1f}</td></tr>"
        for step, name, us in zip(longest["step"], longest["name"], longest["duration_us"]))
    return ReportSection(
        f"Steps and their longest operator ({profile.label})",
        "<table><tr><th>step</th><th>step µs</th><th>longest operator</th><th>µs</th></tr>"
        f"{rows}</table>")


@hookimpl
def advisor_readers() -> list[OpTimingReader]:
    return [OpTimingReader()]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return [STEPS]


@hookimpl
def advisor_rule_paths() -> list[Path]:
    return [RULES_DIR]


@hookimpl
def advisor_functions() -> dict[str, Callable[..., float]]:
    return {"excess_over": excess_over}


@hookimpl
def advisor_report_sections(analysis: ProfileAnalysis) -> list[ReportSection]:
    section = step_section(analysis.profile)
    return [section] if section else []
