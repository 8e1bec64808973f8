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
from clirunner import separate_runner
from conftest import DEMO, FIXTURE_DIR, ROOT

from advisor.cli import main
from advisor.cli.run import FORMATS
from advisor.render.json_report import validate_report

SMALL = FIXTURE_DIR / "msprof/PROF_000001_20260105093000123_SMALLCASE"
MULTI = FIXTURE_DIR / "msprof/PROF_000002_20250610120000456_MULTIDEV"
RAW = FIXTURE_DIR / "msprof/PROF_000003_20250101000000000_RAWONLY"
REAL = FIXTURE_DIR / "real/cann_timeline/PROF_000001_20230818142704322_COJGGGCANRMICFBC"


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def tree_digest(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None):
    """Run the real executable, to see exactly what a user sees (tracebacks included)."""
    return subprocess.run(
        [sys.executable, "-m", "advisor", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


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
    fired = {f["rule_id"] for group in report["data"].values() for e in group for f in e["result"]}
    assert {"STEP-001", "OP-001", "OP-002", "OP-003"} <= fired
    ranks = sorted(
        (f["rank"], f["impact_us"]) for g in report["data"].values() for e in g for f in e["result"]
    )
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
    result = invoke(
        "run",
        DEMO,
        "-o",
        tmp_path,
        "--format",
        "json",
        "--select",
        "OP-002",
        "--set",
        "OP-002.min_duration_us=1000",
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "prof_rule_0.json").read_text(encoding="utf-8"))
    assert list(report["rules"]) == ["OP-002"]
    assert report["rules"]["OP-002"]["params"] == {"min_duration_us": 1000}
    assert report["rules"]["OP-002"]["outcome"] == "passed"
    ignored = invoke("run", DEMO, "-o", tmp_path / "i", "--format", "json", "--ignore", "aicpu")
    report = json.loads((tmp_path / "i/prof_rule_0.json").read_text(encoding="utf-8"))
    assert "OP-002" not in report["rules"] and ignored.exit_code == 0


def test_set_may_target_a_rule_outside_the_selection(tmp_path):
    result = invoke(
        "run", DEMO, "-o", tmp_path, "--select", "OP-002", "--set", "STEP-001.max_ratio=0.2"
    )
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--set", "OP-002.nope=1"], "has no param 'nope'"),
        (["--set", "NOPE-001.x=1"], "no rule 'NOPE-001'"),
        (["--set", "garbage"], "expects ID.param=VALUE"),
        (["--format", "pdf"], f"choose from {', '.join(FORMATS)}"),
    ],
)
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


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda p: p.mkdir(), "an empty directory"),
        (lambda p: (p.mkdir(), (p / "notes.txt").write_text("hello")), "nothing advisor can read"),
        (lambda p: None, "no such file or directory"),
    ],
)
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
    team.write_text(
        source.replace("Data augmentation bound is high", "Team version of input wait"),
        encoding="utf-8",
    )
    listing = invoke("rules", "list", "--rules", team)
    line = next(x for x in listing.output.splitlines() if x.startswith("STEP-001"))
    assert "Team version of input wait" in line and str(team) in line
    run = invoke("run", DEMO, "-o", tmp_path / "out", "--rules", team, "--format", "json,html")
    assert run.exit_code == 0 and f"STEP-001 from {team} replaces" in run.output
    report = json.loads((tmp_path / "out" / "prof_rule_0.json").read_text(encoding="utf-8"))
    notes = report["advisor"]["rule_overrides"]  # the file holds every step rule
    ids = sorted(
        line.split(":", 1)[1].strip() for line in source.splitlines() if line.startswith("- id:")
    )
    assert len(ids) >= 2 and sorted(n.split()[0] for n in notes) == ids
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
        assert any(
            line.startswith(f"{name} (dl-perf-advisor 0.1.0) [loaded]")
            for line in result.output.splitlines()
        ), result.output
    assert "reader msprof" in result.output


def test_blocked_plugin_is_not_loaded(tmp_path):
    listing = invoke("plugins", "list", env={"ADVISOR_BLOCK_PLUGINS": "msprof"})
    assert "msprof (dl-perf-advisor 0.1.0) [blocked]" in listing.output
    result = invoke("run", DEMO, "-o", tmp_path, env={"ADVISOR_BLOCK_PLUGINS": "msprof"})
    assert result.exit_code == 3 and "nothing advisor can read" in result.output


