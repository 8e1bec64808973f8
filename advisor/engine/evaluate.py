"""Evaluates rules over one profile: applicability, let values, condition, impact, evidence.

Each rule is evaluated in isolation: a rule that fails (bad data, a runtime expression error)
is reported as a rule error and the others still run. Findings are ranked by the time at stake.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from advisor import units, workload
from advisor.applicability import Inapplicable, explain
from advisor.compat import zip_strict
from advisor.derive import present as is_present
from advisor.engine import savings, sources, windows
from advisor.engine.expr import ExprError, Expression, MissingData, Scope
from advisor.engine.outcome import SEVERITIES, Outcome, Severity
from advisor.engine.row_order import stable_order
from advisor.engine.rules import Evidence, Rule
from advisor.engine.sources import SourceLocation
from advisor.engine.wording import words
from advisor.hookspecs import MetricProvider
from advisor.lazy import lazy_module
from advisor.model import TABLES, Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

HIGH_SHARE = 0.05  # msprof-analyze: problem time >= 5% of step time is high priority
MEDIUM_SHARE = 0.03  # ... >= 3% is medium
MIN_JUDGED_US = 100.0
"""A profile spanning less (twenty kernel launches of about 5 µs) holds no training step: a
share of it is no advice, so its findings stay low and no step time if fixed is given (our
choice; libkineto's own test traces hold one 0.02 µs kernel)."""


def severity_from_share(share: float | None) -> Severity:
    if share is None:
        return Severity.LOW
    if share >= HIGH_SHARE:
        return Severity.HIGH
    return Severity.MEDIUM if share >= MEDIUM_SHARE else Severity.LOW


def at_least(severity: str, threshold: str) -> bool:
    """Whether `severity` is `threshold` or more urgent (values or Severity members)."""
    return SEVERITIES.index(Severity(severity)) <= SEVERITIES.index(Severity(threshold))


@dataclass
class Finding:
    """A rule that fired, with everything needed to act on it."""

    rule: Rule
    severity: Severity
    message: str
    suggestions: list[str]
    values: dict[str, Any]
    params: dict[str, Any]
    impact_us: float | None
    impact_ratio: float | None
    evidence: dict[str, Any] | None
    tune_ops: list[str] = field(default_factory=list)
    rank: int = 0
    lang: str = "en"
    measured_us: float | None = None
    """The time impact_us was measured over (impact_ratio = impact_us / measured_us)."""
    impact_note: str | None = None
    """Why no time at stake is given (rules without impact_us), or how it was bounded."""
    uncapped_impact_us: float | None = None
    """What the rule computed when that exceeded the time it was measured over: the figure
    shown is capped there, since no fix saves more time than was spent."""
    shares_time_with: list[str] = field(default_factory=list)
    """Other findings of this profile in the same time pool: part of this finding's time is
    theirs too, so their impacts are not to be added to it."""
    step_time_if_fixed_us: float | None = None
    """Estimated mean step time were this finding fixed: the impact taken off the step, at
    most the time its kind of work holds on the critical path (engine/savings.py); None
    without an impact or a profile time."""
    if_fixed_bounded_by: list[str] = field(default_factory=list)
    """The critical-path categories (savings.BOUNDS) whose time made step_time_if_fixed_us
    save less than the time at stake; empty when the whole time at stake is saved. A reader
    who sees 96% at stake and -10% if fixed is told why."""
    sources: list[SourceLocation] = field(default_factory=list)
    """The user code lines that ran the operators behind this finding, most time first (at
    most sources.MAX_SOURCES); empty when the profile recorded no Python stacks or the
    evidence names no operator (engine/sources.py)."""
    evidence_rows: pd.Index | None = field(default=None, repr=False, compare=False)
    """Labels of every row of the evidence table the rule's evidence selected (not only those
    shown): the operators `sources` are charged from; None without evidence."""
    window: windows.Window | None = None
    """The time the finding is about (its worst step, or its evidence's span), for its trace
    snippet and the timeline; None when its evidence is placed in no time (windows.py)."""

    @property
    def title(self) -> str:
        """The rule's title in the language the message was written in."""
        return self.rule.text(self.lang).title


@dataclass
class Evaluation:
    """What happened to every rule for one profile."""

    findings: Sequence[Finding] = field(default_factory=list)
    """Ranked (Finding.rank); a list, or for a rank of a run of many, kept on disk until its
    outputs read it (advisor.spool)."""
    not_applicable: list[tuple[Rule, list[str]]] = field(default_factory=list)
    errors: list[tuple[Rule, str]] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    params: dict[str, dict[str, Any]] = field(default_factory=dict)
    lang: str = "en"
    inapplicable: dict[str, Inapplicable] = field(default_factory=dict)
    """Why each not-applicable rule did not run: data missing here, or never recorded."""
    combined_impact_us: float | None = None
    """The time all findings together stand for, each interval once: per time pool only the
    largest impact, findings without a pool in full, never above the profile time."""
    critical_path: savings.CriticalPath | None = None
    """The profile time by what bounded it (step_bounds), the budget findings' savings come
    from; None without a profile time."""
    fix_first: savings.FixFirst | None = None
    """The few findings to fix first and the mean step time were they all fixed (shared time
    counted once); None when no finding saves a noticeable share of the step."""
    total_us: float | None = None
    """The time the findings were measured against (profile_time_us), as every output
    reports it."""
    training: bool | None = None
    """Whether the profile records training (advisor.workload; false: inference, none: it
    cannot tell), as the rules read it: the reports show it, since it words their advice."""


def _shown_suggestions(suggestions: list[tuple[str, str]], context: dict[str, Any]) -> list[str]:
    """Each fitting suggestion rendered with its label; one whose template renders to
    nothing (`{% if fragmented %}...{% endif %}` when it is not) is left out, so advice can
    follow the measured values."""
    from advisor.engine import templates

    shown = []
    for template, label in suggestions:
        text = templates.render(template, context)
        if text.strip():
            shown.append(label + text)
    return shown


def _too_short(total_us: float | None) -> bool:
    """Whether the profile is too short to judge (MIN_JUDGED_US)."""
    return total_us is not None and total_us < MIN_JUDGED_US


def profile_time_us(profile: Profile) -> float | None:
    """The time findings are measured against: the wall-clock span of all steps (gaps between
    iterations, e.g. msprof's Data Aug Bound, included), else the sum of the step durations
    (a step_trace_time.csv gives durations without start and end), else the device timeline
    span; for a cluster, the slowest rank's mean step times the most steps any rank
    profiled."""
    ranks = profile.tables.get("ranks")
    if ranks is not None and not ranks.empty:
        total = ranks["duration_us"].max() * ranks["steps"].max()
        return float(total) if pd.notna(total) else None  # a hand-written table may lack steps
    steps = profile.tables.get("steps")
    if (
        steps is not None
        and not steps.empty
        and {"start_us", "end_us"} <= set(steps)
        and steps["end_us"].notna().any()
    ):
        return float(steps["end_us"].max() - steps["start_us"].min())
    if steps is not None and "duration_us" in steps and steps["duration_us"].gt(0).any():
        return float(steps["duration_us"].sum())
    ops = profile.tables.get("device_ops")
    if ops is None or ops.empty:
        return None
    if "start_us" in ops and ops["start_us"].notna().any():
        end = (ops["start_us"] + ops["duration_us"]).max()
        return float(end - ops["start_us"].min())
    return float(ops["duration_us"].sum())


def to_plain(value: Any) -> Any:
    """A JSON-friendly Python value (NaN and pandas NA become None)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (int, float, str, bool)):
        return value
    return str(value)


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (pd.Series, pd.DataFrame, np.ndarray, list, tuple))


class _RowValues(Mapping[str, Any]):
    """The names an evidence filter reads: the table's columns by bare name (a column wins
    over a let value or param of that name), each column taken from the table when read;
    a table has dozens of columns and a filter reads one or two."""

    def __init__(self, values: Mapping[str, Any], table: pd.DataFrame) -> None:
        self._values, self._table = values, table

    def __getitem__(self, name: str) -> Any:
        if name in self._table.columns:
            return self._table[name]
        return self._values[name]

    def _names(self) -> dict[str, None]:
        return dict.fromkeys([*self._values, *self._table.columns])

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


def _evidence(
    ev: Evidence,
    profile: Profile,
    values: Mapping[str, Any],
    functions: Mapping[str, Callable[..., Any]],
    memo: dict[bytes, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], pd.Index]:
    """(the evidence as reported, the rows shown, the labels of every row selected). The
    rows shown are arrays by column, of the columns shown (tune_ops is one) and those
    evidence_window reads: no DataFrame, which on pandas 3 costs more than these few rows."""
    df = profile.tables[ev.table]
    positions = np.arange(len(df))  # of the rows selected; the table's rows are taken once
    if ev.where is not None:
        scope = Scope(profile.tables, _RowValues(values, df), functions, memo)
        mask = ev.where.evaluate(scope)
        if isinstance(mask, pd.Series):
            keep = mask.fillna(False).astype(bool)
            if not keep.index.equals(df.index):
                keep = keep.reindex(df.index, fill_value=False)
            positions = np.flatnonzero(keep.to_numpy(dtype=bool))
        elif not mask:
            positions = positions[:0]
    total_rows, selected = len(positions), df.index[positions]
    keys = [(df[c].array.take(positions), a) for c, a in ev.sort if c in df.columns]
    if keys:  # sorted by the sort columns of the selected rows alone
        positions = positions[stable_order(keys)]
    columns = [c for c in ev.columns if c in df.columns]
    # only the columns shown and those a window reads, of the table's dozens, taken column by
    # column: on pandas 3 a selection of several columns costs more than the rows it takes
    read = [c for c in dict.fromkeys([*columns, *windows.COLUMNS]) if c in df.columns]
    shown_at = positions[: ev.limit]
    taken = {c: df[c].array.take(shown_at) for c in read}
    # an array gives the values its Series gives, as to_plain writes them
    rows = [[to_plain(v) for v in row] for row in zip(*(taken[c] for c in columns))]
    shown = {"table": ev.table, "columns": columns, "rows": rows, "total_rows": total_rows}
    return shown, taken, selected


def _eval(expr: Expression, scope: Scope) -> Any:
    value = expr.evaluate(scope)
    if isinstance(value, np.generic):
        value = value.item()
    return value


def _impact(
    rule: Rule, scope: Scope, total_us: float | None
) -> tuple[float | None, float | None, float | None]:
    """(impact, the time it was measured over, the uncapped impact when capped)."""
    if rule.impact_us is None:
        return None, None, None
    raw = _eval(rule.impact_us, scope)
    if not _is_scalar(raw):
        raise ExprError("'impact_us' must give one number; wrap columns in sum()")
    impact = to_plain(raw)
    impact = max(float(impact), 0.0) if isinstance(impact, (int, float)) else None
    base = total_us
    if rule.measured_us is not None:
        measured = to_plain(_eval(rule.measured_us, scope))
        base = float(measured) if isinstance(measured, (int, float)) and measured > 0 else None
    if impact is not None and base is not None and impact > base:
        return base, base, impact
    return impact, base, None


_NULLABLE = {"bool": "boolean", "int64": "Int64"}
"""Contract dtypes that cannot hold a missing value, and the nullable ones used instead."""


class BlankColumns:
    """What a rule's optional "table.column" reads as where the profile lacks it: missing
    values of its contract dtype (nullable where the contract's is not; float64 for a
    plugin's table), as long as its table (none where the table itself is absent): a rule
    reads the data where a profile has it and no data elsewhere.

    One for the rules of a profile: each blank column is made once, when a rule first reads
    it, not added to a copy of its table for every rule that may (a tiny rank's rules spent
    a tenth of their time copying tables for columns most of them never read)."""

    def __init__(self, tables: Mapping[str, pd.DataFrame]) -> None:
        self.tables = tables
        self.made: dict[tuple[str, str], pd.Series] = {}

    def for_rule(self, optional: Sequence[str]) -> Callable[[str, str], pd.Series | None]:
        """Scope.blank for a rule whose optional columns are `optional`."""
        wanted = frozenset(optional)

        def blank(table: str, column: str) -> pd.Series | None:
            return self.column(table, column) if f"{table}.{column}" in wanted else None

        return blank

    def column(self, table: str, column: str) -> pd.Series:
        """The blank `table.column`, a copy of the one made for this profile (a rule's
        functions then cannot change what the next rule reads; a shallow copy would share its
        values where pandas copies on write only from version 3)."""
        made = self.made.get((table, column))
        if made is None:
            frame = self.tables.get(table)
            spec = TABLES[table].column(column) if table in TABLES else None
            dtype = _NULLABLE.get(spec.dtype, spec.dtype) if spec is not None else "float64"
            index = pd.RangeIndex(0) if frame is None else frame.index
            made = self.made[table, column] = _missing(index, dtype, column)
        return made.copy()


def _missing(index: pd.Index, dtype: str, name: str) -> pd.Series:
    """A column of missing values of `dtype` on `index`. A float one is made from its NaN
    array: pandas fills a Series given only an index and a dtype at twice the cost, which
    many profiles pay (steps.bubble_us, comm_ops.transit_us); a nullable one is made by
    pandas, as fast as from an array of its own."""
    if dtype == "float64":
        return pd.Series(np.full(len(index), np.nan), index=index, name=name)
    return pd.Series(index=index, dtype=dtype, name=name)


def evaluate_rule(
    rule: Rule,
    profile: Profile,
    params: dict[str, Any],
    functions: Mapping[str, Callable[..., Any]],
    total_us: float | None,
    lang: str = "en",
    memo: dict[bytes, Any] | None = None,
    step_spans: Callable[[], dict[int, tuple[float, float]]] | None = None,
    blanks: BlankColumns | None = None,
    training: bool | None = None,
) -> Finding | None:
    """Evaluate one applicable rule; raise ExprError on a runtime problem. `memo`: the
    values of table-only sub-expressions shared by the rules of this profile (Scope.memo);
    `step_spans`: the profile's windows.step_spans, computed on the first call; `blanks`: the
    blank columns of the profile's rules so far (a new one when not given); `training`:
    whether the profile records training (advisor.workload), as the rules read it."""
    meta = profile.meta
    values: dict[str, Any] = {
        "total_us": math.nan if total_us is None else total_us,
        "device_kind": meta.device_kind,  # PROFILE_NAMES; a rule's own names win
        "framework": meta.framework,
        "training": training,
        **params,
    }
    blanks = blanks or BlankColumns(profile.tables)
    scope = Scope(profile.tables, values, functions, memo, blanks.for_rule(rule.optional))
    before_when = rule.lets_for_when
    for name in before_when:
        values[name] = _eval(rule.let[name], scope)
    fired = _eval(rule.when, scope)
    if not _is_scalar(fired):
        raise ExprError("'when' must give one true/false value; wrap columns in any() or all()")
    if fired is None or (isinstance(fired, float) and math.isnan(fired)) or not bool(fired):
        return None
    for name, expr in rule.let.items():  # the lets only the message, evidence or impact read
        if name not in before_when:
            values[name] = _eval(expr, scope)
    impact, measured_us, uncapped = _impact(rule, scope, total_us)
    ratio = impact / measured_us if impact is not None and measured_us else None
    evidence, shown_rows, selected = (None, None, None)
    if rule.evidence is not None:
        evidence, shown_rows, selected = _evidence(rule.evidence, profile, values, functions, memo)
    measured = {k: to_plain(values[k]) for k in rule.let if _is_scalar(values[k])}  # in order
    context = {
        "device_kind": meta.device_kind,  # before params and lets: a rule's own names win
        "framework": meta.framework,
        "execution": meta.extra.get("execution"),
        "gpu_runtime": meta.extra.get("gpu_runtime"),
        "training": training,
        **words(lang, training, meta.extra.get("gpu_runtime")),
        **{k: to_plain(v) for k, v in params.items()},
        **measured,
        "impact_us": impact,
        "impact_ratio": ratio,
        "total_us": total_us,
        "measured_us": measured_us,
        "evidence": [dict(zip_strict(evidence["columns"], r)) for r in evidence["rows"]]
        if evidence
        else [],
        "evidence_total": evidence["total_rows"] if evidence else 0,
    }
    tune_ops: list[str] = []
    if rule.tune_ops and shown_rows is not None and meta.device_kind == "NPU":
        # AOE tunes Ascend operators only: a GPU kernel name in its file would be an error
        tune_ops = [str(v) for v in pd.Series(shown_rows[rule.tune_ops]).dropna().unique()]
    text = rule.text(lang)
    suggestions = rule.suggestions_for(
        lang, meta.framework, meta.device_kind, meta.extra.get("execution")
    )
    from advisor.engine import templates  # Jinja is loaded once a rule fires, not before

    return Finding(
        rule=rule,
        severity=Severity.LOW
        if _too_short(total_us)
        else rule.severity or severity_from_share(ratio),
        message=templates.render(text.message, context),
        suggestions=_shown_suggestions(suggestions, context),
        values=measured,
        params={k: to_plain(v) for k, v in params.items()},
        impact_us=impact,
        impact_ratio=ratio,
        evidence=evidence,
        tune_ops=tune_ops,
        lang=lang,
        measured_us=measured_us,
        uncapped_impact_us=uncapped,
        impact_note=templates.render(text.impact_note, context) if text.impact_note else None,
        evidence_rows=selected,
        window=None
        if rule.evidence is None
        else windows.evidence_window(
            profile,
            rule.evidence.table,
            shown_rows,
            windows.step_spans(profile) if step_spans is None else step_spans(),
        ),
    )


def rank_findings(findings: list[Finding], path: savings.CriticalPath | None = None) -> None:
    """Order by severity, then time at stake over the whole profile (savings.at_stake_us: a
    finding measured over the few steps a device timeline covers is weighed as standing for
    all steps, not against other findings' totals over every step); within a severity,
    findings without an impact come last, and of those the notes on how the profile was
    taken (tagged `profiling`) after the findings about the run itself."""
    stake = {id(f): savings.at_stake_us(f, path) for f in findings}
    findings.sort(
        key=lambda f: (
            SEVERITIES.index(f.severity),
            stake[id(f)] is None,
            -(stake[id(f)] or 0.0),
            stake[id(f)] is None and "profiling" in f.rule.tags,
            f.rule.id,
        )
    )
    for i, finding in enumerate(findings, start=1):
        finding.rank = i


def evaluate(
    profile: Profile,
    rules: Sequence[Rule],
    *,
    functions: Mapping[str, Callable[..., Any]],
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    lang: str = "en",
    providers: Sequence[MetricProvider] = (),
    present: Mapping[str, bool] | None = None,
) -> Evaluation:
    """Evaluate every rule over a profile whose derived metrics are already in place; messages
    are written in `lang` (English for rules without that translation). `providers` (those
    derived metrics came from) tell missing data from data the format never records;
    `present`: whether each need is present, as derive found it (asked here otherwise)."""
    overrides = overrides or {}
    total_us = profile_time_us(profile)
    result = Evaluation(lang=lang, total_us=total_us)
    memo: dict[bytes, Any] = {}  # the tables stay as they are while the rules run
    blanks = BlankColumns(profile.tables)  # ... and the blank optional columns they lack
    step_spans = cache(partial(windows.step_spans, profile))
    training = result.training = workload.training(profile)
    available = dict(present or {})  # rules share needs, and rules leave the tables as they are
    hinted: dict[str, list[str] | None] = {}  # ... and lack the same ones: how each is collected
    findings: list[Finding] = []
    for rule in rules:
        params = {**rule.params, **overrides.get(rule.id, {})}
        result.params[rule.id] = {k: to_plain(v) for k, v in params.items()}
        for need in rule.needs():
            if need not in available:
                available[need] = is_present(profile, need)
        missing = [n for n in rule.required() if not available[n]]
        try:
            finding = (
                None
                if missing
                else evaluate_rule(
                    rule,
                    profile,
                    params,
                    functions,
                    total_us,
                    lang,
                    memo,
                    step_spans,
                    blanks,
                    training,
                )
            )
        except MissingData as exc:
            missing = [exc.ref]
        except ExprError as exc:
            result.errors.append((rule, str(exc)))
            result.outcomes[rule.id] = Outcome.ERROR
            continue
        if missing:
            result.not_applicable.append((rule, missing))
            result.outcomes[rule.id] = Outcome.NOT_APPLICABLE
            result.inapplicable[rule.id] = explain(
                profile, missing, providers, available, hinted
            ).in_language(lang, profile.meta.collect_zh)
        elif finding is None:
            result.outcomes[rule.id] = Outcome.PASSED
        else:
            findings.append(finding)
            result.outcomes[rule.id] = Outcome.FIRED
    too_short = _too_short(total_us)
    if not too_short:
        result.critical_path = savings.critical_path(profile, total_us)
    rank_findings(findings, result.critical_path)
    result.findings = findings
    result.combined_impact_us = combine_impacts(findings, total_us)
    path = result.critical_path
    recorded = None if path is None else path.recorded_share()
    if too_short:
        spans, least = units.fmt_us(total_us), units.fmt_us(MIN_JUDGED_US)
        profile.warn_whole(
            f"the profile spans {spans}, under {least}: too short to hold a training step, so "
            "its findings stay low and no step time if fixed is given",
            zh=f"性能数据只覆盖 {spans}，不足 {least}：太短，容纳不下一个训练迭代，因此其发现"
            "都保持为低严重度，也不给出修复后的迭代时间",
        )
    elif recorded is not None and recorded < savings.MIN_RECORDED_SHARE:
        share = units.fmt_pct(recorded)
        timed = path is not None and path.recorded_us is None  # else no step breakdown
        of, of_zh = ("the steps", "迭代时间") if timed else ("the profiled time", "采集时长")
        profile.warn_whole(
            f"recorded work (device tasks, collectives, host calls, data loading) fills "
            f"{share} of {of}: what the rest of the time went to is not in the "
            "profile, so no step time if fixed is given",
            zh=f"记录到的工作（设备任务、集合通信、Host 调用、数据加载）只占{of_zh}的 {share}："
            "其余时间花在何处不在性能数据中，因此不给出修复后的迭代时间",
        )
    else:
        result.fix_first = savings.apply(findings, path)
    sources.attach(findings, profile)
    return result


def combine_impacts(findings: Sequence[Finding], total_us: float | None) -> float | None:
    """The time the findings stand for together, counting shared time once, and each
    finding's `shares_time_with`.

    Free time, task waits, tiny-kernel gaps and data loading often describe one idle
    interval; adding their impacts would promise more than the step lasts. Rules say which
    kind of time they measure (`time_pool`); per pool only the largest impact counts."""
    pools: dict[str, list[Finding]] = {}
    alone = 0.0
    for finding in findings:
        if finding.impact_us is None:
            continue
        if finding.rule.time_pool:
            pools.setdefault(finding.rule.time_pool, []).append(finding)
        else:
            alone += finding.impact_us
    for members in pools.values():
        for finding in members:
            finding.shares_time_with = [f.rule.id for f in members if f is not finding]
    if not pools and not alone:
        return None
    combined = alone + sum(max(f.impact_us or 0.0 for f in m) for m in pools.values())
    return min(combined, total_us) if total_us else combined
