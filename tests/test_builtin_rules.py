"""Every built-in rule fires where the data says so and stays quiet elsewhere."""

from __future__ import annotations

import pandas as pd
import pytest

from advisor.derive import derive
from advisor.engine.evaluate import evaluate
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rules
from advisor.model import Profile, ProfileMeta, conform
from advisor_plugins.builtin_rules import advisor_rule_paths
from advisor_plugins.step_metrics import PROVIDERS

RULES, ERRORS = load_rules(advisor_rule_paths(), BUILTIN_FUNCTIONS)


def run(rule_id: str, **tables: pd.DataFrame):
    profile = Profile(ProfileMeta("test", "mem"),
                      {name: conform(name, df) for name, df in tables.items()})
    rule = RULES.rules[rule_id]
    derive(profile, rule.needs(), PROVIDERS)
    result = evaluate(profile, [rule], functions=BUILTIN_FUNCTIONS)
    assert result.errors == [], result.errors
    assert result.outcomes[rule_id] != "not_applicable", result.not_applicable
    return result.findings


def steps(n: int, duration: float, **cols: float) -> pd.DataFrame:
    start = [i * (duration + cols.get("data_aug_bound_us", 0.0)) for i in range(n)]
    df = pd.DataFrame({"step": range(1, n + 1), "start_us": start,
                       "end_us": [s + duration for s in start], "duration_us": duration})
    for name, value in cols.items():
        df[name] = value
    return df


def ops(rows: list[tuple[str, str, str, float]], wait: float = 0.0) -> pd.DataFrame:
    """rows of (name, op_type, core_type, duration_us), laid out back to back."""
    df = pd.DataFrame(rows, columns=["name", "op_type", "core_type", "duration_us"])
    df["start_us"] = (df["duration_us"] + wait).cumsum() - df["duration_us"]
    df["wait_us"] = wait
    df["category"] = ["communication" if c == "COMMUNICATION" else "compute"
                      for c in df["core_type"]]
    return df


def test_builtin_rules_load_cleanly():
    assert ERRORS == []
    assert {"STEP-001", "STEP-002", "OP-001", "OP-002", "OP-003", "OP-004", "OP-005"} <= set(
        RULES.rules)


def test_data_aug_bound_fires_with_impact():
    (finding,) = run("STEP-001", steps=steps(5, 10_000, data_aug_bound_us=2_000))
    # wait 10 000 of wall 60 000, all of it recoverable
    assert finding.values["ratio"] == pytest.approx(10_000 / 60_000)
    assert finding.impact_us == pytest.approx(10_000)
    assert "16.7%" in finding.message


@pytest.mark.parametrize("aug", [500.0, 300.0])
def test_data_aug_bound_quiet_when_small(aug):
    # 500 µs of 10 000: ratio below 10 %; 300 µs of 1 000: ratio high but mean below 0.5 ms
    duration = 10_000 if aug == 500.0 else 1_000
    assert run("STEP-001", steps=steps(5, duration, data_aug_bound_us=aug)) == []


def test_grad_refresh_fires_and_quiet():
    (finding,) = run("STEP-002", steps=steps(4, 10_000, fp_bp_us=5_000, grad_refresh_us=5_000))
    assert finding.values["ratio"] == pytest.approx(0.5)
    assert finding.impact_us == pytest.approx(20_000 - 0.3 * 40_000)
    assert run("STEP-002", steps=steps(4, 10_000, fp_bp_us=8_000, grad_refresh_us=2_000)) == []


def test_top_vector_ops_lists_types_with_share():
    device = ops([("sm", "SoftmaxV2", "AI_VECTOR_CORE", 300), ("ln", "LayerNorm",
                  "AI_VECTOR_CORE", 200), ("mm", "MatMulV2", "AI_CORE", 500),
                  ("ar", "AllReduce", "COMMUNICATION", 1000)])
    (finding,) = run("OP-001", device_ops=device)
    assert finding.values["ratio"] == pytest.approx(0.5)  # communication excluded
    assert [r[0] for r in finding.evidence["rows"]] == ["SoftmaxV2", "LayerNorm"]
    assert "SoftmaxV2 30.0%" in finding.message
    quiet = ops([("sm", "SoftmaxV2", "AI_VECTOR_CORE", 100), ("mm", "MatMulV2", "AI_CORE", 900)])
    assert run("OP-001", device_ops=quiet) == []


def test_aicpu_ops_fire_only_above_duration():
    device = ops([("a/NonZero-op1", "NonZero", "AI_CPU", 50), ("b/Drop-op2", "DropOutGenMask",
                  "AI_CPU", 30), ("c", "Add", "AI_CORE", 10), ("d", "Cast", "AI_CPU", 5)])
    (finding,) = run("OP-002", device_ops=device)
    assert finding.values["aicpu_count"] == 2
    assert finding.impact_us == pytest.approx(80)
    assert [r[0] for r in finding.evidence["rows"]] == ["a/NonZero-op1", "b/Drop-op2"]
    assert "NonZero" in finding.message
    assert run("OP-002", device_ops=ops([("d", "Cast", "AI_CPU", 19.9)])) == []


def test_task_wait_fires_and_quiet():
    rows = [(f"op{i}", "Add", "AI_CORE", 100.0) for i in range(10)]
    (finding,) = run("OP-003", device_ops=ops(rows, wait=20))
    assert finding.values["ratio"] == pytest.approx(200 / 1200)
    assert finding.impact_us == pytest.approx(200)
    assert run("OP-003", device_ops=ops(rows, wait=5)) == []


def test_cube_vector_balance():
    vector_heavy = ops([("sm", "SoftmaxV2", "AI_VECTOR_CORE", 700), ("mm", "MatMulV2",
                        "AI_CORE", 300)])
    (finding,) = run("OP-004", device_ops=vector_heavy)
    assert finding.severity == "low" and finding.values["cube_ratio"] == pytest.approx(0.3)
    cube_heavy = ops([("sm", "SoftmaxV2", "AI_VECTOR_CORE", 300), ("mm", "MatMulV2",
                      "AI_CORE", 700)])
    assert run("OP-004", device_ops=cube_heavy) == []


def test_dominant_op_type_feeds_tune_ops():
    device = ops([("mm1", "MatMulV2", "AI_CORE", 400), ("mm2", "MatMulV2", "AI_CORE", 300),
                  ("mm1", "MatMulV2", "AI_CORE", 350), ("add", "Add", "AI_VECTOR_CORE", 200),
                  ("c", "Cast", "AI_VECTOR_CORE", 150)])
    (finding,) = run("OP-005", device_ops=device)
    assert finding.values["top_type"] == "MatMulV2"
    assert finding.values["top_share"] == pytest.approx(1050 / 1400)
    assert finding.tune_ops == ["mm1", "mm2"]
    even = ops([(f"op{i}", f"T{i}", "AI_CORE", 100) for i in range(5)])
    assert run("OP-005", device_ops=even) == []
