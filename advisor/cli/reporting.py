"""What the commands that evaluate rules into reports share (`run`, `compare`): which rules
run and how, where the outputs go, the terminal summary and closing lines, and the exit code
that findings at or above --fail-on give. Kept apart from advisor.cli.common, which every
command imports, so that listing commands never import the evaluation and the renderers.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import click
from click.core import ParameterSource

from advisor.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    EXIT_UNREADABLE,
    EXIT_USAGE,
    Failure,
    echo,
    error,
)
from advisor.config import Config
from advisor.engine.evaluate import Finding, at_least
from advisor.engine.outcome import SEVERITIES
from advisor.engine.rules import LANGUAGES
from advisor.errors import RuleError
from advisor.model import ReaderWarning
from advisor.outputs import OutputFolderError, output_dir
from advisor.render.format import terminal_safe

STDOUT = "-"
"""`-o -`: the JSON goes to stdout, nothing is written to disk."""
MAX_FAIL_LISTED = 5
"""Findings named when --fail-on trips; the rest are counted."""

F = TypeVar("F", bound=Callable[..., object])


def exit_code(
    unreadable: bool,
    findings: Sequence[Finding],
    fail_on: str | None,
    places: Sequence[str | None] | None = None,
) -> int:
    """3 when an input (or a whole file of a profile) could not be read, 1 for a finding at
    or above --fail-on, else 0.

    When --fail-on trips, one line on stderr names the findings that tripped it (`places`,
    parallel to `findings`, says where each was found, e.g. "rank 0"), so a red CI job says
    why without opening the report."""
    if unreadable:
        return EXIT_UNREADABLE
    if not fail_on:
        return EXIT_OK
    tripped = [
        (f, places[i] if places else None)
        for i, f in enumerate(findings)
        if at_least(f.severity, fail_on)
    ]
    if not tripped:
        return EXIT_OK
    tripped.sort(key=lambda fp: SEVERITIES.index(fp[0].severity))  # stable: ranked order kept
    named = [
        f"{f.rule.id} ({', '.join(x for x in (f.severity, place) if x)})"
        for f, place in tripped[:MAX_FAIL_LISTED]
    ]
    more = len(tripped) - len(named)
    error(
        f"--fail-on {fail_on}: {len(tripped)} finding{'' if len(tripped) == 1 else 's'} at "
        f"or above {fail_on}: {', '.join(named)}" + (f" and {more} more" if more else "")
    )
    return EXIT_FINDINGS


def parse_formats(
    value: str, allowed: Sequence[str], param_hint: str | None = None
) -> tuple[str, ...]:
    """--format's comma-separated list, each one of `allowed`."""
    chosen = tuple(f.strip() for f in value.split(",") if f.strip())
    if not chosen or any(f not in allowed for f in chosen):
        raise click.BadParameter(
            f"choose from {', '.join(allowed)} (comma-separated)", param_hint=param_hint
        )
    return chosen


def complete_formats(
    allowed: Sequence[str],
) -> Callable[[click.Context, click.Parameter, str], list[str]]:
    """Shell completion of a comma-separated --format: the word typed so far completed by each
    format not already in it (`json,h` -> `json,html`)."""

    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
        head, _, last = incomplete.rpartition(",")
        chosen = set(head.split(",")) if head else set()
        prefix = f"{head}," if head else ""
        return [prefix + f for f in allowed if f.startswith(last) and f not in chosen]

    return complete


