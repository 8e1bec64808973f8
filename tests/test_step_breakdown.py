"""Step breakdown numbers against values computed by hand from the fixtures."""

from __future__ import annotations

import gzip
import json
import math

import pandas as pd
import pytest
from conftest import FIXTURE_DIR

import advisor
from advisor.derive import derive
from advisor.model import Profile, ProfileMeta, conform
from advisor_plugins.step_metrics import PROVIDERS

SMALL = FIXTURE_DIR / "msprof/PROF_000001_20260105093000123_SMALLCASE"
REAL = FIXTURE_DIR / "real/cann_timeline/PROF_000001_20230818142704322_COJGGGCANRMICFBC"


@pytest.fixture(scope="module")
def small():
    (analysis,) = advisor.analyze(SMALL).analyses
    return analysis


def test_small_fixture_step_breakdown_by_hand(small):
    steps = small.tables["steps"].set_index("step")
    # Step 1, window [0, 8000]: Conv2D 200 + MatMulV2 100 + GatherV2 10 + SoftmaxV2 50
    # + LayerNorm 30 = 390 µs of compute; all-reduce 800 + 600 = 1400 µs, not overlapped.
    assert steps.loc[1, "computing_us"] == pytest.approx(390)
    assert steps.loc[1, "communication_us"] == pytest.approx(1400)
    assert steps.loc[1, "comm_not_overlapped_us"] == pytest.approx(1400)
    assert steps.loc[1, "free_us"] == pytest.approx(8000 - 390 - 1400)
    # Step 2, window [9000, 17000]: 200 + 100 + 25 + 50 + 30 + 240 = 645 µs of compute.
    assert steps.loc[2, "computing_us"] == pytest.approx(645)
    assert steps.loc[2, "free_us"] == pytest.approx(8000 - 645 - 1400)
    # Step 5: 200 + 100 + 40 + 50 + 30 = 420 compute, one 1000 µs all-reduce.
    assert steps.loc[5, "computing_us"] == pytest.approx(420)
    assert steps.loc[5, "communication_us"] == pytest.approx(1000)


def test_small_fixture_report_metrics(small):
    metrics = small.report["metrics"]
    assert list(small.metrics.steps["step"]) == [1, 2, 3, 4, 5]
    assert [s["step"] for s in metrics["steps"]] == [1, 2, 3, 4, 5]
    assert metrics["steps"][2]["grad_refresh_us"] == pytest.approx(2500)
    cores = {c["core_type"]: c for c in metrics["core_types"]}
    assert cores["AI_CORE"]["total_us"] == pytest.approx(1500)
    assert cores["AI_VECTOR_CORE"]["total_us"] == pytest.approx(400)
    assert cores["AI_CPU"]["count"] == 5
    # total time = wall-clock span of the steps: FP start of step 1 to end of step 5
    assert small.report["summary"]["total_time_us"] == pytest.approx(48_500)


def test_overlapped_communication_is_hidden():
    ops = pd.DataFrame(
        {
            "name": ["mm", "ar", "add"],
            "core_type": ["AI_CORE", "COMMUNICATION", "AI_VECTOR_CORE"],
            "category": ["compute", "communication", "compute"],
            "start_us": [0.0, 50.0, 200.0],
            "duration_us": [100.0, 100.0, 50.0],
        }
    )
    steps = pd.DataFrame(
        {"step": [1], "start_us": [0.0], "end_us": [300.0], "duration_us": [300.0]}
    )
    profile = Profile(
        ProfileMeta("t", "mem"),
        {"device_ops": conform("device_ops", ops), "steps": conform("steps", steps)},
    )
    derive(profile, ["steps.computing_us"], PROVIDERS)
    row = profile.tables["steps"].iloc[0]
    assert row["computing_us"] == 150 and row["communication_us"] == 100
    assert row["comm_not_overlapped_us"] == 50  # [100, 150) is not hidden by compute
    assert row["free_us"] == 300 - 200


def test_steps_without_task_data_get_no_breakdown():
    """The real sample has tasks for iteration 1 only: later steps are unknown, not idle."""
    (analysis,) = advisor.analyze(REAL).analyses
    steps = analysis.tables["steps"].set_index("step")
    assert len(steps) == 10
    assert steps.loc[1, "communication_us"] == pytest.approx(41534.3)
    assert steps.loc[1, "computing_us"] > 0
    assert all(math.isnan(steps.loc[s, "free_us"]) for s in range(2, 11))
    assert steps.loc[1, "duration_us"] == pytest.approx(47587.81)
    assert steps.loc[2, "data_aug_bound_us"] == pytest.approx(32134.95)


