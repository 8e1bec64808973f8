"""Command line: `advisor run`, `compare`, `top`, `inspect`, `rules list|show|new|validate|test`,
`plugins list`, `completion`.

Each command parses its options, calls the API (advisor.api, advisor.compare, advisor.outputs,
advisor.scaffold, advisor.top) and prints; advisor.cli.common holds what they share and the
exit codes. No traceback reaches the user unless --debug is given.

A command's module is imported only when that command runs (or its own --help is shown):
`advisor --version` and `advisor --help` import click and advisor.version, never pandas, and
neither does completing a command's name in the shell (click's completion,
`_ADVISOR_COMPLETE=bash_source advisor`, or `advisor completion bash`).
"""

from __future__ import annotations

import importlib
from typing import NoReturn

import click

from advisor import cpu_idle
from advisor.collector import (
    end_process,
    in_command_line,
    keep_freed_memory,
    tune_for_command_line,
)
from advisor.version import __version__

__all__ = ["COMMANDS", "entry", "main"]

COMMANDS: dict[str, tuple[str, str]] = {
    "completion": (
        "advisor.cli.completion:completion_command",
        "Print the script that completes advisor's commands and options in SHELL.",
    ),
    "compare": (
        "advisor.cli.compare:compare_command",
        "Compare two runs: what got slower in COMPARISON against BASELINE, and where.",
    ),
    "inspect": (
        "advisor.cli.inspect:inspect_command",
        "Show what was detected in PATHS and which tables and rows were read.",
    ),
    "plugins": ("advisor.cli.plugins:plugins_group", "Inspect installed plugins."),
    "rules": ("advisor.cli.rules:rules_group", "List, show, validate, test and scaffold rules."),
    "run": (
        "advisor.cli.run:run_command",
        "Analyse profiles and write prof_rule JSON, an HTML report and a summary.",
    ),
    "top": (
        "advisor.cli.top:top_command",
        "Rank the slowest operators of any profile advisor reads.",
    ),
}
"""Command name -> (where it is defined, the first line of its help). The line is kept here so
that `advisor --help` lists the commands without importing them; a test checks that it is the
command's own."""
ANALYSES = frozenset({"compare", "inspect", "run", "top"})
"""The commands that read profiles: the C allocator is tuned for them before they are imported
(collector.keep_freed_memory; before pyarrow is imported and before a read-ahead child is
forked, which inherits it)."""


class LazyGroup(click.Group):
    """A group whose commands are imported the first time they are looked up."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in COMMANDS and cmd_name not in self.commands:
            if cmd_name in ANALYSES and in_command_line():
                keep_freed_memory()
            module, _, attr = COMMANDS[cmd_name][0].partition(":")
            self.add_command(getattr(importlib.import_module(module), attr), cmd_name)
        return super().get_command(ctx, cmd_name)

    def shell_complete(
        self, ctx: click.Context, incomplete: str
    ) -> list[click.shell_completion.CompletionItem]:
        """Command names with COMMANDS' lines, then the group's options: click's own listing
        would import every command (and pandas) on each press of TAB."""
        from click.shell_completion import CompletionItem

        names = [name for name in self.list_commands(ctx) if name.startswith(incomplete)]
        items = [
            CompletionItem(
                name,
                help=COMMANDS[name][1]
                if name in COMMANDS
                else self.commands[name].get_short_help_str(),
            )
            for name in names
        ]
        return items + click.Command.shell_complete(self, ctx, incomplete)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """`advisor --help`'s command list as click writes it, from COMMANDS' lines for the
        commands not imported yet."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(map(len, names))
        rows = [
            (name, self.commands.get(name, click.Command(name, help=COMMANDS[name][1])))
            for name in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
def main() -> None:
    """Turn performance profiles into ranked, actionable tuning advice.

    \b
    Example:
      advisor run PROF_000001_20260105100000000_DEMO -o report
    """


def entry() -> NoReturn:
    """The `advisor` executable and `python -m advisor`: the command line in a process of
    its own, whose garbage collector is tuned for one run and which ends without tearing
    down its objects (advisor.collector). Tests call `main` in their own process, which keeps
    its settings."""
    tune_for_command_line(allocator=False)  # get_command tunes it for the analyses
    cpu_idle.mark()  # a large trace read later sees the idle CPUs without waiting for them
    try:
        main()
    except SystemExit as stop:
        end_process(stop.code)
    end_process(0)
