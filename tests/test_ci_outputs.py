"""`--format sarif` and `--format junit`: the findings for CI systems.

The SARIF log is validated against the official SARIF 2.1.0 schema (vendored in
tests/fixtures/sarif, see its PROVENANCE.md); the JUnit XML is parsed back and its counts
checked against the findings the API returns for the same real profile, including that a
finding below --fail-on is not a failure. docs/ci.md's examples are checked against the
formats and file names the code uses.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from conftest import FIXTURE_DIR, REAL, ROOT

import advisor
from advisor.api import AnalysisResult
from advisor.cli import main
from advisor.cli.run import FORMATS
from advisor.engine.evaluate import SourceLocation, at_least
from advisor.engine.outcome import SEVERITIES
from advisor.outputs import JUNIT_FILE, MANIFEST, SARIF_FILE, read_manifest
from advisor.render.junit import DEFAULT_FAIL_ON, render_junit, xml_text
from advisor.render.sarif import SRCROOT, sarif_log

CANN = REAL / "cann_timeline"
"""A genuine msprof timeline export: one profile, findings of high and low severity."""
LEGACY = REAL / "mindspore_legacy"
"""Several genuine MindSpore profiles of two runs (ranks sharing a number)."""
CLUSTER = REAL / "mindspore_cluster_4rank"
"""The four ranks of one MindSpore run, and their cluster."""
SCHEMA = json.loads((FIXTURE_DIR / "sarif" / "sarif-schema-2.1.0.json").read_text("utf-8"))
URI_CHARS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
LEVEL = {"high": "error", "medium": "warning", "low": "note"}


@pytest.fixture(scope="module")
def cann() -> AnalysisResult:
    return advisor.analyze(CANN, lang="en")


def validate_sarif(document: dict[str, Any]) -> None:
    """Raise when `document` breaks the SARIF 2.1.0 schema (formats such as uri checked)."""
    validator = jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.FormatChecker())
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(document)]
    assert errors == []
    # jsonschema checks the "uri" formats only with an extra package: every URI holds only
    # the characters RFC 3986 allows (anything else percent-encoded)
    uris = re.findall(r'"uri": "([^"]*)"', json.dumps(document))
    assert uris and all(URI_CHARS.fullmatch(u) for u in uris), uris


def run(*args: object) -> Any:
    return CliRunner().invoke(main, ["run", *map(str, args), "-q", "--lang", "en"])


# --- SARIF ------------------------------------------------------------------------------------


def test_sarif_file_is_valid_and_holds_every_finding(
    tmp_path: Path, cann: AnalysisResult, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(ROOT)  # paths are written relative to the working directory
    result = run(CANN, "-o", tmp_path, "--format", "sarif")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([SARIF_FILE, MANIFEST])
    document = json.loads((tmp_path / SARIF_FILE).read_text("utf-8"))
    validate_sarif(document)
    (sarif_run,) = document["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] == "advisor" and driver["version"] == advisor.__version__
    (analysis,) = cann.analyses
    assert [r["id"] for r in driver["rules"]] == [r.id for r in analysis.rules]
    findings = analysis.findings
    assert {f.severity for f in findings} >= {"high", "low"}
    assert len(sarif_run["results"]) == len(findings)
    for out, finding in zip(sarif_run["results"], findings):
        assert out["ruleId"] == finding.rule.id
        assert driver["rules"][out["ruleIndex"]]["id"] == finding.rule.id
        assert out["level"] == LEVEL[finding.severity]
        assert out["message"]["text"].startswith(finding.message)
        stake = "Time at stake: " if finding.impact_us is not None else "(no time estimate: "
        assert stake in out["message"]["text"]
        props = out["properties"]
        assert props["rank"] == finding.rank
        assert props["impact_us"] == finding.impact_us  # JSON keeps a float exactly
        assert props["impact_ratio"] == finding.impact_ratio
        assert props["step_time_if_fixed_us"] == finding.step_time_if_fixed_us
        # no recorded stacks: the profile folder, its files as related locations
        (location,) = out["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        profile = Path(os.path.abspath(analysis.profile.meta.path)).relative_to(ROOT)
        assert artifact == {"uri": profile.as_posix() + "/", "uriBaseId": SRCROOT}
        related = [
            r["physicalLocation"]["artifactLocation"]["uri"] for r in out["relatedLocations"]
        ]
        assert related == [f"{profile.as_posix()}/{f}" for f in analysis.profile.meta.files_read]
    fixed = {r["id"]: r.get("defaultConfiguration") for r in driver["rules"]}
    for rule in analysis.rules:
        expected = {"level": LEVEL[rule.severity]} if rule.severity else None
        assert fixed[rule.id] == expected, rule.id


def test_sarif_places_findings_on_the_source_lines(
    tmp_path: Path, cann: AnalysisResult, monkeypatch: pytest.MonkeyPatch
):
    """The line with the most time is the location, the others related ones: relative
    inside the working directory, file:// outside it."""
    evaluation = cann.analyses[0].evaluation
    first, *rest = evaluation.findings
    sources = [
        SourceLocation(str(tmp_path / "model" / "train.py"), 42, "forward", 1200.0, 0.6),
        SourceLocation("/opt/site-packages/torch/nn/linear.py", 117, "linear", 700.0, 0.35),
        SourceLocation("<built-in>", None, "matmul", 100.0, None),
    ]
    monkeypatch.setattr(
        evaluation, "findings", [dataclasses.replace(first, sources=sources), *rest]
    )
    document = sarif_log(cann, cwd=tmp_path)
    validate_sarif(document)
    assert document["runs"][0]["originalUriBaseIds"][SRCROOT]["uri"] == tmp_path.as_uri() + "/"
    out = document["runs"][0]["results"][0]
    (primary,) = out["locations"]
    assert primary["physicalLocation"] == {
        "artifactLocation": {"uri": "model/train.py", "uriBaseId": SRCROOT},
        "region": {"startLine": 42},
    }
    assert primary["logicalLocations"] == [{"name": "forward", "kind": "function"}]
    outside, builtin = out["relatedLocations"]
    assert outside["physicalLocation"] == {
        "artifactLocation": {"uri": "file:///opt/site-packages/torch/nn/linear.py"},
        "region": {"startLine": 117},
    }
    assert "region" not in builtin["physicalLocation"]
    assert builtin["physicalLocation"]["artifactLocation"]["uri"] == "%3Cbuilt-in%3E"
    # the other findings still point at the profile
    assert all(
        "region" not in r["locations"][0]["physicalLocation"]
        for r in document["runs"][0]["results"][1:]
    )


