"""The garbage collector of a command-line run (advisor.collector): tuned and frozen in the
`advisor` process, left alone where a program calls advisor in its own process."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from conftest import DEMO

from advisor.cli import main
from advisor.collector import YOUNG_COLLECTION_EVERY

PROBE = """
import gc, json, sys
from advisor.cli import entry
sys.argv = ["advisor", "run", sys.argv[1], "-o", sys.argv[2], "--format", "json", "--quiet"]
try:
    entry()
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "threshold": gc.get_threshold(), "frozen": gc.get_freeze_count()}))
"""


def test_the_advisor_process_collects_less_often_and_freezes_its_imports(tmp_path: Path) -> None:
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(DEMO), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state["code"] == 0
    assert state["threshold"][0] == YOUNG_COLLECTION_EVERY
    # pandas, numpy and pyarrow alone leave tens of thousands of objects alive
    assert state["frozen"] > 20_000
    assert (out / "prof_rule_0.json").is_file()


def test_a_program_calling_the_command_keeps_its_collector(tmp_path: Path) -> None:
    threshold, frozen = gc.get_threshold(), gc.get_freeze_count()
    result = CliRunner().invoke(
        main, ["run", str(DEMO), "-o", str(tmp_path / "out"), "--format", "json", "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert gc.get_threshold() == threshold
    assert gc.get_freeze_count() == frozen
