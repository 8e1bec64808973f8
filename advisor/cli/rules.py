"""`advisor rules list|show|new|validate|test`: the rules in effect, one rule's documentation,
a new rule's scaffold, checking rule files and running their test cases."""

from __future__ import annotations

from pathlib import Path

import click

from advisor.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_USAGE,
    Failure,
    debug_option,
    echo,
    error,
    guard,
    severity_option,
    stop_on_user_rule_errors,
)
from advisor.config import discover
from advisor.engine.rules import Rule, RuleSet, load_rules
from advisor.model import TABLES
from advisor.plugin_manager import PluginHost
from advisor.ruleset import (
    expression_functions,
    find_rule,
    load_ruleset,
    parse_overrides,
    parse_severities,
    prepare_rules,
)

rule_paths_option = click.option(
    "--rules",
    "rule_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Also load these rule files or folders.",
)


def source_label(ruleset: RuleSet, rule: Rule) -> str:
    """Who supplies a rule: `built-in`, `plugin NAME`, or `user FILE`."""
    origin = ruleset.origins.get(rule.id, "user")
    return f"user {rule.source}" if origin == "user" else origin


@click.group("rules")
def rules_group() -> None:
    """List, show, validate, test and scaffold rules."""


@rules_group.command("list")
@rule_paths_option
@debug_option
def rules_list(rule_paths: tuple[Path, ...], debug: bool) -> None:
    """List every rule in effect with its id, severity, title and source.

    \b
    Example:
      advisor rules list --rules team_rules/
    """

    def body() -> int:
        ruleset, errors, _ = prepare_rules(PluginHost(), discover(), rule_paths)
        rules = sorted(ruleset.rules.values(), key=lambda r: r.id)
        labels = {r.id: source_label(ruleset, r) for r in rules}
        width = max(map(len, ["SOURCE", *labels.values()]))
        echo(f"{'ID':<10} {'NAME':<32} {'SEVERITY':<10} {'SOURCE':<{width}} TITLE")
        for rule in rules:
            echo(
                f"{rule.id:<10} {rule.name:<32} {rule.severity or 'by impact':<10} "
                f"{labels[rule.id]:<{width}} {rule.title}"
            )
        for note in ruleset.overrides:
            error(f"note: rule {note}")
        for rule_error in errors:
            error(str(rule_error))
        return EXIT_USAGE if errors else EXIT_OK

    guard(debug, body)


@rules_group.command("show")
@click.argument("rule_id")
@rule_paths_option
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="ID.PARAM=VALUE",
    help="Show params in effect with this override, as `run --set` would use them.",
)
@severity_option
@debug_option
def rules_show(
    rule_id: str,
    rule_paths: tuple[Path, ...],
    assignments: tuple[str, ...],
    severities: tuple[str, ...],
    debug: bool,
) -> None:
    """Show a rule's documentation, parameters (default and in effect), expressions and an
    example finding.

    Params in effect include the project config (advisor.yaml or [tool.advisor]) and --set.

    \b
    Example:
      advisor rules show STEP-001
      advisor rules show TEAM-001 --rules team_rules/ --set TEAM-001.max_ratio=0.1
    """

    def body() -> int:
        from advisor.cases import example_finding

        host = PluginHost()
        ruleset, _, overrides = prepare_rules(
            host, discover(), rule_paths, parse_overrides(assignments), parse_severities(severities)
        )
        rule = find_rule(ruleset, rule_id)
        if rule is None:
            raise Failure(f"no rule {rule_id!r} (see `advisor rules list`)", EXIT_USAGE)
        echo(f"{rule.id} {rule.name}: {rule.title}")
        echo(f"type: {rule.group} / {rule.type}" + (f" / {rule.subtype}" if rule.subtype else ""))
        echo(
            f"severity: {rule.severity or 'from impact (>=5% high, >=3% medium)'}"
            + (
                ""
                if rule.severity == rule.raw.get("severity")
                else " (fixed by config or --severity)"
            )
        )
        origin = source_label(ruleset, rule)
        echo(f"source: {origin}" + ("" if origin.startswith("user") else f" ({rule.source})"))
        echo(f"needs: {', '.join(rule.needs())}")
        for name, default in rule.params.items():
            value = overrides.get(rule.id, {}).get(name, default)
            echo(
                f"param {name} = {value!r}"
                + ("" if value == default else f" (default {default!r})")
            )
        for name, expr in rule.let.items():
            echo(f"let {name} = {expr.source}")
        echo(f"when: {rule.when.source}")
        if rule.impact_us:
            echo(f"impact_us: {rule.impact_us.source}")
        example = example_finding(rule, ruleset, host)
        if example:
            echo(f"example finding ({example[0]}):\n  {example[1]}")
        else:
            echo(
                f"message template (no firing case in a .case.yaml beside the rule):\n"
                f"  {rule.message.strip()}"
            )
        echo("")
        echo(rule.docs.strip())
        return EXIT_OK

    guard(debug, body)


