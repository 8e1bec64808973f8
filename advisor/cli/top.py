"""`advisor top`: the slowest operators of any profile, as a table, CSV or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import click
import pandas as pd

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
from advisor.model import Profile
from advisor.plugin_manager import PluginHost
from advisor.reading import read_inputs
from advisor.render.format import terminal_json
from advisor.top import TopError, TopOptions, format_table, operator_rows, rank_operators

Ranked = list[tuple[Profile, str, pd.DataFrame]]
"""Per profile: the profile, the table its rows came from, its ranked operators."""


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
    "--format",
    "fmt",
    type=click.Choice(["text", "csv", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
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
    fmt: str,
    debug: bool,
) -> None:
    """Rank the slowest operators of any profile advisor reads.

    Uses device_ops (one row per execution) or, when a profile has none, op_stats. GFLOPS
    and GB/s appear where the profile knows operators' FLO and bytes (MegEngine static graph).

    \b
    Example:
      advisor top profiling.json -k 5
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
    )
    guard(debug, lambda: top(paths, options, fmt))


def top(paths: Sequence[Path], options: TopOptions, fmt: str) -> int:
    """The body of `advisor top`: rank every profile read, print them in `fmt`."""
    result = read_inputs(list(paths), PluginHost())
    profiles = result.profiles
    for input_error in result.input_errors:
        error(str(input_error))
    if not profiles:
        raise Failure("no profile could be read", EXIT_UNREADABLE)
    ranked: Ranked = []
    problems: list[str] = []
    for profile in profiles:
        for warning in profile.warnings:
            error(f"warning: {warning}")
        try:
            ranked.append((profile, operator_rows(profile)[1], rank_operators(profile, options)))
        except TopError as exc:
            if "no operator times" not in str(exc):
                raise  # a bad option: the same for every profile
            problems.append(str(exc))
    if not ranked:
        raise Failure(problems[0], EXIT_USAGE)
    for problem in problems:
        error(problem)
    echo_ranked(ranked, fmt)
    return EXIT_OK


def echo_ranked(ranked: Ranked, fmt: str) -> None:
    """The rankings as one JSON document, one CSV with a profile column, or a table each."""
    if fmt == "json":
        click.echo(
            terminal_json(
                {
                    "profiles": [
                        {
                            "profile": p.label,
                            "path": p.meta.path,
                            "source_table": table,
                            "rows": json.loads(frame.to_json(orient="records")),
                        }
                        for p, table, frame in ranked
                    ]
                },
                indent=2,
            )
        )
    elif fmt == "csv":
        frames = [
            frame.assign(profile=p.label)[["profile", *frame.columns]] for p, _, frame in ranked
        ]
        echo(pd.concat(frames, ignore_index=True).to_csv(index=False), nl=False)
    else:
        for profile, table, frame in ranked:
            echo(
                f"{profile.label} ({profile.meta.source_format}, {table}, "
                f"{profile.meta.path}): {len(frame)} row(s)"
            )
            echo(format_table(frame))
            echo("")