def _breakdown(ops: dict, steps: list[tuple[float, float]]) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "step": range(1, len(steps) + 1),
            "start_us": [lo for lo, _ in steps],
            "end_us": [hi for _, hi in steps],
            "duration_us": [hi - lo for lo, hi in steps],
        }
    )
    device = pd.DataFrame({"name": "k", "category": "compute", **ops})
    profile = Profile(
        ProfileMeta("t", "mem"),
        {"device_ops": conform("device_ops", device), "steps": conform("steps", frame)},
    )
    derive(profile, ["steps.free_us"], PROVIDERS)
    return profile.tables["steps"].set_index("step")


def test_a_step_the_timeline_stops_early_in_gets_no_breakdown():
    """A device timeline recorded for the first steps only (MindSpore's old profiler: 15 of
    322), ending 10 µs into step 3: that step's other 90 µs were not recorded, not idle; a
    timeline that ends late in its last step, or a last step of the profile, keeps it."""
    steps = [(0.0, 100.0), (100.0, 200.0), (200.0, 300.0), (300.0, 400.0)]
    ops = {"start_us": [10.0, 110.0, 200.0], "duration_us": [60.0, 60.0, 10.0]}
    got = _breakdown(ops, steps)
    assert got.loc[1, "free_us"] == 40 and got.loc[2, "free_us"] == 40
    assert math.isnan(got.loc[3, "free_us"]) and math.isnan(got.loc[4, "free_us"])
    late = _breakdown({"start_us": [10.0, 110.0, 200.0], "duration_us": [60.0, 60.0, 70.0]}, steps)
    assert late.loc[3, "free_us"] == 30 and math.isnan(late.loc[4, "free_us"])
    last = _breakdown(ops, steps[:3])  # no step after it: the run ended, the device idled
    assert last.loc[3, "free_us"] == 90
    # the same at the start: a timeline that begins 10 µs before the end of step 2
    first = _breakdown({"start_us": [190.0, 210.0], "duration_us": [10.0, 60.0]}, steps)
    assert math.isnan(first.loc[1, "free_us"]) and math.isnan(first.loc[2, "free_us"])
    assert first.loc[3, "free_us"] == 40


def test_report_host_and_compute_class_metrics():
    from advisor.metrics import compute_class_time, host_counts

    host = pd.DataFrame(
        {
            "name": [
                "DataLoader",
                "DataLoader",
                "cudaStreamSynchronize",
                "cudaLaunchKernel",
                "cudaLaunchKernel",
            ],
            "kind": ["dataloader", "dataloader", "sync", "launch", "launch"],
            "start_us": [0.0, 100.0, 50.0, 10.0, 110.0],
            "duration_us": [30.0, 50.0, 5.0, 2.0, 2.0],
        }
    )
    ops = pd.DataFrame(
        {
            "name": ["gemm", "add", "nccl"],
            "core_type": "GPU",
            "category": ["compute", "compute", "communication"],
            "start_us": [0.0, 20.0, 40.0],
            "duration_us": [100.0, 4.0, 50.0],
        }
    )
    steps = pd.DataFrame(
        {
            "step": [1, 2],
            "start_us": [0.0, 100.0],
            "end_us": [100.0, 200.0],
            "duration_us": [100.0, 100.0],
        }
    )
    profile = Profile(
        ProfileMeta("t", "mem"),
        {
            "host_ops": conform("host_ops", host),
            "device_ops": conform("device_ops", ops),
            "steps": conform("steps", steps),
        },
    )
    derive(profile, ["device_ops.compute_class"], PROVIDERS)
    assert host_counts(profile) == {
        "sync_calls": 1,
        "compile_calls": 0,
        "launch_calls": 2,
        "dataloader_us_per_step": 40.0,
        "small_kernel_share": 0.5,
        "kernels": 2,
    }
    classes = dict(compute_class_time(profile)[["compute_class", "total_us"]].to_numpy())
    assert classes == {"matmul": 100.0, "other_compute": 4.0, "communication": 50.0}


def _host_profile(host: dict, comm: dict | None, device: bool = False) -> Profile:
    """One 1,000 µs step with these host operations (and comm_ops, device_ops)."""
    steps = pd.DataFrame(
        {"step": [1], "start_us": [0.0], "end_us": [1000.0], "duration_us": [1000.0]}
    )
    tables = {"steps": conform("steps", steps), "host_ops": conform("host_ops", pd.DataFrame(host))}
    if comm is not None:
        tables["comm_ops"] = conform("comm_ops", pd.DataFrame(comm))
    if device:
        ops = {"name": ["k"], "category": ["compute"], "start_us": [0.0], "duration_us": [10.0]}
        tables["device_ops"] = conform("device_ops", pd.DataFrame(ops))
    return Profile(ProfileMeta("t", "mem"), tables)


