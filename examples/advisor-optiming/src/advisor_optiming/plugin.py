"""The advisor hooks of this package: reader, table, metric providers, rules, function and
report section."""

from __future__ import annotations

import html
from collections.abc import Callable
from numbers import Real
from pathlib import Path

import pandas as pd

from advisor import hookimpl
from advisor.api import ProfileAnalysis
from advisor.hookspecs import MetricProvider, ReportSection
from advisor.model import Column, Profile, TableSpec, conform
from advisor_optiming.reader import OpTimingReader

RULES_DIR = Path(__file__).parent / "rules"


def steps_from_ops(profile: Profile) -> None:
    """The format has no step table: a step spans from its first op start to its last op end."""
    ops = profile.tables["device_ops"]
    ends = ops["start_us"] + ops["duration_us"]
    steps = (
        pd.DataFrame({"step": ops["step"], "start_us": ops["start_us"], "end_us": ends})
        .dropna()
        .groupby("step", sort=True)
        .agg(start_us=("start_us", "min"), end_us=("end_us", "max"))
        .reset_index()
    )
    steps["duration_us"] = steps["end_us"] - steps["start_us"]
    profile.tables["steps"] = conform("steps", steps)


STEPS = MetricProvider(
    name="optiming_steps",
    inputs=("device_ops.step", "device_ops.start_us", "device_ops.duration_us"),
    outputs=("steps", "steps.step", "steps.start_us", "steps.end_us", "steps.duration_us"),
    compute=steps_from_ops,
    doc="steps from the step number, start and duration of every device task",
)


LONGEST_OPS = TableSpec(
    "step_longest_ops",
    "step with its longest operator",
    (
        Column("step", "int64", "", "step number", required=True),
        Column("name", "string", "", "the step's longest operator", required=True),
        Column("duration_us", "float64", "µs", "that operator's duration", required=True),
        Column("step_share", "float64", "ratio", "its share of the step's time"),
    ),
)
"""A table of this plugin: its provider fills it, its rule and report section read it."""


def longest_ops(profile: Profile) -> None:
    """Each step's longest operator and the share of the step it took."""
    ops = profile.tables["device_ops"].dropna(subset=["step", "duration_us"])
    longest = ops.loc[ops.groupby("step")["duration_us"].idxmax(), ["step", "name", "duration_us"]]
    spans = profile.tables["steps"].set_index("step")["duration_us"]
    longest["step_share"] = longest["duration_us"] / longest["step"].map(spans)
    profile.tables["step_longest_ops"] = conform("step_longest_ops", longest, LONGEST_OPS)


LONGEST = MetricProvider(
    name="optiming_longest_ops",
    inputs=("steps", "device_ops.step", "device_ops.duration_us"),  # steps: derived first
    outputs=("step_longest_ops", *(f"step_longest_ops.{c}" for c in LONGEST_OPS.column_names)),
    compute=longest_ops,
    doc="each step's longest operator and its share of the step",
)


def excess_over(values: pd.Series | float, limit: float) -> float:
    """Total by which the values exceed limit (0 when none does); missing values are skipped."""
    series = values if isinstance(values, pd.Series) else pd.Series([values])
    if not isinstance(limit, Real):
        raise TypeError("excess_over: limit must be a number")
    return float((pd.to_numeric(series, errors="coerce") - limit).clip(lower=0).sum())


def step_section(profile: Profile) -> ReportSection | None:
    """Per-step longest operator, for the profiles this package's reader produced."""
    longest = profile.tables.get("step_longest_ops")
    if profile.meta.source_format != "optiming-csv" or longest is None:
        return None
    rows = "".join(
        f"<tr><td>{step}</td><td>{html.escape(str(name))}</td><td>{us:,.1f}</td>"
        f"<td>{share:.0%}</td></tr>"
        for step, name, us, share in zip(
            longest["step"], longest["name"], longest["duration_us"], longest["step_share"]
        )
    )
    return ReportSection(
        f"Steps and their longest operator ({profile.label})",
        "<table><tr><th>step</th><th>longest operator</th><th>µs</th><th>share of step</th>"
        f"</tr>{rows}</table>",
    )


@hookimpl
def advisor_readers() -> list[OpTimingReader]:
    return [OpTimingReader()]


@hookimpl
def advisor_tables() -> list[TableSpec]:
    return [LONGEST_OPS]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return [LONGEST, STEPS]  # in any order: advisor derives a provider's inputs first


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
