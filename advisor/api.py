"""The Python API (`advisor.analyze`), also what the CLI runs: locate, read, derive, evaluate.

Notebook users get the normalized tables as DataFrames, the derived metrics and the findings
from the same objects the CLI renders, so both always agree.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pandas as pd

from advisor.cluster import build_cluster
from advisor.config import Config
from advisor.derive import derive
from advisor.engine.evaluate import Evaluation, Finding, evaluate
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.outcome import SEVERITIES
from advisor.engine.rules import LANGUAGES, Rule, RuleSet, load_rules
from advisor.errors import AdvisorError, RuleError, UnreadableInput
from advisor.executors import dask_executor, process_pool
from advisor.locate import Claim, locate
from advisor.model import Profile
from advisor.plugin_manager import PluginHost, PluginInfo
from advisor.render.json_report import RunInfo, build_report
from advisor.tuning_loop import files_read, neighbour_results, tuning_loop


@dataclass
class ProfileAnalysis:
    """One profile (device or rank) with its evaluation and prof_rule report."""

    profile: Profile
    evaluation: Evaluation
    report: dict[str, Any]

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return self.profile.tables

    @property
    def findings(self) -> list[Finding]:
        return self.evaluation.findings

    @property
    def metrics(self) -> dict[str, Any]:
        return self.report["metrics"]


@dataclass
class AnalysisResult:
    """Everything one run produced, including what could not be read."""

    analyses: list[ProfileAnalysis] = field(default_factory=list)
    input_errors: list[AdvisorError] = field(default_factory=list)
    rule_errors: list[RuleError] = field(default_factory=list)
    rule_overrides: list[str] = field(default_factory=list)
    plugin_problems: list[str] = field(default_factory=list)
    plugins: list[PluginInfo] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)

    @property
    def findings(self) -> list[Finding]:
        return [f for a in self.analyses for f in a.findings]

    @property
    def reports(self) -> list[dict[str, Any]]:
        return [a.report for a in self.analyses]

    def tune_ops(self) -> list[str]:
        """Operator names the findings point at, for AOE's --tune_ops_file."""
        return list(dict.fromkeys(op for f in self.findings for op in f.tune_ops))


def read_neighbour_tuning(paths: Sequence[Path], profiles: Sequence[Profile], host: PluginHost,
                          result: AnalysisResult) -> list[Profile]:
    """AOE results next to the profiles read (their folder or the one above), not yet read.

    Only looked for when a profile other than AOE results was read: the results are there to
    close the tuning loop of that profile.
    """
    if all("tuning" in p.tables for p in profiles):
        return []
    read = [*paths, *(f for p in profiles if "tuning" in p.tables
                      for f in files_read(p.meta.path, p.meta.files_read))]
    neighbours = AnalysisResult()
    found = read_inputs(neighbour_results(paths, read), host, neighbours, jobs=1)
    # Files the user did not name cannot fail the run: their problems are the profiles' warnings.
    for error in neighbours.input_errors:
        for profile in profiles:
            profile.warn(getattr(error, "path", ""), getattr(error, "problem", str(error)))
    result.plugin_problems += neighbours.plugin_problems
    return found


def attach_tuning_loop(analyses: Sequence[ProfileAnalysis]) -> None:
    """Add to each profile's report what AOE did with the operators advised for it."""
    aoe = [a.profile for a in analyses if "tuning" in a.tables]
    if not aoe:
        return
    tuning = pd.concat([p.tables["tuning"] for p in aoe], ignore_index=True)
    sources = [str(f) for p in aoe for f in files_read(p.meta.path, p.meta.files_read)]
    for analysis in analyses:
        if "tuning" not in analysis.tables:
            advised = list(dict.fromkeys(op for f in analysis.findings for op in f.tune_ops))
            analysis.report["tuning_loop"] = tuning_loop(advised, tuning, sources)


def parse_overrides(assignments: Iterable[str]) -> dict[str, dict[str, Any]]:
    """`ID.param=VALUE` strings to {ID: {param: value}}; VALUE is a YAML scalar."""
    import yaml

    out: dict[str, dict[str, Any]] = {}
    for text in assignments:
        target, sep, raw = text.partition("=")
        rule_id, dot, param = target.partition(".")
        if not sep or not dot or not rule_id or not param:
            raise ValueError(f"--set expects ID.param=VALUE, got {text!r}")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        if not isinstance(value, (int, float, str, bool)):
            raise ValueError(f"--set {target}: value must be a number, string or boolean")
        out.setdefault(rule_id, {})[param] = value
    return out


