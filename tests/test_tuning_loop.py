"""advisor → AOE → advisor, end to end with the CLI: the report says which advised operators
AOE tuned, with what result, and which it did not tune."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import FIXTURE_DIR

from advisor.cli import main
from advisor.render.json_report import validate_report

SMALL = FIXTURE_DIR / "msprof/PROF_000001_20260105093000123_SMALLCASE"
AOE = FIXTURE_DIR / "aoe/good/aoe_result_opat_20260105103000123_pid4242.json"
MISSING_COMMA = FIXTURE_DIR / "aoe/malformed/aoe_result_opat_missing_comma.json"


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def expected_loop(advised: list[str]) -> dict:
    """What the loop must say, computed from the AOE file with the standard json module."""
    outcome: dict[str, list[tuple]] = {}
    for key, sections in json.loads(AOE.read_text(encoding="utf-8"), object_pairs_hook=list):
        opat = dict(dict(sections[1])["OPAT"])
        for op in opat["repo_modified_operators"]:
            op = dict(op)
            for mode, perf in op["tune_performance"]:
                perf = dict(perf)
                before = perf["performance_before_tune(us)"]
                after = perf["performance_after_tune(us)"]
                outcome.setdefault(op["op_name"], []).append(
                    (mode, before, after, "regressed" if after > before else "improved", key)
                )
        for name in opat.get("tuning_failed_operators", []):
            outcome.setdefault(name, []).append((None, None, None, "failed", key))
    tuned = [(name, *row) for name in outcome if name in advised for row in outcome[name]]
    return {"tuned": tuned, "not_tuned": [n for n in advised if n not in outcome]}


def run_loop(tmp_path: Path, *inputs: Path) -> tuple[dict, str, list[str]]:
    out = tmp_path / "out"
    result = invoke("run", *inputs, "-o", out, "--format", "json,html", "-q")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "prof_rule_0.json").read_text(encoding="utf-8"))
    validate_report(report)
    advised = json.loads((out / "operator_tuning_file.cfg").read_text(encoding="utf-8"))
    return report, (out / "report.html").read_text(encoding="utf-8"), advised["tune_ops_name"]


def check(report: dict, advised: list[str]) -> None:
    loop = report["tuning_loop"]
    want = expected_loop(advised)
    assert loop["advised"] == advised
    assert [
        (r["name"], r["mode"], r["before_us"], r["after_us"], r["status"], r["task"])
        for r in loop["tuned"]
    ] == want["tuned"]
    assert loop["not_tuned"] == want["not_tuned"]
    statuses = [row[4] for row in want["tuned"]]
    assert loop["summary"] == {
        "advised": len(advised),
        "tuned": len(advised) - len(want["not_tuned"]),
        "not_tuned": len(want["not_tuned"]),
        "improved": statuses.count("improved"),
        "regressed": statuses.count("regressed"),
        "failed": statuses.count("failed"),
        "incomplete": 0,
    }


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """A copy of the msprof SMALLCASE fixture with the AOE result in the folder above it."""
    root = tmp_path / "work"
    shutil.copytree(SMALL, root / SMALL.name)
    shutil.copy(AOE, root)
    return root


def test_results_next_to_the_profile_close_the_loop(tmp_path, workdir):
    before = digest(workdir)
    report, html, advised = run_loop(tmp_path, workdir / SMALL.name)
    # the fixture tunes three of the five advised convolutions: improved, regressed, failed;
    # the Ascend compute rules (OP-009/010/011) advise more operators, which AOE did not tune
    assert len([n for n in advised if n.endswith("conv1/Conv2D")]) == 5
    assert len(advised) == len(set(advised))
    check(report, advised)
    assert report["tuning_loop"]["sources"] == [str((workdir / AOE.name).resolve())]
    assert "AOE tuning of the advised operators" in html
    assert "model/layer4/conv1/Conv2D" in html and "regressed" in html
    assert digest(workdir) == before  # nothing written into the input


def test_results_given_on_the_command_line(tmp_path):
    aoe_dir = tmp_path / "aoe_run"
    aoe_dir.mkdir()
    shutil.copy(AOE, aoe_dir)
    report, _, advised = run_loop(tmp_path, SMALL, aoe_dir / AOE.name)
    check(report, advised)
    reports = sorted(p.name for p in (tmp_path / "out").glob("prof_rule_*.json"))
    assert len(reports) == 2  # the profile and the AOE results, each read once
    aoe_report = json.loads((tmp_path / "out" / reports[1]).read_text(encoding="utf-8"))
    assert "tuning_loop" not in aoe_report
    fired = {f["rule_id"] for g in aoe_report["data"].values() for e in g for f in e["result"]}
    assert {"AOE-001", "AOE-003", "AOE-005"} <= fired


def test_results_inside_the_profile_folder(tmp_path):
    prof = tmp_path / SMALL.name
    shutil.copytree(SMALL, prof)
    shutil.copy(AOE, prof)
    report, _, advised = run_loop(tmp_path, prof)
    check(report, advised)


def test_no_results_no_loop(tmp_path):
    out = tmp_path / "out"
    assert invoke("run", SMALL, "-o", out, "--format", "json", "-q").exit_code == 0
    report = json.loads((out / "prof_rule_0.json").read_text(encoding="utf-8"))
    assert "tuning_loop" not in report


def test_broken_results_next_to_the_profile_warn_in_one_line(tmp_path, workdir):
    shutil.copy(MISSING_COMMA, workdir)
    (workdir / "aoe_result_opat_empty.json").write_text("", encoding="utf-8")
    out = tmp_path / "out"
    result = invoke("run", workdir / SMALL.name, "-o", out, "--format", "json")
    assert "Traceback" not in result.output
    assert f"{workdir / 'aoe_result_opat_empty.json'}: empty file" in result.output
    assert result.exit_code == 0  # files found beside the profile warn; they never fail the run
    comma = [
        line
        for line in result.output.splitlines()
        if "warning:" in line and "aoe_result_opat_missing_comma.json" in line
    ]
    assert len(comma) == 1 and "missing comma" in comma[0]
    report = json.loads((out / "prof_rule_0.json").read_text(encoding="utf-8"))
    assert report["tuning_loop"]["summary"]["tuned"] == 3


def test_terminal_summary_has_one_loop_line(tmp_path, workdir):
    result = invoke("run", workdir / SMALL.name, "-o", tmp_path / "out", "--format", "json,text")
    assert result.exit_code == 0, result.output
    advised = json.loads(
        (tmp_path / "out" / "operator_tuning_file.cfg").read_text(encoding="utf-8")
    )["tune_ops_name"]
    want = expected_loop(advised)
    statuses = [row[4] for row in want["tuned"]]
    tuned = len(advised) - len(want["not_tuned"])
    line = (
        f"AOE: {tuned} of {len(advised)} advised operators tuned "
        f"({statuses.count('improved')} improved, {statuses.count('regressed')} regressed, "
        f"{statuses.count('failed')} failed), {len(want['not_tuned'])} not tuned"
    )
    assert line in result.output


def test_report_of_a_single_file_is_named_after_its_stem(tmp_path):
    out = tmp_path / "out"
    result = invoke("run", AOE, "-o", out, "--format", "json", "-q")
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.glob("prof_rule_*.json")] == [
        "prof_rule_aoe_result_opat_20260105103000123_pid4242.json"
    ]
