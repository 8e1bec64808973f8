"""`advisor completion SHELL`: the shell completion script, as click writes it.

The same script comes from `_ADVISOR_COMPLETE=bash_source advisor` (zsh_source, fish_source);
this command only saves remembering the variable. Completion itself runs through click's
mechanism: each TAB calls advisor with _ADVISOR_COMPLETE set.
"""

from __future__ import annotations

import click
from click.shell_completion import BashComplete, FishComplete, ShellComplete, ZshComplete

SHELLS: dict[str, type[ShellComplete]] = {
    "bash": BashComplete,
    "zsh": ZshComplete,
    "fish": FishComplete,
}
PROG = "advisor"
COMPLETE_VAR = "_ADVISOR_COMPLETE"
"""The variable click's completion reads, named after the program (`_{PROG}_COMPLETE`)."""


@click.command("completion")
@click.argument("shell", type=click.Choice(list(SHELLS)))
def completion_command(shell: str) -> None:
    """Print the script that completes advisor's commands and options in SHELL.

    \b
    Example:
      eval "$(advisor completion bash)"        # in ~/.bashrc
      eval "$(advisor completion zsh)"         # in ~/.zshrc
      advisor completion fish > ~/.config/fish/completions/advisor.fish
    """
    root = click.get_current_context().find_root().command
    click.echo(SHELLS[shell](root, {}, PROG, COMPLETE_VAR).source(), nl=False)
