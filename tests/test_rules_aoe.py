"""AOE rules (rules/aoe.yaml): each fires on tuning results that call for it and stays quiet
on results that do not."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from advisor.engine.evaluate import evaluate
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rules
from advisor.model import Profile, ProfileMeta, conform
from advisor_plugins.aoe import AoeReader
from advisor_plugins.builtin_rules import advisor_rule_paths

RULES, ERRORS = load_rules(advisor_rule_paths(), BUILTIN_FUNCTIONS)
GOOD = Path(__file__).parent / "fixtures" / "aoe" / "good"
COLUMNS = ["kind", "name", "op_type", "mode", "before_us", "after_us", "status", "task",
           "repo_total", "repo_unsatisfied"]


def tuning(*rows: tuple) -> pd.DataFrame:
    """Rows of (kind, name, op_type, mode, before_us, after_us, status, task, total, unsat)."""
    df = pd.DataFrame(list(rows), columns=COLUMNS)
    df["improvement_pct"] = (df["before_us"] / df["after_us"] - 1) * 100
    return df


def op(name: str, before: float, after: float, mode: str = "Schedule") -> tuple:
    status = "regressed" if after > before else "improved"
    return ("op", name, "Conv2D", mode, before, after, status, "report_1", None, None)


def task(name: str, status: str = "completed", before: float | None = None,
         after: float | None = None, total: int = 10, unsatisfied: int = 1) -> tuple:
    return ("task", name, None, "OPAT", before, after, status, "report_1", total, unsatisfied)


def run(rule_id: str, table: pd.DataFrame):
    profile = Profile(ProfileMeta("aoe", "mem"), {"tuning": conform("tuning", table)})
    result = evaluate(profile, [RULES.rules[rule_id]], functions=BUILTIN_FUNCTIONS)
    assert result.errors == [], result.errors
    assert result.outcomes[rule_id] != "not_applicable", result.not_applicable
    return result.findings


def test_aoe_rules_load():
    assert ERRORS == []
    assert {f"AOE-00{i}" for i in range(1, 6)} <= set(RULES.rules)


def test_regressions_fire_with_lost_time_and_worst_first():
    table = tuning(task("t"), op("a", 100, 80), op("b", 50, 60), op("c", 10, 10.05),
                   ("subgraph", "123", None, "SGAT", 2000, 2300, "regressed", "report_1",
                    None, None))
    (finding,) = run("AOE-001", table)
    # c is slower by 0.5%, under the 1% noise floor
    assert finding.values["regressions"] == 2
    assert finding.impact_us == pytest.approx((60 - 50) + (2300 - 2000))
    name = finding.evidence["columns"].index("name")
    # worst improvement first: b is -16.7%, the subgraph -13.0%
    assert [row[name] for row in finding.evidence["rows"]] == ["b", "123"]
    assert finding.severity == "medium"
    assert "2 operator/subgraph tuning results" in finding.message


def test_regressions_quiet_when_everything_got_faster():
    assert run("AOE-001", tuning(task("t"), op("a", 100, 80), op("c", 10, 10.05))) == []


def test_model_regression_fires_on_slower_model():
    table = tuning(task("slow", "regressed", 4000, 4400), task("fine", "improved", 5000, 3000))
    (finding,) = run("AOE-002", table)
    assert finding.values["slower_tasks"] == 1
    assert finding.impact_us == pytest.approx(400)
    assert finding.values["before_ms"] == pytest.approx(4.0)
    assert finding.values["after_ms"] == pytest.approx(4.4)
    assert finding.severity == "high"


def test_model_regression_quiet_without_model_times_or_when_faster():
    assert run("AOE-002", tuning(task("fine", "improved", 5000, 3000), op("b", 50, 60))) == []


def test_failed_and_incomplete_tuning_fires():
    table = tuning(task("a", "failed"), task("b", "incomplete"), op("x", 10, 5),
                   ("op", "res4a_branch1", None, None, None, None, "failed", "report_1",
                    None, None))
    (finding,) = run("AOE-003", table)
    assert (finding.values["failed_tasks"], finding.values["incomplete_tasks"],
            finding.values["failed_ops"]) == (1, 1, 1)
    assert finding.evidence["total_rows"] == 3
    assert "1 task failed, 1 stopped before the end, 1 operator failed" in finding.message


def test_failed_quiet_when_all_tasks_completed():
    assert run("AOE-003", tuning(task("a"), op("x", 10, 5))) == []


def test_repo_unsatisfied_fires_above_half():
    table = tuning(task("a", total=121, unsatisfied=120), task("b", total=13, unsatisfied=1))
    (finding,) = run("AOE-004", table)
    assert finding.values["ratio"] == pytest.approx(121 / 134)
    assert finding.values["unsatisfied"] == 121 and finding.values["total"] == 134


def test_repo_unsatisfied_quiet_when_most_strategies_landed():
    assert run("AOE-004", tuning(task("a", total=13, unsatisfied=1))) == []


def test_gain_summary_sums_improved_results():
    table = tuning(task("t"), op("a", 120.5, 80.25), op("b", 58.781, 26.876), op("c", 95, 101.5))
    (finding,) = run("AOE-005", table)
    assert finding.values["improved"] == 2 and finding.values["regressed"] == 1
    assert finding.values["saved_us"] == pytest.approx((120.5 - 80.25) + (58.781 - 26.876))
    assert finding.values["saved_ratio"] == pytest.approx(
        ((120.5 - 80.25) + (58.781 - 26.876)) / (120.5 + 58.781))
    assert finding.impact_us is None and finding.severity == "low"
    assert "1 other result got slower" in finding.message


def test_gain_summary_quiet_without_improvement():
    assert run("AOE-005", tuning(task("t", "failed"), op("c", 95, 101.5))) == []


def test_rules_on_the_fixture_folder_match_an_independent_count():
    """End to end on the reader's output: numbers recomputed from the files with plain json."""
    improved = regressed_us = 0.0
    count = 0
    for path in GOOD.glob("*.json"):
        text = path.read_text(encoding="utf-8")
        # repeated report keys: pairs keep both tasks
        for before, after in _times(json.loads(text, object_pairs_hook=list)):
            if after > before * 1.01:
                regressed_us += after - before
            elif after < before:
                improved += before - after
                count += 1
    (profile,) = AoeReader().read(GOOD)
    result = evaluate(profile, [RULES.rules["AOE-001"], RULES.rules["AOE-005"]],
                      functions=BUILTIN_FUNCTIONS)
    by_id = {f.rule.id: f for f in result.findings}
    assert by_id["AOE-001"].impact_us == pytest.approx(regressed_us)
    assert by_id["AOE-005"].values["saved_us"] == pytest.approx(improved)
    assert by_id["AOE-005"].values["improved"] == count


def _times(node) -> list[tuple[float, float]]:
    """(before, after) in µs of every operator/subgraph entry found anywhere in a pairs tree."""
    found = []
    if isinstance(node, list):
        pairs = [p for p in node if isinstance(p, tuple) and len(p) == 2]
        keys = dict(pairs) if len(pairs) == len(node) and pairs else {}
        for unit, scale in (("(us)", 1), ("(ms)", 1000)):
            if f"performance_before_tune{unit}" in keys and (
                    "op_name" in keys or "repo_key" in keys or "update_mode" in keys):
                found.append((keys[f"performance_before_tune{unit}"] * scale,
                              keys[f"performance_after_tune{unit}"] * scale))
        for item in node:
            found += _times(item)
    elif isinstance(node, tuple):
        found += _times(node[1])
    return found
