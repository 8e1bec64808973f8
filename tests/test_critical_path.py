"""The critical path of each step (step_bounds) and the step time were a finding fixed.

The per-step categories are checked against numbers computed here from the raw traces with
plain json parsing (never the readers' code), against tables built by hand, and the savings
against the budget they must stay within on every fixture.
"""

from __future__ import annotations

import gzip
import json
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURE_DIR, REAL
from hypothesis import given, settings
from hypothesis import strategies as st

import advisor
from advisor.derive import derive
from advisor.engine import savings
from advisor.engine.evaluate import Finding, rank_findings
from advisor.engine.outcome import Severity
from advisor.engine.rules import Rule
from advisor.model import Profile, ProfileMeta, conform
from advisor.session import Session
from advisor_plugins.critical_path import BOUNDS

PARTS = [f"{b}_us" for b in BOUNDS]
KINETO = REAL / "kineto"
TIMELINE = KINETO / "timeline_analysis__sampled_rank-0.json.gz"
ALEXNET = KINETO / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
SMALL = FIXTURE_DIR / "msprof/PROF_000001_20260105093000123_SMALLCASE"


def _profile(**tables: list[dict]) -> Profile:
    profile = Profile(ProfileMeta("test", "mem"))
    for name, rows in tables.items():
        profile.tables[name] = conform(name, pd.DataFrame(rows))
    return profile


def _bounds(profile: Profile) -> pd.DataFrame:
    derive(profile, ["step_bounds"], Session.open().providers)
    return profile.tables["step_bounds"].set_index("step")


# --- raw traces -------------------------------------------------------------------------------


