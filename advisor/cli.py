"""Command line: `advisor run`, `top`, `rules list|show|validate|test|new`, `plugins list`,
`inspect`.

Exit codes: 0 ok; 1 a finding at or above --fail-on; 2 usage error (bad option, bad rule file
given with --rules, output inside the input); 3 an input could not be read; 4 internal error.
No traceback reaches the user unless --debug is given.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import click
import yaml
from click.core import ParameterSource

from advisor import __version__, progress
from advisor.api import (
    AnalysisResult,
    analyze,
    find_rule,
    load_ruleset,
    parse_overrides,
    parse_severities,
    prepare_rules,
)
from advisor.config import discover
from advisor.engine.evaluate import at_least
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.outcome import SEVERITIES
from advisor.engine.rules import LANGUAGES, RULE_SCHEMA, Rule, RuleSet, load_rules
from advisor.errors import AdvisorError
from advisor.model import TABLES
from advisor.outputs import MAX_LABEL as MAX_LABEL  # re-exported: the names' limit
from advisor.outputs import report_names, write_files
from advisor.plugin_manager import PluginHost
from advisor.render.format import terminal_json, terminal_safe

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNREADABLE, EXIT_INTERNAL = 0, 1, 2, 3, 4
FORMATS = ("json", "html", "text")
STDOUT = "-"
"""`-o -`: the JSON report goes to stdout, nothing is written to disk."""
MAX_FAIL_LISTED = 5
"""Findings named when --fail-on trips; the rest are counted."""


class Failure(Exception):
    """Stops a command with a one-line message and an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _out(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print text that may hold strings from a profile, a file name or a rule file: control
    characters (terminal escape sequences) never reach the terminal raw."""
    click.echo(terminal_safe(text), err=err, nl=nl)


def _err(message: str) -> None:
    _out(f"advisor: {message}", err=True)


_report_names = report_names  # the writing lives in advisor.outputs


def _inside(child: Path, parent: Path) -> bool:
    child, parent = child.resolve(), parent.resolve()
    return child == parent or parent in child.parents


def _output_dir(out: str | None, inputs: Sequence[Path]) -> Path:
    """The folder outputs go to (not created yet), refused inside an input. `-o -` is stdout:
    callers handle it before asking for a folder."""
    path = Path(out) if out else Path.cwd() / f"advisor-report-{datetime.now():%Y%m%d-%H%M%S}"
    for src in inputs:
        if src.is_dir() and _inside(path, src):
            raise Failure(f"output folder {path} is inside the input {src}; "
                          "advisor never writes into a profile (choose another -o)", EXIT_USAGE)
    return path


def _formats(value: str) -> list[str]:
    chosen = [f.strip() for f in value.split(",") if f.strip()]
    bad = [f for f in chosen if f not in FORMATS]
    if bad or not chosen:
        raise click.BadParameter(f"choose from {', '.join(FORMATS)} (comma-separated)")
    return chosen


def _write_outputs(result: AnalysisResult, out_dir: Path, formats: list[str],
                   host: PluginHost) -> list[Path]:
    """Render every output before writing any, so a failing renderer leaves the folder as it
    was; each file is then replaced atomically, and the earlier run's outputs this one does
    not rewrite are removed (advisor.outputs). Only text: nothing written, no folder."""
    from advisor.outputs import render_outputs

    return write_files(out_dir, render_outputs(result, formats, host), command="run")


def _exit_code(unreadable: bool, findings: Sequence[Any], fail_on: str | None,
               places: Sequence[str | None] | None = None) -> int:
    """3 when an input could not be read, 1 for a finding at or above --fail-on, else 0.

    When --fail-on trips, one line on stderr names the findings that tripped it (`places`,
    parallel to `findings`, says where each was found, e.g. "rank 0"), so a red CI job says
    why without opening the report."""
    if unreadable:
        return EXIT_UNREADABLE
    if not fail_on:
        return EXIT_OK
    tripped = [(f, places[i] if places else None) for i, f in enumerate(findings)
               if at_least(f.severity, fail_on)]
    if not tripped:
        return EXIT_OK
    tripped.sort(key=lambda fp: SEVERITIES.index(fp[0].severity))  # stable: ranked order kept
    named = [f"{f.rule.id} ({', '.join(x for x in (f.severity, place) if x)})"
             for f, place in tripped[:MAX_FAIL_LISTED]]
    more = len(tripped) - len(named)
    _err(f"--fail-on {fail_on}: {len(tripped)} finding{'' if len(tripped) == 1 else 's'} at "
         f"or above {fail_on}: {', '.join(named)}" + (f" and {more} more" if more else ""))
    return EXIT_FINDINGS


def _place(meta: Any) -> str | None:
    """Where a finding was found, for people: "rank 3", "cluster", "device 1" or a file name."""
    if meta.source_format == "cluster":
        return "cluster"
    if meta.rank is not None:
        return f"rank {meta.rank}"
    if meta.device_id is not None:
        return f"device {meta.device_id}"
    name = Path(str(meta.path)).name
    return "".join(c if c.isprintable() else "?" for c in name) or None


def _guard(debug: bool, func: Any, *args: Any) -> None:
    """Run a command body; turn any error into one line and an exit code."""
    try:
        code = func(*args)
    except Failure as exc:
        _err(str(exc))
        sys.exit(exc.code)
    except (AdvisorError, ValueError) as exc:
        if debug:
            raise
        _err(str(exc))
        sys.exit(EXIT_USAGE)
    except Exception as exc:
        if debug:
            raise
        _err(f"internal error: {type(exc).__name__}: {exc} (run with --debug for details)")
        sys.exit(EXIT_INTERNAL)
    sys.exit(code or EXIT_OK)


def locale_language() -> str:
    """The report language the user's locale asks for: the first of LC_ALL, LC_MESSAGES and
    LANG that is set decides, as for other programs' messages."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


debug_option = click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
fail_on_option = click.option(
    "--fail-on", type=click.Choice(SEVERITIES), default=None,
    help="Exit with 1 when a finding of this severity or higher exists.")
lang_option = click.option(
    "--lang", type=click.Choice(LANGUAGES), default=locale_language,
    show_default="zh when LC_ALL, LC_MESSAGES or LANG starts with zh, else en",
    help="Language of findings and reports.")


def select_options(command: Any) -> Any:
    """--select and --ignore, which pick rules for every command that evaluates them."""
    command = click.option("--ignore", multiple=True,
                           help="Skip rules with this id, name or tag.")(command)
    return click.option("--select", multiple=True,
                        help="Only run rules with this id, name or tag.")(command)


severity_option = click.option(
    "--severity", "severities", multiple=True, metavar="ID=high|medium|low",
    help="Fix a rule's severity (repeatable), e.g. --severity STEP-001=high.")


def _defaulted(param: str) -> bool:
    """True when the running command's option was not given (so a project config may set it)."""
    source = click.get_current_context().get_parameter_source(param)
    return source in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def _source_label(ruleset: RuleSet, rule: Rule) -> str:
    """Who supplies a rule: `built-in`, `plugin NAME`, or `user FILE`."""
    origin = ruleset.origins.get(rule.id, "user")
    return f"user {rule.source}" if origin == "user" else origin


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
def main() -> None:
    """Turn performance profiles into ranked, actionable tuning advice.

    \b
    Example:
      advisor run PROF_000001_20260105100000000_DEMO -o report
    """


@main.command("run")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", "out",
              help="Output folder (default: ./advisor-report-<time>); - writes the JSON "
                   "report to stdout.")
