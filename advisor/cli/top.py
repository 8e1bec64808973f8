"""`advisor top`: the slowest operators of any profile, as a table, CSV or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from advisor.cli.common import (
    EXIT_OK,
    EXIT_UNREADABLE,
    EXIT_USAGE,
    Failure,
    debug_option,
    echo,
    error,
    guard,
)
from advisor.cli.reporting import lang_option
from advisor.lazy import lazy_module
from advisor.model import Profile
from advisor.plugin_manager import PluginHost
from advisor.reading import read_inputs
from advisor.render.format import terminal_json
from advisor.render.top_text import (
    format_table,
    host_line,
    kern_note,
    profile_line,
    summary_lines,
)
from advisor.top import (
    MissingData,
    TopOptions,
    operator_rows,
    rank_host_operators,
    rank_operators,
    summary,
)

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


@dataclass(frozen=True)
class Ranking:
    """One profile's answer: the table its device rows came from, the summary, the ranked
    device operators and, with --show-host, the ranked host operators."""

    profile: Profile
    table: str
    end_key: str
    summary: dict[str, float | None]
    device: pd.DataFrame
    host: pd.DataFrame | None


@click.command("top")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "-k",
    "--top",
    "top_k",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="Rows to show (0: all).",
)
@click.option(
    "--aggregate",
    type=click.Choice(["sum", "mean", "max", "min"]),
    default=None,
    help="Group operators by op_type; time_us becomes this aggregate of their times.",
)
@click.option(
    "--order-by",
    default="time_us",
    show_default=True,
    help="Output column to sort by (time_us, total_us, count, gflops, gbps, ...).",
)
@click.option("--ascending", is_flag=True, help="Sort ascending (default: descending).")
@click.option(
    "--min-time",
    type=float,
    default=None,
    help="Only operators taking at least this many µs (each execution).",
)
@click.option(
    "--max-time",
    type=float,
    default=None,
    help="Only operators taking at most this many µs (each execution).",
)
@click.option(
    "--type",
    "types",
    multiple=True,
    help="Only op types matching this regular expression (searched anywhere, so a "
    "plain word is a substring match; repeatable).",
)
@click.option(
    "--name",
    default=None,
    help="Only operators whose name matches this regular expression (searched anywhere).",
)
@click.option(
    "--input-dtype",
    default=None,
    metavar="DTYPE",
    help="Only operators with at least one input of this data type (e.g. Float16; case "
    "ignored). Needs input dtypes (MegEngine static graph, Ascend).",
)
@click.option(
    "--top-end-key",
    "end_key",
    type=click.Choice(["end", "kern"]),
    default="end",
    show_default=True,
    help="How an operator's time is measured: end = start to end (its whole time); kern = "
    "start to its kernel's start (only the wait before the kernel). kern needs MegEngine "
    "static-graph profiles.",
)
@click.option(
    "--copy-time",
    is_flag=True,
    help="Add to the summary the total and mean time of the copy operators (category memcpy) "
    "the filters keep, and of their wait before the kernel where recorded.",
)
@click.option(
    "--show-host",
    is_flag=True,
    help="Also rank the operators' host times (MegEngine: the host side of each operator; "
    "PyTorch: aten operators), with the same options.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "csv", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@lang_option
@debug_option
def top_command(
    paths: tuple[Path, ...],
    top_k: int,
    aggregate: str | None,
    order_by: str,
    ascending: bool,
    min_time: float | None,
    max_time: float | None,
    types: tuple[str, ...],
    name: str | None,
    input_dtype: str | None,
    end_key: str,
    copy_time: bool,
    show_host: bool,
    fmt: str,
    lang: str,
    debug: bool,
) -> None:
    """Rank the slowest operators of any profile advisor reads.

    Uses device_ops (one row per execution) or, when a profile has none, op_stats. GFLOPS
    and GB/s appear where the profile knows operators' FLO and bytes (MegEngine static graph).
    A summary line gives the total device time (every operator's time, summed) and total host
    time (text and JSON). An option whose data a profile lacks is a one-line error (exit 2).

    \b
    Example:
      advisor top profiling.json -k 5
      advisor top profiling.json --input-dtype Float16 --copy-time --show-host
      advisor top profiling.json --top-end-key kern
      advisor top PROF_000001 --aggregate sum --order-by total_us
      advisor top trace.pt.trace.json.gz --type 'gemm|conv' --min-time 100 --format csv
    """
    options = TopOptions(
        top=top_k,
        aggregate=aggregate,
        order_by=order_by,
        ascending=ascending,
        min_time_us=min_time,
        max_time_us=max_time,
        types=types,
        name=name,
        input_dtype=input_dtype,
        end_key=end_key,
    )
    guard(
        debug,
        lambda: top(paths, options, fmt, copy_time=copy_time, show_host=show_host, lang=lang),
    )


def top(
    paths: Sequence[Path],
    options: TopOptions,
    fmt: str,
    *,
    copy_time: bool = False,
    show_host: bool = False,
    lang: str = "en",
) -> int:
    """The body of `advisor top`: rank every profile read, print them in `fmt`; the text
    format and the warnings in `lang`."""
    result = read_inputs(list(paths), PluginHost())
    profiles = result.profiles
    for input_error in result.input_errors:
        error(str(input_error))
    if not profiles:
        raise Failure("no profile could be read", EXIT_UNREADABLE)
    ranked: list[Ranking] = []
    problems: list[str] = []
    for profile in profiles:
        for warning in profile.warnings:
            error(f"warning: {warning.line_in(lang)}")
        try:  # a bad option (TopError) is the same for every profile: it stops the command
            ranked.append(
                Ranking(
                    profile,
                    operator_rows(profile)[1],
                    options.end_key,
                    summary(profile, options, copy_time=copy_time),
                    rank_operators(profile, options),
                    rank_host_operators(profile, options) if show_host else None,
                )
            )
        except MissingData as exc:  # this profile lacks what the options need
            problems.append(str(exc))
    if not ranked:
        raise Failure(problems[0], EXIT_USAGE)
    for problem in problems:
        error(problem)
    echo_ranked(ranked, fmt, lang)
    return EXIT_OK


def echo_ranked(ranked: Sequence[Ranking], fmt: str, lang: str = "en") -> None:
    """The rankings as one JSON document, one CSV with a profile column (and a side column
    with --show-host; the summary is left out of CSV), or a summary and table(s) each, in
    `lang`."""
    if fmt == "json":
        click.echo(terminal_json({"profiles": [_as_json(r) for r in ranked]}, indent=2))
    elif fmt == "csv":
        frames = []
        for r in ranked:
            sides = [("device", r.device)] + ([("host", r.host)] if r.host is not None else [])
            for side, frame in sides:
                extra = {"profile": r.profile.label}
                if r.host is not None:
                    extra["side"] = side
                frames.append(frame.assign(**extra)[[*extra, *frame.columns]])
        echo(pd.concat(frames, ignore_index=True).to_csv(index=False), nl=False)
    else:
        for r in ranked:
            p = r.profile
            echo(
                profile_line(
                    lang, p.label, p.meta.source_format, r.table, p.meta.path, len(r.device)
                )
            )
            for line in summary_lines(r.summary, lang):
                echo(line)
            if r.end_key == "kern":
                echo(kern_note(lang))
            echo(format_table(r.device, lang=lang))
            if r.host is not None:
                echo(host_line(lang, len(r.host)))
                echo(format_table(r.host, lang=lang))
            echo("")


def _as_json(r: Ranking) -> dict[str, object]:
    out = {
        "profile": r.profile.label,
        "path": r.profile.meta.path,
        "source_table": r.table,
        "time_key": r.end_key,
        "summary": r.summary,
        "rows": json.loads(r.device.to_json(orient="records")),
    }
    if r.host is not None:
        out["host_rows"] = json.loads(r.host.to_json(orient="records"))
    return out