GLOO_STEP = {
    # the training thread: forward and backward, the call that queues the all-reduce, a
    # Python frame and a user's span lasting through the wait, then the optimizer; gloo's
    # thread: the all-reduce itself
    "name": [
        "aten::mm",
        "c10d::allreduce_",
        "backward",
        "train",
        "Optimizer.step#SGD.step",
        "aten::add_",
        "gloo:all_reduce",
    ],
    "kind": ["aten", "aten", "python", "annotation", "optimizer", "aten", "annotation"],
    "start_us": [0.0, 200.0, 100.0, 0.0, 900.0, 910.0, 250.0],
    "duration_us": [200.0, 50.0, 800.0, 1000.0, 50.0, 20.0, 600.0],
    "thread": [1, 1, 1, 1, 1, 1, 2],
}
GLOO_COMM = {
    "name": ["gloo:all_reduce"],
    "op": ["allreduce"],
    "start_us": [250.0],
    "duration_us": [600.0],
}


def test_cpu_collectives_get_their_overlap_from_host_operations():
    """Without device tasks, gloo's collectives (host operations on gloo's threads, also in
    comm_ops) communicate and the training thread's operators compute: the all-reduce
    [250, 850) overlaps no operator, so all of it is exposed."""
    profile = _host_profile(GLOO_STEP, GLOO_COMM)
    derive(profile, ["steps.comm_not_overlapped_us"], PROVIDERS)
    row = profile.tables["steps"].iloc[0]
    assert row["computing_us"] == 200 + 50  # aten::mm, the optimizer's step; not the
    # queueing call, the Python frame or the span, which last through the wait
    assert row["communication_us"] == 600
    assert row["comm_not_overlapped_us"] == 600
    assert "free_us" not in profile.tables["steps"]  # the device's idle time: no device here
    overlapped = {**GLOO_STEP, "start_us": [*GLOO_STEP["start_us"][:-1], 100.0]}
    profile = _host_profile(overlapped, {**GLOO_COMM, "start_us": [100.0]})
    derive(profile, ["steps.comm_not_overlapped_us"], PROVIDERS)
    assert profile.tables["steps"].iloc[0]["comm_not_overlapped_us"] == 600 - 100  # [100, 200)


def test_a_call_queueing_a_collective_inside_an_operator_does_not_compute():
    """DDP's hook queues the all-reduce (c10d::allreduce_ [200, 250)) from within autograd's
    AccumulateGrad [150, 260) on the training thread: only [150, 200) and [250, 260) of it
    compute. The call holds its own thread only: an operator on another thread at
    [220, 240) still computes."""
    step = {
        key: [*GLOO_STEP[key], *extra]
        for key, extra in {
            "name": ["autograd::engine::evaluate_function: AccumulateGrad", "aten::relu"],
            "kind": ["aten", "aten"],
            "start_us": [150.0, 220.0],
            "duration_us": [110.0, 20.0],
            "thread": [1, 3],
        }.items()
    }
    profile = _host_profile(step, GLOO_COMM)
    derive(profile, ["steps.comm_not_overlapped_us"], PROVIDERS)
    row = profile.tables["steps"].iloc[0]
    assert row["computing_us"] == 200 + 10 + 20 + 50  # [0, 200) [220, 240) [250, 260) [900, 950)
    assert row["comm_not_overlapped_us"] == 600 - 10  # [250, 260) hides 10 µs of the all-reduce


def test_host_overlap_needs_collectives_on_host_threads_and_no_device_tasks():
    # comm_ops recorded on a device (HCCL, NCCL kernels) are not host operations
    profile = _host_profile(GLOO_STEP, {**GLOO_COMM, "start_us": [260.0]})
    derive(profile, ["steps.comm_not_overlapped_us"], PROVIDERS)
    assert not profile.has("steps", "comm_not_overlapped_us")
    # with device tasks the device's overlap counts (here no device communication at all)
    profile = _host_profile(GLOO_STEP, GLOO_COMM, device=True)
    derive(profile, ["steps.comm_not_overlapped_us"], PROVIDERS)
    assert profile.tables["steps"].iloc[0]["comm_not_overlapped_us"] == 0
    assert "host_step_overlap" not in profile.providers_run


