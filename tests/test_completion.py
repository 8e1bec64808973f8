"""Shell completion through click's mechanism: the candidates bash, zsh and fish get for
commands, options, --format values and paths, the scripts `advisor completion SHELL` prints,
and that completing a command name imports no command (each TAB starts advisor anew)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.shell_completion import BashComplete, CompletionItem
from click.testing import CliRunner

from advisor.cli import COMMANDS, main
from advisor.cli.run import FORMATS

VAR = "_ADVISOR_COMPLETE"


def candidates(args: list[str], incomplete: str) -> list[CompletionItem]:
    return BashComplete(main, {}, "advisor", VAR).get_completions(args, incomplete)


def values(args: list[str], incomplete: str) -> list[str]:
    return [item.value for item in candidates(args, incomplete)]


def test_commands_complete_with_their_help():
    items = candidates([], "")
    assert [i.value for i in items if not i.value.startswith("-")] == sorted(COMMANDS)
    assert {i.value: i.help for i in items}["run"] == COMMANDS["run"][1]
    assert values([], "co") == ["compare", "completion"]
    assert values([], "--v") == ["--version"]


@pytest.mark.parametrize(
    "args, incomplete, expected",
    [
        (["run"], "--fo", ["--format"]),
        (["run"], "--fa", ["--fail-on"]),
        (["run", "--format"], "", list(FORMATS)),
        (["run", "--format"], "json,s", ["json,sarif"]),
        (
            ["run", "--format"],
            "json,html,",
            [f"json,html,{f}" for f in FORMATS if f not in ("json", "html")],
        ),
        (["run", "--fail-on"], "", ["high", "medium", "low"]),
        (["compare", "--format"], "x", ["xlsx"]),
        (["rules"], "va", ["validate"]),
        (["completion"], "", ["bash", "zsh", "fish"]),
    ],
)
def test_options_and_values_complete(args: list[str], incomplete: str, expected: list[str]):
    assert values(args, incomplete) == expected


def test_paths_are_left_to_the_shell():
    """PATHS and --rules complete as files: click tells the shell to list them."""
    for args in (["run"], ["run", "--rules"], ["inspect"]):
        (item,) = candidates(args, "tests/fix")
        assert (item.type, item.value) == ("file", "tests/fix")


@pytest.mark.parametrize(
    "shell, env, expected",
    [
        ("bash", {"COMP_WORDS": "advisor run --fo", "COMP_CWORD": "2"}, "plain,--format\n"),
        (
            "bash",
            {"COMP_WORDS": "advisor run --format json,h", "COMP_CWORD": "3"},
            "plain,json,html\n",
        ),
        ("zsh", {"COMP_WORDS": "advisor run --fail-on h", "COMP_CWORD": "3"}, "plain\nhigh\n_\n"),
        ("fish", {"COMP_WORDS": "advisor ru", "COMP_CWORD": "ru"}, "plain,rules\tList, show"),
    ],
)
def test_each_shell_gets_candidates_through_the_environment(
    shell: str, env: dict[str, str], expected: str
):
    """What the shell scripts do on TAB: run advisor with the words in the environment."""
    result = CliRunner().invoke(
        main, [], env={VAR: f"{shell}_complete", **env}, prog_name="advisor"
    )
    assert result.exit_code == 0
    assert result.output.startswith(expected), result.output


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_command_prints_clicks_script(shell: str):
    printed = CliRunner().invoke(main, ["completion", shell], prog_name="advisor")
    sourced = CliRunner().invoke(main, [], env={VAR: f"{shell}_source"}, prog_name="advisor")
    assert printed.exit_code == 0 and sourced.exit_code == 0
    # click before 8.2 (Python 3.9) ends the sourced script with one more newline
    assert printed.output.rstrip("\n") == sourced.output.rstrip("\n")
    assert f"{VAR}={shell}_complete" in printed.output


PROBE = """
import json, sys
from advisor.cli import main
try:
    main([], prog_name="advisor")
except SystemExit:
    pass
heavy = ("pandas", "numpy", "advisor.api", "advisor.plugin_manager", "advisor.cli.run")
print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""


def test_completing_a_command_name_imports_no_command():
    env = {VAR: "bash_complete", "COMP_WORDS": "advisor ", "COMP_CWORD": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert "plain,run" in proc.stdout.splitlines()
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []
