"""A broken plugin is named and skipped; every hook is documented and exercised by a plugin.

test_cli.py covers a plugin failing at import or in `advisor_readers` through a subprocess;
these tests add readers whose `detect` or `read` raises, providers, functions and report
sections that raise, and a misspelt hook, with installed (entry-point) and in-process plugins.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from clirunner import separate_runner
from conftest import DEMO, ROOT

import advisor
from advisor.cli import main
from advisor.hookspecs import MetricProvider, hookimpl
from advisor.plugin_manager import PluginHost

EXAMPLE_SRC = ROOT / "examples/advisor-optiming/src"
SAMPLE = ROOT / "examples/advisor-optiming/sample/train.optiming.csv"
DIST = "advisor-broken-fixture 0.0.1"
READER = """
from advisor import hookimpl

class Reader:
    name = {name!r}
    formats = ("broken test format (*.broken)",)

    def detect(self, path):
        {detect}

    def read(self, path):
        raise RuntimeError("boom in read")

@hookimpl
def advisor_readers():
    return [Reader()]
"""
MODULES = {
    "advbroken_import": "raise RuntimeError('boom at import')\n",
    # Raises on every path it is asked about (third-party readers are asked first).
    "advbroken_detect": READER.format(
        name="baddetect", detect="raise RuntimeError('boom in detect')"
    ),
    "advbroken_read": READER.format(name="badread", detect="return path.suffix == '.broken'"),
}


@pytest.fixture
def broken_installed(tmp_path, monkeypatch) -> Iterator[Path]:
    """Three installed third-party plugins (a dist-info on sys.path) that fail differently."""
    site = tmp_path / "site"
    dist = site / "advisor_broken_fixture-0.0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: advisor-broken-fixture\nVersion: 0.0.1\n"
    )
    (dist / "entry_points.txt").write_text(
        "[advisor]\nbadimport = advbroken_import\nbaddetect = advbroken_detect\n"
        "badread = advbroken_read\n"
    )
    for module, body in MODULES.items():
        (site / f"{module}.py").write_text(body)
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.syspath_prepend(str(site))
    yield site
    for module in MODULES:
        sys.modules.pop(module, None)


def test_plugins_list_names_each_broken_plugin(broken_installed):
    result = separate_runner().invoke(main, ["plugins", "list"])
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert f"badimport ({DIST}) [failed]: import failed: RuntimeError: boom at import" in lines
    for name in ("baddetect", "badread"):  # they load; their readers fail only when used
        index = lines.index(f"{name} ({DIST}) [loaded]")
        assert lines[index + 1] == f"    reader {name}: broken test format (*.broken)"
    assert "msprof (dl-perf-advisor 0.1.0) [loaded]" in lines


def test_run_names_each_broken_plugin_and_analyses_the_rest(broken_installed, tmp_path):
    bad = tmp_path / "input/data.broken"
    bad.parent.mkdir()
    bad.write_text("anything\n")
    out = tmp_path / "out"
    result = separate_runner().invoke(
        main, ["run", str(DEMO), str(bad), "-o", str(out), "--format", "json"]
    )
    # The input the failing reader claimed is unreadable (exit 3); the other one is analysed.
    assert result.exit_code == 3, result.output
    errors = result.stderr.splitlines()
    assert (
        f"advisor: plugin badimport ({DIST}) [failed]: import failed: RuntimeError: boom at import"
    ) in errors
    # Third-party readers are asked first (pluggy's order): baddetect fails on the demo path.
    assert (
        f"advisor: plugin 'baddetect' failed to inspect {DEMO}: RuntimeError: boom in detect"
    ) in errors
    assert any(
        line.startswith(f"advisor: {bad}")
        and "reader 'badread' (plugin 'badread') failed: RuntimeError: boom in read" in line
        for line in errors
    ), errors
    assert "Traceback" not in result.stdout + result.stderr
    report = json.loads((out / "prof_rule_0.json").read_text(encoding="utf-8"))
    assert report["profile"]["source_format"] == "msprof-summary"
    assert report["summary"]["findings"] >= 4


def test_misspelt_hook_makes_the_plugin_invalid_not_the_host():
    @hookimpl
    def advisor_reader():  # the hook is advisor_readers
        return []

    host = PluginHost(extra=[("typo", SimpleNamespace(advisor_reader=advisor_reader))])
    (failed,) = host.failed()
    assert failed.name == "typo" and failed.error.startswith("invalid plugin: ")
    assert "advisor_reader" in failed.error
    assert "msprof" in {reader.name for _, reader in host.readers()}


@pytest.fixture(scope="module")
def example() -> ModuleType:
    """The example package's hook module, imported from its source folder."""
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(EXAMPLE_SRC))
        return importlib.import_module("advisor_optiming.plugin")