@click.option("--format", "formats", default="json,html,text", show_default=True,
              help="Comma-separated outputs: json, html, text.")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help="Extra rule file or folder (repeatable); same id replaces a built-in rule.")
@select_options
@click.option("--set", "assignments", multiple=True, metavar="ID.PARAM=VALUE",
              help="Override a rule parameter, e.g. --set STEP-001.max_ratio=0.2.")
@severity_option
@fail_on_option
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Processes to read several ranks with (default: automatic).")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Read the ranks on a Dask cluster: its scheduler's address, e.g. "
                   "tcp://10.0.0.1:8786 (needs: pip install 'dl-perf-advisor[dask]').")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors (no progress).")
@lang_option
@debug_option
def run_command(paths: tuple[Path, ...], out: str | None, formats: str,
                rule_paths: tuple[Path, ...], select: tuple[str, ...], ignore: tuple[str, ...],
                assignments: tuple[str, ...], severities: tuple[str, ...], fail_on: str | None,
                jobs: int | None, scheduler: str | None, quiet: bool, lang: str,
                debug: bool) -> None:
    """Analyse profiles and write prof_rule JSON, an HTML report and a summary.

    \b
    Example:
      advisor run PROF_000001 -o out --fail-on high
      advisor run PROF_000001 --set STEP-001.max_ratio=0.2 --ignore OP-003
      advisor run ranks/ --scheduler tcp://10.0.0.1:8786
    """
    _guard(debug, _run, paths, out, _formats(formats), rule_paths, select, ignore,
           assignments, fail_on, jobs, quiet, lang, severities, scheduler)


