"""`advisor rules list|show|new`: sources, effective params, example findings, scaffolding."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from click.testing import CliRunner
from conftest import DEMO, ROOT

from advisor.cli import main
from advisor.hookspecs import hookimpl
from advisor.plugin_manager import PluginHost
from advisor.ruleset import load_ruleset
from advisor.scaffold import ScaffoldError, new_rule

STEP_RULES = (ROOT / "rules/step.yaml").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def no_project_config(tmp_path, monkeypatch):
    """Run from an empty folder, so no advisor.yaml above the checkout leaks in."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ADVISOR_RULES", raising=False)


def invoke(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args])


def line_of(output: str, rule_id: str) -> str:
    return next(x for x in output.splitlines() if x.startswith(rule_id + " "))


def test_rules_list_has_a_source_column(tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text(STEP_RULES.replace("Data augmentation bound is high", "Team title"), "utf-8")
    result = invoke("rules", "list", "--rules", team)
    assert result.exit_code == 0
    header = result.output.splitlines()[0]
    assert header.split() == ["ID", "NAME", "SEVERITY", "SOURCE", "TITLE"]
    column = header.index("SOURCE")
    assert line_of(result.output, "OP-001")[column:].startswith("built-in ")
    assert line_of(result.output, "STEP-001")[column:].startswith(f"user {team} ")
    assert f"note: rule STEP-001 from {team} replaces the built-in one in" in result.output


def test_plugin_rules_are_labelled_with_the_plugin_name(tmp_path):
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    (shipped / "step.yaml").write_text(STEP_RULES, "utf-8")
    plugin = SimpleNamespace(advisor_rule_paths=hookimpl(lambda: [shipped]))
    ruleset, errors = load_ruleset(PluginHost(extra=[("teamplug", plugin)]), [])
    assert errors == []
    assert ruleset.origins["STEP-001"] == "plugin teamplug"
    assert ruleset.origins["OP-001"] == "built-in"


def test_user_rule_replacing_builtin_reaches_json_html_and_terminal(tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text(STEP_RULES, "utf-8")
    result = invoke("run", DEMO, "-o", tmp_path / "out", "--rules", team)
    assert result.exit_code == 0
    assert f"note: rule STEP-001 from {team} replaces the built-in one" in result.output
    report = json.loads((tmp_path / "out/prof_rule_0.json").read_text("utf-8"))
    assert report["rules"]["STEP-001"]["source"] == str(team)
    sources = {
        r["rule_id"]: r["source"] for g in report["data"].values() for i in g for r in i["result"]
    }
    assert sources["STEP-001"] == str(team)
    assert str(team) in (tmp_path / "out/report.html").read_text("utf-8")


def test_rules_show_params_default_and_in_effect(tmp_path):
    (tmp_path / "advisor.yaml").write_text(
        "params: {STEP-001: {max_ratio: 0.2, min_mean_us: 100}}\nseverity: {STEP-001: medium}\n",
        "utf-8",
    )
    result = invoke("rules", "show", "STEP-001", "--set", "STEP-001.max_ratio=0.3")
    assert result.exit_code == 0, result.output
    assert "param max_ratio = 0.3 (default 0.1)" in result.output
    assert "param min_mean_us = 100 (default 500)" in result.output
    assert "severity: medium (fixed by config or --severity)" in result.output
    assert "source: built-in (" in result.output
    plain = invoke("rules", "show", "STEP-002", "--severity", "STEP-002=low")
    assert "param max_ratio = 0.3\n" in plain.output and "severity: low" in plain.output


def test_rules_show_example_finding_from_the_case_beside_the_rule():
    result = invoke("rules", "show", "STEP-001")
    assert result.exit_code == 0
    assert "example finding (case 'fires when the device waits 2 ms" in result.output
    assert "16.7% of the steady steps' wall-clock time" in result.output


def test_rules_show_falls_back_to_the_message_template(tmp_path):
    team = tmp_path / "team.yaml"
    team.write_text(STEP_RULES, "utf-8")
    result = invoke("rules", "show", "STEP-001", "--rules", team)
    assert "message template (no firing case" in result.output
    assert "{{ ratio|pct }}" in result.output


def test_rules_show_unknown_rule_is_exit_2():
    result = invoke("rules", "show", "NOPE-001")
    assert result.exit_code == 2 and "no rule 'NOPE-001'" in result.output


def test_rules_new_scaffolds_a_valid_rule_and_its_cases(tmp_path):
    result = invoke("rules", "new", "slow-steps", "--dir", tmp_path / "team", "--table", "steps")
    assert result.exit_code == 0, result.output
    rule_file, case_file = tmp_path / "team/slow-steps.yaml", tmp_path / "team/slow-steps.case.yaml"
    rule = yaml.safe_load(rule_file.read_text("utf-8"))
    assert rule["id"] == "TEAM-001" and rule["name"] == "slow-steps" and "TODO" in rule["title"]
    cases = yaml.safe_load(case_file.read_text("utf-8"))
    assert cases["rule"] == "TEAM-001"
    assert [c["expect"]["fires"] for c in cases["cases"]] == [True, False]
    assert set(cases["cases"][0]["tables"]["steps"][0]) == {
        "step",
        "start_us",
        "end_us",
        "duration_us",
    }
    validated = invoke("rules", "validate", rule_file)
    assert validated.exit_code == 0 and "1 valid rule(s), 0 error(s)" in validated.output
    shown = invoke("rules", "show", "slow-steps", "--rules", rule_file)
    assert "example finding (case 'fires on three rows'" in shown.output
    assert "TODO: 3 rows in steps (limit 2)." in shown.output


def test_rules_new_takes_the_next_free_team_id(tmp_path):
    assert invoke("rules", "new", "first-rule").exit_code == 0
    assert invoke("rules", "new", "second-rule").exit_code == 0
    assert yaml.safe_load((tmp_path / "second-rule.yaml").read_text("utf-8"))["id"] == "TEAM-002"


@pytest.mark.parametrize("existing", ["my-rule.yaml", "my-rule.case.yaml"])
def test_rules_new_never_overwrites(tmp_path, existing):
    (tmp_path / existing).write_text("keep me\n", "utf-8")
    result = invoke("rules", "new", "my-rule")
    assert result.exit_code == 2
    assert result.output.strip() == f"advisor: {Path(existing)}: already exists; not overwritten"
    assert (tmp_path / existing).read_text("utf-8") == "keep me\n"
    assert len(list(tmp_path.iterdir())) == 1


def test_rules_new_refuses_a_bad_name_or_table(tmp_path):
    bad = invoke("rules", "new", "My_Rule")
    assert bad.exit_code == 2 and "rule name 'My_Rule'" in bad.output
    assert invoke("rules", "new", "ok-rule", "--table", "nope").exit_code == 2
    assert list(tmp_path.iterdir()) == []


def test_new_rule_api_writes_a_rule_that_passes_its_cases(tmp_path):
    first = new_rule("first-rule", tmp_path / "team", table="steps")
    assert (first.rule_file, first.case_file, first.rule_id) == (
        tmp_path / "team/first-rule.yaml",
        tmp_path / "team/first-rule.case.yaml",
        "TEAM-001",
    )
    assert new_rule("second-rule", tmp_path / "team").rule_id == "TEAM-002"
    tested = invoke("rules", "test", tmp_path / "team", "--rules", tmp_path / "team")
    assert tested.exit_code == 0, tested.output
    assert "4 case(s) in 2 file(s): 4 passed, 0 failed, 0 invalid" in tested.output
    with pytest.raises(ScaffoldError, match="already exists"):
        new_rule("first-rule", tmp_path / "team")
    with pytest.raises(ScaffoldError, match="unknown table 'nope'"):
        new_rule("third-rule", tmp_path / "team", table="nope")
