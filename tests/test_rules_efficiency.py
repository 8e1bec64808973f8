"""EFF rules on MegEngine profiles read by the MegEngine reader. What EFF-001 and EFF-002 do on
given data is tested by rules/efficiency.case.yaml; these tests stay in Python because they
recompute the expected figures from the raw fixture files with plain json, independently of the
reader, and the fixtures live under tests/, which the wheel does not ship with the rules' case
files."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURE_DIR

import advisor
from advisor.compat import zip_strict

STATIC = FIXTURE_DIR / "megengine" / "static" / "profiling.json"


def test_low_efficiency_on_the_megengine_static_fixture():
    """Reader + EFF-001, checked against FLO, bytes and times taken from the file itself; and
    no tune_ops for a GPU profile, which a case's `expect` cannot check."""
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


def test_dispatch_bound_on_the_megengine_timeline():
    """Reader + EFF-002: the launch time is the worker thread's B/E spans in the raw trace."""
    timeline = STATIC.parents[1] / "dynamic" / "4242.chrome_timeline.json"
    events = json.loads(timeline.read_text(encoding="utf-8"))["traceEvents"]
    worker = [e["ts"] for e in events if e.get("tid") == 101 and e["ph"] in ("B", "E")]
    launch = sum(end - begin for begin, end in zip_strict(worker[::2], worker[1::2]))
    (analysis,) = advisor.analyze(
        timeline, select=["EFF-002"], params={"EFF-002": {"min_launch_ratio": 0.1}}
    ).analyses
    (finding,) = analysis.findings
    assert finding.values["launch_us"] == pytest.approx(launch)
    (quiet,) = advisor.analyze(timeline, select=["EFF-002"]).analyses
    assert quiet.findings == []  # the worker is busy 13% of the step: not the cause