def _run(paths: Sequence[Path], out: str | None, formats: list[str],
         rule_paths: Sequence[Path], select: Sequence[str], ignore: Sequence[str],
         assignments: Sequence[str], fail_on: str | None, jobs: int | None, quiet: bool,
         lang: str, severities: Sequence[str] = (), scheduler: str | None = None) -> int:
    from advisor.outputs import stdout_document

    config = discover()
    if config.lang and _defaulted("lang"):  # the project's language beats the locale's
        lang = config.lang
    fail_on = fail_on or config.fail_on
    to_stdout = out == STDOUT
    if to_stdout and "html" in formats and not _defaulted("formats"):
        raise Failure("-o - writes the JSON report to stdout; --format html needs a folder "
                      "(-o DIR)", EXIT_USAGE)
    out_dir = None if to_stdout else _output_dir(out, paths)
    progress.set_quiet(quiet)
    host = PluginHost()
    result = analyze(*paths, rules=rule_paths, select=select, ignore=ignore,
                     params=parse_overrides(assignments), host=host, jobs=jobs, lang=lang,
                     severity=parse_severities(severities), config=config,
                     scheduler=scheduler)
    for info in host.failed():  # failed at import, validation or in a hook
        _err(f"plugin {info.describe()}")
    for problem in dict.fromkeys(result.plugin_problems):
        _err(problem)
    for error in result.rule_errors:
        _err(f"rule file {error}")
    if not quiet:
        for note in result.rule_overrides:
            _err(f"note: rule {note}")
    user_paths = [*config.rules, *rule_paths]
    if any(_inside(Path(e.source), p) for e in result.rule_errors for p in user_paths):
        raise Failure("fix the rule files above (check them with `advisor rules validate`)",
                      EXIT_USAGE)
    for error in result.input_errors:
        _err(str(error))
    if not result.analyses:
        raise Failure("no profile could be read", EXIT_UNREADABLE)
    written = [] if out_dir is None else _write_outputs(result, out_dir, formats, host)
    names = [p.name for p in written]
    if not quiet:
        if "text" in formats:  # beside JSON on stdout, the summary goes to stderr
            details = _details(names, report_names(result))
            _echo_summary(result.reports, details, err=to_stdout)
        for warning in (w for a in result.analyses for w in a.profile.warnings):
            _err(f"warning: {warning}")
        if written:
            _echo_written(names, out_dir, lang)
    if to_stdout:
        click.echo(terminal_json(stdout_document(result), indent=2))
    places = [_place(a.profile.meta) for a in result.analyses for _ in a.findings]
    return _exit_code(bool(result.input_errors), result.findings, fail_on, places)


def _details(names: Sequence[str], json_names: Sequence[str],
             html: str = "report.html") -> list[str | None]:
    """Per report, the written file its details are in: the HTML report, else its JSON;
    None when neither was written (the summary then points at nothing)."""
    return [html if html in names else name if name in names else None
            for name in json_names]


def _echo_summary(reports: list[dict], details: list[str | None], err: bool = False,
                  before: Sequence[str] = ()) -> None:
    """The terminal summary (after the lines `before`), wrapped to the terminal's width,
    coloured on a terminal unless NO_COLOR is set."""
    from advisor.render.text import color_enabled, render_text, terminal_width

    color = color_enabled(sys.stderr if err else sys.stdout)
    text = render_text(reports, width=terminal_width(), color=color, details=details)
    click.echo("".join(f"{terminal_safe(line)}\n" for line in before) + text, err=err,
               color=color)


def _echo_written(names: Sequence[str], out_dir: Path, lang: str) -> None:
    """The closing line: "Wrote report.html, prof_rule_0.json in DIR"."""
    from advisor.render.text import terminal_width, written_line

    _out(written_line(names, str(out_dir), width=terminal_width(), lang=lang))


@main.group("rules")
def rules_group() -> None:
    """List, show, validate, test and scaffold rules."""


