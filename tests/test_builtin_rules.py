"""What the built-in rules do on given data is tested by their case files (rules/*.case.yaml,
run by `advisor rules test` and tests/test_rule_cases.py). This file keeps what a case file
cannot express: properties of all rules at once, loading errors, and the parts of a finding a
case's `expect` has no key for (which evidence rows, in what order; tune_ops; no impact)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import pytest

from advisor.cases import CaseRunner, load_case_file
from advisor.compat import zip_strict
from advisor.engine.evaluate import Finding
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import DEVICES, FRAMEWORKS, load_rules
from advisor.plugin_manager import PluginHost
from advisor.ruleset import load_ruleset
from advisor_plugins.builtin_rules import advisor_rule_paths

RULES, ERRORS = load_rules(advisor_rule_paths(), BUILTIN_FUNCTIONS)
ROOT_RULES = advisor_rule_paths()[0]


@cache
def _runner() -> CaseRunner:
    host = PluginHost()
    ruleset, errors = load_ruleset(host, [])
    assert errors == []
    return CaseRunner(ruleset, host)


def case_finding(case_file: str, rule_id: str, name: str) -> Finding:
    """The finding of the case `name` of rules/<case_file>.case.yaml, evaluated as
    `advisor rules test` evaluates it: the data stays in the case file, in one place."""
    cases = [
        c
        for c in load_case_file(Path(ROOT_RULES, f"{case_file}.case.yaml"))
        if c.rule_id == rule_id and c.name == name
    ]
    assert len(cases) == 1, f"no case {name!r} of {rule_id} in {case_file}.case.yaml"
    _, evaluation = _runner().evaluate(cases[0])
    (finding,) = evaluation.findings
    return finding


def evidence_column(finding: Finding, column: str) -> list[Any]:
    """One column of the evidence rows, in the order the finding shows them."""
    return [
        dict(zip_strict(finding.evidence["columns"], row))[column]
        for row in finding.evidence["rows"]
    ]


def test_builtin_rules_load_cleanly():
    """Loading all rule files together (ids unique across files) is not a case of one rule."""
    assert ERRORS == []
    assert {
        "STEP-001",
        "STEP-002",
        "OP-001",
        "OP-002",
        "OP-003",
        "OP-004",
        "OP-005",
        "EFF-001",
        "EFF-002",
        *(f"DATA-00{i}" for i in range(1, 8)),
        *(f"AOE-00{i}" for i in range(1, 6)),
    } <= set(RULES.rules)


# (case file, rule, case name, evidence column, its values in the order shown). A case's
# `evidence_rows` checks how many rows matched; which rows and their order need code. Rules
# whose message lists the top rows (OP-001, OP-002, EFF-001, DATA-003, DATA-007, AOE-001)
# check the order with message_contains instead.
EVIDENCE = [
    (
        "overlap",
        "COMM-002",
        "fires on a 64 MiB all-reduce at 6.7 GB/s, not on one at 33.6 GB/s or a slow 1 MiB one",
        "name",
        ["slow"],
    ),
    (
        "efficiency",
        "EFF-002",
        "fires when a 300 µs kernel leaves each 1000 µs step idle while launching takes 800 µs",
        "step",
        [1, 2],
    ),
    (
        "data_pipeline",
        "DATA-002",
        "fires when the device queue is empty at three of four GetNext calls and the host queue "
        "never",
        "step",
        [1, 3, 4],
    ),
    (
        "data_pipeline",
        "DATA-004",
        "fires when GetNext waits 1200 µs on average, up to 2 ms",
        "wait_us",
        [2000.0, 1500.0],
    ),
    (
        "data_pipeline",
        "DATA-005",
        "fires when the host queue is empty at 8 of 10 batches and the CPU is 25% busy in user "
        "code",
        "user_pct",
        [20.0, 25.0, 30.0],
    ),
    (
        "data_pipeline",
        "DATA-006",
        "fires on 35% system time with 12 runnable processes on 8 CPUs",
        "sys_pct",
        [40.0, 35.0, 30.0],
    ),
    (
        "data_pipeline",
        "DATA-006",
        "fires on 35% system time with 12 runnable processes on 8 CPUs",
        "context_switches",
        [1000.0, 1000.0, 1000.0],
    ),
]


@pytest.mark.parametrize(("case_file", "rule_id", "name", "column", "expected"), EVIDENCE)
def test_evidence_rows_of_cases(case_file, rule_id, name, column, expected):
    """Case files count evidence rows but cannot name them or their order (no expect key)."""
    assert evidence_column(case_finding(case_file, rule_id, name), column) == expected


def test_dominant_op_type_feeds_tune_ops_on_npu_only():
    """tune_ops (the names for operator_tuning_file.cfg) has no key in a case's `expect`."""
    on_npu = case_finding(
        "operators",
        "OP-005",
        "fires on MatMulV2 at 75% of an Ascend "
        "profile's operator time (its task names go to the tuning file)",
    )
    assert on_npu.tune_ops == ["mm1", "mm2"]  # each name once, slowest first
    # the same operators on a GPU: AOE cannot tune them, so no names for its file
    on_gpu = case_finding(
        "operators",
        "OP-005",
        "fires on the same MatMulV2 tasks on a GPU, without advice to tune them with AOE",
    )
    assert on_gpu.tune_ops == []


def test_gain_summary_has_no_impact():
    """A case's `expect.impact_us` is a number; that a finding has no impact needs code."""
    finding = case_finding(
        "aoe", "AOE-005", "fires with the time saved by an operator and a subgraph"
    )
    assert finding.impact_us is None and finding.severity == "low"


def test_a_dominant_operator_type_claims_no_saving():
    """OP-005 says where tuning pays most; its share is how the network is built, not time
    that fixing would give back (it had an impact of its time above 30% before)."""
    finding = case_finding(
        "operators", "OP-005", "fires when MatMulV2 takes 62.5% of operator time"
    )
    assert finding.impact_us is None and finding.severity == "low"
    assert finding.impact_note and "not a loss" in finding.impact_note


def test_total_us_is_a_reserved_name(tmp_path):
    """A load-time error of an edited rule file: case files test rules that load."""
    from advisor.engine.rules import load_rule_file

    text = (
        (ROOT_RULES / "host.yaml")
        .read_text(encoding="utf-8")
        .replace("max_share: 0.05    #", "total_us: 0.05    #")
    )
    path = tmp_path / "host.yaml"
    path.write_text(text, encoding="utf-8")
    _, errors = load_rule_file(path, BUILTIN_FUNCTIONS)
    assert any("'total_us' is a built-in name" in str(e) for e in errors)


@pytest.mark.parametrize("device", [*DEVICES, "unknown"])
@pytest.mark.parametrize("framework", [*FRAMEWORKS, "CANN", "unknown"])
def test_every_rule_has_advice_for_every_framework_and_device(framework, device):
    """Scoping a suggestion to one stack must never leave another stack with no advice.
    A property of every rule and every stack, not of one rule on given data."""
    for rule in RULES.rules.values():
        for lang in ("en", "zh"):
            assert rule.suggestions_for(lang, framework, device), (rule.id, lang)


def test_unmeasured_rules_say_why_in_both_languages():
    """A property of every rule definition, with no data to evaluate."""
    for rule in RULES.rules.values():
        if rule.impact_us is None:
            assert rule.impact_note and rule.text("zh").impact_note, rule.id