def defaulted(param: str) -> bool:
    """True when the running command's option was not given (so a project config may set it)."""
    source = click.get_current_context().get_parameter_source(param)
    return source in (None, ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def locale_language() -> str:
    """The report language the user's locale asks for: the first of LC_ALL, LC_MESSAGES and
    LANG that is set decides, as for other programs' messages."""
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


@dataclass(frozen=True)
class RuleOptions:
    """Which rules run and how, as `run` and `compare` take them: --rules, --select,
    --ignore, --set and --severity, unparsed (the API parses them inside the guard)."""

    rule_paths: tuple[Path, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    assignments: tuple[str, ...] = ()
    severities: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReportOptions:
    """Where outputs go and how a command that evaluates rules ends, as `run` and `compare`
    take them. `lang` and `fail_on` None: the project config decides (the locale for
    `lang`), see with_config."""

    out: str | None
    formats: tuple[str, ...]
    formats_given: bool
    fail_on: str | None
    quiet: bool
    lang: str | None

    @property
    def to_stdout(self) -> bool:
        """`-o -`: the JSON goes to stdout and the summary to stderr, no file is written."""
        return self.out == STDOUT

    def folder(
        self,
        inputs: Sequence[Path],
        default: Callable[[], str | Path],
        folder_formats: Sequence[str],
        refusal: str,
    ) -> Path | None:
        """The output folder (`default()` when -o is not given), None for `-o -`. Stops with
        exit 2 when it lies inside an input, or with `refusal` when -o - comes with a
        --format of `folder_formats`, which only a folder can hold."""
        if self.to_stdout:
            if self.formats_given and set(folder_formats) & set(self.formats):
                raise Failure(refusal, EXIT_USAGE)
            return None
        try:
            return output_dir(self.out or default(), inputs)
        except OutputFolderError as exc:
            raise Failure(str(exc), EXIT_USAGE) from exc

    def with_config(self, config: Config) -> ReportOptions:
        """The options with what the command line left open filled from the project config:
        the config's language beats the locale's, its --fail-on applies when none is given."""
        return replace(
            self,
            lang=self.lang or config.lang or locale_language(),
            fail_on=self.fail_on or config.fail_on,
        )


def report_options(
    out: str | None, formats: tuple[str, ...], fail_on: str | None, quiet: bool, lang: str
) -> ReportOptions:
    """ReportOptions from the running command's options, remembering which were given."""
    return ReportOptions(
        out=out,
        formats=formats,
        formats_given=not defaulted("formats"),
        fail_on=fail_on,
        quiet=quiet,
        lang=None if defaulted("lang") else lang,
    )


def echo_summary(
    reports: Sequence[dict],
    details: list[str | None],
    err: bool = False,
    before: Sequence[str] = (),
) -> None:
    """The terminal summary (after the lines `before`), wrapped to the terminal's width,
    coloured on a terminal unless NO_COLOR is set; `details` names, per report, the written
    file its details are in (None: none was written)."""
    from advisor.render.text import color_enabled, render_text, terminal_width

    color = color_enabled(sys.stderr if err else sys.stdout)
    text = render_text(reports, width=terminal_width(), color=color, details=details)
    click.echo("".join(f"{terminal_safe(line)}\n" for line in before) + text, err=err, color=color)


def detail_files(names: Sequence[str], json_names: Sequence[str], html: str) -> list[str | None]:
    """Per report, the written file its details are in: the HTML page, else its JSON; None
    when neither was written (the summary then points at nothing)."""
    return [html if html in names else name if name in names else None for name in json_names]


def echo_closing(
    report: ReportOptions,
    warnings: Iterable[ReaderWarning],
    out_dir: Path | None,
    names: Sequence[str],
) -> None:
    """After the summary: the files of profiles that could not be read at all (always), then,
    unless --quiet, the profiles' warnings (each once: a file shared by the devices of one
    export is warned about on each profile) and the closing line "Wrote report.html,
    prof_rule_0.json in DIR" when something was written."""
    from advisor.render.text import terminal_width, written_line

    lines = dict.fromkeys((w.unread, w.line_in(report.lang)) for w in warnings)
    for unread, line in lines:
        if unread:
            error(line)
    if report.quiet:
        return
    for unread, line in lines:
        if not unread:
            error(f"warning: {line}")
    if out_dir is not None and names:
        echo(written_line(names, str(out_dir), width=terminal_width(), lang=report.lang))


def echo_problems(plugin_problems: Sequence[str], rule_errors: Sequence[RuleError]) -> None:
    """Plugin problems (each once) and broken rule files, before the results they affect."""
    for problem in dict.fromkeys(plugin_problems):
        error(problem)
    for rule_error in rule_errors:
        error(f"rule file {rule_error}")


fail_on_option = click.option(
    "--fail-on",
    type=click.Choice(SEVERITIES),
    default=None,
    help="Exit with 1 when a finding of this severity or higher exists.",
)
lang_option = click.option(
    "--lang",
    type=click.Choice(LANGUAGES),
    default=locale_language,
    show_default="zh when LC_ALL, LC_MESSAGES or LANG starts with zh, else en",
    help="Language of findings and reports.",
)


def select_options(command: F) -> F:
    """--select and --ignore, which pick rules for every command that evaluates them."""
    command = click.option("--ignore", multiple=True, help="Skip rules with this id, name or tag.")(
        command
    )
    return click.option(
        "--select", multiple=True, help="Only run rules with this id, name or tag."
    )(command)
