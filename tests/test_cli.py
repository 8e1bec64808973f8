"""The command line end to end: outputs, exit codes, bad input, plugins, rule validation."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from advisor.cli import main
from advisor.render.json_report import validate_report

ROOT = Path(__file__).parents[1]
DEMO = ROOT / "advisor/examples/PROF_000001_20260105100000000_DEMO"
SMALL = ROOT / "tests/fixtures/msprof/PROF_000001_20260105093000123_SMALLCASE"
MULTI = ROOT / "tests/fixtures/msprof/PROF_000002_20250610120000456_MULTIDEV"
RAW = ROOT / "tests/fixtures/msprof/PROF_000003_20250101000000000_RAWONLY"
REAL = ROOT / "../shared/fixtures/cann_timeline/PROF_000001_20230818142704322_COJGGGCANRMICFBC"


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def tree_digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
    """Run the real executable, to see exactly what a user sees (tracebacks included)."""
    return subprocess.run([sys.executable, "-m", "advisor", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, **(env or {})},
                          timeout=120)


@pytest.mark.parametrize("profile", [DEMO, SMALL, MULTI, REAL])
def test_run_writes_valid_outputs_and_leaves_input_untouched(tmp_path, profile):
    before = tree_digest(profile)
    result = invoke("run", profile, "-o", tmp_path / "out")
    assert result.exit_code == 0, result.output
    reports = sorted((tmp_path / "out").glob("prof_rule_*.json"))
    assert reports
    for path in reports:
        validate_report(json.loads(path.read_text(encoding="utf-8")))
    html = (tmp_path / "out/report.html").read_text(encoding="utf-8")
    assert "<html" in html and "http://" not in html and "https://" not in html
    assert tree_digest(profile) == before


def test_multi_device_profile_gets_one_report_per_device(tmp_path):
    result = invoke("run", MULTI, "-o", tmp_path, "--format", "json")
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in tmp_path.glob("prof_rule_*.json"))
    assert names == ["prof_rule_0.json", "prof_rule_1.json", "prof_rule_cluster.json"]
    cluster = json.loads((tmp_path / "prof_rule_cluster.json").read_text(encoding="utf-8"))
    assert cluster["profile"]["tables"] == {"ranks": 2}
    assert cluster["rules"]["CLUSTER-001"]["outcome"] == "passed"  # both devices alike


def test_demo_findings_and_tune_ops_file(tmp_path):
    result = invoke("run", DEMO, "-o", tmp_path)
    report = json.loads((tmp_path / "prof_rule_0.json").read_text(encoding="utf-8"))
    fired = {f["rule_id"] for group in report["data"].values() for e in group
             for f in e["result"]}
    assert {"STEP-001", "OP-001", "OP-002", "OP-003"} <= fired
    ranks = sorted((f["rank"], f["impact_us"]) for g in report["data"].values() for e in g
                   for f in e["result"])
    impacts = [i for _, i in ranks if i is not None]
    assert impacts == sorted(impacts, reverse=True)
    tune = json.loads((tmp_path / "operator_tuning_file.cfg").read_text(encoding="utf-8"))
    assert tune["tune_ops_name"] and all(isinstance(n, str) for n in tune["tune_ops_name"])
    assert "Vector operators take a large share" in result.output


def test_fail_on_gates_ci(tmp_path):
    assert invoke("run", DEMO, "-o", tmp_path / "a", "--fail-on", "high").exit_code == 1
    quiet = invoke("run", DEMO, "-o", tmp_path / "b", "--fail-on", "high", "--select", "OP-004")
    assert quiet.exit_code == 0, quiet.output


def test_set_select_ignore_and_thresholds_in_json(tmp_path):
    result = invoke("run", DEMO, "-o", tmp_path, "--format", "json", "--select", "OP-002",
                    "--set", "OP-002.min_duration_us=1000")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "prof_rule_0.json").read_text(encoding="utf-8"))
    assert list(report["rules"]) == ["OP-002"]
    assert report["rules"]["OP-002"]["params"] == {"min_duration_us": 1000}
    assert report["rules"]["OP-002"]["outcome"] == "passed"
    ignored = invoke("run", DEMO, "-o", tmp_path / "i", "--format", "json", "--ignore", "aicpu")
    report = json.loads((tmp_path / "i/prof_rule_0.json").read_text(encoding="utf-8"))
    assert "OP-002" not in report["rules"] and ignored.exit_code == 0


def test_set_may_target_a_rule_outside_the_selection(tmp_path):
    result = invoke("run", DEMO, "-o", tmp_path, "--select", "OP-002",
                    "--set", "STEP-001.max_ratio=0.2")
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("args, message", [
    (["--set", "OP-002.nope=1"], "has no param 'nope'"),
    (["--set", "NOPE-001.x=1"], "no rule 'NOPE-001'"),
    (["--set", "garbage"], "expects ID.param=VALUE"),
    (["--format", "pdf"], "choose from json, html, text"),
])
def test_usage_errors_exit_2(tmp_path, args, message):
    result = invoke("run", DEMO, "-o", tmp_path, *args)
    assert result.exit_code == 2 and message in result.output


def test_output_inside_input_is_refused(tmp_path):
    copy = tmp_path / "PROF_copy"
    shutil.copytree(SMALL, copy)
    before = tree_digest(copy)
    result = invoke("run", copy, "-o", copy / "out")
    assert result.exit_code == 2 and "inside the input" in result.output
    assert tree_digest(copy) == before


@pytest.mark.parametrize("make, expected", [
    (lambda p: p.mkdir(), "an empty directory"),
    (lambda p: (p.mkdir(), (p / "notes.txt").write_text("hello")), "nothing advisor can read"),
    (lambda p: None, "no such file or directory"),
])
def test_unreadable_inputs_exit_3_with_one_line(tmp_path, make, expected):
    target = tmp_path / "input"
    make(target)
    proc = cli("run", target, "-o", tmp_path / "out")
    assert proc.returncode == 3
    assert expected in proc.stderr and str(target) in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_raw_only_profile_tells_how_to_export(tmp_path):
    proc = cli("run", RAW, "-o", tmp_path / "out")
    assert proc.returncode == 3
    assert "msprof --export=on" in proc.stderr and "Traceback" not in proc.stderr


def test_one_bad_input_does_not_stop_the_others(tmp_path):
    result = invoke("run", SMALL, tmp_path / "missing", "-o", tmp_path / "out", "--format", "json")
    assert result.exit_code == 3
    assert (tmp_path / "out/prof_rule_0.json").exists()


def test_broken_file_is_a_warning_and_the_rest_is_analysed(tmp_path):
    copy = tmp_path / "PROF_broken"
    shutil.copytree(SMALL, copy)
    (next(copy.rglob("op_summary_*.csv"))).write_text("Device_id,Op Name\n0,x\n")
    proc = cli("run", copy, "-o", tmp_path / "out", "--format", "json,text")
    assert proc.returncode == 0, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "op_summary" in x]
    assert str(copy) in line and "missing column 'Task Type'" in line
    assert line.count("Task Type") == 1
    report = json.loads((tmp_path / "out/prof_rule_0.json").read_text(encoding="utf-8"))
    assert report["profile"]["tables"]["steps"] == 5
    assert any("Task Type" in w["problem"] for w in report["warnings"])


def test_not_applicable_rules_name_what_is_missing(tmp_path):
    invoke("run", REAL, "-o", tmp_path, "--format", "json")
    report = json.loads((tmp_path / "prof_rule_0.json").read_text(encoding="utf-8"))
    missing = {n["rule_id"]: n["missing"] for n in report["not_applicable"]}
    assert "device_ops.wait_us" not in missing.get("OP-003", [])
    assert all(m for m in missing.values())


BAD_RULES = {
    "unknown key": ("color: red\n", "Additional properties are not allowed ('color'"),
    "bad severity": ("severity: urgent\n", "'urgent' is not one of"),
    "attribute access": ("when: steps.duration_us.real > 0\n", "attribute access"),
    "unknown name": ("when: mystery > 1\n", "mystery"),
}


@pytest.mark.parametrize("case", BAD_RULES)
def test_rules_validate_rejects_with_file_and_rule_id(tmp_path, case):
    extra, message = BAD_RULES[case]
    rule = textwrap.dedent("""\
        id: TEAM-007
        name: team-rule
        title: A team rule
        type: Custom
        message: hi
        suggestions: [do it]
        docs: A rule used to test validation messages.
        """)
    if not extra.startswith("when:"):
        rule += "when: 1 > 0\n"
    path = tmp_path / "team.yaml"
    path.write_text(rule + extra, encoding="utf-8")
    result = invoke("rules", "validate", path)
    assert result.exit_code == 2
    assert str(path) in result.output and "TEAM-007" in result.output and message in result.output


def test_rules_validate_accepts_builtin_pack():
    result = invoke("rules", "validate", ROOT / "rules")
    assert result.exit_code == 0 and "0 error(s)" in result.output


def test_invalid_user_rules_stop_run_with_exit_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("id: X\n", encoding="utf-8")
    result = invoke("run", DEMO, "-o", tmp_path / "out", "--rules", path)
    assert result.exit_code == 2 and str(path) in result.output


def test_user_rule_replaces_builtin_and_is_listed(tmp_path):
    source = (ROOT / "rules/step.yaml").read_text(encoding="utf-8")
    team = tmp_path / "team.yaml"
    team.write_text(source.replace("Data augmentation bound is high", "Team version of input wait"),
                    encoding="utf-8")
    listing = invoke("rules", "list", "--rules", team)
    line = next(x for x in listing.output.splitlines() if x.startswith("STEP-001"))
    assert "Team version of input wait" in line and str(team) in line
    run = invoke("run", DEMO, "-o", tmp_path / "out", "--rules", team, "--format", "json,html")
    assert run.exit_code == 0 and f"STEP-001 from {team} replaces" in run.output
    report = json.loads((tmp_path / "out" / "prof_rule_0.json").read_text(encoding="utf-8"))
    notes = report["advisor"]["rule_overrides"]  # the file holds every step rule
    assert sorted(n.split()[0] for n in notes) == ["STEP-001", "STEP-002"]
    assert all(f"from {team} replaces the built-in one" in n for n in notes)
    validate_report(report)
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "Rules replaced" in html and str(team) in html
    shown = invoke("rules", "show", "STEP-001")
    assert "max_ratio = 0.1" in shown.output and "Data Aug Bound" in shown.output


def test_plugins_list_shows_builtins_with_distribution():
    result = invoke("plugins", "list")
    assert result.exit_code == 0
    for name in ("msprof", "step_metrics", "builtin_rules"):
        assert any(line.startswith(f"{name} (advisor 0.1.0) [loaded]")
                   for line in result.output.splitlines()), result.output
    assert "reader msprof" in result.output


def test_blocked_plugin_is_not_loaded(tmp_path):
    listing = invoke("plugins", "list", env={"ADVISOR_BLOCK_PLUGINS": "msprof"})
    assert "msprof (advisor 0.1.0) [blocked]" in listing.output
    result = invoke("run", DEMO, "-o", tmp_path, env={"ADVISOR_BLOCK_PLUGINS": "msprof"})
    assert result.exit_code == 3 and "nothing advisor can read" in result.output


@pytest.mark.parametrize("where", ["import", "hook"])
def test_broken_third_party_plugin_is_reported_and_skipped(tmp_path, where):
    site = tmp_path / "site"
    dist = site / "brokenplug-1.2.3.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 1.2.3\n")
    (dist / "entry_points.txt").write_text("[advisor]\nbroken = brokenplug\n")
    body = ("raise RuntimeError('boom at import')\n" if where == "import" else
            "from advisor import hookimpl\n\n@hookimpl\ndef advisor_readers():\n"
            "    raise RuntimeError('boom in hook')\n")
    (site / "brokenplug.py").write_text(body)
    env = {"PYTHONPATH": str(site)}
    listing = cli("plugins", "list", env=env)
    assert "broken (brokenplug 1.2.3) [failed]" in listing.stdout
    assert "boom" in listing.stdout
    run = cli("run", DEMO, "-o", tmp_path / "out", "--format", "json", env=env)
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("broken (brokenplug 1.2.3) [failed]") == 1
    assert "Traceback" not in run.stderr
    assert (tmp_path / "out/prof_rule_0.json").exists()


def test_inspect_lists_tables_and_rows():
    result = invoke("inspect", SMALL)
    assert result.exit_code == 0
    assert "msprof-summary" in result.output
    assert any(line.split()[:2] == ["device_ops", "36"] for line in result.output.splitlines())


@pytest.mark.parametrize("command", [["run"], ["rules", "list"], ["rules", "show"],
                                     ["rules", "validate"], ["plugins", "list"], ["inspect"]])
def test_every_command_help_has_an_example(command):
    result = invoke(*command, "--help")
    assert result.exit_code == 0 and "Example:" in result.output and "advisor " in result.output


def test_default_output_folder_is_created_in_working_directory(tmp_path):
    proc = cli("run", DEMO, "--format", "json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (folder,) = tmp_path.glob("advisor-report-*")
    assert (folder / "prof_rule_0.json").exists()


def test_internal_error_is_one_line_unless_debug(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("advisor.cli.analyze", broken)
    result = invoke("run", DEMO, "-o", tmp_path)
    assert result.exit_code == 4
    assert result.output.strip() == ("advisor: internal error: RuntimeError: boom "
                                     "(run with --debug for details)")
    debug = invoke("run", DEMO, "-o", tmp_path, "--debug")
    assert isinstance(debug.exception, RuntimeError)
