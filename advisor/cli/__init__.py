"""Command line: `advisor run`, `compare`, `top`, `inspect`, `rules list|show|new|validate|test`,
`plugins list`.

Each command parses its options, calls the API (advisor.api, advisor.compare, advisor.outputs,
advisor.scaffold, advisor.top) and prints; advisor.cli.common holds what they share and the
exit codes. No traceback reaches the user unless --debug is given.
"""

from __future__ import annotations

import click

from advisor import __version__
from advisor.cli.compare import compare_command
from advisor.cli.inspect import inspect_command
from advisor.cli.plugins import plugins_group
from advisor.cli.rules import rules_group
from advisor.cli.run import run_command
from advisor.cli.top import top_command

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
def main() -> None:
    """Turn performance profiles into ranked, actionable tuning advice.

    \b
    Example:
      advisor run PROF_000001_20260105100000000_DEMO -o report
    """


for command in (
    run_command,
    compare_command,
    top_command,
    inspect_command,
    rules_group,
    plugins_group,
):
    main.add_command(command)
