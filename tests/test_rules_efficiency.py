"""EFF rules: operator efficiency against device peaks, and host-bound kernel dispatch."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import advisor
from advisor.compat import zip_strict
from advisor.derive import derive
from advisor.engine.evaluate import evaluate
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import load_rules
from advisor.model import Profile, ProfileMeta, conform
from advisor_plugins.builtin_rules import advisor_rule_paths
from advisor_plugins.step_metrics import PROVIDERS

RULES, ERRORS = load_rules(advisor_rule_paths(), BUILTIN_FUNCTIONS)
STATIC = Path(__file__).parent / "fixtures" / "megengine" / "static" / "profiling.json"


def run(rule_id: str, params: dict | None = None, **tables: pd.DataFrame):
    profile = Profile(ProfileMeta("test", "mem"),
                      {name: conform(name, df) for name, df in tables.items()})
    rule = RULES.rules[rule_id]
    derive(profile, rule.needs(), PROVIDERS)
    result = evaluate(profile, [rule], functions=BUILTIN_FUNCTIONS,
                      overrides={rule_id: params or {}})
    assert result.errors == [], result.errors
    assert result.outcomes[rule_id] != "not_applicable", result.not_applicable
    return result.findings


def test_rules_load():
    assert ERRORS == []
    assert {"EFF-001", "EFF-002"} <= set(RULES.rules)


def device(rows: list[tuple[str, float, float | None, float | None]]) -> pd.DataFrame:
    """rows of (name, duration_us, flops, bytes), back to back."""
    df = pd.DataFrame(rows, columns=["name", "duration_us", "flops", "bytes"])
    df["op_type"] = df["name"]
    df["core_type"] = "GPU"
    df["category"] = "compute"
    df["start_us"] = df["duration_us"].cumsum() - df["duration_us"]
    return df


def test_low_efficiency_fires_on_ops_below_both_peaks():
    # peaks 10 TFLOPS = 1e7 FLO/µs and 1000 GB/s = 1e6 B/µs
    ops = device([("gemm", 100, 5e8, 1e6),      # 50% of FLOPS: fine
                  ("slow", 200, 2e7, 2e6),      # 1% FLOPS, 1% bandwidth: flagged
                  ("copyish", 100, None, 5e7),  # 50% of bandwidth: fine
                  ("tiny", 10, 1e3, 1e3)])      # below min_duration_us: ignored
    (finding,) = run("EFF-001", {"peak_tflops": 10, "peak_gbps": 1000}, device_ops=ops)
    attained = max(2e7 / 200 / 1e7, 2e6 / 200 / 1e6)
    assert finding.values["slow_count"] == 1
    assert finding.values["slow_us"] == pytest.approx(200)
    assert finding.impact_us == pytest.approx(200 * (1 - attained / 0.10))
    assert [r[0] for r in finding.evidence["rows"]] == ["slow"]
    assert "1 operator (200.0 µs)" in finding.message


def test_low_efficiency_silent_when_ops_reach_a_peak():
    ops = device([("gemm", 100, 5e8, 1e6), ("copyish", 100, None, 5e7)])
    assert run("EFF-001", {"peak_tflops": 10, "peak_gbps": 1000}, device_ops=ops) == []


def test_low_efficiency_on_the_megengine_static_fixture():
    doc = json.loads(STATIC.read_text(encoding="utf-8"))
    peak_flo_us, peak_b_us, floor = 15.7e12 / 1e6, 900e9 / 1e6, 0.10  # rule defaults
    slow = {}
    for oid, opr in doc["graph_exec"]["operator"].items():
        (t,) = doc["profiler"]["device"][oid].values()
        fp = doc["profiler"]["opr_footprint"][oid]
        us = (t["end"] - t["start"]) * 1e6
        eff = max((fp["computation"] or 0) / us / peak_flo_us, fp["memory"] / us / peak_b_us)
        if us >= 50 and eff < floor:
            slow[opr["name"]] = us * (1 - eff / floor)
    (analysis,) = advisor.analyze(STATIC, select=["EFF-001"]).analyses
    (finding,) = analysis.findings
    assert finding.values["slow_count"] == len(slow) == 3
    assert finding.impact_us == pytest.approx(sum(slow.values()))
    names = {row[finding.evidence["columns"].index("name")] for row in finding.evidence["rows"]}
    assert names == set(slow)
    # a MegEngine GPU profile: AOE tunes Ascend operators only, so no tune-ops file entries
    assert analysis.profile.meta.device_kind == "GPU" and finding.tune_ops == []


def steps_and_ops(busy_us: float, launch_us: float, n: int = 2, step_us: float = 1000.0):
    """n steps; per step one compute kernel of busy_us and one launch call of launch_us."""
    steps = pd.DataFrame({"step": range(1, n + 1), "start_us": [i * step_us for i in range(n)],
                          "end_us": [(i + 1) * step_us for i in range(n)],
                          "duration_us": step_us})
    ops = pd.DataFrame({"name": "k", "op_type": "k", "core_type": "GPU", "category": "compute",
                        "start_us": [i * step_us for i in range(n)], "duration_us": busy_us})
    host = pd.DataFrame({"name": "launch", "kind": "launch",
                         "start_us": [i * step_us for i in range(n)], "duration_us": launch_us})
    return {"steps": steps, "device_ops": ops, "host_ops": host}


def test_dispatch_bound_fires_when_device_idles_and_launch_thread_is_busy():
    (finding,) = run("EFF-002", **steps_and_ops(busy_us=300, launch_us=800))
    assert finding.values["free_ratio"] == pytest.approx(700 / 1000)
    assert finding.values["launch_ratio"] == pytest.approx(800 / 1000)
    assert finding.impact_us == pytest.approx(2 * 700 - 0.2 * 2000)
    assert [r[0] for r in finding.evidence["rows"]] == [1, 2]


@pytest.mark.parametrize(("busy", "launch"), [(900, 800), (300, 100)])
def test_dispatch_bound_silent_when_device_busy_or_host_idle(busy, launch):
    assert run("EFF-002", **steps_and_ops(busy_us=busy, launch_us=launch)) == []


def test_dispatch_bound_on_the_megengine_timeline():
    timeline = STATIC.parents[1] / "dynamic" / "4242.chrome_timeline.json"
    events = json.loads(timeline.read_text(encoding="utf-8"))["traceEvents"]
    worker = [e["ts"] for e in events if e.get("tid") == 101 and e["ph"] in ("B", "E")]
    launch = sum(end - begin for begin, end in zip_strict(worker[::2], worker[1::2]))
    (analysis,) = advisor.analyze(timeline, select=["EFF-002"],
                                  params={"EFF-002": {"min_launch_ratio": 0.1}}).analyses
    (finding,) = analysis.findings
    assert finding.values["launch_us"] == pytest.approx(launch)
    (quiet,) = advisor.analyze(timeline, select=["EFF-002"]).analyses
    assert quiet.findings == []  # the worker is busy 13% of the step: not the cause
