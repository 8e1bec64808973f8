"""Plugin loading order and rule precedence: built-in, then plugin-shipped, then the user's."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from conftest import ROOT

from advisor.hookspecs import hookimpl
from advisor.plugin_manager import PluginHost
from advisor.ruleset import load_ruleset


def team_plugin(rule_dir: Path) -> SimpleNamespace:
    @hookimpl
    def advisor_rule_paths():
        return [rule_dir]

    return SimpleNamespace(advisor_rule_paths=advisor_rule_paths)


def replacement_rule(tmp_path: Path, title: str, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    text = (ROOT / "rules/step.yaml").read_text(encoding="utf-8")
    (folder / "step.yaml").write_text(
        text.replace("Data augmentation bound is high", title), encoding="utf-8"
    )
    return folder


def test_builtin_plugins_load_first_in_name_order():
    names = [i.name for i in PluginHost(extra=[("zz_team", SimpleNamespace())]).infos]
    assert names[-1] == "zz_team"
    assert names[:-1] == sorted(names[:-1])
    assert {"builtin_rules", "msprof", "step_metrics"} <= set(names)


def test_plugin_rules_replace_builtin_and_user_rules_replace_plugin(tmp_path):
    shipped = replacement_rule(tmp_path, "Plugin version", "plugin")
    host = PluginHost(extra=[("team", team_plugin(shipped))])
    ruleset, errors = load_ruleset(host, [])
    assert errors == [] and ruleset.rules["STEP-001"].title == "Plugin version"
    user = replacement_rule(tmp_path, "User version", "user")
    ruleset, _ = load_ruleset(host, [user])
    assert ruleset.rules["STEP-001"].title == "User version"
    assert sum(o.startswith("STEP-001 ") for o in ruleset.overrides) == 2


def test_hook_failure_marks_only_that_plugin_failed():
    @hookimpl
    def advisor_functions():
        raise RuntimeError("bad functions")

    host = PluginHost(extra=[("flaky", SimpleNamespace(advisor_functions=advisor_functions))])
    assert host.functions() == {}
    failed = {i.name: i.error for i in host.failed()}
    assert list(failed) == ["flaky"] and "bad functions" in failed["flaky"]
    assert "msprof" in {reader.name for _, reader in host.readers()}


def test_hooks_are_called_in_pluggys_order_and_the_first_wins():
    def functions(value):
        @hookimpl
        def advisor_functions():
            return {"team_factor": lambda: value}

        return SimpleNamespace(advisor_functions=advisor_functions)

    def early_functions():
        @hookimpl(trylast=True)
        def advisor_functions():
            return {"team_factor": lambda: "last"}

        return SimpleNamespace(advisor_functions=advisor_functions)

    host = PluginHost(
        extra=[("a", functions("a")), ("b", functions("b")), ("c", early_functions())]
    )
    # pluggy calls the last registered first, trylast ones after everything else
    called = [name for name, _ in host.call("advisor_functions")]
    assert called[:2] == ["b", "a"] and called[-1] == "c"
    assert host.functions()["team_factor"]() == "b"


def test_hook_wrappers_are_refused():
    @hookimpl(wrapper=True)
    def advisor_readers():
        return (yield)

    host = PluginHost(extra=[("wrapping", SimpleNamespace(advisor_readers=advisor_readers))])
    (failed,) = host.failed()
    assert failed.name == "wrapping" and "hook wrapper" in failed.error
    assert "msprof" in {reader.name for _, reader in host.readers()}


def test_a_plugin_table_may_not_reuse_a_name():
    from advisor.model import TABLES, Column, TableSpec

    @hookimpl
    def advisor_tables():
        return [TableSpec("steps", "again", (Column("x", "float64", "", "x"),))]

    host = PluginHost(extra=[("clash", SimpleNamespace(advisor_tables=advisor_tables))])
    tables = host.tables()
    assert tables["steps"] == TABLES["steps"] and tables["steps"].row != "again"
    (failed,) = host.failed()
    assert failed.name == "clash" and "table 'steps' is already defined" in failed.error