def _merge(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def _clip(spans: list[tuple[float, float]], lo: float, hi: float) -> list[tuple[float, float]]:
    return [(max(a, lo), min(b, hi)) for a, b in spans if min(b, hi) > max(a, lo)]


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(b - a for a, b in spans)


def _minus(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """|a \\ b| for merged span lists."""
    covered = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)
    return _length(a) - covered


class RawTrace:
    """A Kineto trace as plain events: the device events, the runtime calls by correlation,
    the step windows (ProfilerStep, else the device span)."""

    def __init__(self, path: Path) -> None:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            events = [e for e in json.load(fh)["traceEvents"] if e.get("ph") == "X"]
        self.device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
        self.launch = {  # (start, end) of each runtime call
            e["args"]["correlation"]: (float(e["ts"]), float(e["ts"] + e["dur"]))
            for e in events
            if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
        }
        steps = [e for e in events if str(e["name"]).startswith("ProfilerStep#")]
        if steps:
            self.windows = sorted((float(e["ts"]), float(e["ts"] + e["dur"])) for e in steps)
        else:
            self.windows = [
                (
                    min(float(e["ts"]) for e in self.device),
                    max(float(e["ts"] + e["dur"]) for e in self.device),
                )
            ]

    def spans(self, comm: bool) -> list[tuple[float, float]]:
        return _merge(
            [
                (float(e["ts"]), float(e["ts"] + e["dur"]))
                for e in self.device
                if ("nccl" in e["name"].lower()) == comm
            ]
        )

    def late_idle(self, lo: float, hi: float) -> float:
        """Idle time in [lo, hi) ended by a device event launched after the idle began, up to
        the launch call's return where the event then waited over 30 µs to start."""
        busy = _merge([(float(e["ts"]), float(e["ts"] + e["dur"])) for e in self.device])
        first = {}
        for e in sorted(self.device, key=lambda e: e["ts"]):
            first.setdefault(float(e["ts"]), e)
        late = 0.0
        for (_, gap_start), (gap_end, _) in zip(busy, busy[1:]):
            call = self.launch.get(first[gap_end]["args"].get("correlation"))
            if call is not None and call[0] > gap_start:
                host_end = call[1] if gap_end - call[1] > 30 else gap_end
                late += _length(_clip([(gap_start, host_end)], lo, hi))
        return late


@pytest.mark.parametrize("path", [TIMELINE, ALEXNET], ids=lambda p: p.name[:24])
def test_kineto_bounds_match_the_raw_trace(path):
    """Per step: the window from the raw ProfilerStep (or device span), compute = the union of
    non-NCCL device events, communication = NCCL time not under compute, idle = the rest;
    host at least the idle time ended by a late launch (cudaLaunchKernel after the device
    ran dry), at most all idle."""
    raw = RawTrace(path)
    (analysis,) = advisor.analyze(path).analyses
    table = analysis.tables["step_bounds"].sort_values("start_us")
    compute, comm = raw.spans(comm=False), raw.spans(comm=True)
    assert len(table) == len(raw.windows)
    for (lo, hi), row in zip(raw.windows, table.itertuples()):
        c, m = _clip(compute, lo, hi), _clip(comm, lo, hi)
        exposed = _minus(m, c)
        assert row.duration_us == pytest.approx(hi - lo)
        assert sum(getattr(row, p) for p in PARTS) == pytest.approx(hi - lo)
        assert row.compute_us == pytest.approx(_length(c))
        assert row.communication_us == pytest.approx(exposed)
        idle = hi - lo - _length(c) - exposed
        assert row.host_us + row.data_us + row.idle_us == pytest.approx(idle)
        late = raw.late_idle(lo, hi)
        assert late > 0
        assert late - 1e-6 <= row.host_us <= idle + 1e-6
        parts = {b: getattr(row, f"{b}_us") for b in BOUNDS}
        assert row.bound == max(parts, key=parts.get)
        assert row.bound_share == pytest.approx(parts[row.bound] / (hi - lo))


def test_alexnet_is_host_bound_and_fixing_the_idle_time_leaves_the_compute():
    """The alexnet trace's device computes 66 ms of a 12.9 s span: the host holds it up, 11.6 s
    of it in one-time start-up calls. The start-up finding comes first; the idle-time finding
    holds the rest of the idle time, and the two, fixed, leave the step its compute and the
    few µs nothing explains."""
    (analysis,) = advisor.analyze(ALEXNET).analyses
    (row,) = analysis.tables["step_bounds"].itertuples()
    assert row.bound == "host"
    by_rule = {f.rule.id: f for f in analysis.findings}
    idle_finding, startup = by_rule["STEP-003"], by_rule["STEP-006"]
    idle = row.host_us + row.data_us + row.idle_us
    assert startup.impact_us > 0.9 * idle
    assert idle_finding.impact_us + startup.impact_us == pytest.approx(idle)
    assert idle_finding.step_time_if_fixed_us == pytest.approx(
        row.duration_us - idle_finding.impact_us
    )
    fix_first = analysis.evaluation.fix_first
    assert fix_first.rules[0] == "STEP-006"
    assert fix_first.step_time_if_fixed_us == pytest.approx(row.duration_us - idle, rel=1e-3)
    assert fix_first.step_time_if_fixed_us >= row.compute_us - 1e-6


def test_ascend_pt_rank0_bounds_add_up_to_the_raw_step():
    """torch_npu rank 0 (real trace_view.json): ProfilerStep#1 runs 14,091.97 µs; compute is
    the Overlap Analysis "Computing" time inside it; no communication, so the idle parts are
    the rest of the step."""
    folder = REAL / "ascend_pt/rank0_ascend_pt"
    with open(folder / "ASCEND_PROFILER_OUTPUT/trace_view.json", encoding="utf-8") as fh:
        events = json.load(fh)
    names = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
    (step,) = [e for e in events if str(e.get("name")).startswith("ProfilerStep#")]
    origin = Decimal(str(step["ts"]))  # ns digits in a string: exact only as a decimal

    def at(e: dict) -> float:
        return float(Decimal(str(e["ts"])) - origin)

    computing = _merge(
        [
            (at(e), at(e) + float(e["dur"]))
            for e in events
            if e.get("name") == "Computing" and names.get(e.get("pid")) == "Overlap Analysis"
        ]
    )
    compute = _length(_clip(computing, 0.0, float(step["dur"])))
    (analysis,) = advisor.analyze(folder).analyses
    (row,) = analysis.tables["step_bounds"].itertuples()
    assert row.duration_us == pytest.approx(14_091.97)
    assert sum(getattr(row, p) for p in PARTS) == pytest.approx(14_091.97)
    assert row.compute_us == pytest.approx(compute, rel=1e-6)
    assert row.communication_us == 0
    assert row.host_us + row.data_us + row.idle_us == pytest.approx(14_091.97 - compute, rel=1e-6)
    assert row.bound != "compute"


def test_msprof_data_wait_between_steps_is_data_loading():
    """SMALLCASE: msprof's Data Aug Bound (1000, 2000, 500, 3000 µs before steps 2-5) is the
    gap between the step windows, counted as data loading; every window's parts add up."""
    (analysis,) = advisor.analyze(SMALL).analyses
    table = analysis.tables["step_bounds"].set_index("step")
    assert list(table["between_data_us"]) == pytest.approx([0, 1000, 2000, 500, 3000])
    assert list(table["between_us"]) == pytest.approx([0, 1000, 2000, 500, 3000])
    assert (table[PARTS].sum(axis=1) - table["duration_us"]).abs().max() < 1e-6
    path = analysis.evaluation.critical_path
    assert path.steps == 5
    assert path.step_us == pytest.approx(48_500 / 5)
    assert path.by_bound["data"] == pytest.approx(6500)
    (data_finding,) = [f for f in analysis.findings if f.rule.id == "STEP-001"]
    assert data_finding.step_time_if_fixed_us == pytest.approx((48_500 - 6500) / 5)


# --- hand-built tables -----------------------------------------------------------------------


def test_hand_built_step_splits_idle_into_data_host_and_other():
    """Step [0, 10000): compute 0-2000 and 8000-9000 (launched at 7000: [2000, 8000) waits
    for the host, but the data-loader call 2500-4000 comes first) and a collective 9000-9800
    (launched early); the idle [9800, 10000) closes the step with no task after it."""
    profile = _profile(
        steps=[{"step": 1, "start_us": 0, "end_us": 10_000, "duration_us": 10_000}],
        device_ops=[
            {"name": "mm", "core_type": "AI_CORE", "category": "compute", "start_us": 0,
             "duration_us": 2000, "launch_us": 0},
            {"name": "add", "core_type": "AI_CORE", "category": "compute", "start_us": 8000,
             "duration_us": 1000, "launch_us": 7000},
            {"name": "hcom_allReduce", "core_type": "COMMUNICATION", "category": "communication",
             "start_us": 9000, "duration_us": 800, "launch_us": 100},
        ],
        host_ops=[
            {"name": "DataLoader.__next__", "kind": "dataloader", "start_us": 2500,
             "duration_us": 1500},
        ],
    )  # fmt: skip
    row = _bounds(profile).loc[1]
    assert row["compute_us"] == pytest.approx(3000)
    assert row["communication_us"] == pytest.approx(800)
    assert row["data_us"] == pytest.approx(1500)
    assert row["host_us"] == pytest.approx(6000 - 1500)
    assert row["idle_us"] == pytest.approx(200)
    assert row["bound"] == "host"
    assert row["bound_share"] == pytest.approx(0.45)


def test_host_time_before_a_steps_first_task_is_its_preparation():
    """Step 1 [0, 5000): the host preprocesses 200-3000 and 3100-3500 (ended before the first
    launch), then launches a (3600-3610, runs 4000-5000); a step-long call and a sync in
    that time are not the host holding the device up. Step 2 [5000, 9000): b was launched at
    6000, after the device ran dry at 5000: [5000, 6010) is the host's, before b's start at
    8000 (waited 1990 µs on the device after its launch returned): all of it leading. Step 3
    [9000, 12000) starts while b still runs: nothing before its first task."""
    profile = _profile(
        steps=[
            {"step": 1, "start_us": 0, "end_us": 5000, "duration_us": 5000},
            {"step": 2, "start_us": 5000, "end_us": 9000, "duration_us": 4000},
            {"step": 3, "start_us": 9000, "end_us": 12_000, "duration_us": 3000},
        ],
        device_ops=[
            {"name": "a", "core_type": "AI_CORE", "category": "compute", "start_us": 4000,
             "duration_us": 1000, "launch_us": 3600, "launch_dur_us": 10},
            {"name": "b", "core_type": "AI_CORE", "category": "compute", "start_us": 8000,
             "duration_us": 2000, "launch_us": 6000, "launch_dur_us": 10},
            {"name": "c", "core_type": "AI_CORE", "category": "compute", "start_us": 10_000,
             "duration_us": 1000, "launch_us": 6100, "launch_dur_us": 10},
        ],
        host_ops=[
            {"name": "train.py(10): step", "kind": "python", "start_us": 0,
             "duration_us": 12_000},
            {"name": "decode", "kind": "python", "start_us": 200, "duration_us": 2800},
            {"name": "resize", "kind": "python", "start_us": 3100, "duration_us": 400},
            {"name": "cudaDeviceSynchronize", "kind": "sync", "start_us": 3500,
             "duration_us": 50},
        ],
    )  # fmt: skip
    table = _bounds(profile)
    assert list(table.loc[1, PARTS]) == pytest.approx([1000, 0, 3200, 0, 800])
    assert table.loc[1, "host_leading_us"] == pytest.approx(3200)
    assert table.loc[2, "host_us"] == pytest.approx(1010)
    assert table.loc[2, "host_leading_us"] == pytest.approx(1010)
    assert table.loc[3, "host_us"] == pytest.approx(0)
    assert table.loc[3, "host_leading_us"] == pytest.approx(0)


def test_profiler_figures_larger_than_the_timeline_are_cut_to_the_step():
    """A profiler's own step figures may disagree with its timeline: compute 7000 and exposed
    communication 5000 in a 10000 µs step leave 3000 for communication and no idle time,
    whatever the host did; a step outside the timeline has no breakdown and no bound."""
    profile = _profile(
        steps=[
            {"step": 1, "start_us": 0, "end_us": 10_000, "duration_us": 10_000,
             "computing_us": 7000, "communication_us": 5000, "comm_not_overlapped_us": 5000,
             "free_us": 0},
            {"step": 2, "start_us": 12_000, "end_us": 20_000, "duration_us": 8000},
        ],
        host_ops=[
            {"name": "aclrtSynchronizeDevice", "kind": "sync", "start_us": 0,
             "duration_us": 10_000},
        ],
    )  # fmt: skip
    table = _bounds(profile)
    assert list(table.loc[1, PARTS]) == pytest.approx([7000, 3000, 0, 0, 0])
    assert table.loc[1, "bound"] == "compute"
    assert table.loc[2, PARTS].isna().all()
    assert pd.isna(table.loc[2, "bound"])
    assert table.loc[2, "between_us"] == pytest.approx(2000)
    assert table.loc[2, "between_data_us"] == pytest.approx(0)


def _rule(rule_id: str, tags: tuple[str, ...], pool: str | None = None) -> Rule:
    return Rule(rule_id, rule_id.lower(), rule_id, "t", None, "", (), "", "test",  # type: ignore[arg-type]
                tags=tags, time_pool=pool)  # fmt: skip


def _finding(rule: Rule, impact: float | None, rank: int) -> Finding:
    return Finding(rule, Severity.HIGH, "", [], {}, {}, impact, None, None, rank=rank)


def test_savings_stay_within_the_critical_path_and_shared_time_counts_once():
    """Four steps, 40000 µs: compute 10000, communication 6000, host 12000, data 2000, idle
    10000. A kernel finding claiming 30000 µs saves at most the 10000 of compute; two
    device-idle findings share their pool, so only the larger joins "fix these first"; a
    communication finding saves its 5000; a finding of no known kind is bounded by the
    profile time only."""
    path = savings.CriticalPath(
        4,
        40_000.0,
        {"compute": 10_000.0, "communication": 6000.0, "host": 12_000.0, "data": 2000.0,
         "idle": 10_000.0, savings.UNATTRIBUTED: 0.0},
    )  # fmt: skip
    kernels = _finding(_rule("OP-1", ("operator",)), 30_000, 1)
    idle = _finding(_rule("STEP-3", ("step",), "device_idle"), 20_000, 2)
    launch = _finding(_rule("OP-7", ("operator", "launch"), "device_idle"), 15_000, 3)
    comm = _finding(_rule("COMM-1", ("communication",), "communication"), 5000, 4)
    loose = _finding(_rule("X-1", ("misc",)), 50_000, 5)
    info = _finding(_rule("INFO", ("step",)), None, 6)
    fix = savings.apply([kernels, idle, launch, comm, loose, info], path)
    assert kernels.step_time_if_fixed_us == pytest.approx((40_000 - 10_000) / 4)
    assert idle.step_time_if_fixed_us == pytest.approx((40_000 - 20_000) / 4)
    assert comm.step_time_if_fixed_us == pytest.approx((40_000 - 5000) / 4)
    assert loose.step_time_if_fixed_us is None  # all of the steps: no step of 0 ms promised
    assert info.step_time_if_fixed_us is None
    # the reader is told which critical-path time held a saving below the time at stake
    assert kernels.if_fixed_bounded_by == ["compute"]
    assert idle.if_fixed_bounded_by == comm.if_fixed_bounded_by == []
    assert loose.if_fixed_bounded_by == [] and info.if_fixed_bounded_by == []
    wide = _finding(_rule("STEP-9", ("step",), "device_idle"), 30_000, 7)
    savings.apply([wide], path)
    assert wide.step_time_if_fixed_us == pytest.approx((40_000 - 24_000) / 4)
    assert wide.if_fixed_bounded_by == ["host", "data", "idle"]
    # largest first: X-1 takes all 40000 (no kind: it may be any of it), nothing is left,
    # which is named without an estimate
    assert fix is not None and fix.rules == ("X-1",)
    assert fix.step_time_if_fixed_us is None and fix.saving_ratio is None
    fix = savings.apply([kernels, idle, launch, comm], path)
    # STEP-3 takes host 12000 + idle 8000; OP-1 compute 10000; OP-7 shares STEP-3's pool;
    # COMM-1 communication 5000: 35000 of 40000 -> 5000 / 4 steps left
    assert fix is not None and fix.rules == ("STEP-3", "OP-1", "COMM-1")
    assert fix.step_time_if_fixed_us == pytest.approx(5000 / 4)
    assert fix.saving_ratio == pytest.approx(35_000 / 40_000)


def test_without_step_bounds_savings_are_bounded_by_the_profile_time():
    profile = _profile(steps=[{"step": 1, "start_us": 0, "end_us": 1000, "duration_us": 1000}])
    path = savings.critical_path(profile, 1000.0)
    assert path is not None and path.by_bound == {savings.UNATTRIBUTED: 1000.0}
    finding = _finding(_rule("OP-1", ("operator",)), 400, 1)
    whole = _finding(_rule("OP-2", ("operator",)), 1500, 2)
    savings.apply([finding, whole], path)
    assert finding.step_time_if_fixed_us == pytest.approx(600.0)
    assert whole.step_time_if_fixed_us is None  # bounded to all of it: no step of 0 ms
    assert savings.critical_path(profile, None) is None
    assert savings.critical_path(profile, math.nan) is None


def test_a_profile_recording_almost_nothing_gets_no_step_time_if_fixed():
    """HTA's backward_thread sample: one 45 µs kernel and 10 µs of host calls on the critical
    path of a 413 ms step. Its idle finding is true, but "if fixed: 413 ms -> 0.04 ms" would
    be fiction: nothing in it says what the step spent its time on."""
    (analysis,) = advisor.analyze(REAL / "kineto_backward_thread").analyses
    path = analysis.evaluation.critical_path
    assert path.recorded_share() == pytest.approx((45 + 10) / 413_451)
    assert analysis.findings and all(f.step_time_if_fixed_us is None for f in analysis.findings)
    assert analysis.evaluation.fix_first is None
    (warning,) = [w for w in analysis.profile.warnings if "recorded work" in w.problem]
    assert "fills <0.1% of the steps" in warning.problem
    assert "no step time if fixed" in warning.problem
    # a profile that records most of its steps keeps its estimates
    (sampled,) = advisor.analyze(TIMELINE).analyses
    assert sampled.evaluation.critical_path.recorded_share() > 0.6
    assert sampled.evaluation.fix_first is not None


def test_a_profile_without_steps_recording_almost_nothing_gets_no_step_time_if_fixed():
    """vLLM Ascend's task_time export: three kernels (38.5 µs) in a 14.5 ms span, no steps.
    OP-003's wait is true, but "if fixed: 14.5 ms -> 0.04 ms" would be fiction, as above."""
    folder = REAL / "msprof_2026_vllm_ascend_task_time"
    (analysis,) = advisor.analyze(folder).analyses
    ops = analysis.tables["device_ops"]
    span = (ops["start_us"] + ops["duration_us"]).max() - ops["start_us"].min()
    path = analysis.evaluation.critical_path
    assert path.by_bound == {savings.UNATTRIBUTED: pytest.approx(span)}
    assert path.recorded_us == pytest.approx(4.32 + 8.36 + 25.8)  # the task_time(us) column
    assert path.recorded_share() == pytest.approx(38.48 / span)
    fired = {f.rule.id: f for f in analysis.findings}
    assert "OP-003" in fired and fired["OP-003"].step_time_if_fixed_us is None
    assert analysis.evaluation.fix_first is None
    (warning,) = [w for w in analysis.profile.warnings if "recorded work" in w.problem]
    assert "fills 0.3% of the profiled time" in warning.problem
    # a device timeline without steps that records its time keeps its estimates
    profile = _profile(
        device_ops=[
            {
                "name": "a",
                "core_type": "GPU",
                "category": "compute",
                "start_us": 0.0,
                "duration_us": 300.0,
            },
            {
                "name": "b",
                "core_type": "GPU",
                "category": "compute",
                "start_us": 200.0,
                "duration_us": 100.0,
            },
            {
                "name": "c",
                "core_type": "GPU",
                "category": "compute",
                "start_us": 400.0,
                "duration_us": 600.0,
            },
        ]
    )
    path = savings.critical_path(profile, 1000.0)
    assert path is not None and path.recorded_share() == pytest.approx(0.9)


def test_a_finding_measured_over_the_steps_with_a_breakdown_stands_for_all_of_them():
    """Device data for 2 of 8 steps of 1000 µs: an idle finding measured over those two
    (500 µs, a quarter of their time) saves a quarter of every step, as its message says;
    a finding measured over something else (communication time) keeps its impact, and with
    every step broken down nothing is scaled."""
    steps = [{"step": k, "start_us": 1000 * (k - 1), "end_us": 1000 * k, "duration_us": 1000}
             for k in range(1, 9)]  # fmt: skip
    ops = [{"name": "k", "category": "compute", "start_us": s, "duration_us": 750}
           for s in (0, 1000)]  # fmt: skip
    profile = _profile(steps=steps, device_ops=ops)
    _bounds(profile)
    path = savings.critical_path(profile, 8000.0)
    assert path is not None and path.covered == (2000.0, 8000.0)
    idle = _finding(_rule("STEP-3", ("step",), "device_idle"), 500, 1)
    idle.measured_us = 2000.0
    comm = _finding(_rule("COMM-2", ("communication",), "communication"), 100, 2)
    comm.measured_us = 300.0
    savings.apply([idle, comm], path)
    assert idle.step_time_if_fixed_us == pytest.approx(750.0)  # 8000 - 2000, over 8 steps
    assert comm.step_time_if_fixed_us == pytest.approx((8000 - 100) / 8)
    full = savings.CriticalPath(8, 8000.0, dict(path.by_bound))
    idle.measured_us = 2000.0
    savings.apply([idle], full)
    assert idle.step_time_if_fixed_us == pytest.approx((8000 - 500) / 8)


def test_findings_are_ranked_by_their_time_over_the_whole_profile():
    """Device data for 2 of 8 steps: an idle finding of 500 µs over those two stands for
    2000 µs of the profile, so it ranks above a finding of 1500 µs over all steps; with
    every step broken down (or no critical path) the measured impacts are compared."""
    path = savings.CriticalPath(8, 8000.0, {savings.UNATTRIBUTED: 8000.0}, (2000.0, 8000.0))
    idle = _finding(_rule("STEP-3", ("step",), "device_idle"), 500, 0)
    idle.measured_us = 2000.0
    refresh = _finding(_rule("STEP-2", ("step",)), 1500, 0)
    refresh.measured_us = 8000.0
    unknown = _finding(_rule("INFO", ("step",)), None, 0)
    findings = [unknown, refresh, idle]
    rank_findings(findings, path)
    assert [f.rule.id for f in findings] == ["STEP-3", "STEP-2", "INFO"]
    assert [f.rank for f in findings] == [1, 2, 3]
    assert savings.at_stake_us(idle, path) == pytest.approx(2000.0)
    assert savings.at_stake_us(refresh, path) == pytest.approx(1500.0)
    for other in (None, savings.CriticalPath(8, 8000.0, {savings.UNATTRIBUTED: 8000.0})):
        rank_findings(findings, other)
        assert [f.rule.id for f in findings] == ["STEP-2", "STEP-3", "INFO"]


# --- every fixture ---------------------------------------------------------------------------


def _fixtures() -> list[Path]:
    paths: list[Path] = []
    for folder in sorted(p for p in REAL.iterdir() if p.is_dir()):
        if folder.name == "kineto":
            paths += sorted(folder.iterdir())
        elif folder.name == "ascend_pt":
            paths += [folder / "rank0_ascend_pt"]
        else:
            paths.append(folder)
    paths += sorted((FIXTURE_DIR / "kineto_own").glob("*.gz"))
    paths += sorted((FIXTURE_DIR / "msprof").glob("PROF_*"))
    paths += sorted((FIXTURE_DIR / "msprof_queues").glob("PROF_*"))
    paths += [FIXTURE_DIR / "megengine/dynamic", FIXTURE_DIR / "megengine/static"]
    paths += [FIXTURE_DIR / "mindspore_hccl", FIXTURE_DIR / "cluster_links"]
    paths += sorted(p for p in (FIXTURE_DIR / "ascend_db").iterdir() if p.is_dir())
    return paths


@pytest.mark.slow
@pytest.mark.parametrize("path", _fixtures(), ids=lambda p: p.name[:40])
def test_every_fixture_keeps_the_estimates_within_the_step(path):
    """On every fixture: each step's parts add up to it; each finding's step time if fixed
    lies between 0 and the mean step time, and saves no more than the impact nor the
    critical-path time of its kind; "fix these first" stays within the step too."""
    for analysis in advisor.analyze(path).analyses:
        assert not [w for w in analysis.profile.warnings if "step_bounds" in w.file]
        table = analysis.tables.get("step_bounds")
        if table is not None:
            known = table[table["bound"].notna()]
            assert (known[PARTS] >= -1e-9).all().all()
            assert (known[PARTS].sum(axis=1) - known["duration_us"]).abs().max(
                skipna=True
            ) == pytest.approx(0, abs=1e-6) or known.empty
        path_ = analysis.evaluation.critical_path
        for finding in analysis.findings:
            after = finding.step_time_if_fixed_us
            if after is None:
                recorded = path_.recorded_share() if path_ is not None else None
                assert (
                    finding.impact_us is None
                    or path_ is None
                    or (recorded is not None and recorded < savings.MIN_RECORDED_SHARE)
                    or savings.saving_us(finding, path_) >= path_.total_us - 0.01 * path_.steps
                )
                continue
            assert 0.0 < after <= path_.step_us * (1 + 1e-9)
            saved = (path_.step_us - after) * path_.steps
            scale = 1.0  # a finding measured over the steps with a breakdown stands for all
            covered = path_.covered
            if covered is not None and math.isclose(
                finding.measured_us or 0.0, covered[0], rel_tol=1e-6
            ):
                scale = covered[1] / covered[0]
            assert saved <= finding.impact_us * scale * (1 + 1e-9) + 1e-6
            kinds = savings.bounds_of(finding.rule.tags, finding.rule.time_pool)
            if kinds is not None:
                room = sum(path_.by_bound.get(k, 0.0) for k in kinds)
                room += path_.by_bound.get(savings.UNATTRIBUTED, 0.0)
                assert saved <= room * (1 + 1e-9) + 1e-6, finding.rule.id
        fix = analysis.evaluation.fix_first
        if fix is not None and fix.step_time_if_fixed_us is not None:
            assert 0.0 < fix.step_time_if_fixed_us <= fix.step_us
            assert not math.isnan(fix.saving_ratio)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(allow_nan=True, allow_infinity=True, width=64)
            | st.sampled_from([1e16, 1.0, -0.0, 0.1]),
            st.booleans(),
        ),
        max_size=12,
    )
)
def test_a_columns_sum_is_pandas_sum(rows):
    """The critical path's sums are pandas' to the last digit: float columns summed from
    their arrays, other dtypes by pandas; of all rows or of a mask's."""
    values = [v for v, _ in rows]
    keep = np.array([k for _, k in rows], dtype=bool)
    table = pd.DataFrame(
        {
            "idle_us": pd.Series(values, dtype="float64"),
            "free_us": pd.Series(values, dtype="Float64"),
            "steps": pd.Series([int(k) for k in keep], dtype="int64"),
        }
    )
    with np.errstate(all="ignore"):  # 1e308 + 1e308, as pandas sums it too
        for column in table.columns:
            series = table[column]
            for mask, expected in ((None, series.sum()), (keep, series[keep].sum())):
                got = savings._column_sum(table, column, mask)
                assert isinstance(got, float)
                assert got == float(expected) or (math.isnan(got) and pd.isna(expected)), column
                assert math.copysign(1, got) == math.copysign(1, float(expected)), column
    assert savings._column_sum(table, "absent_us") == 0.0