def test_failing_provider_function_and_section_each_hit_only_their_part(example, tmp_path):
    def explode(*_args):
        raise ValueError("explode always fails")

    def no_wait(profile):
        raise RuntimeError("no wait today")

    rules = tmp_path / "rules"
    rules.mkdir()
    rule = ROOT / "examples/advisor-optiming/src/advisor_optiming/rules/optiming.yaml"
    (rules / "boom.yaml").write_text(
        rule.read_text(encoding="utf-8")
        .replace("OPTIMING-001", "BOOM-001")
        .replace("step-time-outliers", "boom-outliers")
        .replace("excess_over(steps.duration_us, limit_us)", "explode(limit_us)"),
        encoding="utf-8",
    )

    @hookimpl
    def advisor_metrics():
        return [
            MetricProvider(
                "boom_wait", ("device_ops.duration_us",), ("device_ops.wait_us",), no_wait
            )
        ]

    @hookimpl
    def advisor_functions():
        return {"explode": explode}

    @hookimpl
    def advisor_rule_paths():
        return [rules]

    @hookimpl
    def advisor_report_sections(analysis):
        raise RuntimeError("no section")

    broken = SimpleNamespace(
        advisor_metrics=advisor_metrics,
        advisor_functions=advisor_functions,
        advisor_rule_paths=advisor_rule_paths,
        advisor_report_sections=advisor_report_sections,
    )
    host = PluginHost(extra=[("optiming", example), ("broken", broken)])
    result = advisor.analyze(SAMPLE, host=host)
    assert result.rule_errors == [] and result.input_errors == []
    (analysis,) = result.analyses
    report = analysis.report
    # The provider: a warning, and the rule needing its output (OP-003) not applicable.
    assert any(
        w["file"] == "<metric boom_wait>" and "no wait today" in w["problem"]
        for w in report["warnings"]
    )
    assert "OP-003" in {r["rule_id"] for r in report["not_applicable"]}
    # The function: an error for the rule calling it; the plugin's own rule still fires.
    assert [e["rule_id"] for e in report["rule_errors"]] == ["BOOM-001"]
    assert "explode always fails" in report["rule_errors"][0]["problem"]
    assert "OPTIMING-001" in {f.rule.id for f in analysis.findings}
    # The section: that plugin is marked failed; the other plugin's section is kept.
    assert [s.title for s in host.report_sections(analysis)] == [
        "Steps and their longest operator (device 0)"
    ]
    assert [(i.name, i.error) for i in host.failed()] == [
        ("broken", "advisor_report_sections raised RuntimeError: no section")
    ]


def hookspec_names() -> list[str]:
    tree = ast.parse((ROOT / "advisor/hookspecs.py").read_text(encoding="utf-8"))
    return [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any(ast.unparse(d) == "hookspec" for d in node.decorator_list)
    ]


def test_every_hook_has_a_heading_in_the_plugin_guide():
    names = hookspec_names()
    assert len(names) >= 5
    text = (ROOT / "docs/plugins.md").read_text(encoding="utf-8")
    headings = set(re.findall(r"^### `(\w+)\(", text, flags=re.M))
    assert [n for n in names if n not in headings] == []


def test_every_hook_is_implemented_by_a_tested_plugin(example):
    """Built-in plugins plus the example package (both run by tests) implement every hook."""
    host = PluginHost(extra=[("optiming", example)])
    assert host.failed() == []
    implemented = {name for name in hookspec_names() if getattr(host.pm.hook, name).get_hookimpls()}
    assert implemented == set(hookspec_names())
    # The example's own implementations all contribute something (it is what the suite runs).
    (analysis,) = advisor.analyze(SAMPLE, host=host).analyses
    for name in hookspec_names():
        assert dict(host.call(name, analysis=analysis)).get("optiming"), name