def _raw_exposed_communication(path) -> dict[int, float]:
    """Per ProfilerStep, the gloo collectives' time no CPU operator computes through,
    computed from the trace file's events directly with a sweep over span ends: operators
    (cat cpu_op) compute, except while their thread is inside a c10d call (DDP's hook queues
    the all-reduce from within autograd's AccumulateGrad); gloo's spans communicate."""
    with gzip.open(path) as raw:
        events = [e for e in json.load(raw)["traceEvents"] if e.get("ph") == "X"]
    origin = min(e["ts"] for e in events)

    def union(spans):
        marks = {}
        for ts, dur in spans:
            lo, hi = ts - origin, ts - origin + dur
            marks[lo] = marks.get(lo, 0) + 1
            marks[hi] = marks.get(hi, 0) - 1
        covered, depth, last = [], 0, None
        for t in sorted(marks):
            if depth > 0:
                covered.append((last, t))
            depth += marks[t]
            last = t
        return covered

    def minus(a, b):
        out = []
        for lo, hi in a:
            pieces = [(lo, hi)]
            for c, d in b:
                pieces = [
                    p for x, y in pieces for p in ((x, min(y, c)), (max(x, d), y)) if p[1] > p[0]
                ]
            out += pieces
        return out

    compute = []
    for tid in {e["tid"] for e in events if e.get("cat") == "cpu_op"}:
        mine = [e for e in events if e["tid"] == tid and e.get("cat") == "cpu_op"]
        calls = [(e["ts"], e["dur"]) for e in mine if e["name"].startswith("c10d::")]
        ops = [(e["ts"], e["dur"]) for e in mine if not e["name"].startswith("c10d::")]
        compute += minus(union(ops), union(calls))
    compute = union((lo + origin, hi - lo) for lo, hi in compute)
    comm = union((e["ts"], e["dur"]) for e in events if e["name"].startswith("gloo:"))
    exposed = {}
    for step in (e for e in events if e["name"].startswith("ProfilerStep#")):
        lo, hi = step["ts"] - origin, step["ts"] - origin + step["dur"]
        inside = [(max(a, lo), min(b, hi)) for a, b in comm if min(b, hi) > max(a, lo)]
        hidden = sum(max(0.0, min(b, d) - max(a, c)) for a, b in inside for c, d in compute)
        exposed[int(step["name"].split("#")[1])] = sum(b - a for a, b in inside) - hidden
    return exposed


def test_a_cpu_ddp_run_shows_its_exposed_all_reduce_true_to_the_trace():
    """The own 4-rank DDP run over gloo (rank 2 sleeps): the other ranks' training threads
    wait most of each step for the all-reduce. Before, every rank said "No problems found"."""
    path = FIXTURE_DIR / "kineto_own" / "ddp4_rank0.pt.trace.json.gz"
    (analysis,) = advisor.analyze(path).analyses
    steps = analysis.tables["steps"].set_index("step")
    raw = _raw_exposed_communication(path)
    assert sorted(raw) == sorted(steps.index)
    for step, exposed in raw.items():
        assert steps.loc[step, "comm_not_overlapped_us"] == pytest.approx(exposed, abs=1e-3)
    (finding,) = [f for f in analysis.findings if f.rule.id == "COMM-001"]
    share = sum(raw.values()) / steps["duration_us"].sum()
    assert share > 0.7
    assert f"{share:.1%}" in finding.message
    assert "gloo on CPU" in " ".join(finding.suggestions)


def test_a_cpu_rank_sleeping_before_backward_leads_with_its_idle_training_thread():
    """Rank 2 of the own 4-rank gloo run sleeps 20 ms per step before backward() (kineto_own
    README). Its report led with the communication it spends least in of the four ranks;
    STEP-007 now names the gaps no recorded work fills, and each step's gap holds the sleep:
    the time on the training thread from aten::cross_entropy_loss's end to the next operator."""
    path = FIXTURE_DIR / "kineto_own" / "ddp4_rank2.pt.trace.json.gz"
    (analysis,) = advisor.analyze(path).analyses
    bounds = analysis.tables["step_bounds"].set_index("step")
    with gzip.open(path) as raw:
        events = [e for e in json.load(raw)["traceEvents"] if e.get("ph") == "X"]
    for step in (e for e in events if e["name"].startswith("ProfilerStep#")):
        lo, hi = step["ts"], step["ts"] + step["dur"]
        thread = [e for e in events if e["tid"] == step["tid"] and e.get("cat") == "cpu_op"]
        ops = sorted((e for e in thread if lo <= e["ts"] < hi), key=lambda e: e["ts"])
        loss = next(e for e in ops if e["name"] == "aten::cross_entropy_loss")
        after = next(e for e in ops if e["ts"] >= loss["ts"] + loss["dur"])
        sleep = after["ts"] - (loss["ts"] + loss["dur"])
        number = int(step["name"].split("#")[1])
        assert 20_000 <= sleep <= bounds.loc[number, "idle_us"]
    (finding,) = [f for f in analysis.findings if f.rule.id == "STEP-007"]
    assert finding is analysis.findings[0]  # ranked above COMM-001
    assert finding.impact_us == pytest.approx(bounds["idle_us"].sum())
    assert finding.values["ratio"] == pytest.approx(
        bounds["idle_us"].sum() / bounds["duration_us"].sum()
    )