def test_sarif_fingerprints_are_stable_across_runs(cann: AnalysisResult):
    again = advisor.analyze(CANN, lang="en")
    prints = [
        [r["partialFingerprints"] for r in sarif_log(x, cwd=ROOT)["runs"][0]["results"]]
        for x in (cann, again)
    ]
    assert prints[0] == prints[1]
    assert len({json.dumps(p) for p in prints[0]}) == len(prints[0])  # one per finding


def test_dash_output_refuses_sarif_and_junit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """-o - keeps stdout for the JSON report: a SARIF or JUnit file needs a folder."""
    monkeypatch.chdir(tmp_path)
    for formats, named in (
        ("sarif", "--format sarif needs"),
        ("json,sarif,junit", "sarif, junit need"),
    ):
        result = run(CANN, "-o", "-", "--format", formats)
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and named in lines[0] and "a folder (-o DIR)" in lines[0]
    assert list(tmp_path.iterdir()) == []


# --- JUnit ------------------------------------------------------------------------------------


def suites_of(path: Path) -> list[ET.Element]:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    for key in ("tests", "failures", "errors", "skipped"):
        assert int(root.get(key)) == sum(int(s.get(key)) for s in suites), key
    return suites


def check_suite(suite: ET.Element, analysis: Any, fail_on: str) -> None:
    """The suite's counts and test cases against the profile's evaluation."""
    evaluation = analysis.evaluation
    cases = suite.findall("testcase")
    assert [c.get("name").split(" ", 1)[0] for c in cases] == [r.id for r in analysis.rules]
    assert [c.get("classname") for c in cases] == [r.group for r in analysis.rules]
    by_id = {c.get("name").split(" ", 1)[0]: c for c in cases}
    failing = [f for f in analysis.findings if at_least(f.severity, fail_on)]
    passing = [f for f in analysis.findings if not at_least(f.severity, fail_on)]
    assert int(suite.get("tests")) == len(cases) == len(analysis.rules)
    assert int(suite.get("failures")) == len(failing) == len(suite.findall("testcase/failure"))
    assert int(suite.get("skipped")) == len(evaluation.not_applicable)
    assert len(suite.findall("testcase/skipped")) == len(evaluation.not_applicable)
    assert int(suite.get("errors")) == len(evaluation.errors)
    for finding in failing:
        failure = by_id[finding.rule.id].find("failure")
        assert failure.get("message").startswith(finding.message)
        assert failure.get("type") == finding.severity
    for finding in passing:  # fired below the threshold: passed, the finding in system-out
        case = by_id[finding.rule.id]
        assert case.find("failure") is None and case.find("skipped") is None
        assert f"below --fail-on {fail_on}" in case.findtext("system-out")
        assert finding.message in case.findtext("system-out")
    for rule, missing in evaluation.not_applicable:
        reason = by_id[rule.id].find("skipped").get("message")
        assert reason.startswith(("data missing from this profile: ", "data this format never"))
        assert missing[0] in reason


