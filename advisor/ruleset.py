"""The rules in effect for a run: loaded, replaced, selected, re-severitied and re-parametrized.

What a user asks for (config file, --rules, --select/--ignore, --severity, --set) is checked
here against the rules actually loaded, so a mistyped selector or parameter is an error that
names the option it came from instead of a silently smaller run.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.config import Config
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.outcome import SEVERITIES, Severity
from advisor.engine.rules import Rule, RuleSet, load_rules
from advisor.errors import RuleError
from advisor.lazy import lazy_module
from advisor.model import TableSpec
from advisor.plugin_manager import PluginHost

if TYPE_CHECKING:
    import yaml
else:  # imported when a --set value is parsed
    yaml = lazy_module("yaml")


def parse_overrides(assignments: Iterable[str]) -> dict[str, dict[str, Any]]:
    """`ID.param=VALUE` strings to {ID: {param: value}}; VALUE is a YAML scalar."""
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
            import difflib  # only for a selector that names nothing

            known = sorted({k for r in rules for k in (r.id, r.name, *r.tags)})
            close = difflib.get_close_matches(selector.upper(), [k.upper() for k in known], 3)
            close += difflib.get_close_matches(selector.lower(), known, 3)
            hint = (
                f" (did you mean {', '.join(dict.fromkeys(close))}?)"
                if close
                else " (`advisor rules list` shows ids, names and tags)"
            )
            raise ValueError(f"{what}: {selector!r} matches no rule id, name or tag{hint}")


def select_rules(
    ruleset: RuleSet,
    select: Sequence[str],
    ignore: Sequence[str],
    what: tuple[str, str] = ("--select", "--ignore"),
) -> list[Rule]:
    """The rules --select picks (all when empty) less those --ignore names; a selector that
    matches no rule is a ValueError. `what` names the two options in that error."""
    _check_selectors(ruleset, select, what[0])
    _check_selectors(ruleset, ignore, what[1])
    rules = list(ruleset.rules.values())
    if select:
        rules = [r for r in rules if any(r.matches(s) for s in select)]
    return [r for r in rules if not any(r.matches(s) for s in ignore)]


def select_configured(
    ruleset: RuleSet, config: Config, select: Sequence[str], ignore: Sequence[str]
) -> list[Rule]:
    """select_rules with the caller's selectors, or the config's where the caller gives none;
    errors name where the selector came from."""
    return select_rules(
        ruleset,
        select or config.select,
        ignore or config.ignore,
        (
            "--select" if select else f"{config.label}: select",
            "--ignore" if ignore else f"{config.label}: ignore",
        ),
    )


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
        (r for r in ruleset.rules.values() if folded in (r.id.casefold(), r.name.casefold())), None
    )


def fix_severities(ruleset: RuleSet, severities: Mapping[str, str], what: str) -> None:
    """Give the named rules a fixed severity, as if their YAML said `severity:`."""
    for key, severity in severities.items():
        rule = find_rule(ruleset, key)
        if rule is None:
            raise ValueError(f"{what}: no rule {key!r}")
        ruleset.rules[rule.id] = replace(rule, severity=Severity(severity))


def resolve_overrides(
    ruleset: RuleSet, overrides: Mapping[str, Mapping[str, Any]], what: str = "--set"
) -> dict[str, dict[str, Any]]:
    """Key overrides by rule id (a rule's name is accepted too) and check every param exists."""
    resolved: dict[str, dict[str, Any]] = {}
    for key, params in overrides.items():
        rule = find_rule(ruleset, key)
        if rule is None:
            raise ValueError(f"{what}: no rule {key!r}")
        unknown = sorted(set(params) - set(rule.params))
        if unknown:
            raise ValueError(
                f"{what}: rule {rule.id} has no param {unknown[0]!r} "
                f"(params: {', '.join(rule.params) or 'none'})"
            )
        resolved.setdefault(rule.id, {}).update(
            {name: typed_param(rule, name, value, what) for name, value in params.items()}
        )
    return resolved


def typed_param(rule: Rule, name: str, value: Any, what: str = "--set") -> Any:
    """`value` as the type of the param's default, or a ValueError naming both: a threshold
    set to text would otherwise make the rule fail at run time and its finding vanish."""
    default = rule.params[name]
    if (
        isinstance(value, str)
        and isinstance(default, (int, float))
        and not isinstance(default, bool)
    ):
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
        kind = (
            "true or false"
            if isinstance(default, bool)
            else "a finite number"
            if isinstance(default, (int, float))
            else "text"
        )
        raise ValueError(
            f"{what}: {rule.id}.{name} expects {kind} (default {default!r}), got {value!r}"
        )
    return value


def expression_functions(host: PluginHost) -> dict[str, Callable[..., Any]]:
    """The functions rule expressions may call: the built-in ones and the plugins'."""
    return {**BUILTIN_FUNCTIONS, **host.functions()}


def load_ruleset(
    host: PluginHost, rule_paths: Sequence[Path], tables: Mapping[str, TableSpec] | None = None
) -> tuple[RuleSet, list[RuleError]]:
    """Built-in and plugin-shipped rules first, then the user's; later ids replace earlier.
    `tables` (default: the host's) are those rule expressions may name."""
    shipped = host.rule_paths()
    builtin = {i.name for i in host.infos if i.module.startswith("advisor_plugins.")}
    origins = {p: "built-in" if name in builtin else f"plugin {name}" for name, p in shipped}
    return load_rules(
        [p for _, p in shipped] + list(rule_paths),
        expression_functions(host),
        origins,
        host.tables() if tables is None else tables,
    )


def prepare_rules(
    host: PluginHost,
    config: Config,
    rules: Sequence[str | Path] = (),
    params: Mapping[str, Mapping[str, Any]] | None = None,
    severity: Mapping[str, str] | None = None,
    tables: Mapping[str, TableSpec] | None = None,
) -> tuple[RuleSet, list[RuleError], dict[str, dict[str, Any]]]:
    """The rules in effect and the param overrides to evaluate them with.

    User rules load after the built-in and plugin ones: the config's (ADVISOR_RULES first), then
    `rules`. Params and severities from the config apply first; the caller's (CLI) win.
    """
    ruleset, errors = load_ruleset(host, [*config.rules, *(Path(p) for p in rules)], tables)
    fix_severities(ruleset, config.severity, f"{config.label}: severity")
    fix_severities(ruleset, severity or {}, "--severity")
    overrides = resolve_overrides(ruleset, config.params, f"{config.label}: params")
    for rule_id, values in resolve_overrides(ruleset, params or {}).items():
        overrides.setdefault(rule_id, {}).update(values)
    return ruleset, errors, overrides