@rules_group.command("list")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help="Also load these rule files or folders.")
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
        labels = {r.id: _source_label(ruleset, r) for r in rules}
        width = max(map(len, ["SOURCE", *labels.values()]))
        _out(f"{'ID':<10} {'NAME':<32} {'SEVERITY':<10} {'SOURCE':<{width}} TITLE")
        for rule in rules:
            _out(f"{rule.id:<10} {rule.name:<32} {rule.severity or 'by impact':<10} "
                 f"{labels[rule.id]:<{width}} {rule.title}")
        for note in ruleset.overrides:
            _err(f"note: rule {note}")
        for error in errors:
            _err(str(error))
        return EXIT_USAGE if errors else EXIT_OK
    _guard(debug, body)


@rules_group.command("show")
@click.argument("rule_id")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help="Also load these rule files or folders.")
@click.option("--set", "assignments", multiple=True, metavar="ID.PARAM=VALUE",
              help="Show params in effect with this override, as `run --set` would use them.")
@severity_option
@debug_option
def rules_show(rule_id: str, rule_paths: tuple[Path, ...], assignments: tuple[str, ...],
               severities: tuple[str, ...], debug: bool) -> None:
    """Show a rule's documentation, parameters (default and in effect), expressions and an
    example finding.

    Params in effect include the project config (advisor.yaml or [tool.advisor]) and --set.

    \b
    Example:
      advisor rules show STEP-001
      advisor rules show TEAM-001 --rules team_rules/ --set TEAM-001.max_ratio=0.1
    """
    def body() -> int:
        host = PluginHost()
        ruleset, _, overrides = prepare_rules(host, discover(), rule_paths,
                                              parse_overrides(assignments),
                                              parse_severities(severities))
        rule = find_rule(ruleset, rule_id)
        if rule is None:
            raise Failure(f"no rule {rule_id!r} (see `advisor rules list`)", EXIT_USAGE)
        _out(f"{rule.id} {rule.name}: {rule.title}")
        _out(f"type: {rule.group} / {rule.type}" + (f" / {rule.subtype}"
                                                    if rule.subtype else ""))
        _out(f"severity: {rule.severity or 'from impact (>=5% high, >=3% medium)'}"
             + ("" if rule.severity == rule.raw.get("severity")
                else " (fixed by config or --severity)"))
        origin = _source_label(ruleset, rule)
        _out(f"source: {origin}" + ("" if origin.startswith("user") else
                                    f" ({rule.source})"))
        _out(f"needs: {', '.join(rule.needs())}")
        for name, default in rule.params.items():
            value = overrides.get(rule.id, {}).get(name, default)
            _out(f"param {name} = {value!r}"
                 + ("" if value == default else f" (default {default!r})"))
        for name, expr in rule.let.items():
            _out(f"let {name} = {expr.source}")
        _out(f"when: {rule.when.source}")
        if rule.impact_us:
            _out(f"impact_us: {rule.impact_us.source}")
        from advisor.engine.cases import example_finding

        example = example_finding(rule, ruleset, host)
        if example:
            _out(f"example finding ({example[0]}):\n  {example[1]}")
        else:
            _out(f"message template (no firing case in a .case.yaml beside the rule):\n"
                 f"  {rule.message.strip()}")
        _out("")
        _out(rule.docs.strip())
        return EXIT_OK
    _guard(debug, body)


def _example_rows(table: str, count: int) -> list[dict[str, Any]]:
    """`count` rows holding a value for every required column of `table`, for a new case."""
    def value(dtype: str, column: str, i: int) -> Any:
        if dtype == "string":
            return f"{column}-{i}"
        if dtype == "bool":
            return True
        return float(10 * (i + 1)) if dtype == "float64" else i

    return [{c.name: value(c.dtype, c.name, i) for c in TABLES[table].columns if c.required}
            for i in range(count)]


