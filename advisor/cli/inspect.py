"""`advisor inspect`: what was detected in the paths and which tables and rows were read."""

from __future__ import annotations

from pathlib import Path

import click

from advisor.cli.common import EXIT_OK, EXIT_UNREADABLE, debug_option, echo, error, guard
from advisor.plugin_manager import PluginHost
from advisor.reading import read_inputs

FILES_SHOWN = 8


@click.command("inspect")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@debug_option
def inspect_command(paths: tuple[Path, ...], debug: bool) -> None:
    """Show what was detected in PATHS and which tables and rows were read.

    \b
    Example:
      advisor inspect PROF_000001
    """

    def body() -> int:
        result = read_inputs(list(paths), PluginHost())
        profiles = result.profiles
        for profile in profiles:
            meta = profile.meta
            echo(
                f"{profile.label}: {meta.source_format} ({meta.framework}, "
                f"{meta.device_kind}) at {meta.path}"
            )
            for name, df in profile.tables.items():
                echo(f"    {name:<13} {len(df):>9} rows  {', '.join(df.columns)}")
            echo(_files_line(meta.files_read, meta.extra.get("source")))
            for warning in profile.warnings:
                echo(f"    warning: {warning}")
        for problem in result.plugin_problems:
            error(problem)
        for input_error in result.input_errors:
            error(str(input_error))
        if result.input_errors or not profiles:
            return EXIT_UNREADABLE
        return EXIT_OK

    guard(debug, body)


def _files_line(files: list[str], source: object) -> str:
    """How many files were read, the first ones, and the source a reader chose when a
    profile holds the same data twice (`db`: the profiler database, not the text files)."""
    shown = ", ".join(files[:FILES_SHOWN]) + (", ..." if len(files) > FILES_SHOWN else "")
    origin = f" (source: {source})" if source else ""
    return f"    files read: {len(files)}{origin}" + (f": {shown}" if files else "")