@pytest.mark.parametrize("where", ["import", "hook"])
def test_broken_third_party_plugin_is_reported_and_skipped(tmp_path, where):
    site = tmp_path / "site"
    dist = site / "brokenplug-1.2.3.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 1.2.3\n")
    (dist / "entry_points.txt").write_text("[advisor]\nbroken = brokenplug\n")
    body = (
        "raise RuntimeError('boom at import')\n"
        if where == "import"
        else "from advisor import hookimpl\n\n@hookimpl\ndef advisor_readers():\n"
        "    raise RuntimeError('boom in hook')\n"
    )
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


def test_inspect_in_chinese_keeps_the_contract_names():
    """--lang zh: the words and the warnings in Chinese; table and column names, counts and
    paths as in English (they are the contract's names, which rules and scripts use)."""
    english = invoke("inspect", SMALL).output.splitlines()
    chinese = invoke("inspect", SMALL, "--lang", "zh").output.splitlines()
    assert len(chinese) == len(english)
    assert chinese[0] == english[0].replace(": ", "：", 1).replace(" (", "（").replace(
        ", ", "，"
    ).replace(") at ", "），位于 ")
    tables = [line.split() for line in english if line.split()[2:3] == ["rows"]]
    assert tables and all(
        line.split()[:2] + line.split()[3:] == t[:2] + t[3:] and line.split()[2] == "行"
        for line, t in zip(chinese[1 : 1 + len(tables)], tables)
    )
    assert any(line.strip().startswith("已读取文件：") for line in chinese)
    assert not any("warning:" in line or "files read" in line for line in chinese)


@pytest.mark.parametrize(
    "command",
    [
        ["run"],
        ["rules", "list"],
        ["rules", "show"],
        ["rules", "validate"],
        ["plugins", "list"],
        ["inspect"],
    ],
)
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

    monkeypatch.setattr("advisor.cli.run.analyze", broken)
    result = invoke("run", DEMO, "-o", tmp_path)
    assert result.exit_code == 4
    assert result.output.strip() == (
        "advisor: internal error: RuntimeError: boom (run with --debug for details)"
    )
    debug = invoke("run", DEMO, "-o", tmp_path, "--debug")
    assert isinstance(debug.exception, RuntimeError)


# --- output a user can trust at first sight -------------------------------------------------

OWN = FIXTURE_DIR / "kineto_own"
ANSI = "\x1b["


def ddp_ranks(folder: Path, ranks=(0, 1)) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for rank in ranks:
        shutil.copy(OWN / f"ddp4_rank{rank}.pt.trace.json.gz", folder)
    return folder


