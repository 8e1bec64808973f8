"""One analysis session: the rules, tables, functions and metric providers of a run, and the
one pipeline every front end runs with them, read → hold to contract → derive → evaluate.

`advisor.analyze`, `advisor.compare` and the rule case runner all open a session, so what a
rule sees cannot differ between `advisor run`, `advisor compare` and `advisor rules test`.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from advisor.collector import freeze_imports
from advisor.config import Config
from advisor.derive import derive
from advisor.engine.evaluate import Evaluation, evaluate
from advisor.engine.rules import LANGUAGES, Rule, RuleSet
from advisor.errors import AdvisorError, RuleError
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
    "timeline_lanes",
)
"""What every run derives for every profile besides the needs of the rules: the report's
breakdown, statistics and charts (the per-step timeline too), the critical path findings'
savings are bounded by, and the user code lines behind the operators findings name
(op_stacks)."""


class SessionMismatch(AdvisorError):
    """A worker opened a session with other rules than the run's (another advisor version,
    or rule files it cannot read): its results could not be joined with the others."""


@dataclass(frozen=True)
class SessionRecipe:
    """What a session with only the installed plugins was opened with: enough to open an
    equal one in a worker process, local or on a Dask cluster (`reopen`)."""

    config: Config
    rules: tuple[str, ...]
    """User rule files and folders, absolute."""
    select: tuple[str, ...]
    ignore: tuple[str, ...]
    params: Mapping[str, Mapping[str, Any]] | None
    severity: Mapping[str, str] | None
    lang: str
    selected: tuple[tuple[str, str], ...]
    """(id, source) of every selected rule: a worker whose session selects others refuses."""


_REOPENED: list[tuple[SessionRecipe, Session]] = []
"""The session a worker process opened last, kept for the next claim it is given."""


def reopen(recipe: SessionRecipe) -> Session:
    """The session `recipe` describes, opened once per process and reused (rules are loaded
    and compiled once per worker, not once per rank). Raises SessionMismatch when it selects
    other rules than the recipe's."""
    for known, session in _REOPENED:
        if known == recipe:
            return session
    session = Session.open(
        config=recipe.config,
        rules=recipe.rules,
        select=recipe.select,
        ignore=recipe.ignore,
        params=recipe.params,
        severity=recipe.severity,
        lang=recipe.lang,
    )
    if session.recipe is None or session.recipe.selected != recipe.selected:
        raise SessionMismatch(
            "a worker loads other rules than this run (is the same advisor version installed "
            "there, and can it read the rule files?)"
        )
    _REOPENED[:] = [(recipe, session)]
    return session


class _RuleRefPickler(pickle.Pickler):
    def persistent_id(self, obj: Any) -> str | None:
        return obj.id if isinstance(obj, Rule) else None


class _RuleRefUnpickler(pickle.Unpickler):
    def __init__(self, data: bytes, rules: Mapping[str, Rule]) -> None:
        super().__init__(io.BytesIO(data))
        self.rules = rules

    def persistent_load(self, pid: Any) -> Rule:
        return self.rules[pid]


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
    recipe: SessionRecipe | None = None
    """How a worker opens an equal session; None when the host has plugins of the caller's
    own (those exist in this process only)."""

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
        freeze_imports()
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
        recipe = None
        if host.installed_only:
            recipe = SessionRecipe(
                config,
                tuple(str(Path(p).absolute()) for p in rules),
                tuple(select),
                tuple(ignore),
                params,
                severity,
                lang,
                tuple((r.id, r.source) for r in selected),
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
            recipe,
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

    def derive(self, profile: Profile, needs: Sequence[str] = RUN_NEEDS) -> dict[str, bool]:
        """Derive what the selected rules of the profile's kind and `needs` read; whether
        each is present after (derive.derive)."""
        return derive(profile, [*self._profile_needs, *needs], self.providers)

    @cached_property
    def _profile_needs(self) -> list[str]:
        """What the selected profile rules read, each once (the same for every profile)."""
        return list(dict.fromkeys(n for r in self.rules if r.scope == PROFILE for n in r.needs()))

    def evaluate(
        self,
        profile: Profile,
        rules: Sequence[Rule],
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        present: Mapping[str, bool] | None = None,
    ) -> Evaluation:
        """`rules` on `profile`, with this session's params unless `overrides` are given;
        `present`: what `derive` returned for the profile, its tables unchanged since."""
        return evaluate(
            profile,
            list(rules),
            functions=self.functions,
            overrides=self.overrides if overrides is None else overrides,
            lang=self.lang,
            providers=self.providers,
            present=present,
        )

    def ship(self, value: Any) -> bytes:
        """`value` pickled for another process, each Rule in it as a reference by id: rules
        hold compiled expressions, which do not pickle. `unship` in a session with the same
        rules (`reopen`) turns the references back into its own rules."""
        buffer = io.BytesIO()
        _RuleRefPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(value)
        return buffer.getvalue()

    def unship(self, data: bytes) -> Any:
        """What `ship` pickled, its rule references resolved to this session's rules."""
        return _RuleRefUnpickler(data, self.ruleset.rules).load()
