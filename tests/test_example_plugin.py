"""The example plugin package works as a real third-party distribution, and the guide shows it.

The installed tests build wheels of advisor and of examples/advisor-optiming and install both
into a fresh virtual environment (no index, no dependencies: those come from the running
environment through a .pth file), so they prove plugins are found through entry points only.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pandas as pd
import pytest
from conftest import ROOT

import advisor
from advisor.errors import UnreadableInput
from advisor.model import contract_problems
from advisor.plugin_manager import PluginHost

pytestmark = pytest.mark.integration

EXAMPLE = ROOT / "examples/advisor-optiming"
PACKAGE = EXAMPLE / "src/advisor_optiming"
SAMPLE = EXAMPLE / "sample/train.optiming.csv"
HEADER = "step,op_name,op_type,core_type,device,start_us,duration_us\n"


def pip(*args: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "pip", *args, "-q", "--no-index", "--no-deps"],
        check=True,
        timeout=300,
        capture_output=True,
    )


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A fresh virtual environment holding advisor and advisor-optiming as built wheels."""
    work = tmp_path_factory.mktemp("example_plugin")
    source = work / "advisor-optiming"  # a copy, so the build leaves the checkout untouched
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    pip("wheel", "--no-build-isolation", "-w", str(work / "wheels"), str(ROOT), str(source))
    env = work / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120
    )
    python = env / "bin/python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # Dependencies (pandas, pluggy, ...) from the running environment's site-packages only:
    # those folders' own .pth files (an editable advisor) are not processed from here.
    Path(purelib, "_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    pip("--python", str(python), "install", *map(str, (work / "wheels").glob("*.whl")))
    return env


def run_venv(
    env: Path, cwd: Path, *args: str, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(
        [str(env / "bin/advisor"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**environ, **extra_env},
    )


def test_installed_plugin_and_its_reader_are_listed(venv, tmp_path):
    proc = run_venv(venv, tmp_path, "plugins", "list")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "optiming (advisor-optiming 0.1.0) [loaded]" in lines
    reader = lines[lines.index("optiming (advisor-optiming 0.1.0) [loaded]") + 1]
    assert reader.startswith("    reader optiming: op-timing CSV (*.optiming.csv")
    assert "msprof (dl-perf-advisor 0.1.0) [loaded]" in lines  # the installed core
    assert "[failed]" not in proc.stdout


def test_installed_plugin_reads_the_sample_and_its_rule_fires(venv, tmp_path):
    proc = run_venv(venv, tmp_path, "run", str(SAMPLE), "-o", "out")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out/prof_rule_0.json").read_text(encoding="utf-8"))
    assert report["profile"]["source_format"] == "optiming-csv"
    findings = [r for group in report["data"].values() for item in group for r in item["result"]]
    fired = {f["rule_id"]: f for f in findings}
    assert "OPTIMING-001" in fired and "step 3" in fired["OPTIMING-001"]["message"]
    assert fired["OPTIMING-001"]["impact_us"] == pytest.approx(3410 - 1.5 * 900)
    assert report["rules"]["OPTIMING-001"]["source"].startswith(str(venv))
    assert [(w["line"], w["reader"]) for w in report["warnings"]] == [(15, "optiming")] * 2
    assert f"{SAMPLE}:15: row skipped: no duration_us" in proc.stderr
    html = (tmp_path / "out/report.html").read_text(encoding="utf-8")
    assert "Steps and their longest operator (device 0)" in html
    assert "Default/NonZero-op5" in html


def test_no_builtin_reader_claims_the_sample(venv, tmp_path):
    proc = run_venv(
        venv, tmp_path, "run", str(SAMPLE), "-o", "out", ADVISOR_BLOCK_PLUGINS="optiming"
    )
    assert proc.returncode == 3
    assert f"{SAMPLE}: nothing advisor can read" in proc.stderr


@pytest.fixture(scope="module")
def plugin() -> ModuleType:
    """The example's hook module imported from its source folder, for in-process tests."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(PACKAGE.parent))
        return importlib.import_module("advisor_optiming.plugin")


def write(tmp_path: Path, rows: str, name: str = "run.optiming.csv") -> Path:
    path = tmp_path / name
    path.write_text(HEADER + rows, encoding="utf-8")
    return path


def test_detect_needs_the_suffix_and_the_columns(plugin, tmp_path):
    reader = plugin.OpTimingReader()
    assert reader.detect(SAMPLE)
    assert not reader.detect(write(tmp_path, "", "run.csv"))
    other = tmp_path / "x.optiming.csv"
    other.write_text("step,op_name,duration_us\n1,a,2\n", encoding="utf-8")
    assert not reader.detect(other)
    assert not reader.detect(tmp_path)


def test_one_profile_per_device_with_rebased_times(plugin, tmp_path):
    path = write(
        tmp_path,
        "1,mm,MatMulV2,ai_core,1,5000,10\n1,ar,AllReduce,COMMUNICATION,0,"
        "2000,30\n2,mm,MatMulV2,AI_CORE,0,2100,10\n",
    )
    profiles = plugin.OpTimingReader().read(path)
    assert [p.meta.device_id for p in profiles] == ["0", "1"]
    assert all(contract_problems(p) == [] and p.warnings == [] for p in profiles)
    ops = profiles[0].tables["device_ops"]
    assert ops["start_us"].tolist() == [0.0, 100.0]
    assert ops["category"].tolist() == ["communication", "compute"]
    assert profiles[0].meta.extra["time_origin_us"] == 2000.0
    assert profiles[1].tables["device_ops"]["core_type"].tolist() == ["AI_CORE"]


def test_bad_rows_are_skipped_with_one_warning_each(plugin, tmp_path):
    path = write(
        tmp_path,
        "1,mm,MatMulV2,AI_CORE,0,0,10\n1,,Cast,AI_CORE,0,20,5\nx,mm,MatMulV2,AI_CORE,0,30,-1\n",
    )
    (profile,) = plugin.OpTimingReader().read(path)
    assert len(profile.tables["device_ops"]) == 1
    problems = [(w.line, w.problem) for w in profile.warnings]
    assert (3, "row skipped: empty op_name") in problems
    assert (4, "row skipped: no step, negative duration_us") in problems
    assert any(line == 4 and "'x'" in problem for line, problem in problems)


def test_many_bad_rows_are_counted_not_listed(plugin, tmp_path):
    path = write(tmp_path, "1,mm,MatMulV2,AI_CORE,0,0,10\n" + "1,mm,MatMulV2,AI_CORE,0,0,\n" * 25)
    (profile,) = plugin.OpTimingReader().read(path)
    assert [w.line for w in profile.warnings] == list(range(3, 23)) + [None]
    assert profile.warnings[-1].problem == "5 more rows skipped"


@pytest.mark.parametrize(
    ("rows", "problem"),
    [
        ("", "no row has"),
        ("1,,MatMulV2,AI_CORE,0,0,10\n", "no row has"),
    ],
)
def test_file_without_usable_rows_is_unreadable(plugin, tmp_path, rows, problem):
    with pytest.raises(UnreadableInput, match=problem):
        plugin.OpTimingReader().read(write(tmp_path, rows))


def test_file_missing_a_column_is_unreadable(plugin, tmp_path):
    path = tmp_path / "run.optiming.csv"
    path.write_text(
        "step,op_name,op_type,core_type,start_us,duration_us\n1,a,b,AI_CORE,0,1\n", encoding="utf-8"
    )
    with pytest.raises(UnreadableInput, match="missing column.s.: device"):
        plugin.OpTimingReader().read(path)


def test_steps_provider_spans_first_start_to_last_end(plugin, tmp_path):
    path = write(
        tmp_path, "1,a,A,AI_CORE,0,100,10\n1,b,B,AI_CORE,0,150,20\n2,a,A,AI_CORE,0,300,5\n"
    )
    (profile,) = plugin.OpTimingReader().read(path)
    plugin.STEPS.compute(profile)
    steps = profile.tables["steps"]
    assert steps[["step", "start_us", "end_us", "duration_us"]].values.tolist() == [
        [1, 0.0, 70.0, 70.0],
        [2, 200.0, 205.0, 5.0],
    ]
    assert contract_problems(profile) == []


def test_excess_over_sums_what_exceeds_the_limit(plugin):
    assert plugin.excess_over(pd.Series([1.0, 5.0, None, 9.0]), 4.0) == 6.0
    assert plugin.excess_over(3.0, 4.0) == 0.0
    with pytest.raises(TypeError, match="limit must be a number"):
        plugin.excess_over(pd.Series([1.0]), "4")


def test_in_process_analysis_matches_the_guide(plugin):
    host = PluginHost(extra=[("optiming", plugin)])
    result = advisor.analyze(SAMPLE, host=host)
    assert result.input_errors == [] and host.failed() == []
    (analysis,) = result.analyses
    assert "OPTIMING-001" in {f.rule.id for f in analysis.findings}
    # The plugin's own table, filled by a provider that needs another provider's steps first.
    dominated = next(f for f in analysis.findings if f.rule.id == "OPTIMING-002")
    assert dominated.values["worst_step"] == 3 and dominated.impact_us == 2500
    assert analysis.tables["step_longest_ops"]["step_share"].round(3).tolist() == [
        0.444,
        0.444,
        0.733,
        0.444,
        0.444,
    ]
    assert [s.title for s in host.report_sections(analysis)] == [
        "Steps and their longest operator (device 0)"
    ]


def guide_blocks() -> dict[str, str]:
    """Code blocks of docs/plugins.md that follow a line naming a package file: path -> text."""
    text = (ROOT / "docs/plugins.md").read_text(encoding="utf-8")
    found = re.findall(r"^`([\w./-]+)`:\n\n```\w*\n(.*?)^```", text, flags=re.M | re.S)
    return dict(found)


@pytest.mark.parametrize(
    "name",
    [
        "pyproject.toml",
        "src/advisor_optiming/reader.py",
        "src/advisor_optiming/plugin.py",
        "src/advisor_optiming/rules/optiming.yaml",
    ],
)
def test_guide_shows_the_package_files_as_they_are(name):
    blocks = guide_blocks()
    assert name in blocks, f"docs/plugins.md does not show {name}"
    assert blocks[name] == (EXAMPLE / name).read_text(encoding="utf-8")