def _scaffold(name: str, rule_id: str, table: str, rule_file: Path, case_file: Path
              ) -> tuple[str, str]:
    """The text of a new rule (valid as written, TODOs to edit) and of its test cases."""
    rule = f"""\
# {name}: scaffolded by `advisor rules new`. Edit every TODO, then check and test it:
#   advisor rules validate {rule_file}
#   advisor rules test {case_file} --rules {rule_file}
# Keys and expressions: docs/rule-authoring.md; tables and columns: docs/tables.md.
id: {rule_id}                   # TODO: your team's prefix and number (change the case file too)
name: {name}
title: "TODO: one line saying what {name} found"
group: Model Summary            # or Op Summary, Op Parallel, Data Pipeline, Communication, Tuning
type: Computation               # TODO: prof_rule's "Rule Type"
tags: [team]
params:
  min_rows: 2                   # TODO: thresholds; override with --set {rule_id}.min_rows=5
let:
  row_count: rows({table})      # TODO: what to measure in {table}
when: row_count >= min_rows     # TODO: when the rule fires
# impact_us: ...                # TODO: µs at stake; ranks the finding and derives its severity
message: >-
  TODO: {{{{ row_count|num }}}} rows in {table} (limit {{{{ min_rows|num }}}}).
suggestions:
  - "TODO: what to do about it."
docs: |
  TODO: what it checks, why it matters, when it fires (params and their defaults) and where
  the thresholds come from.
"""
    cases = yaml.safe_dump({"rule": rule_id, "cases": [
        {"name": "fires on three rows", "tables": {table: _example_rows(table, 3)},
         "expect": {"fires": True, "values": {"row_count": 3}}},
        {"name": "silent on one row", "tables": {table: _example_rows(table, 1)},
         "expect": {"fires": False}},
    ]}, sort_keys=False, default_flow_style=None, allow_unicode=True)
    header = (f"# Test cases of {rule_id} ({rule_file.name}). TODO: rows that make the rule fire "
              f"and rows that must not.\n#   advisor rules test {case_file} --rules {rule_file}\n")
    return rule, header + cases


@rules_group.command("new")
@click.argument("name")
@click.option("--dir", "folder", type=click.Path(file_okay=False, path_type=Path),
              default=Path("."), show_default=True, help="Folder to write the files into.")
@click.option("--table", type=click.Choice(sorted(TABLES)), default="device_ops",
              show_default=True, help="The table the new rule reads.")
@debug_option
def rules_new(name: str, folder: Path, table: str, debug: bool) -> None:
    """Write NAME.yaml, a valid rule with TODOs to edit, and NAME.case.yaml, its test cases.

    The rule gets the first free TEAM-NNN id. Existing files are never overwritten.

    \b
    Example:
      advisor rules new slow-casts --dir team_rules --table device_ops
    """
    def body() -> int:
        if not re.fullmatch(RULE_SCHEMA["properties"]["name"]["pattern"], name):
            raise Failure(f"rule name {name!r}: use 3-64 lower-case letters, digits and '-', "
                          "starting with a letter (e.g. slow-casts)", EXIT_USAGE)
        rule_file, case_file = folder / f"{name}.yaml", folder / f"{name}.case.yaml"
        for path in (rule_file, case_file):
            if path.exists():
                raise Failure(f"{path}: already exists; not overwritten", EXIT_USAGE)
        ruleset, _ = load_ruleset(PluginHost(), [*discover().rules,
                                                 *([folder] if folder.is_dir() else [])])
        rule_id = next(i for i in (f"TEAM-{n:03d}" for n in range(1, 1000))
                       if i not in ruleset.rules)
        rule_text, case_text = _scaffold(name, rule_id, table, rule_file, case_file)
        folder.mkdir(parents=True, exist_ok=True)
        for path, text in ((rule_file, rule_text), (case_file, case_text)):
            with path.open("x", encoding="utf-8") as handle:
                handle.write(text)
        _out(f"Wrote {rule_file} ({rule_id}) and {case_file}; edit the TODOs, then run "
             f"`advisor rules test {case_file} --rules {rule_file}`")
        return EXIT_OK
    _guard(debug, body)


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
        functions = {**BUILTIN_FUNCTIONS, **PluginHost().functions()}
        ruleset, errors = load_rules(list(paths), functions)
        for error in errors:
            _err(str(error))
        _out(f"{len(ruleset.rules)} valid rule(s), {len(errors)} error(s)")
        return EXIT_USAGE if errors else EXIT_OK
    _guard(debug, body)