def _check_selectors(ruleset: RuleSet, selectors: Sequence[str], what: str) -> None:
    """Refuse a selector that names no rule: a mistyped `--select OP-05` would otherwise run
    nothing and report "no problems", a silent pass in CI."""
    rules = list(ruleset.rules.values())
    for selector in selectors:
        if not any(r.matches(selector) for r in rules):
            known = sorted({k for r in rules for k in (r.id, r.name, *r.tags)})
            close = difflib.get_close_matches(selector.upper(), [k.upper() for k in known], 3)
            close += difflib.get_close_matches(selector.lower(), known, 3)
            hint = f" (did you mean {', '.join(dict.fromkeys(close))}?)" if close else \
                " (`advisor rules list` shows ids, names and tags)"
            raise ValueError(f"{what}: {selector!r} matches no rule id, name or tag{hint}")


def select_rules(ruleset: RuleSet, select: Sequence[str], ignore: Sequence[str],
                 what: tuple[str, str] = ("--select", "--ignore")) -> list[Rule]:
    """The rules --select picks (all when empty) less those --ignore names; a selector that
    matches no rule is a ValueError. `what` names the two options in that error."""
    _check_selectors(ruleset, select, what[0])
    _check_selectors(ruleset, ignore, what[1])
    rules = list(ruleset.rules.values())
    if select:
        rules = [r for r in rules if any(r.matches(s) for s in select)]
    return [r for r in rules if not any(r.matches(s) for s in ignore)]


def select_configured(ruleset: RuleSet, config: Config, select: Sequence[str],
                      ignore: Sequence[str]) -> list[Rule]:
    """select_rules with the caller's selectors, or the config's where the caller gives none;
    errors name where the selector came from."""
    return select_rules(
        ruleset, select or config.select, ignore or config.ignore,
        ("--select" if select else f"{config.label}: select",
         "--ignore" if ignore else f"{config.label}: ignore"))


def parse_severities(assignments: Iterable[str]) -> dict[str, str]:
    """`ID=high` strings (from --severity) to {ID: severity}."""
    out: dict[str, str] = {}
    for text in assignments:
        rule_id, sep, severity = text.partition("=")
        if not sep or not rule_id or severity not in SEVERITIES:
            raise ValueError(f"--severity expects ID={'|'.join(SEVERITIES)}, got {text!r}")
        out[rule_id] = severity
    return out


def find_rule(ruleset: RuleSet, key: str) -> Rule | None:
    """The rule a user names by id or by name."""
    folded = key.casefold()
    return ruleset.rules.get(key) or next(
        (r for r in ruleset.rules.values()
         if folded in (r.id.casefold(), r.name.casefold())), None)


def fix_severities(ruleset: RuleSet, severities: Mapping[str, str], what: str) -> None:
    """Give the named rules a fixed severity, as if their YAML said `severity:`."""
    for key, severity in severities.items():
        rule = find_rule(ruleset, key)
        if rule is None:
            raise ValueError(f"{what}: no rule {key!r}")
        ruleset.rules[rule.id] = replace(rule, severity=severity)


def resolve_overrides(ruleset: RuleSet, overrides: Mapping[str, Mapping[str, Any]],
                      what: str = "--set") -> dict[str, dict[str, Any]]:
    """Key overrides by rule id (a rule's name is accepted too) and check every param exists."""
    resolved: dict[str, dict[str, Any]] = {}
    for key, params in overrides.items():
        rule = find_rule(ruleset, key)
        if rule is None:
            raise ValueError(f"{what}: no rule {key!r}")
        unknown = sorted(set(params) - set(rule.params))
        if unknown:
            raise ValueError(f"{what}: rule {rule.id} has no param {unknown[0]!r} "
                             f"(params: {', '.join(rule.params) or 'none'})")
        resolved.setdefault(rule.id, {}).update(
            {name: typed_param(rule, name, value, what) for name, value in params.items()})
    return resolved


