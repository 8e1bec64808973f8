"""Command line: `advisor run`, `top`, `rules list|show|validate`, `plugins list`, `inspect`.

Exit codes: 0 ok; 1 a finding at or above --fail-on; 2 usage error (bad option, bad rule file
given with --rules, output inside the input); 3 an input could not be read; 4 internal error.
No traceback reaches the user unless --debug is given.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import click

from advisor import __version__, progress
from advisor.api import AnalysisResult, analyze, load_ruleset, parse_overrides
from advisor.engine.evaluate import SEVERITIES, at_least
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rules
from advisor.errors import AdvisorError
from advisor.plugin_manager import PluginHost

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_UNREADABLE, EXIT_INTERNAL = 0, 1, 2, 3, 4
FORMATS = ("json", "html", "text")


class Failure(Exception):
    """Stops a command with a one-line message and an exit code."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


def _err(message: str) -> None:
    click.echo(f"advisor: {message}", err=True)


def _write_atomic(path: Path, text: str) -> None:
    """Write via a temp file and rename, so an interrupted run leaves no half-written report."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _inside(child: Path, parent: Path) -> bool:
    child, parent = child.resolve(), parent.resolve()
    return child == parent or parent in child.parents


def _output_dir(out: str | None, inputs: Sequence[Path]) -> Path:
    path = Path(out) if out else Path.cwd() / f"advisor-report-{datetime.now():%Y%m%d-%H%M%S}"
    for src in inputs:
        if src.is_dir() and _inside(path, src):
            raise Failure(f"output folder {path} is inside the input {src}; "
                          "advisor never writes into a profile (choose another -o)", EXIT_USAGE)
    return path


def _safe_label(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("._") or "profile"


def _report_names(result: AnalysisResult) -> list[str]:
    """prof_rule_{device}.json like msprof, made unique when several inputs share devices."""
    names: list[str] = []
    for analysis in result.analyses:
        meta = analysis.profile.meta
        key = meta.device_id if meta.device_id is not None else (
            str(meta.rank) if meta.rank is not None else
            "cluster" if meta.source_format == "cluster" else _stem(Path(meta.path)))
        name = f"prof_rule_{_safe_label(key)}.json"
        n = 2
        while name in names:
            name = f"prof_rule_{_safe_label(key)}_{n}.json"
            n += 1
        names.append(name)
    return names


def _stem(path: Path) -> str:
    """A file's name without its profile extensions (`x.pt.trace.json.gz` -> `x`); a folder's
    name as it is."""
    name = path.name
    if path.is_dir():
        return name
    for suffix in (".gz", ".json", ".trace", ".pt", ".chrome_timeline", ".csv", ".txt"):
        name = name.removesuffix(suffix)
    return name or path.name


def _formats(value: str) -> list[str]:
    chosen = [f.strip() for f in value.split(",") if f.strip()]
    bad = [f for f in chosen if f not in FORMATS]
    if bad or not chosen:
        raise click.BadParameter(f"choose from {', '.join(FORMATS)} (comma-separated)")
    return chosen


def _write_outputs(result: AnalysisResult, out_dir: Path, formats: list[str],
                   host: PluginHost) -> list[Path]:
    from advisor.render.html import render_html

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    if "json" in formats:
        for name, report in zip(_report_names(result), result.reports, strict=True):
            _write_atomic(out_dir / name, json.dumps(report, indent=2, ensure_ascii=False))
            written.append(out_dir / name)
    if "html" in formats:
        sections = [s for a in result.analyses for s in host.report_sections(a)]
        _write_atomic(out_dir / "report.html", render_html(result.reports, sections=sections))
        written.append(out_dir / "report.html")
    ops = result.tune_ops()
    if ops:
        # The file AOE accepts as --tune_ops_file.
        _write_atomic(out_dir / "operator_tuning_file.cfg",
                      json.dumps({"tune_ops_name": ops}, indent=2, ensure_ascii=False))
        written.append(out_dir / "operator_tuning_file.cfg")
    return written


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


debug_option = click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")


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
@click.option("-o", "--output", "out", help="Output folder (default: ./advisor-report-<time>).")
@click.option("--format", "formats", default="json,html,text", show_default=True,
              help="Comma-separated outputs: json, html, text.")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help="Extra rule file or folder (repeatable); same id replaces a built-in rule.")
@click.option("--select", multiple=True, help="Only run rules with this id, name or tag.")
@click.option("--ignore", multiple=True, help="Skip rules with this id, name or tag.")
@click.option("--set", "assignments", multiple=True, metavar="ID.PARAM=VALUE",
              help="Override a rule parameter, e.g. --set STEP-001.max_ratio=0.2.")
@click.option("--fail-on", type=click.Choice(SEVERITIES), default=None,
              help="Exit with 1 when a finding of this severity or higher exists.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Processes to read several ranks with (default: automatic).")
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors (no progress).")
@debug_option
def run_command(paths: tuple[Path, ...], out: str | None, formats: str,
                rule_paths: tuple[Path, ...], select: tuple[str, ...], ignore: tuple[str, ...],
                assignments: tuple[str, ...], fail_on: str | None, jobs: int | None,
                quiet: bool, debug: bool) -> None:
    """Analyse profiles and write prof_rule JSON, an HTML report and a summary.

    \b
    Example:
      advisor run PROF_000001 -o out --fail-on high
      advisor run PROF_000001 --set STEP-001.max_ratio=0.2 --ignore OP-003
    """
    _guard(debug, _run, paths, out, _formats(formats), rule_paths, select, ignore,
           assignments, fail_on, jobs, quiet)


def _run(paths: Sequence[Path], out: str | None, formats: list[str],
         rule_paths: Sequence[Path], select: Sequence[str], ignore: Sequence[str],
         assignments: Sequence[str], fail_on: str | None, jobs: int | None, quiet: bool) -> int:
    from advisor.render.text import render_text

    out_dir = _output_dir(out, paths)
    progress.set_quiet(quiet)
    host = PluginHost()
    result = analyze(*paths, rules=rule_paths, select=select, ignore=ignore,
                     params=parse_overrides(assignments), host=host, jobs=jobs)
    for info in host.failed():  # failed at import, validation or in a hook
        _err(f"plugin {info.describe()}")
    for problem in dict.fromkeys(result.plugin_problems):
        _err(problem)
    for error in result.rule_errors:
        _err(f"rule file {error}")
    if not quiet:
        for note in result.rule_overrides:
            _err(f"note: rule {note}")
    if any(_inside(Path(e.source), p) for e in result.rule_errors for p in rule_paths):
        raise Failure("fix the rule files above (check them with `advisor rules validate`)",
                      EXIT_USAGE)
    for error in result.input_errors:
        _err(str(error))
    if not result.analyses:
        raise Failure("no profile could be read", EXIT_UNREADABLE)
    written = _write_outputs(result, out_dir, formats, host)
    if not quiet:
        if "text" in formats:
            click.echo(render_text(result.reports, color=sys.stdout.isatty()))
        for warning in (w for a in result.analyses for w in a.profile.warnings):
            _err(f"warning: {warning}")
        if written:
            click.echo(f"Wrote {', '.join(str(p) for p in written)}")
    if result.input_errors:
        return EXIT_UNREADABLE
    if fail_on and any(at_least(f.severity, fail_on) for f in result.findings):
        return EXIT_FINDINGS
    return EXIT_OK


@main.group("rules")
def rules_group() -> None:
    """List, show and validate rules."""


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
        ruleset, errors = load_ruleset(PluginHost(), list(rule_paths))
        for rule in sorted(ruleset.rules.values(), key=lambda r: r.id):
            click.echo(f"{rule.id:<10} {rule.name:<32} {rule.severity or 'by impact':<10} "
                       f"{rule.title}  [{rule.source}]")
        for error in errors:
            _err(str(error))
        return EXIT_USAGE if errors else EXIT_OK
    _guard(debug, body)


@rules_group.command("show")
@click.argument("rule_id")
@click.option("--rules", "rule_paths", multiple=True, type=click.Path(path_type=Path),
              help="Also load these rule files or folders.")
@debug_option
def rules_show(rule_id: str, rule_paths: tuple[Path, ...], debug: bool) -> None:
    """Show a rule's documentation, parameters and expressions.

    \b
    Example:
      advisor rules show STEP-001
    """
    def body() -> int:
        ruleset, _ = load_ruleset(PluginHost(), list(rule_paths))
        rule = next((r for r in ruleset.rules.values() if rule_id in (r.id, r.name)), None)
        if rule is None:
            raise Failure(f"no rule {rule_id!r} (see `advisor rules list`)", EXIT_USAGE)
        click.echo(f"{rule.id} {rule.name}: {rule.title}")
        click.echo(f"type: {rule.group} / {rule.type}" + (f" / {rule.subtype}"
                                                          if rule.subtype else ""))
        click.echo(f"severity: {rule.severity or 'from impact (>=5% high, >=3% medium)'}")
        click.echo(f"source: {rule.source}")
        click.echo(f"needs: {', '.join(rule.needs())}")
        for name, value in rule.params.items():
            click.echo(f"param {name} = {value!r}")
        for name, expr in rule.let.items():
            click.echo(f"let {name} = {expr.source}")
        click.echo(f"when: {rule.when.source}")
        if rule.impact_us:
            click.echo(f"impact_us: {rule.impact_us.source}")
        click.echo("")
        click.echo(rule.docs.strip())
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
        click.echo(f"{len(ruleset.rules)} valid rule(s), {len(errors)} error(s)")
        return EXIT_USAGE if errors else EXIT_OK
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
            click.echo(info.describe())
            for plugin, reader in readers:
                if plugin == info.name:
                    click.echo(f"    reader {reader.name}: {', '.join(reader.formats)}")
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
            click.echo(f"{profile.label}: {meta.source_format} ({meta.framework}, "
                       f"{meta.device_kind}) at {meta.path}")
            for name, df in profile.tables.items():
                click.echo(f"    {name:<13} {len(df):>9} rows  {', '.join(df.columns)}")
            click.echo(f"    files read: {len(meta.files_read)}")
            for warning in profile.warnings:
                click.echo(f"    warning: {warning}")
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
        click.echo(json.dumps({"profiles": [
            {"profile": p.label, "path": p.meta.path, "source_table": table,
             "rows": json.loads(frame.to_json(orient="records"))}
            for p, table, frame in ranked]}, indent=2, ensure_ascii=False))
    elif fmt == "csv":
        import pandas as pd

        frames = [frame.assign(profile=p.label)[["profile", *frame.columns]]
                  for p, _, frame in ranked]
        click.echo(pd.concat(frames, ignore_index=True).to_csv(index=False), nl=False)
    else:
        for profile, table, frame in ranked:
            click.echo(f"{profile.label} ({profile.meta.source_format}, {table}, "
                       f"{profile.meta.path}): {len(frame)} row(s)")
            click.echo(format_table(frame))
            click.echo("")
    return EXIT_OK
