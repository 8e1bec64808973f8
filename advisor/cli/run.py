"""`advisor run`: analyse profiles, write the reports, print the summary."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click

from advisor import progress
from advisor.api import analyze
from advisor.cli.common import (
    EXIT_UNREADABLE,
    Failure,
    debug_option,
    error,
    guard,
    severity_option,
    stop_on_user_rule_errors,
)
from advisor.cli.reporting import (
    ReportOptions,
    RuleOptions,
    complete_formats,
    detail_files,
    echo_closing,
    echo_problems,
    echo_summary,
    exit_code,
    fail_on_option,
    lang_option,
    parse_formats,
    report_options,
    select_options,
)
from advisor.collector import freeze_survivors
from advisor.config import discover
from advisor.model import ProfileMeta
from advisor.outputs import (
    FILE_FORMATS,
    HTML_REPORT,
    TRACES,
    report_names,
    stdout_document,
    timestamped,
    write_outputs,
)
from advisor.plugin_manager import PluginHost
from advisor.render.format import terminal_json
from advisor.ruleset import parse_overrides, parse_severities

FORMATS = (*FILE_FORMATS, "text")
FOLDER_FORMATS = ("html", "sarif", "junit", TRACES)
"""The file formats `-o -` refuses: stdout carries the JSON report only."""


@dataclass(frozen=True)
class RunOptions:
    """Everything `advisor run` was given, as the command line gave it."""

    paths: tuple[Path, ...]
    report: ReportOptions
    rules: RuleOptions
    jobs: int | None = None
    scheduler: str | None = None


@click.command("run")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-o",
    "--output",
    "out",
    help="Output folder (default: ./advisor-report-<time>); - writes the JSON report to stdout.",
)
@click.option(
    "--format",
    "formats",
    default="json,html,traces,text",
    show_default=True,
    shell_complete=complete_formats(FORMATS),
    help="Comma-separated outputs: json, html, sarif (advisor.sarif), junit "
    "(advisor-junit.xml), traces (traces/finding-*.json: each finding's window of the profile, "
    "for Perfetto), text.",
)
@click.option(
    "--rules",
    "rule_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Extra rule file or folder (repeatable); same id replaces a built-in rule.",
)
@select_options
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="ID.PARAM=VALUE",
    help="Override a rule parameter, e.g. --set STEP-001.max_ratio=0.2.",
)
@severity_option
@fail_on_option
@click.option(
    "-j",
    "--jobs",
    type=click.IntRange(min=1),
    default=None,
    help="Processes to read and analyse several ranks with (default: automatic).",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    default=None,
    help="Analyse the ranks on a Dask cluster: its scheduler's address, e.g. "
    "tcp://10.0.0.1:8786 (needs: pip install 'dl-perf-advisor[dask]').",
)
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors (no progress).")
@lang_option
@debug_option
def run_command(
    paths: tuple[Path, ...],
    out: str | None,
    formats: str,
    rule_paths: tuple[Path, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    assignments: tuple[str, ...],
    severities: tuple[str, ...],
    fail_on: str | None,
    jobs: int | None,
    scheduler: str | None,
    quiet: bool,
    lang: str,
    debug: bool,
) -> None:
    """Analyse profiles and write prof_rule JSON, an HTML report and a summary.

    \b
    Example:
      advisor run PROF_000001 -o out --fail-on high
      advisor run PROF_000001 --set STEP-001.max_ratio=0.2 --ignore OP-003
      advisor run ranks/ --scheduler tcp://10.0.0.1:8786
    """
    options = RunOptions(
        paths=paths,
        report=report_options(out, parse_formats(formats, FORMATS), fail_on, quiet, lang),
        rules=RuleOptions(rule_paths, select, ignore, assignments, severities),
        jobs=jobs,
        scheduler=scheduler,
    )
    guard(debug, lambda: run(options))


def run(options: RunOptions) -> int:
    """The body of `advisor run`: analyse, report problems, write, summarise; the exit code."""
    config = discover()
    report = options.report.with_config(config)
    rules = options.rules
    in_folder = [f for f in FOLDER_FORMATS if f in report.formats]
    out_dir = report.folder(
        options.paths,
        lambda: Path.cwd() / timestamped("advisor-report"),
        FOLDER_FORMATS,
        f"-o - writes the JSON report to stdout; --format {', '.join(in_folder)} "
        f"need{'s' if len(in_folder) == 1 else ''} a folder (-o DIR)",
    )
    progress.set_quiet(report.quiet)
    host = PluginHost()
    result = analyze(
        *options.paths,
        rules=rules.rule_paths,
        select=rules.select,
        ignore=rules.ignore,
        params=parse_overrides(rules.assignments),
        host=host,
        jobs=options.jobs,
        lang=report.lang,
        severity=parse_severities(rules.severities),
        config=config,
        scheduler=options.scheduler,
        keep_tables=False,  # the outputs need each rank's report, not its tables
    )
    for info in host.failed():  # failed at import, validation or in a hook
        error(f"plugin {info.describe()}")
    echo_problems(result.plugin_problems, result.rule_errors)
    if not report.quiet:
        for note in result.rule_overrides:
            error(f"note: rule {note}")
        for note in result.notes:
            error(f"note: {note}")
    stop_on_user_rule_errors(result.rule_errors, [*config.rules, *rules.rule_paths])
    for input_error in result.input_errors:
        error(str(input_error))
    if not result.analyses:
        raise Failure("no profile could be read", EXIT_UNREADABLE)
    freeze_survivors()  # the outputs only read what the analysis left
    written = (
        []
        if out_dir is None
        else write_outputs(result, out_dir, report.formats, host, report.fail_on)
    )
    # the snippets are named by their folder: "Wrote report.html, traces/ in DIR"
    names = list(dict.fromkeys(p.name if p.parent == out_dir else f"{TRACES}/" for p in written))
    if not report.quiet and "text" in report.formats:  # beside stdout's JSON: on stderr
        echo_summary(
            result.report_sequence,
            detail_files(names, report_names(result), HTML_REPORT),
            err=report.to_stdout,
        )
    echo_closing(report, (w for a in result.analyses for w in a.profile.warnings), out_dir, names)
    if report.to_stdout:
        click.echo(terminal_json(stdout_document(result), indent=2))
    places = [place(a.profile.meta) for a in result.analyses for _ in a.findings]
    return exit_code(result.incomplete, result.findings, report.fail_on, places)


def place(meta: ProfileMeta) -> str | None:
    """Where a finding was found, for people: "rank 3", "cluster", "device 1" or a file name."""
    if meta.source_format == "cluster":
        return "cluster"
    if meta.rank is not None:
        return f"rank {meta.rank}"
    if meta.device_id is not None:
        return f"device {meta.device_id}"
    name = Path(str(meta.path)).name
    return "".join(c if c.isprintable() else "?" for c in name) or None