def typed_param(rule: Rule, name: str, value: Any, what: str = "--set") -> Any:
    """`value` as the type of the param's default, or a ValueError naming both: a threshold
    set to text would otherwise make the rule fail at run time and its finding vanish."""
    default = rule.params[name]
    if isinstance(value, str) and isinstance(default, (int, float)) \
            and not isinstance(default, bool):
        with contextlib.suppress(ValueError):  # YAML reads 1e-3 as text; a number is meant
            value = float(value)
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):  # 20 or 2.5 µs alike: a threshold is a number
        ok = numeric and math.isfinite(value)
    else:  # text: a number typed for it (a pattern such as 123) is its text
        ok = isinstance(value, str) or numeric
        value = str(value)
    if not ok:
        kind = ("true or false" if isinstance(default, bool) else "a finite number"
                if isinstance(default, (int, float)) else "text")
        raise ValueError(f"{what}: {rule.id}.{name} expects {kind} (default {default!r}), "
                         f"got {value!r}")
    return value


def load_ruleset(host: PluginHost, rule_paths: Sequence[Path]) -> tuple[RuleSet, list[RuleError]]:
    """Built-in and plugin-shipped rules first, then the user's; later ids replace earlier."""
    functions = {**BUILTIN_FUNCTIONS, **host.functions()}
    shipped = host.rule_paths()
    builtin = {i.name for i in host.infos if i.module.startswith("advisor_plugins.")}
    origins = {p: "built-in" if name in builtin else f"plugin {name}" for name, p in shipped}
    return load_rules([p for _, p in shipped] + list(rule_paths), functions, origins)


def prepare_rules(host: PluginHost, config: Config, rules: Sequence[str | Path] = (),
                  params: Mapping[str, Mapping[str, Any]] | None = None,
                  severity: Mapping[str, str] | None = None
                  ) -> tuple[RuleSet, list[RuleError], dict[str, dict[str, Any]]]:
    """The rules in effect and the param overrides to evaluate them with.

    User rules load after the built-in and plugin ones: the config's (ADVISOR_RULES first), then
    `rules`. Params and severities from the config apply first; the caller's (CLI) win.
    """
    ruleset, errors = load_ruleset(host, [*config.rules, *(Path(p) for p in rules)])
    fix_severities(ruleset, config.severity, f"{config.label}: severity")
    fix_severities(ruleset, severity or {}, "--severity")
    overrides = resolve_overrides(ruleset, config.params, f"{config.label}: params")
    for rule_id, values in resolve_overrides(ruleset, params or {}).items():
        overrides.setdefault(rule_id, {}).update(values)
    return ruleset, errors, overrides


RUN_NEEDS = ("steps.computing_us", "op_stats", "device_ops.compute_class", "host_ops.step")
"""What every run derives for every profile besides the needs of the rules: the report's
breakdown, statistics and charts."""

PARALLEL_MIN_BYTES = 64 * 1024 * 1024
"""Below this much input, starting worker processes costs more than it saves."""


def _read_claim(claim: Claim) -> list[Profile] | AdvisorError:
    """Read one claimed path; errors are returned so they cross process boundaries intact."""
    try:
        profiles = claim.reader.read(claim.path)
        hints = getattr(claim.reader, "collect", None) or {}
        for profile in profiles:
            profile.meta.collect = {**hints, **profile.meta.collect}
        return profiles
    except AdvisorError as exc:
        return exc
    except Exception as exc:  # reader plugins are third-party code
        return UnreadableInput(claim.path, f"reader {claim.reader.name!r} (plugin "
                                           f"{claim.plugin!r}) failed: {type(exc).__name__}: {exc}")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def _workers(claims: Sequence[Claim], jobs: int | None) -> int:
    """Processes to read with: as asked, or automatically for several large ranks."""
    if len(claims) < 2:
        return 1
    if jobs is None:
        big = sum(_size(c.path) for c in claims) >= PARALLEL_MIN_BYTES
        jobs = os.cpu_count() or 1 if big else 1
    return max(1, min(jobs, len(claims)))


