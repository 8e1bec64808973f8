"""One analysis session: the rules, tables, functions and metric providers of a run, and the
one pipeline every front end runs with them, read → hold to contract → derive → evaluate.

`advisor.analyze`, `advisor.compare` and the rule case runner all open a session, so what a
rule sees cannot differ between `advisor run`, `advisor compare` and `advisor rules test`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisor.config import Config
from advisor.derive import derive
from advisor.engine.evaluate import Evaluation, evaluate
from advisor.engine.rules import LANGUAGES, Rule, RuleSet
from advisor.errors import RuleError
from advisor.hookspecs import MetricProvider
from advisor.model import PROFILE, Profile, RunInfo, TableSpec
from advisor.plugin_manager import PluginHost
from advisor.reading import Reading, read_inputs
from advisor.ruleset import expression_functions, prepare_rules, select_configured

RUN_NEEDS = (
    "steps.computing_us",
    "op_stats",
    "device_ops.compute_class",
    "host_ops.step",
    "step_bounds",
    "op_stacks",
)
"""What every run derives for every profile besides the needs of the rules: the report's
breakdown, statistics and charts, the critical path findings' savings are bounded by, and
the user code lines behind the operators findings name (op_stacks)."""


def check_language(lang: str) -> str:
    """`lang` when advisor speaks it, else a ValueError listing those it does."""
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r} (choose from {', '.join(LANGUAGES)})")
    return lang


@dataclass
class Session:
    """The rules in effect and everything evaluating them needs, for one run."""

    host: PluginHost
    ruleset: RuleSet
    rules: list[Rule]
    """The selected rules, in the ruleset's order."""
    tables: Mapping[str, TableSpec]
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    lang: str = "en"
    run: RunInfo = field(default_factory=RunInfo)
    rule_errors: list[RuleError] = field(default_factory=list)
    functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    providers: list[MetricProvider] = field(default_factory=list)

    @classmethod
    def open(
        cls,
        *,
        host: PluginHost | None = None,
        config: Config | None = None,
        rules: Sequence[str | Path] = (),
        select: Sequence[str] = (),
        ignore: Sequence[str] = (),
        params: Mapping[str, Mapping[str, Any]] | None = None,
        severity: Mapping[str, str] | None = None,
        lang: str | None = None,
    ) -> Session:
        """A session with the config's and the caller's rules, selectors, params, severities
        and language (the caller's win); raises ValueError for a selector, param, severity or
        language that names nothing."""
        config = config or Config()
        lang = check_language(lang or config.lang or "en")
        host = host or PluginHost()
        tables = host.tables()
        ruleset, errors, overrides = prepare_rules(host, config, rules, params, severity, tables)
        selected = select_configured(ruleset, config, select, ignore)
        run = RunInfo(
            config=str(config.path) if config.path else None,
            rule_overrides=tuple(ruleset.overrides),
        )
        return cls(
            host,
            ruleset,
            selected,
            tables,
            overrides,
            lang,
            run,
            errors,
            expression_functions(host),
            host.metrics(),
        )

    @classmethod
    def of_ruleset(cls, ruleset: RuleSet, host: PluginHost, lang: str = "en") -> Session:
        """A session evaluating every rule of a ruleset loaded elsewhere (rule case files)."""
        return cls(
            host,
            ruleset,
            list(ruleset.rules.values()),
            host.tables(),
            lang=lang,
            functions=expression_functions(host),
            providers=host.metrics(),
        )

    def rules_for(self, scope: str) -> list[Rule]:
        """The selected rules that run on a profile of `scope` (model.TableSpec.scope)."""
        return [r for r in self.rules if r.scope == scope]

    def read(
        self, paths: Sequence[Path], *, jobs: int | None = None, scheduler: str | None = None
    ) -> Reading:
        """The profiles under `paths`, held to this session's tables."""
        return read_inputs(paths, self.host, jobs=jobs, scheduler=scheduler, tables=self.tables)

    def derive(self, profile: Profile, needs: Sequence[str] = RUN_NEEDS) -> None:
        """Derive what the selected rules of the profile's kind and `needs` read."""
        wanted = [n for r in self.rules if r.scope == PROFILE for n in r.needs()]
        derive(profile, [*wanted, *needs], self.providers)

    def evaluate(
        self,
        profile: Profile,
        rules: Sequence[Rule],
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Evaluation:
        """`rules` on `profile`, with this session's params unless `overrides` are given."""
        return evaluate(
            profile,
            list(rules),
            functions=self.functions,
            overrides=self.overrides if overrides is None else overrides,
            lang=self.lang,
            providers=self.providers,
        )