@rules_group.command("test")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help="Also load these rule files or folders (and test their cases by default).")
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
        from advisor.engine.cases import run_cases

        host = PluginHost()
        ruleset, errors = load_ruleset(host, list(rule_paths))
        for error in errors:
            _err(f"rule file {error}")
        if any(_inside(Path(e.source), p) for e in errors for p in rule_paths):
            raise Failure("fix the rule files above (check them with `advisor rules validate`)",
                          EXIT_USAGE)
        roots = list(paths) or [*(p for _, p in host.rule_paths()), *rule_paths]
        run = run_cases(roots, ruleset, host)
        for result in run.results:
            case = result.case
            status = "PASS" if result.passed else "FAIL"
            detail = f": {'; '.join(result.differences)}" if result.differences else ""
            _out(f"{status} {case.rule_id} {case.name} ({case.source}){detail}")
        for error in run.errors:
            _err(str(error))
        if not run.files:
            raise Failure(f"no case files (*.case.yaml) in {', '.join(map(str, roots))}",
                          EXIT_USAGE)
        failed = sum(not r.passed for r in run.results)
        _out(f"{len(run.results)} case(s) in {run.files} file(s): "
             f"{len(run.results) - failed} passed, {failed} failed, "
             f"{len(run.errors)} invalid")
        return EXIT_USAGE if run.errors else EXIT_FINDINGS if failed else EXIT_OK
    _guard(debug, body)


@main.group("plugins")
def plugins_group() -> None:
    """Inspect installed plugins."""


@plugins_group.command("list")
@debug_option
def plugins_list(debug: bool) -> None:
    """Show loaded, blocked and failed plugins with distribution and version.

    \b
    Example:
      ADVISOR_BLOCK_PLUGINS=msprof advisor plugins list
    """
    def body() -> int:
        host = PluginHost()
        readers = host.readers()
        for info in host.infos:
            _out(info.describe())
            for plugin, reader in readers:
                if plugin == info.name:
                    _out(f"    reader {reader.name}: {', '.join(reader.formats)}")
        return EXIT_OK
    _guard(debug, body)


@main.command("inspect")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@debug_option
def inspect_command(paths: tuple[Path, ...], debug: bool) -> None:
    """Show what was detected in PATHS and which tables and rows were read.

    \b
    Example:
      advisor inspect PROF_000001
    """
    def body() -> int:
        from advisor.api import AnalysisResult as Result
        from advisor.api import read_inputs

        result = Result()
        profiles = read_inputs(list(paths), PluginHost(), result)
        for profile in profiles:
            meta = profile.meta
            _out(f"{profile.label}: {meta.source_format} ({meta.framework}, "
                 f"{meta.device_kind}) at {meta.path}")
            for name, df in profile.tables.items():
                _out(f"    {name:<13} {len(df):>9} rows  {', '.join(df.columns)}")
            _out(f"    files read: {len(meta.files_read)}")
            for warning in profile.warnings:
                _out(f"    warning: {warning}")
        for problem in result.plugin_problems:
            _err(problem)
        for error in result.input_errors:
            _err(str(error))
        if result.input_errors or not profiles:
            return EXIT_UNREADABLE
        return EXIT_OK
    _guard(debug, body)



@main.command("top")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-k", "--top", "top_k", type=click.IntRange(min=0), default=10, show_default=True,
              help="Rows to show (0: all).")
@click.option("--aggregate", type=click.Choice(["sum", "mean", "max", "min"]), default=None,
              help="Group operators by op_type; time_us becomes this aggregate of their times.")
@click.option("--order-by", default="time_us", show_default=True,
              help="Output column to sort by (time_us, total_us, count, gflops, gbps, ...).")
@click.option("--ascending", is_flag=True, help="Sort ascending (default: descending).")
@click.option("--min-time", type=float, default=None,
              help="Only operators taking at least this many µs (each execution).")
@click.option("--max-time", type=float, default=None,
              help="Only operators taking at most this many µs (each execution).")
@click.option("--type", "types", multiple=True,
              help="Only op types matching this regular expression (searched anywhere, so a "
                   "plain word is a substring match; repeatable).")
@click.option("--name", default=None,
              help="Only operators whose name matches this regular expression (searched "
                   "anywhere).")
@click.option("--format", "fmt", type=click.Choice(["text", "csv", "json"]), default="text",
              show_default=True, help="Output format.")
@debug_option
def top_command(paths: tuple[Path, ...], top_k: int, aggregate: str | None, order_by: str,
                ascending: bool, min_time: float | None, max_time: float | None,
                types: tuple[str, ...], name: str | None, fmt: str, debug: bool) -> None:
    """Rank the slowest operators of any profile advisor reads.

    Uses device_ops (one row per execution) or, when a profile has none, op_stats. GFLOPS
    and GB/s appear where the profile knows operators' FLO and bytes (MegEngine static graph).

    \b
    Example:
      advisor top profiling.json -k 5
      advisor top PROF_000001 --aggregate sum --order-by total_us
      advisor top trace.pt.trace.json.gz --type 'gemm|conv' --min-time 100 --format csv
    """
    from advisor.top import TopOptions

    opts = TopOptions(top=top_k, aggregate=aggregate, order_by=order_by, ascending=ascending,
                      min_time_us=min_time, max_time_us=max_time, types=types, name=name)
    _guard(debug, _top, paths, opts, fmt)