def read_inputs(paths: Sequence[Path], host: PluginHost, result: AnalysisResult,
                jobs: int | None = None, scheduler: str | None = None) -> list[Profile]:
    """Read every path with the reader that claims it; several ranks in parallel processes,
    or on the workers of the Dask cluster at `scheduler`.

    Failures are recorded in `result`, never raised: the readable inputs are still analysed.
    """
    claims: list[Claim] = []
    readers = host.readers()
    for path in paths:
        try:
            claims += locate(path, readers, result.plugin_problems)
        except UnreadableInput as exc:
            result.input_errors.append(exc)
    if scheduler is not None:
        with dask_executor(scheduler) as executor:
            outcomes = read_claims(claims, executor)
    elif (workers := _workers(claims, jobs)) > 1:
        with process_pool(workers) as executor:
            outcomes = read_claims(claims, executor)
    else:
        outcomes = read_claims(claims)
    profiles: list[Profile] = []
    for outcome in outcomes:
        if isinstance(outcome, AdvisorError):
            result.input_errors.append(outcome)
        else:
            profiles += outcome
    return profiles


def read_claims(claims: Sequence[Claim], executor: Executor | None = None
                ) -> list[list[Profile] | AdvisorError]:
    """Each claim's profiles or error, in the order of the claims; in this process without an
    executor."""
    if executor is None:
        return [_read_claim(claim) for claim in claims]
    return list(executor.map(_read_claim, claims))


def _numeric_order(profile: Profile) -> tuple[int, float]:
    """Ranks, then devices, in numeric order (rank 2 before rank 10); others keep their
    reading order (the sort is stable)."""
    meta = profile.meta
    if meta.rank is not None:
        return 0, meta.rank
    if meta.device_id is not None and meta.device_id.isdigit():
        return 1, int(meta.device_id)
    return 2, 0


def analyze(*paths: str | Path, rules: Sequence[str | Path] = (), select: Sequence[str] = (),
            ignore: Sequence[str] = (), params: Mapping[str, Mapping[str, Any]] | None = None,
            host: PluginHost | None = None, jobs: int | None = None,
            lang: str | None = None, severity: Mapping[str, str] | None = None,
            config: Config | None = None, scheduler: str | None = None) -> AnalysisResult:
    """Analyse profiles and return tables, metrics and ranked findings.

    `jobs` is the number of processes that read several ranks (default: several only for
    large inputs); `scheduler`, the address of a Dask scheduler (tcp://host:8786), reads
    them on that cluster's workers instead (needs the `dask` extra).
    `lang` ("en" or "zh") is the language of titles, messages and suggestions.
    `severity` fixes rules' severities ({ID: "high"}). `config` (`advisor.config.discover()`
    for what the CLI finds) supplies rules, select, ignore, params, severity and lang; the
    arguments given here win over it.

    Example:
        >>> result = advisor.analyze("PROF_000001")
        >>> result.analyses[0].tables["steps"].head()
        >>> [f.rule.title for f in result.findings]
    """
    config = config or Config()
    lang = lang or config.lang or "en"
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r} (choose from {', '.join(LANGUAGES)})")
    host = host or PluginHost()
    ruleset, rule_errors, overrides = prepare_rules(host, config, rules, params, severity)
    selected = select_configured(ruleset, config, select, ignore)
    result = AnalysisResult(rule_errors=rule_errors, rule_overrides=ruleset.overrides,
                            plugins=host.infos, rules=selected)
    functions = {**BUILTIN_FUNCTIONS, **host.functions()}
    providers = host.metrics()
    needs = [n for r in selected for n in r.needs()]
    run = RunInfo(config=str(config.path) if config.path else None,
                  rule_overrides=tuple(ruleset.overrides))
    profiles = read_inputs([Path(p) for p in paths], host, result, jobs, scheduler)
    profiles += read_neighbour_tuning([Path(p) for p in paths], profiles, host, result)
    profiles.sort(key=_numeric_order)
    per_profile = [r for r in selected if not r.needs_ranks and not r.needs_compare]
    for profile in profiles:
        derive(profile, [*needs, *RUN_NEEDS], providers)
        evaluation = evaluate(profile, per_profile, functions=functions, overrides=overrides,
                              lang=lang, providers=providers)
        result.analyses.append(ProfileAnalysis(
            profile, evaluation, build_report(profile, evaluation, per_profile, run)))
    attach_tuning_loop(result.analyses)
    cluster = build_cluster(profiles)
    cross_rank = [r for r in selected if r.needs_ranks]
    if cluster is not None and cross_rank:
        evaluation = evaluate(cluster, cross_rank, functions=functions, overrides=overrides,
                              lang=lang, providers=providers)
        result.analyses.append(ProfileAnalysis(
            cluster, evaluation, build_report(cluster, evaluation, cross_rank, run)))
    return result

