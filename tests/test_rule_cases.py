"""`advisor rules test`: the built-in rules' case files pass and cover every rule; the runner
reports failures, invalid case files and user rules as documented."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml
from click.testing import CliRunner
from conftest import FIXTURE_DIR

from advisor.cases import CaseRunner, case_files, load_case_file
from advisor.cli import main
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rules
from advisor.plugin_manager import PluginHost
from advisor.ruleset import load_ruleset
from advisor.units import fmt_us
from advisor_plugins.builtin_rules import advisor_rule_paths

RULES_DIR = advisor_rule_paths()[0]
FIXTURES = FIXTURE_DIR
LINE = re.compile(r"^(PASS|FAIL) (\S+) ")


def invoke(*args: object):
    return CliRunner().invoke(main, ["rules", "test", *map(str, args)])


def write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def steps_case(name: str, wait: float, **expect: object) -> dict:
    """A STEP-001 case: two 10 ms steps, each after `wait` µs of data wait."""
    rows = [{"step": i, "duration_us": 10000, "data_aug_bound_us": wait} for i in (1, 2)]
    return {"name": name, "tables": {"steps": rows}, "expect": expect}


def test_builtin_cases_all_pass():
    result = invoke()
    assert result.exit_code == 0, result.output
    lines = [m.groups() for m in map(LINE.match, result.output.splitlines()) if m]
    assert lines and all(status == "PASS" for status, _ in lines)
    assert f"{len(lines)} passed, 0 failed, 0 invalid" in result.output


def test_every_builtin_rule_has_a_firing_and_a_silent_case():
    ruleset, errors = load_rules([RULES_DIR], BUILTIN_FUNCTIONS)
    assert errors == []
    firing: set[str] = set()
    silent: set[str] = set()
    measured: set[str] = set()
    files = sorted(RULES_DIR.glob("*.case.yaml"))
    for path in files:
        for case in load_case_file(path):
            (firing if case.expect["fires"] else silent).add(case.rule_id)
            checks_values = case.expect.get("values")
            # a case may check only which advice a profile's framework and device get
            checks_advice = "suggestions_contain" in case.expect
            if case.expect["fires"]:
                assert checks_values or checks_advice, f"{path}: {case.name} checks nothing"
            if checks_values:
                measured.add(case.rule_id)
    assert set(ruleset.rules) == firing == silent == measured
    # one case file per rule file, holding the cases of that file's rules
    assert {p.name.removesuffix(".case.yaml") for p in files} == {
        p.stem for p in RULES_DIR.glob("*.yaml") if not p.name.endswith(".case.yaml")
    }


def test_every_builtin_finding_names_the_time_it_puts_at_stake():
    """The report's right-hand figure is a finding's time at stake: each built-in rule's
    message gives it, as written there, in both languages (else the reader cannot tell what
    '7,282 µs' next to 'idle 98.4% of step time' is: the idle time above the limit)."""
    host = PluginHost()
    ruleset, _ = load_ruleset(host, [])
    unnamed = []
    for lang in ("en", "zh"):
        runner = CaseRunner(ruleset, host, lang=lang)
        for path in case_files(RULES_DIR):
            for case in load_case_file(path, runner.session.tables):
                if not case.expect.get("fires"):
                    continue
                _, evaluation = runner.evaluate(case)
                unnamed += [
                    (lang, f.rule.id, case.name)
                    for f in evaluation.findings
                    if f.impact_us and fmt_us(f.impact_us) not in f.message
                ]
    assert unnamed == []


def test_failing_case_reports_the_differing_value(tmp_path):
    case = steps_case("wrong ratio", 2000, fires=True, values={"ratio": 0.5})
    silent = steps_case("wrongly silent", 2000, fires=False)
    path = write(tmp_path / "step.case.yaml", {"rule": "STEP-001", "cases": [case, silent]})
    result = invoke(path)
    assert result.exit_code == 1
    # 4000 waited of 2 x 10000 + 4000 wall: 1/6
    assert "FAIL STEP-001 wrong ratio" in result.output
    assert "values.ratio: expected 0.5, got 0.1666666667" in result.output
    assert "FAIL STEP-001 wrongly silent" in result.output
    assert "fires: expected false, got true" in result.output
    assert "0 passed, 2 failed, 0 invalid" in result.output


def test_message_excludes_fails_a_case_whose_message_has_the_text(tmp_path):
    """A clause meant for other data (COMM-001's point-to-point note) can be checked absent."""
    shown = steps_case("names the wait", 2000, fires=True, message_excludes="Between iterations")
    absent = steps_case("no such clause", 2000, fires=True, message_excludes="point-to-point")
    path = write(tmp_path / "step.case.yaml", {"rule": "STEP-001", "cases": [shown, absent]})
    result = invoke(path)
    assert result.exit_code == 1
    assert "FAIL STEP-001 names the wait" in result.output
    assert "message: 'Between iterations' in " in result.output
    assert "PASS STEP-001 no such clause" in result.output


def test_invalid_case_file_is_one_line_and_exit_2(tmp_path):
    path = write(
        tmp_path / "bad.case.yaml",
        {"rule": "STEP-001", "cases": [steps_case("typo", 2000, fire=True)]},
    )
    result = invoke(path)
    assert result.exit_code == 2
    (line,) = [ln for ln in result.output.splitlines() if str(path) in ln]
    assert line.endswith("cases.0.expect: 'fires' is a required property")
    assert "Traceback" not in result.output


def test_unknown_rule_table_and_column_are_one_line_errors(tmp_path):
    unknown_rule = write(
        tmp_path / "a.case.yaml", {"rule": "STEP-999", "cases": [steps_case("x", 1, fires=False)]}
    )
    bad_table = steps_case("t", 1, fires=False)
    bad_table["tables"] = {"stepz": [{"step": 1}]}
    bad_column = steps_case("c", 1, fires=False)
    bad_column["tables"]["steps"][0]["durations_us"] = 3
    write(tmp_path / "b.case.yaml", {"rule": "STEP-001", "cases": [bad_table]})
    write(tmp_path / "c.case.yaml", {"rule": "STEP-001", "cases": [bad_column]})
    result = invoke(tmp_path)
    assert result.exit_code == 2
    assert f"{unknown_rule}: [STEP-999]: no rule 'STEP-999' in effect" in result.output
    assert "unknown table 'stepz' (did you mean 'steps'?)" in result.output
    assert (
        "unknown column of table 'steps': 'durations_us' (did you mean 'duration_us'?)"
        in result.output
    )
    assert "Traceback" not in result.output


def test_silent_case_may_not_check_finding_values(tmp_path):
    path = write(
        tmp_path / "s.case.yaml",
        {"rule": "STEP-001", "cases": [steps_case("s", 1, fires=False, values={"ratio": 0})]},
    )
    result = invoke(path)
    assert result.exit_code == 2
    assert "expect.values needs fires: true" in result.output


def test_user_rule_with_its_case_file_passes(tmp_path):
    rule = {
        "id": "TEAM-001",
        "name": "many-casts",
        "title": "Many Cast tasks",
        "type": "Computation",
        "params": {"max_count": 2},
        "let": {"casts": 'count(device_ops.op_type == "Cast")'},
        "when": "casts > max_count",
        "message": "{{ casts }} casts",
        "suggestions": ["Cast less."],
        "docs": "Counts Cast tasks; fires above max_count.",
    }
    write(tmp_path / "team.yaml", [rule])
    cast = {
        "name": "c",
        "op_type": "Cast",
        "core_type": "AI_CORE",
        "category": "compute",
        "duration_us": 5,
    }
    write(
        tmp_path / "team.case.yaml",
        {
            "rule": "TEAM-001",
            "cases": [
                {
                    "name": "three casts",
                    "tables": {"device_ops": [cast] * 3},
                    "expect": {
                        "fires": True,
                        "values": {"casts": 3},
                        "message_contains": "3 casts",
                    },
                },
                {
                    "name": "three casts allowed",
                    "params": {"max_count": 3},
                    "tables": {"device_ops": [cast] * 3},
                    "expect": {"fires": False},
                },
            ],
        },
    )
    result = invoke(tmp_path, "--rules", tmp_path)
    assert result.exit_code == 0, result.output
    assert "PASS TEAM-001 three casts " in result.output
    assert "2 case(s) in 1 file(s): 2 passed" in result.output
    # without --rules the rule is not in effect
    assert invoke(tmp_path).exit_code == 2


def test_no_path_also_runs_the_cases_of_rules_given_with_rules(tmp_path):
    write(
        tmp_path / "x.case.yaml",
        {
            "rule": "STEP-001",
            "cases": [steps_case("mine", 2000, fires=True, values={"wait_us": 4000})],
        },
    )
    result = invoke("--rules", tmp_path)
    assert result.exit_code == 0, result.output
    assert "PASS STEP-001 mine " in result.output and "PASS AOE-001 " in result.output


def test_fixture_case_reads_a_profile(tmp_path):
    shutil.copy(FIXTURES / "kineto_own" / "dataloader_bound.pt.trace.json.gz", tmp_path)
    write(
        tmp_path / "loader.case.yaml",
        {
            "rule": "HOST-001",
            "cases": [
                {
                    "name": "dataloader bound trace",
                    "fixture": "dataloader_bound.pt.trace.json.gz",
                    "expect": {"fires": True, "message_contains": "Data loading takes"},
                },
                {"name": "missing fixture", "fixture": "nope.json", "expect": {"fires": False}},
            ],
        },
    )
    result = invoke(tmp_path / "loader.case.yaml")
    assert "fixture: no such file or folder" in result.output and result.exit_code == 2
    write(
        tmp_path / "loader.case.yaml",
        {
            "rule": "HOST-001",
            "cases": [
                {
                    "name": "dataloader bound trace",
                    "fixture": "dataloader_bound.pt.trace.json.gz",
                    "expect": {"fires": True, "message_contains": "Data loading takes"},
                }
            ],
        },
    )
    result = invoke(tmp_path / "loader.case.yaml")
    assert result.exit_code == 0, result.output


def test_non_number_in_a_numeric_column_is_an_error(tmp_path):
    case = steps_case("n", 1, fires=False)
    case["tables"]["steps"][0]["duration_us"] = "10ms"
    path = write(tmp_path / "n.case.yaml", {"rule": "STEP-001", "cases": [case]})
    result = invoke(path)
    assert result.exit_code == 2
    assert "steps.duration_us: '10ms' is not a number" in result.output