def _top(paths: Sequence[Path], opts: Any, fmt: str) -> int:
    from advisor.api import read_inputs
    from advisor.top import TopError, format_table, operator_rows, rank_operators

    result = AnalysisResult()
    profiles = read_inputs(list(paths), PluginHost(), result)
    for error in result.input_errors:
        _err(str(error))
    if not profiles:
        raise Failure("no profile could be read", EXIT_UNREADABLE)
    ranked, problems = [], []
    for profile in profiles:
        for warning in profile.warnings:
            _err(f"warning: {warning}")
        try:
            ranked.append((profile, operator_rows(profile)[1], rank_operators(profile, opts)))
        except TopError as exc:
            if "no operator times" not in str(exc):
                raise  # a bad option: the same for every profile
            problems.append(str(exc))
    if not ranked:
        raise Failure(problems[0], EXIT_USAGE)
    for problem in problems:
        _err(problem)
    if fmt == "json":
        click.echo(terminal_json({"profiles": [
            {"profile": p.label, "path": p.meta.path, "source_table": table,
             "rows": json.loads(frame.to_json(orient="records"))}
            for p, table, frame in ranked]}, indent=2))
    elif fmt == "csv":
        import pandas as pd

        frames = [frame.assign(profile=p.label)[["profile", *frame.columns]]
                  for p, _, frame in ranked]
        _out(pd.concat(frames, ignore_index=True).to_csv(index=False), nl=False)
    else:
        for profile, table, frame in ranked:
            _out(f"{profile.label} ({profile.meta.source_format}, {table}, "
                 f"{profile.meta.path}): {len(frame)} row(s)")
            _out(format_table(frame))
            _out("")
    return EXIT_OK


COMPARE_FORMATS = ("json", "html", "xlsx", "text")


def _op_name_map(value: str | None) -> dict[str, str]:
    """--op-name-map: a JSON/YAML object given inline or as a file, names to names."""
    import yaml

    if not value:
        return {}
    path = Path(value)
    try:
        text = path.read_text(encoding="utf-8") if path.is_file() else value
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}") from exc
    try:
        mapping = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise click.BadParameter(f"not a JSON/YAML mapping: {exc}".splitlines()[0]) from exc
    if not isinstance(mapping, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()):
        raise click.BadParameter(
            "expects a mapping of operator names to operator names, e.g. "
            "'{\"Optimizer.step#SGD.step\": \"Optimizer.step#NpuFusedSGD.step\"}'")
    return mapping


@main.command("compare")
@click.argument("baseline", type=click.Path(path_type=Path))
@click.argument("comparison", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", help="Output folder (default: ./advisor-compare-<time>).")
@click.option("--format", "formats", default="json,html,xlsx,text", show_default=True,
              help="Comma-separated outputs: json, html, xlsx, text.")
@click.option("--use-input-shape", is_flag=True,
              help="Match operators by name and input shapes (default: by name).")
@click.option("--op-name-map", default=None, metavar="MAPPING|FILE",
              help="Equivalent operator names of the two runs, as a JSON/YAML object or a file "
                   "holding one, e.g. '{\"Optimizer.step#SGD.step\": "
                   "\"Optimizer.step#NpuFusedSGD.step\"}'.")
@click.option("--max-kernel-num", type=click.IntRange(min=4), default=None,
              help="Compare the children of an operator that launches more kernels than this "
                   "(at least 4; default: top-level operators only).")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help="Extra rule file or folder (repeatable).")
@select_options
@click.option("--set", "assignments", multiple=True, metavar="ID.PARAM=VALUE",
              help="Override a rule parameter, e.g. --set CMP-002.min_op_growth=0.2.")
