"""`advisor inspect`: what was detected in the paths and which tables and rows were read."""

from __future__ import annotations

from pathlib import Path

import click

from advisor.cli.common import EXIT_OK, EXIT_UNREADABLE, debug_option, echo, error, guard
from advisor.cli.reporting import lang_option
from advisor.plugin_manager import PluginHost
from advisor.reading import read_inputs
from advisor.render.inspect_text import profile_lines


@click.command("inspect")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@lang_option
@debug_option
def inspect_command(paths: tuple[Path, ...], lang: str, debug: bool) -> None:
    """Show what was detected in PATHS and which tables and rows were read.

    \b
    Example:
      advisor inspect PROF_000001
    """

    def body() -> int:
        result = read_inputs(list(paths), PluginHost())
        profiles = result.profiles
        for profile in profiles:
            for line in profile_lines(profile, lang):
                echo(line)
        for problem in result.plugin_problems:
            error(problem)
        for input_error in result.input_errors:
            error(str(input_error))
        if result.input_errors or not profiles:
            return EXIT_UNREADABLE
        return EXIT_OK

    guard(debug, body)
