"""Step breakdown numbers against values computed by hand from the fixtures."""

from __future__ import annotations

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