@severity_option
@fail_on_option
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@lang_option
@debug_option
def compare_command(baseline: Path, comparison: Path, out: str | None, formats: str,
                    use_input_shape: bool, op_name_map: str | None,
                    max_kernel_num: int | None, rule_paths: tuple[Path, ...],
                    select: tuple[str, ...], ignore: tuple[str, ...],
                    assignments: tuple[str, ...], severities: tuple[str, ...],
                    fail_on: str | None, quiet: bool, lang: str, debug: bool) -> None:
    """Compare two runs: what got slower in COMPARISON against BASELINE, and where.

    Each side is one profile (one rank's or device's file or folder) of any format advisor
    reads: GPU (Kineto) against NPU (Ascend PyTorch, MindSpore), or NPU against NPU. Writes
    compare.json, prof_rule_compare.json, compare.html and performance_comparison_result.xlsx.

    \b
    Example:
      advisor compare gpu.pt.trace.json.gz rank0_ascend_pt -o cmp
      advisor compare old_run new_run --use-input-shape --max-kernel-num 10
    """
    from advisor.compare import CompareOptions

    chosen = [f.strip() for f in formats.split(",") if f.strip()]
    if not chosen or any(f not in COMPARE_FORMATS for f in chosen):
        raise click.BadParameter(f"choose from {', '.join(COMPARE_FORMATS)} (comma-separated)",
                                 param_hint="--format")
    options = CompareOptions(use_input_shape=use_input_shape,
                             op_name_map=_op_name_map(op_name_map),
                             max_kernel_num=max_kernel_num)
    _guard(debug, _compare, baseline, comparison, out, chosen, options, rule_paths, select,
           ignore, assignments, severities, fail_on, quiet, lang)


def _compare(baseline: Path, comparison: Path, out: str | None, formats: list[str],
             options: Any, rule_paths: Sequence[Path], select: Sequence[str],
             ignore: Sequence[str], assignments: Sequence[str], severities: Sequence[str],
             fail_on: str | None, quiet: bool, lang: str) -> int:
    from advisor.compare import CompareError, compare
    from advisor.render.compare_html import LABELS as COMPARE_LABELS
    from advisor.render.compare_html import render_compare_html
    from advisor.render.compare_outputs import compare_document, overall_lines, spreadsheet

    config = discover()
    if config.lang and _defaulted("lang"):
        lang = config.lang
    fail_on = fail_on or config.fail_on
    to_stdout = out == STDOUT
    if to_stdout and {"html", "xlsx"} & set(formats) and not _defaulted("formats"):
        raise Failure("-o - writes the JSON to stdout; --format html and xlsx need a folder "
                      "(-o DIR)", EXIT_USAGE)
    out_dir = None if to_stdout else _output_dir(
        out or f"advisor-compare-{datetime.now():%Y%m%d-%H%M%S}", [baseline, comparison])
    try:
        result = compare(baseline, comparison, options=options, rules=rule_paths,
                         select=select, ignore=ignore, params=parse_overrides(assignments),
                         lang=lang, severity=parse_severities(severities), config=config)
    except CompareError as exc:
        raise Failure(str(exc), EXIT_UNREADABLE) from exc
    for problem in dict.fromkeys(result.plugin_problems):
        _err(problem)
    for error in result.rule_errors:
        _err(f"rule file {error}")
    for error in result.input_errors:
        _err(str(error))
    document = compare_document(result.tables, result.report["profile"],
                                result.report["advisor"])
    outputs: dict[str, str | bytes] = {}
    if out_dir is not None:  # every output rendered before any is written
        if "json" in formats:
            outputs["compare.json"] = json.dumps(document, indent=2, ensure_ascii=False)
            outputs["prof_rule_compare.json"] = json.dumps(result.report, indent=2,
                                                           ensure_ascii=False)
        if "html" in formats:
            outputs["compare.html"] = render_compare_html(result.report, document)
        if "xlsx" in formats:
            outputs["performance_comparison_result.xlsx"] = spreadsheet(result.tables)
    written = [] if out_dir is None else write_files(out_dir, outputs, command="compare")
    names = [p.name for p in written]
    if not quiet:
        if "text" in formats:
            labels = {**COMPARE_LABELS["en"], **COMPARE_LABELS.get(lang, {})}
            overall = overall_lines(result.tables["compare_overall"], labels)
            details = _details(names, ["prof_rule_compare.json"], html="compare.html")
            _echo_summary([result.report], details, err=to_stdout, before=[*overall, ""])
        for warning in result.profile.warnings:
            _err(f"warning: {warning}")
        if written:
            _echo_written(names, out_dir, lang)
    if to_stdout:  # both compare.json and prof_rule_compare.json, as one document
        click.echo(terminal_json({"compare": document, "report": result.report}, indent=2))
    return _exit_code(bool(result.input_errors), result.findings, fail_on)
