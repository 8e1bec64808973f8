"""Team config: finding advisor.yaml / [tool.advisor], checking it, and its precedence."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DEMO, ROOT

import advisor
from advisor.cli import main
from advisor.config import Config, ConfigError, discover, find_config, load_config

STEP_RULES = (ROOT / "rules/step.yaml").read_text(encoding="utf-8")


def invoke(*args: object, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env)


def team_rule(folder: Path, title: str) -> Path:
    """A copy of the built-in STEP rules whose STEP-001 has another title."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "step.yaml"
    path.write_text(STEP_RULES.replace("Data augmentation bound is high", title), "utf-8")
    return path


def test_config_is_found_from_a_subfolder_and_rule_paths_are_relative_to_it(tmp_path, monkeypatch):
    (tmp_path / "advisor.yaml").write_text("rules: [team]\nselect: [STEP-001]\n", "utf-8")
    team_rule(tmp_path / "team", "Config team title")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    config = discover(environ={})
    assert config.path == tmp_path / "advisor.yaml"
    assert config.rules == (tmp_path / "team",)
    result = advisor.analyze(DEMO, config=config)
    assert [f.rule.title for f in result.findings] == ["Config team title"]


def test_pyproject_tool_table_counts_only_when_present(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.advisor]\nignore = ["aicpu"]\n', "utf-8")
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "x"\n', "utf-8")
    monkeypatch.chdir(inner)
    assert find_config(inner) == tmp_path / "pyproject.toml"
    assert discover(environ={}).ignore == ("aicpu",)


def test_a_pyproject_that_never_names_advisor_is_not_parsed(tmp_path):
    """Most projects' pyproject.toml says nothing of advisor: it is passed over unparsed, so
    even one that is no valid TOML does not stop the command; one naming advisor is parsed."""
    (tmp_path / "pyproject.toml").write_text('[project\nname = "x"\n', "utf-8")
    assert find_config(tmp_path) is None
    (tmp_path / "pyproject.toml").write_text('[project\nname = "advisor"\n', "utf-8")
    with pytest.raises(ConfigError, match="invalid TOML"):
        find_config(tmp_path)


def test_advisor_yaml_wins_over_pyproject_in_the_same_folder(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.advisor]\nfail_on = "low"\n', "utf-8")
    (tmp_path / "advisor.yaml").write_text("fail_on: high\n", "utf-8")
    assert load_config(find_config(tmp_path)).fail_on == "high"


def test_empty_or_missing_config_gives_defaults(tmp_path):
    assert discover(tmp_path, environ={}) == Config()
    (tmp_path / "advisor.yaml").write_text("# nothing yet\n", "utf-8")
    assert discover(tmp_path, environ={}) == Config(tmp_path / "advisor.yaml")


