"""Rule test cases (`*.case.yaml`): small tables or a profile, and what a rule must do on them.

A case runs its rule through the same derive + evaluate path as `advisor run` (metric
providers and, for cross-rank rules, the cluster profile included), so a passing case shows
what users get. Case files are data: safe-loaded, schema-checked and checked against the table
contract and the rules in effect before anything runs, each problem reported as one line.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jsonschema

from advisor.cluster import build_cluster
from advisor.engine.evaluate import Evaluation
from advisor.engine.rules import Rule, RuleSet, read_rule_documents
from advisor.errors import AdvisorError, RuleError
from advisor.lazy import lazy_module
from advisor.model import CLUSTER, TABLES, Profile, ProfileMeta, TableSpec, conform
from advisor.plugin_manager import PluginHost
from advisor.session import Session

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

CASE_SCHEMA: dict[str, Any] = json.loads(
    files("advisor").joinpath("schemas/case.schema.json").read_text(encoding="utf-8")
)
_VALIDATOR = jsonschema.Draft202012Validator(CASE_SCHEMA)
CASE_SUFFIXES = (".case.yaml", ".case.yml")
DEFAULT_TOLERANCE = 1e-6
ZERO_TOLERANCE = 1e-9
"""Absolute tolerance when the expected number is 0, where a relative one cannot work."""
ONLY_WHEN_FIRING = (
    "values",
    "impact_us",
    "severity",
    "message_contains",
    "message_excludes",
    "evidence_rows",
    "suggestions_contain",
    "suggestions_exclude",
)


class CaseError(AdvisorError):
    """A case file is invalid, or a case names a rule, param or let that does not exist."""

    def __init__(self, source: str | Path, problem: str) -> None:
        self.source = str(source)
        self.problem = problem
        super().__init__(f"{self.source}: {problem}")


@dataclass(frozen=True)
class Case:
    """One test case of one rule, its tables already cast to the documented dtypes."""

    rule_id: str
    name: str
    source: Path
    expect: Mapping[str, Any]
    params: Mapping[str, Any] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)
    tables: Mapping[str, pd.DataFrame] | None = None
    fixture: Path | None = None

    @property
    def where(self) -> str:
        return f"[{self.rule_id}] case {self.name!r}"


@dataclass
class CaseResult:
    """A case that ran: it passed when nothing differed from its expectation."""

    case: Case
    differences: list[str]

    @property
    def passed(self) -> bool:
        return not self.differences


@dataclass
class CaseRun:
    """Every case result of a run, and the case problems that stopped cases from running."""

    results: list[CaseResult] = field(default_factory=list)
    errors: list[CaseError] = field(default_factory=list)
    files: int = 0


def case_files(path: Path) -> list[Path]:
    """The case files a path stands for: the file itself, or *.case.yaml under a folder."""
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.name.endswith(CASE_SUFFIXES))
    return [path]


def _schema_problem(raw: Mapping[str, Any]) -> str | None:
    error = jsonschema.exceptions.best_match(_VALIDATOR.iter_errors(raw))
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where or 'case group'}: {error.message}"


def _hint(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _table(
    name: str, rows: Sequence[Mapping[str, Any]], where: str, tables: Mapping[str, TableSpec]
) -> pd.DataFrame:
    """Rows as a frame of the documented dtypes; unknown columns and non-numbers are errors.

    Required columns a case leaves out are added without values: present for code that relies
    on the contract, yet missing for rules, which are then not applicable as with a reader.
    """
    spec = tables.get(name)
    if spec is None:
        raise ValueError(f"{where}: unknown table {name!r}{_hint(name, tables)}")
    frame = pd.DataFrame(list(rows))
    for given in frame.columns:
        if given not in spec.column_names:
            raise ValueError(
                f"{where}: unknown column of table {name!r}: {given!r}"
                f"{_hint(str(given), spec.column_names)}"
            )
    for column in spec.columns:  # readers always have them, so evaluation may rely on them
        if column.required and column.name not in frame.columns:
            frame[column.name] = None
    conformed = conform(name, frame, spec)
    for column in spec.columns:
        if column.name in frame.columns and column.dtype in ("float64", "int64", "Int64"):
            lost = frame[column.name].notna() & conformed[column.name].isna()
            if lost.any():
                value = frame[column.name][lost].iloc[0]
                raise ValueError(f"{where}: {name}.{column.name}: {value!r} is not a number")
    return conformed


def _case(
    raw: Mapping[str, Any], rule_id: str, path: Path, tables: Mapping[str, TableSpec]
) -> Case:
    where = f"[{rule_id}] case {raw['name']!r}"
    expect = raw["expect"]
    if not expect["fires"]:
        extra = [k for k in ONLY_WHEN_FIRING if k in expect]
        if extra:
            raise CaseError(
                path,
                f"{where}: expect.{extra[0]} needs fires: true "
                "(a silent case has no finding to check)",
            )
    given = None
    fixture = None
    try:
        if "tables" in raw:
            given = {
                name: _table(name, rows, where, tables) for name, rows in raw["tables"].items()
            }
    except ValueError as exc:
        raise CaseError(path, str(exc)) from None
    if "fixture" in raw:
        fixture = path.parent / raw["fixture"]
        if not fixture.exists():
            raise CaseError(path, f"{where}: fixture: no such file or folder: {fixture}")
    return Case(
        rule_id,
        raw["name"],
        path,
        expect,
        raw.get("params", {}),
        raw.get("meta", {}),
        given,
        fixture,
    )


def load_case_file(path: Path, tables: Mapping[str, TableSpec] = TABLES) -> list[Case]:
    """Read, validate and build every case of a file; the first problem is raised. `tables`
    are those case rows may fill (a plugin's tables too, when a session gives them)."""
    try:
        groups = read_rule_documents(path)
    except RuleError as exc:
        raise CaseError(path, exc.problem) from None
    if not groups:
        raise CaseError(path, "no cases in the file")
    cases = []
    for group in groups:
        problem = _schema_problem(group)
        if problem:
            raise CaseError(path, problem)
        cases += [_case(raw, group["rule"], path, tables) for raw in group["cases"]]
    return cases


def resolve(case: Case, ruleset: RuleSet) -> Rule:
    """The rule a case tests, after checking its params and expected values name real ones."""
    rule = ruleset.rules.get(case.rule_id)
    if rule is None:
        hint = _hint(case.rule_id, ruleset.rules)
        raise CaseError(
            case.source,
            f"[{case.rule_id}]: no rule {case.rule_id!r} in effect "
            f"(load its file with --rules){hint}",
        )
    for param in case.params:
        if param not in rule.params:
            raise CaseError(
                case.source,
                f"{case.where}: params: rule {rule.id} has no param "
                f"{param!r} (params: {', '.join(rule.params) or 'none'})",
            )
    for name in case.expect.get("values", {}):
        if name not in rule.let:
            raise CaseError(
                case.source,
                f"{case.where}: expect.values: rule {rule.id} has no "
                f"let {name!r}{_hint(name, rule.let)}",
            )
    if "evidence_rows" in case.expect and rule.evidence is None:
        raise CaseError(
            case.source, f"{case.where}: expect.evidence_rows: rule {rule.id} has no evidence"
        )
    return rule


def _show(value: Any) -> str:
    return f"{value:.10g}" if isinstance(value, float) else repr(value)


def _differs(expected: Any, actual: Any, tolerance: float) -> bool:
    if isinstance(expected, (bool, str)) or isinstance(actual, bool):
        return type(actual) is not type(expected) or actual != expected
    if not isinstance(actual, (int, float)):
        return True
    return not math.isclose(actual, expected, rel_tol=tolerance, abs_tol=ZERO_TOLERANCE)


_EXTRA_META = ("execution",)
"""Case meta kept in ProfileMeta.extra, as the readers keep it (how a PyTorch trace ran)."""


def _meta_fields(meta: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A case's meta as ProfileMeta fields and the entries of its `extra`."""
    fields = {k: v for k, v in meta.items() if k not in _EXTRA_META}
    return fields, {k: v for k, v in meta.items() if k in _EXTRA_META}


class CaseRunner:
    """Runs cases against the rules in effect, with the plugins' functions and providers."""

    def __init__(self, ruleset: RuleSet, host: PluginHost, lang: str = "en") -> None:
        self.ruleset = ruleset
        self.session = Session.of_ruleset(ruleset, host, lang)

    def _profile(self, case: Case, rule: Rule) -> Profile:
        """The profile a case describes, derived as `advisor run` derives it."""
        fields, extra = _meta_fields(case.meta)
        if case.tables is not None:
            meta = ProfileMeta(
                **{"source_format": "case", "path": str(case.source), **fields, "extra": extra}
            )
            profile = Profile(meta, dict(case.tables))
            self.session.derive(profile)
            return profile
        assert case.fixture is not None
        reading = self.session.read([case.fixture], jobs=1)
        if reading.input_errors:
            raise CaseError(case.source, f"{case.where}: fixture: {reading.input_errors[0]}")
        profiles = reading.profiles
        for profile in profiles:
            self.session.derive(profile)
        if rule.scope == CLUSTER:
            cluster = build_cluster(profiles)
            if cluster is None:
                raise CaseError(
                    case.source,
                    f"{case.where}: fixture: fewer than two ranks with "
                    "steps, so there is no cluster profile",
                )
            profiles = [cluster]
        if len(profiles) != 1:
            raise CaseError(
                case.source,
                f"{case.where}: fixture: holds {len(profiles)} profiles; a case runs on one",
            )
        meta = profiles[0].meta
        profiles[0].meta = dataclasses.replace(meta, **fields, extra={**meta.extra, **extra})
        return profiles[0]

    def evaluate(self, case: Case) -> tuple[Rule, Evaluation]:
        """The case's rule evaluated on the case's profile."""
        rule = resolve(case, self.ruleset)
        return rule, self.session.evaluate(
            self._profile(case, rule), [rule], overrides={rule.id: dict(case.params)}
        )

    def run(self, case: Case) -> CaseResult:
        """Evaluate the case's rule and list what differs from the expectation."""
        rule, evaluation = self.evaluate(case)
        expect = case.expect
        outcome = evaluation.outcomes[rule.id]
        if outcome == "not_applicable":
            missing = [n for _, names in evaluation.not_applicable for n in names]
            return CaseResult(case, [f"not applicable: missing {', '.join(missing)}"])
        if outcome == "error":
            return CaseResult(case, [f"rule error: {evaluation.errors[0][1]}"])
        fired = outcome == "fired"
        if fired != expect["fires"]:
            return CaseResult(
                case, [f"fires: expected {str(expect['fires']).lower()}, got {str(fired).lower()}"]
            )
        if not fired:
            return CaseResult(case, [])
        (finding,) = evaluation.findings
        tolerance = expect.get("tolerance", DEFAULT_TOLERANCE)
        differences = []
        for name, expected in expect.get("values", {}).items():
            if name not in finding.values:
                differences.append(f"values.{name}: not a single value (a column?)")
            elif _differs(expected, finding.values[name], tolerance):
                differences.append(
                    f"values.{name}: expected {_show(expected)}, got {_show(finding.values[name])}"
                )
        if "impact_us" in expect and _differs(expect["impact_us"], finding.impact_us, tolerance):
            differences.append(
                f"impact_us: expected {_show(expect['impact_us'])}, got {_show(finding.impact_us)}"
            )
        if "severity" in expect and finding.severity != expect["severity"]:
            differences.append(f"severity: expected {expect['severity']}, got {finding.severity}")
        for text in _texts(expect.get("message_contains", [])):
            if text not in finding.message:
                differences.append(f"message: no {text!r} in {finding.message[:300]!r}")
        for text in _texts(expect.get("message_excludes", [])):
            if text in finding.message:
                differences.append(f"message: {text!r} in {finding.message[:300]!r}")
        shown = "\n".join(finding.suggestions)
        for text in _texts(expect.get("suggestions_contain", [])):
            if text not in shown:
                differences.append(f"suggestions: no {text!r} in {shown[:300]!r}")
        for text in _texts(expect.get("suggestions_exclude", [])):
            if text in shown:
                differences.append(f"suggestions: {text!r} shown for this profile")
        if "evidence_rows" in expect:
            rows = (finding.evidence or {}).get("total_rows")
            if rows != expect["evidence_rows"]:
                differences.append(f"evidence_rows: expected {expect['evidence_rows']}, got {rows}")
        return CaseResult(case, differences)


def _texts(wanted: str | list[str]) -> list[str]:
    """A case's one text or list of texts, as a list."""
    return [wanted] if isinstance(wanted, str) else wanted


def example_finding(rule: Rule, ruleset: RuleSet, host: PluginHost) -> tuple[str, str] | None:
    """(case, message) of the first firing case of the rule in the case file beside it, for
    `rules show`; None when there is none or it cannot run (the template is shown instead)."""
    case_file = Path(rule.source).with_suffix(".case.yaml")
    runner = CaseRunner(ruleset, host)
    try:
        cases = load_case_file(case_file, runner.session.tables) if case_file.is_file() else []
    except CaseError:
        return None
    for case in cases:
        if case.rule_id != rule.id or not case.expect.get("fires"):
            continue
        try:
            _, evaluation = runner.evaluate(case)
        except CaseError:
            continue
        if evaluation.findings:
            return f"case {case.name!r} of {case_file}", evaluation.findings[0].message
    return None


def run_cases(paths: Sequence[Path], ruleset: RuleSet, host: PluginHost) -> CaseRun:
    """Load every case file under the paths and run its cases; problems are collected."""
    outcome = CaseRun()
    runner = CaseRunner(ruleset, host)
    for root in paths:
        if not root.exists():
            outcome.errors.append(CaseError(root, "no such file or folder"))
            continue
        for path in case_files(root):
            outcome.files += 1
            try:
                cases = load_case_file(path, runner.session.tables)
            except CaseError as exc:
                outcome.errors.append(exc)
                continue
            for case in cases:
                try:
                    outcome.results.append(runner.run(case))
                except CaseError as exc:
                    if str(exc) not in map(str, outcome.errors):
                        outcome.errors.append(exc)
    return outcome