@rules_group.command("new")
@click.argument("name")
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Folder to write the files into.",
)
@click.option(
    "--table",
    type=click.Choice(sorted(TABLES)),
    default="device_ops",
    show_default=True,
    help="The table the new rule reads.",
)
@debug_option
def rules_new(name: str, folder: Path, table: str, debug: bool) -> None:
    """Write NAME.yaml, a valid rule with TODOs to edit, and NAME.case.yaml, its test cases.

    The rule gets the first free TEAM-NNN id. Existing files are never overwritten.

    \b
    Example:
      advisor rules new slow-casts --dir team_rules --table device_ops
    """

    def body() -> int:
        from advisor.scaffold import ScaffoldError, new_rule

        try:
            new = new_rule(name, folder, table, rule_paths=discover().rules)
        except ScaffoldError as exc:
            raise Failure(str(exc), EXIT_USAGE) from exc
        echo(
            f"Wrote {new.rule_file} ({new.rule_id}) and {new.case_file}; edit the TODOs, "
            f"then run `advisor rules test {new.case_file} --rules {new.rule_file}`"
        )
        return EXIT_OK

    guard(debug, body)


@rules_group.command("validate")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@debug_option
def rules_validate(paths: tuple[Path, ...], debug: bool) -> None:
    """Check rule files (schema, expressions, templates) without running them.

    \b
    Example:
      advisor rules validate team_rules/ my_rule.yaml
    """

    def body() -> int:
        host = PluginHost()
        ruleset, errors = load_rules(list(paths), expression_functions(host), tables=host.tables())
        for rule_error in errors:
            error(str(rule_error))
        echo(f"{len(ruleset.rules)} valid rule(s), {len(errors)} error(s)")
        return EXIT_USAGE if errors else EXIT_OK

    guard(debug, body)


@rules_group.command("test")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--rules",
    "rule_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Also load these rule files or folders (and test their cases by default).",
)
@debug_option
def rules_test(paths: tuple[Path, ...], rule_paths: tuple[Path, ...], debug: bool) -> None:
    """Run the test cases (*.case.yaml) of rules; exit 1 when a case fails.

    Without PATHS, the cases next to the built-in rules, the plugins' rules and --rules.

    \b
    Example:
      advisor rules test
      advisor rules test team_rules/ --rules team_rules/
    """

    def body() -> int:
        from advisor.cases import run_cases

        host = PluginHost()
        ruleset, errors = load_ruleset(host, list(rule_paths))
        for rule_error in errors:
            error(f"rule file {rule_error}")
        stop_on_user_rule_errors(errors, rule_paths)
        roots = list(paths) or [*(p for _, p in host.rule_paths()), *rule_paths]
        run = run_cases(roots, ruleset, host)
        for result in run.results:
            case = result.case
            status = "PASS" if result.passed else "FAIL"
            detail = f": {'; '.join(result.differences)}" if result.differences else ""
            echo(f"{status} {case.rule_id} {case.name} ({case.source}){detail}")
        for case_error in run.errors:
            error(str(case_error))
        if not run.files:
            raise Failure(
                f"no case files (*.case.yaml) in {', '.join(map(str, roots))}", EXIT_USAGE
            )
        failed = sum(not r.passed for r in run.results)
        echo(
            f"{len(run.results)} case(s) in {run.files} file(s): "
            f"{len(run.results) - failed} passed, {failed} failed, "
            f"{len(run.errors)} invalid"
        )
        return EXIT_USAGE if run.errors else EXIT_FINDINGS if failed else EXIT_OK

    guard(debug, body)
