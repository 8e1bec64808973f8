"""The command line's fixed cost: `advisor --version` and `--help` import no command (hence
no pandas, no plugin), and the lazy group lists and runs every command as before."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner
from conftest import FIXTURE_DIR

from advisor.cli import COMMANDS, main

PROBE = """
import json, sys
from advisor.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = ("pandas", "numpy", "pyarrow", "jinja2", "jsonschema", "yaml", "advisor.api",
         "advisor.plugin_manager", "advisor.engine.rules")
print(json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr)
"""


@pytest.mark.parametrize("args", [["--version"], ["--help"], []])
def test_version_and_help_import_nothing_heavy(args: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == []
    assert "advisor" in proc.stdout + proc.stderr  # no arguments: the help, on stderr


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_each_listed_line_is_the_commands_own(name: str) -> None:
    """`advisor --help` shows COMMANDS' lines without importing the commands: each must be
    the first line of the command's own help, and name a click command."""
    module, _, attr = COMMANDS[name][0].partition(":")
    command = getattr(importlib.import_module(module), attr)
    assert isinstance(command, click.Command) and command.name == name
    assert command.get_short_help_str(limit=1000) == COMMANDS[name][1]


def test_help_lists_every_command_and_each_runs() -> None:
    listing = CliRunner().invoke(main, ["--help"])
    assert listing.exit_code == 0
    listed = listing.output.split("Commands:")[1].split()
    assert all(name in listed for name in COMMANDS)
    for name in COMMANDS:
        result = CliRunner().invoke(main, [name, "--help"], prog_name="advisor")
        assert result.exit_code == 0 and f"Usage: advisor {name}" in result.output
    unknown = CliRunner().invoke(main, ["rnu"])
    assert unknown.exit_code == 2 and "No such command 'rnu'" in unknown.output


def test_rules_list_imports_no_parser_nor_the_evaluation(tmp_path) -> None:
    """`rules list`, its cache empty or not, reads the built-in rules as builtin_checks.json
    holds them, checked and parsed: no YAML parser, schema checker or template engine, no
    importlib.metadata (advisor.distributions reads the entry points), no trace decoder or
    file opener of a reader plugin (gzip, orjson, advisor.formats.files, the read-ahead), no
    evaluation and no DataFrame."""
    env = {k: v for k, v in os.environ.items() if k not in ("ADVISOR_NO_CACHE", "ADVISOR_RULES")}
    env["ADVISOR_CACHE_DIR"] = str(tmp_path / "cache")
    probe = PROBE.replace(
        'heavy = ("pandas",',
        'heavy = ("importlib.metadata", "msgspec", "advisor.engine.evaluate", "gzip", '
        '"orjson", "advisor.formats.files", "advisor.formats.read_ahead", '
        '"advisor.render.text", "pandas",',
    ).replace('"advisor.plugin_manager", "advisor.engine.rules"', "")
    runs = [
        subprocess.run(
            [sys.executable, "-c", probe, "rules", "list"],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env=env,
        )
        for _ in range(2)  # with an empty cache, then with what the first one left
    ]
    assert runs[0].stdout == runs[1].stdout and "STEP-001" in runs[1].stdout
    assert [json.loads(run.stderr.strip().splitlines()[-1]) for run in runs] == [[], []]


def test_a_kineto_run_loads_no_reader_of_another_format(tmp_path) -> None:
    """Every reader's `detect` runs on every input: the cluster-output reader's names its
    files from the Ascend layout module, so a Kineto trace loads none of the Ascend reading
    code (the cluster output's reader, the trace_view decoder, CANN's CSV and database
    helpers, sqlite3), about 15 ms of imports in each process."""
    folder = tmp_path / "run"  # a folder: every reader is asked, not only the file's
    folder.mkdir()
    shutil.copy(FIXTURE_DIR / "kineto_own" / "ddp4_rank0.pt.trace.json.gz", folder)
    probe = PROBE.replace(
        'heavy = ("pandas", "numpy", "pyarrow", "jinja2", "jsonschema", "yaml", "advisor.api",\n'
        '         "advisor.plugin_manager", "advisor.engine.rules")',
        'heavy = ("advisor_plugins.ascend_pt.cluster_output", "advisor_plugins.ascend_pt.'
        'trace_view", "advisor.formats.cann_csv", "advisor.formats.cann_db", "sqlite3", '
        '"advisor_plugins.kineto.reader")',
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe, "run", str(folder), "-o", str(tmp_path / "out"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert list((tmp_path / "out").glob("prof_rule*.json")), proc.stderr
    assert json.loads(proc.stderr.strip().splitlines()[-1]) == ["advisor_plugins.kineto.reader"]


ENTRY_PROBE = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(
    m for m in ("ctypes", "hashlib", "tomllib") if m in sys.modules)), file=sys.stderr))
from advisor.cli import entry
sys.argv = ["advisor", *sys.argv[1:]]
entry()
"""


@pytest.mark.parametrize(
    ("args", "allocator"),
    [(["--version"], False), (["rules", "list"], False), (["run", "--help"], True)],
)
def test_only_the_analyses_tune_the_allocator_and_no_command_loads_openssl(
    tmp_path, args: list[str], allocator: bool
) -> None:
    """The executable's path (entry, which ends the process itself): ctypes, which tunes the
    C allocator, is loaded for the commands that analyse profiles alone; with the rule cache
    warm, the user cache names its entries without hashlib (which loads OpenSSL); a folder
    whose pyproject.toml never names advisor loads no TOML parser."""
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n', "utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("ADVISOR_NO_CACHE", "ADVISOR_RULES")}
    env["ADVISOR_CACHE_DIR"] = str(tmp_path / "cache")
    for _ in range(2):  # the first fills the rule cache (parsing loads more)
        proc = subprocess.run(
            [sys.executable, "-c", ENTRY_PROBE, *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stderr.strip().splitlines()[-1])
    assert ("ctypes" in loaded) is (allocator and sys.platform.startswith("linux"))
    assert "hashlib" not in loaded and "tomllib" not in loaded
