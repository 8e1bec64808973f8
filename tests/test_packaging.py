"""A non-editable install works: rules, plugins, schemas, templates and the example ship."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import jinja2
import pytest
from conftest import ROOT

pytestmark = pytest.mark.integration

EXAMPLE = "advisor/examples/PROF_000001_20260105100000000_DEMO"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The wheel built from this checkout, installed into a folder of its own."""
    work = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            str(ROOT),
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(work),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = work.glob("dl_perf_advisor-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "advisor_rules/step.yaml" in names and "advisor_plugins/msprof/__init__.py" in names
    assert "advisor_plugins/fusion_patterns.yaml" in names  # data the fusion plugin reads
    assert "advisor_plugins/env_catalogue.yaml" in names  # data the environment plugin reads
    assert "advisor_plugins/env_catalogue.yaml.parsed.json" in names  # the same, parsed
    assert "advisor/schemas/report.schema.json" in names
    assert "advisor/engine/builtin_checks.json" in names  # the built-in rules, checked
    assert "advisor/render/page_code.json" in names  # the report pages, compiled
    assert "advisor/render/templates/report.html.j2" in names
    assert f"{EXAMPLE}/mindstudio_profiler_output/op_summary_20260105100731.csv" in names
    assert not any(n.startswith("tests/") for n in names)
    site = work / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        timeout=300,
    )
    return site


def installed_python(
    site: Path, cwd: Path, *args: str, cache: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Python with the installed wheel on its path; with `cache`, an empty cache there, on."""
    env = {**os.environ, "PYTHONPATH": str(site)}
    if cache is not None:
        env["ADVISOR_CACHE_DIR"] = str(cache)
        env.pop("ADVISOR_NO_CACHE", None)
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def run_installed(site: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return installed_python(site, cwd, "-m", "advisor", *args)


def test_installed_wheel_runs_the_bundled_example(installed, tmp_path):
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "import advisor, advisor_rules, advisor_plugins;"
            "print(advisor.__file__, advisor_rules.__file__, advisor_plugins.__file__)",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert all(path.startswith(str(installed)) for path in where.stdout.split())
    proc = run_installed(installed, tmp_path, "run", str(installed / EXAMPLE), "-o", "out")
    assert proc.returncode == 0, proc.stderr
    report = json.loads((tmp_path / "out/prof_rule_0.json").read_text(encoding="utf-8"))
    assert report["summary"]["findings"] >= 4
    assert all(r["source"].startswith(str(installed)) for r in report["rules"].values())


def test_installed_wheel_lists_builtin_plugins(installed, tmp_path):
    proc = run_installed(installed, tmp_path, "plugins", "list")
    assert proc.returncode == 0, proc.stderr
    for name in ("msprof", "step_metrics", "builtin_rules"):
        assert f"{name} (dl-perf-advisor 0.1.0) [loaded]" in proc.stdout


def test_installed_environment_plugin_reads_its_catalogue(installed, tmp_path):
    """The env_advice provider loads its catalogue from the installed package, not the tree."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import advisor_plugins.environment as e;print(e.__file__, len(e.catalogue()))",
        ],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(installed)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    where, entries = proc.stdout.split()
    assert where.startswith(str(installed)) and int(entries) >= 10


def test_installed_wheel_takes_its_rules_as_checked_on_a_first_run(installed, tmp_path):
    """The records of builtin_checks.json match the installed files: with an empty cache no
    built-in rule file is parsed or checked again (the refused parse or schema check)."""
    script = (
        "import advisor.engine.rules as r\n"
        "def refuse(*_): raise SystemExit('checked again')\n"
        "r._schema_problem = r.parse_rule_documents = refuse\n"
        "from advisor.plugin_manager import PluginHost\n"
        "from advisor.ruleset import load_ruleset\n"
        "rules, errors = load_ruleset(PluginHost(), [])\n"
        "print(r.__file__, len(rules.rules), len(errors))\n"
    )
    proc = installed_python(installed, tmp_path, "-c", script, cache=tmp_path / "c")
    assert proc.returncode == 0, proc.stderr
    where, count, errors = proc.stdout.split()
    assert where.startswith(str(installed)) and int(count) > 50 and errors == "0"


def test_installed_wheel_compiles_no_page_on_a_first_run(installed, tmp_path):
    """page_code.json matches the installed templates: with an empty cache, loading every
    page compiles none (Jinja2's compile is refused)."""
    script = (
        "import jinja2\n"
        "def refuse(*_, **__): raise SystemExit('compiled')\n"
        "jinja2.Environment.compile = refuse\n"
        "from advisor.render import html\n"
        "env = html.page_environment()\n"
        "names = env.list_templates(filter_func=lambda n: n.endswith('.j2'))\n"
        "print(html.__file__, sum(bool(env.get_template(n)) for n in names))\n"
    )
    proc = installed_python(installed, tmp_path, "-c", script, cache=tmp_path / "c")
    shipped = json.loads((installed / "advisor" / "render" / "page_code.json").read_text())
    if shipped["jinja2"] != jinja2.__version__:  # another Jinja2's code is never used
        assert proc.returncode != 0 and "compiled" in proc.stderr
        return
    assert proc.returncode == 0, proc.stderr
    where, pages = proc.stdout.split()
    assert where.startswith(str(installed)) and pages == "4"
