"""`advisor compare`: compare two runs, write the compare outputs, print the breakdown."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
import yaml

from advisor.cli.common import (
    EXIT_UNREADABLE,
    Failure,
    debug_option,
    error,
    guard,
    severity_option,
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
from advisor.compare import CompareError, CompareOptions, compare
from advisor.config import discover
from advisor.outputs import (
    COMPARE_FILE_FORMATS,
    COMPARE_HTML,
    COMPARE_REPORT,
    compare_stdout_document,
    timestamped,
    write_compare_outputs,
)
from advisor.render.format import terminal_json
from advisor.ruleset import parse_overrides, parse_severities

COMPARE_FORMATS = (*COMPARE_FILE_FORMATS, "text")


@dataclass(frozen=True)
class CompareCommandOptions:
    """Everything `advisor compare` was given: the two runs, how to match their operators,
    which rules judge the difference and where the outputs go."""

    baseline: Path
    comparison: Path
    compare: CompareOptions
    report: ReportOptions
    rules: RuleOptions


def parse_op_name_map(value: str | None) -> dict[str, str]:
    """--op-name-map: a JSON/YAML object given inline or as a file, names to names."""
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
        isinstance(k, str) and isinstance(v, str) for k, v in mapping.items()
    ):
        raise click.BadParameter(
            "expects a mapping of operator names to operator names, e.g. "
            '\'{"Optimizer.step#SGD.step": "Optimizer.step#NpuFusedSGD.step"}\''
        )
    return mapping


@click.command("compare")
@click.argument("baseline", type=click.Path(path_type=Path))
@click.argument("comparison", type=click.Path(path_type=Path))
@click.option("-o", "--output", "out", help="Output folder (default: ./advisor-compare-<time>).")
@click.option(
    "--format",
    "formats",
    default="json,html,xlsx,text",
    show_default=True,
    shell_complete=complete_formats(COMPARE_FORMATS),
    help="Comma-separated outputs: json, html, xlsx, text.",
)
@click.option(
    "--use-input-shape",
    is_flag=True,
    help="Match operators by name and input shapes (default: by name).",
)
@click.option(
    "--op-name-map",
    default=None,
    metavar="MAPPING|FILE",
    help="Equivalent operator names of the two runs, as a JSON/YAML object or a file "
    'holding one, e.g. \'{"Optimizer.step#SGD.step": '
    '"Optimizer.step#NpuFusedSGD.step"}\'.',
)
@click.option(
    "--max-kernel-num",
    type=click.IntRange(min=4),
    default=None,
    help="Compare the children of an operator that launches more kernels than this "
    "(at least 4; default: top-level operators only).",
)
@click.option(
    "--base-step",
    type=int,
    default=None,
    metavar="N",
    help="Compare only step N of the baseline (its ProfilerStep number; default: the mean "
    "of all its steps).",
)
@click.option(
    "--comparison-step",
    type=int,
    default=None,
    metavar="N",
    help="Compare only step N of the comparison.",
)
@click.option(
    "--rules",
    "rule_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Extra rule file or folder (repeatable).",
)
@select_options
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="ID.PARAM=VALUE",
    help="Override a rule parameter, e.g. --set CMP-002.min_op_growth=0.2.",
)
@severity_option
@fail_on_option
@click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")
@lang_option
@debug_option
def compare_command(
    baseline: Path,
    comparison: Path,
    out: str | None,
    formats: str,
    use_input_shape: bool,
    op_name_map: str | None,
    max_kernel_num: int | None,
    base_step: int | None,
    comparison_step: int | None,
    rule_paths: tuple[Path, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    assignments: tuple[str, ...],
    severities: tuple[str, ...],
    fail_on: str | None,
    quiet: bool,
    lang: str,
    debug: bool,
) -> None:
    """Compare two runs: what got slower in COMPARISON against BASELINE, and where.

    Each side is a profile (a file or folder) of any format advisor reads: GPU (Kineto)
    against NPU (Ascend PyTorch, MindSpore), or NPU against NPU. A side holding several ranks
    is compared as its slowest rank; one multi-rank folder given as both sides compares its
    fastest rank (baseline) with its slowest. Writes compare.json, prof_rule_compare.json,
    compare.html and performance_comparison_result.xlsx.

    \b
    Example:
      advisor compare gpu.pt.trace.json.gz rank0_ascend_pt -o cmp
      advisor compare old_run new_run --use-input-shape --max-kernel-num 10
      advisor compare old_run new_run --base-step 5 --comparison-step 5
      advisor compare ranks/ ranks/            # fastest rank against slowest
    """
    chosen = parse_formats(formats, COMPARE_FORMATS, param_hint="--format")
    options = CompareCommandOptions(
        baseline=baseline,
        comparison=comparison,
        compare=CompareOptions(
            use_input_shape=use_input_shape,
            op_name_map=parse_op_name_map(op_name_map),
            max_kernel_num=max_kernel_num,
            base_step=base_step,
            comparison_step=comparison_step,
        ),
        report=report_options(out, chosen, fail_on, quiet, lang),
        rules=RuleOptions(rule_paths, select, ignore, assignments, severities),
    )
    guard(debug, lambda: run_compare(options))


def run_compare(options: CompareCommandOptions) -> int:
    """The body of `advisor compare`: compare, report problems, write, summarise; the exit
    code."""
    from advisor.render.compare_html import LABELS
    from advisor.render.compare_outputs import overall_lines, side_notes
    from advisor.render.messages import translator

    config = discover()
    report = options.report.with_config(config)
    rules = options.rules
    out_dir = report.folder(
        [options.baseline, options.comparison],
        lambda: timestamped("advisor-compare"),
        ["html", "xlsx"],
        "-o - writes the JSON to stdout; --format html and xlsx need a folder (-o DIR)",
    )
    try:
        result = compare(
            options.baseline,
            options.comparison,
            options=options.compare,
            rules=rules.rule_paths,
            select=rules.select,
            ignore=rules.ignore,
            params=parse_overrides(rules.assignments),
            lang=report.lang,
            severity=parse_severities(rules.severities),
            config=config,
        )
    except CompareError as exc:
        raise Failure(str(exc), EXIT_UNREADABLE) from exc
    echo_problems(result.plugin_problems, result.rule_errors)
    for input_error in result.input_errors:
        error(str(input_error))
    written = [] if out_dir is None else write_compare_outputs(result, out_dir, report.formats)
    names = [p.name for p in written]
    if not report.quiet and "text" in report.formats:
        labels = {**LABELS["en"], **LABELS.get(report.lang, {})}
        extra = result.profile.meta.extra
        overall = overall_lines(
            result.tables["compare_overall"],
            labels,
            inflated=not result.tables["compare_profiling"].empty,
        )
        notes = side_notes(extra["baseline"], extra["comparison"], translator(report.lang or "en"))
        echo_summary(
            [result.report],
            detail_files(names, [COMPARE_REPORT], COMPARE_HTML),
            err=report.to_stdout,
            before=[*overall, *notes, ""],
        )
    echo_closing(report, result.profile.warnings, out_dir, names)
    if report.to_stdout:
        click.echo(terminal_json(compare_stdout_document(result), indent=2))
    return exit_code(result.incomplete, result.findings, report.fail_on)