@pytest.mark.parametrize(
    "name, text, problem",
    [
        ("advisor.yaml", "select: [a\n", "invalid YAML"),
        ("advisor.yaml", "colour: red\n", "unknown key 'colour'"),
        ("advisor.yaml", "select: STEP-001\n", "select: expected a list of strings"),
        ("advisor.yaml", "severity: {STEP-001: urgent}\n", "severity.STEP-001: expected one of"),
        ("advisor.yaml", "params: {STEP-001: {max_ratio: [1]}}\n", "params.STEP-001.max_ratio"),
        ("advisor.yaml", "params: [1]\n", "params: expected a mapping"),
        ("advisor.yaml", "- rules\n", "expected a mapping of keys"),
        ("advisor.yaml", "lang: fr\n", "lang: expected one of en, zh"),
        ("advisor.yaml", "fail_on: true\n", "fail_on: expected one of"),
        ("advisor.yaml", "rules: !!python/object/apply:os.system [echo]\n", "invalid YAML"),
        ("pyproject.toml", "[tool.advisor\n", "invalid TOML"),
        ("pyproject.toml", "[tool.advisor]\nrules = 3\n", "rules: expected a list of strings"),
    ],
)
def test_bad_config_is_one_line_naming_the_file_with_exit_2(
    tmp_path, monkeypatch, name, text, problem
):
    (tmp_path / name).write_text(text, "utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=problem):
        discover(environ={})
    result = invoke("run", DEMO, "-o", tmp_path / "out")
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path / name) in lines[0] and problem in lines[0]
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def test_unknown_rule_in_config_names_the_config(tmp_path, monkeypatch):
    (tmp_path / "advisor.yaml").write_text("params: {NOPE-001: {x: 1}}\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    result = invoke("rules", "list")
    assert result.exit_code == 2
    assert f"{tmp_path / 'advisor.yaml'}: params: no rule 'NOPE-001'" in result.output


def test_user_rule_sources_in_order_env_then_config_then_cli(tmp_path, monkeypatch):
    env_rule = team_rule(tmp_path / "env", "From env")
    team_rule(tmp_path / "cfg", "From config")
    cli_rule = team_rule(tmp_path / "cli", "From cli")
    (tmp_path / "advisor.yaml").write_text("rules: [cfg]\n", "utf-8")
    monkeypatch.chdir(tmp_path)

    def title(*args: object, env: str = "") -> str:
        listing = invoke("rules", "list", *args, env={"ADVISOR_RULES": env})
        return next(x for x in listing.output.splitlines() if x.startswith("STEP-001"))

    assert "From config" in title(env=str(env_rule))
    assert "From cli" in title("--rules", cli_rule, env=str(env_rule))
    (tmp_path / "advisor.yaml").unlink()
    assert "From env" in title(env=os.pathsep.join([str(tmp_path / "nowhere"), str(env_rule)]))


def test_env_rules_come_before_config_rules(tmp_path):
    (tmp_path / "advisor.yaml").write_text("rules: [cfg]\n", "utf-8")
    config = discover(tmp_path, environ={"ADVISOR_RULES": os.pathsep.join(["x", "y"])})
    assert config.rules == (Path("x"), Path("y"), tmp_path / "cfg")


def test_params_from_config_and_set_wins(tmp_path, monkeypatch):
    (tmp_path / "advisor.yaml").write_text(
        "params:\n  OP-002: {min_duration_us: 55}\n  data-aug-bound-high: {max_ratio: 0.15}\n",
        "utf-8",
    )
    monkeypatch.chdir(tmp_path)
    config = discover(environ={})
    result = advisor.analyze(DEMO, config=config, params={"OP-002": {"min_duration_us": 60}})
    used = result.reports[0]["rules"]
    assert used["OP-002"]["params"]["min_duration_us"] == 60
    assert used["STEP-001"]["params"]["max_ratio"] == 0.15
    run = invoke("run", DEMO, "-o", tmp_path / "out", "--format", "json")
    report = json.loads((tmp_path / "out/prof_rule_0.json").read_text("utf-8"))
    assert run.exit_code == 0 and report["rules"]["OP-002"]["params"]["min_duration_us"] == 55


def test_severity_override_from_config_and_cli(tmp_path, monkeypatch):
    (tmp_path / "advisor.yaml").write_text("severity: {OP-002: medium, STEP-001: low}\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    run = invoke(
        "run", DEMO, "-o", tmp_path / "out", "--format", "json", "--severity", "aicpu-ops=high"
    )
    assert run.exit_code == 0, run.output
    report = json.loads((tmp_path / "out/prof_rule_0.json").read_text("utf-8"))
    severities = {
        r["rule_id"]: r["severity"]
        for group in report["data"].values()
        for item in group
        for r in item["result"]
    }
    assert severities["OP-002"] == "high" and severities["STEP-001"] == "low"
    bad = invoke("run", DEMO, "-o", tmp_path / "out2", "--severity", "OP-002=urgent")
    assert bad.exit_code == 2 and "--severity expects ID=high|medium|low" in bad.output


def test_select_and_ignore_by_tag_from_config_and_cli_replaces_them(tmp_path, monkeypatch):
    (tmp_path / "advisor.yaml").write_text("select: [operator]\nignore: [aicpu]\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    config = discover(environ={})
    ids = {f.rule.id for f in advisor.analyze(DEMO, config=config).findings}
    every = advisor.analyze(DEMO).findings
    tagged = {f.rule.id for f in every if "operator" in f.rule.tags and "aicpu" not in f.rule.tags}
    assert {"OP-001", "OP-003", "OP-005"} <= ids == tagged
    assert "OP-002" in {f.rule.id for f in every} - ids  # an operator rule tagged aicpu
    ids = {
        f.rule.id
        for f in advisor.analyze(DEMO, config=config, select=["step"], ignore=["vector"]).findings
    }
    assert ids == {"STEP-001"}


def test_fail_on_from_config_and_cli_overrides_it(tmp_path, monkeypatch):
    (tmp_path / "advisor.yaml").write_text("fail_on: high\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    assert invoke("run", DEMO, "-o", tmp_path / "a", "-q").exit_code == 1
    assert (
        invoke(
            "run", DEMO, "-o", tmp_path / "b", "-q", "--ignore", "step", "--ignore", "operator"
        ).exit_code
        == 0
    )


def test_lang_from_config_unless_given(tmp_path, monkeypatch):
    (tmp_path / "advisor.yaml").write_text("lang: zh\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    invoke("run", DEMO, "-o", tmp_path / "zh", "--format", "json", env={"LANG": "C"})
    invoke("run", DEMO, "-o", tmp_path / "en", "--format", "json", "--lang", "en")
    langs = [
        json.loads((tmp_path / d / "prof_rule_0.json").read_text("utf-8"))["advisor"]["lang"]
        for d in ("zh", "en")
    ]
    assert langs == ["zh", "en"]


def test_bad_rule_file_from_config_stops_the_run(tmp_path, monkeypatch):
    (tmp_path / "team").mkdir()
    (tmp_path / "team/bad.yaml").write_text("id: X\n", "utf-8")
    (tmp_path / "advisor.yaml").write_text("rules: [team]\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    result = invoke("run", DEMO, "-o", tmp_path / "out")
    assert result.exit_code == 2 and str(tmp_path / "team/bad.yaml") in result.output