@pytest.mark.parametrize("fail_on", [None, "low", "high"])
def test_junit_counts_match_the_findings(tmp_path: Path, cann: AnalysisResult, fail_on: str | None):
    threshold = fail_on or DEFAULT_FAIL_ON
    (analysis,) = cann.analyses
    assert any(not at_least(f.severity, "medium") for f in analysis.findings)  # a low one
    assert any(at_least(f.severity, "high") for f in analysis.findings)
    args = ["--fail-on", fail_on] if fail_on else []
    result = run(CANN, "-o", tmp_path, "--format", "junit", *args)
    assert result.exit_code == (1 if fail_on else 0), result.output
    (suite,) = suites_of(tmp_path / JUNIT_FILE)
    assert suite.get("name") == "rank 0"
    check_suite(suite, analysis, threshold)
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["fail_on"] == threshold
    failures = int(suite.get("failures"))
    lows = sum(f.severity == "low" for f in analysis.findings)
    assert (failures == len(analysis.findings)) == (threshold == "low") and lows > 0


def test_junit_has_a_suite_per_profile(tmp_path: Path):
    result = advisor.analyze(LEGACY, lang="en")
    path = tmp_path / JUNIT_FILE
    path.write_text(render_junit(result, "medium"), encoding="utf-8")
    suites = suites_of(path)
    assert len(suites) == len(result.analyses) > 2
    names = [s.get("name") for s in suites]
    assert len(set(names)) == len(names)  # two "rank 1" profiles told apart by their path
    assert "cluster" not in names  # two runs (rank 1 twice): not compared as ranks
    for suite, analysis in zip(suites, result.analyses):
        check_suite(suite, analysis, "medium")
    result = advisor.analyze(CLUSTER, lang="en")
    path.write_text(render_junit(result, "medium"), encoding="utf-8")
    suites = suites_of(path)
    assert [s.get("name") for s in suites] == ["rank 0", "rank 1", "rank 2", "rank 3", "cluster"]
    for suite, analysis in zip(suites, result.analyses):
        check_suite(suite, analysis, "medium")


def test_junit_survives_control_characters(
    tmp_path: Path, cann: AnalysisResult, monkeypatch: pytest.MonkeyPatch
):
    """A kernel name from a profile may hold characters XML 1.0 cannot: the file still parses."""
    evaluation = cann.analyses[0].evaluation
    first, *rest = evaluation.findings
    odd = dataclasses.replace(first, message="kernel \x1b[31mred\x00 \x0b done")
    monkeypatch.setattr(evaluation, "findings", [odd, *rest])
    path = tmp_path / JUNIT_FILE
    path.write_text(render_junit(cann, "low"), encoding="utf-8")
    (suite,) = suites_of(path)
    messages = [f.get("message") for f in suite.iter("failure")]
    assert any(m.startswith("kernel \ufffd[31mred\ufffd \ufffd done") for m in messages)
    assert xml_text("tab\tnew\nline ok 中文") == "tab\tnew\nline ok 中文"


def test_ci_files_follow_the_manifest(tmp_path: Path):
    """A run without sarif/junit removes the files an earlier run wrote, like any output."""
    assert run(CANN, "-o", tmp_path, "--format", "sarif,junit").exit_code == 0
    assert set(read_manifest(tmp_path)["run"]) == {SARIF_FILE, JUNIT_FILE}
    assert run(CANN, "-o", tmp_path, "--format", "json").exit_code == 0
    assert not (tmp_path / SARIF_FILE).exists() and not (tmp_path / JUNIT_FILE).exists()


# --- docs/ci.md -------------------------------------------------------------------------------


def test_ci_doc_examples_use_real_formats_and_files():
    text = (ROOT / "docs" / "ci.md").read_text("utf-8")
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 2  # GitHub Actions and GitLab CI
    for block in blocks:
        document = yaml.safe_load(block)
        commands = re.findall(r"advisor run .*", block)
        assert commands, block
        for command in commands:
            formats = re.search(r"--format (\S+)", command).group(1).split(",")
            assert set(formats) <= set(FORMATS) and {"sarif", "junit"} <= set(formats)
            assert re.search(r"--fail-on (\S+)", command).group(1) in SEVERITIES
        assert f"advisor-out/{JUNIT_FILE}" in block
        assert isinstance(document, dict)
    github, gitlab = (yaml.safe_load(b) for b in blocks)
    steps = github["jobs"]["advisor"]["steps"]
    upload = next(s for s in steps if "upload-sarif" in s.get("uses", ""))
    assert upload["with"]["sarif_file"] == f"advisor-out/{SARIF_FILE}"
    assert gitlab["advisor"]["artifacts"]["reports"]["junit"] == f"advisor-out/{JUNIT_FILE}"