def test_dash_output_is_one_json_document_on_stdout(tmp_path):
    proc = cli("run", DEMO, "-o", "-", "--lang", "en", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    validate_report(report)
    assert report["profile"]["source_format"].startswith("msprof")
    assert "Data augmentation bound is high" in proc.stderr  # the summary goes to stderr
    assert list(tmp_path.iterdir()) == []  # no folder named -, no default folder


def test_dash_output_of_several_profiles_holds_every_report(tmp_path):
    ranks = ddp_ranks(tmp_path / "ranks")
    proc = cli("run", ranks, "-o", "-", "-q", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert list(document) == ["reports"]
    kinds = [(r["profile"]["source_format"], r["profile"].get("rank")) for r in document["reports"]]
    assert kinds == [("kineto", 0), ("kineto", 1), ("cluster", None)]
    assert "(cluster" not in proc.stderr  # -q: no summary anywhere
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ranks"]


def test_dash_output_refuses_an_explicit_html(tmp_path):
    result = invoke("run", DEMO, "-o", "-", "--format", "json,html")
    assert result.exit_code == 2 and "--format html needs a folder" in result.output
    assert not Path("-").exists()


def test_compare_dash_output(tmp_path):
    proc = cli(
        "compare",
        OWN / "compare_base.pt.trace.json.gz",
        OWN / "compare_slow.pt.trace.json.gz",
        "-o",
        "-",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert set(document) == {"compare", "report"}
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["run", "compare"])
def test_format_text_alone_writes_no_folder(tmp_path, command):
    inputs = (
        [DEMO]
        if command == "run"
        else [OWN / "compare_base.pt.trace.json.gz", OWN / "compare_slow.pt.trace.json.gz"]
    )
    proc = cli(command, *inputs, "--format", "text", "--lang", "en", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    again = cli(command, *inputs, "--format", "text", "-o", tmp_path / "out", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert list(tmp_path.iterdir()) == []
    for output in (proc.stdout, again.stdout):
        assert "Wrote" not in output and "--format html" not in output
        assert "details in" not in output


def test_closing_line_names_the_files_written(tmp_path):
    proc = cli("run", DEMO, "-o", "out", "--lang", "en", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.rstrip().splitlines()[-1]
        == "Wrote report.html, prof_rule_0.json, traces/, operator_tuning_file.cfg in out"
    )
    assert "(details in report.html)" in proc.stdout
    assert "use --format html or json" not in proc.stdout
    only_json = cli("run", DEMO, "-o", "js", "--lang", "en", "--format", "json,text", cwd=tmp_path)
    assert "(details in prof_rule_0.json)" in only_json.stdout
    assert "Wrote prof_rule_0.json, operator_tuning_file.cfg in js" in only_json.stdout


@pytest.mark.parametrize(
    "env, coloured",
    [
        ({"FORCE_COLOR": "1"}, True),
        ({"FORCE_COLOR": "1", "NO_COLOR": "1"}, False),
        ({}, False),
    ],
)
def test_no_color_wins_over_forced_colour(tmp_path, env, coloured):
    base = {"NO_COLOR": "", "FORCE_COLOR": ""}  # whatever the test runner's terminal says
    proc = cli("run", DEMO, "-o", tmp_path / "out", "--lang", "en", env={**base, **env})
    assert proc.returncode == 0, proc.stderr
    assert (ANSI in proc.stdout) is coloured


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_summary_fits_the_terminal_width(tmp_path, lang):
    import unicodedata

    proc = cli(
        "run",
        DEMO,
        "-o",
        "out",
        "--lang",
        lang,
        cwd=tmp_path,
        env={"COLUMNS": "70", "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    widths = [
        sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)
        for line in proc.stdout.splitlines()
    ]
    assert max(widths) <= 70 and max(widths) > 60, proc.stdout


def test_fail_on_names_the_findings_that_tripped_it(tmp_path):
    proc = cli("run", DEMO, "-o", tmp_path / "out", "--fail-on", "medium", "--lang", "en")
    assert proc.returncode == 1
    (line,) = [x for x in proc.stderr.splitlines() if "--fail-on" in x]
    report = json.loads((tmp_path / "out" / "prof_rule_0.json").read_text(encoding="utf-8"))
    tripped = [
        r
        for group in report["data"].values()
        for item in group
        for r in item["result"]
        if r["severity"] in ("high", "medium")
    ]
    assert len(tripped) > 1
    assert line.startswith(
        f"advisor: --fail-on medium: {len(tripped)} findings at or above medium: "
    )
    assert "STEP-001 (high, rank 0)" in line and "OP-004" not in line  # low: not listed
    passed = cli("run", DEMO, "-o", tmp_path / "b", "--fail-on", "high", "--select", "OP-004")
    assert passed.returncode == 0 and "--fail-on" not in passed.stderr


def test_fail_on_of_compare_names_the_findings(tmp_path):
    proc = cli(
        "compare",
        OWN / "compare_base.pt.trace.json.gz",
        OWN / "compare_slow.pt.trace.json.gz",
        "-o",
        tmp_path / "c",
        "--fail-on",
        "low",
        "--format",
        "json",
    )
    assert proc.returncode == 1, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if "--fail-on" in x]
    assert line.startswith("advisor: --fail-on low: ") and "CMP-" in line


def msprof_rank(parent: Path, rank: int) -> Path:
    """The small msprof fixture as rank `rank` (as tests/test_multirank.py builds ranks)."""
    target = parent / f"rank{rank}"
    shutil.copytree(SMALL, target)
    info = target / "device_0/info.json.0"
    info.write_text(info.read_text().replace('"rank_id":0', f'"rank_id":{rank}'))
    return target


def test_many_ranks_start_with_the_cluster_verdict_in_rank_order(tmp_path):
    """Twelve ranks in one folder: listed as rank0, rank1, rank10, rank11, rank2, ..."""
    ranks = tmp_path / "ranks"
    for rank in range(12):
        msprof_rank(ranks, rank)
    result = separate_runner().invoke(
        main,
        ["run", str(ranks), "-o", str(tmp_path / "out"), "--lang", "en"],
        env={"COLUMNS": "100", "NO_COLOR": "1"},
    )
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].endswith("(cluster of 12 ranks)")
    table = lines.index("12 ranks, in rank order")
    assert table < 20
    assert lines[table + 1].split()[:2] == ["RANK", "STEP"]
    assert [line.split()[0] for line in lines[table + 2 : table + 14]] == [
        str(r) for r in range(12)
    ]
    assert result.stdout.count("(msprof-summary)") == 5  # only the worst ranks in detail
    assert "7 more ranks with findings at or above medium (details in report.html)" in lines
    first_rank_block = next(i for i, x in enumerate(lines) if "(msprof-summary)" in x)
    assert first_rank_block > table
