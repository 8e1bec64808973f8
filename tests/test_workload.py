"""Training or inference (advisor.workload): read from the operator and kernel names of real
profiles, so that inference runs are not told to checkpoint activations or accumulate
gradients, and profiles that say too little are not guessed at."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import FIXTURE_DIR, REAL

import advisor
from advisor.model import Profile, ProfileMeta, conform
from advisor.render.format import profile_label
from advisor.render.json_report import validate_report
from advisor.workload import MIN_FRAMEWORK_NAMES, training

ALEXNET = "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"


def _first_profile(path):
    return advisor.analyze(path).analyses[0].profile


@pytest.mark.parametrize(
    "path",
    [
        # autograd's MeanBackward0 and the logit_backward kernel (HTA's GPU training sample)
        REAL / "kineto" / "timeline_analysis__sampled_rank-0.json.gz",
        # torch_npu: aten::nll_loss_backward, aclnnNLLLossBackward kernels
        REAL / "ascend_pt" / "rank0_ascend_pt",
        # MindSpore graph kernels under the Gradients/ scope
        REAL / "mindspore_lenet_aicore_detail",
        # a CANN export of kernels alone: gradients/.../SoftmaxGrad
        FIXTURE_DIR / "msprof" / "PROF_000002_20250610120000456_MULTIDEV",
    ],
    ids=lambda p: p.name[:32],
)
def test_training_runs_are_told_by_their_backward_pass(path):
    assert training(_first_profile(path)) is True


@pytest.mark.parametrize(
    "path",
    [
        REAL / "kineto_2025_h100_qwen_inference",  # HF generate on an H100
        REAL / "kineto_2025_mi300x_sglang_decode",  # an SGLang decode step
        REAL / "kineto" / ALEXNET,
    ],
    ids=lambda p: p.name[:32],
)
def test_inference_runs_record_operators_but_no_backward_pass(path):
    profile = _first_profile(path)
    assert (profile.tables["host_ops"]["kind"] == "aten").any()
    assert training(profile) is False


def _profile(**tables: list[dict]) -> Profile:
    profile = Profile(ProfileMeta("test", "mem"))
    for name, rows in tables.items():
        profile.tables[name] = conform(name, pd.DataFrame(rows))
    return profile


def test_a_profile_without_framework_operators_is_not_guessed():
    """Kernels that name no gradient and runtime calls alone: a CANN export's forward kernels
    may belong to a training step whose backward pass was not profiled."""
    forward_kernels = _profile(
        device_ops=[{"name": "MatMulV2", "start_us": 0, "duration_us": 5}],
        host_ops=[{"name": "aclrtLaunchKernel", "kind": "runtime", "start_us": 0,
                   "duration_us": 1}],
    )  # fmt: skip
    assert training(forward_kernels) is None
    assert training(_profile(device_ops=[{"name": "ReluGrad", "start_us": 0, "duration_us": 5}]))
    optimizer_only = _profile(
        host_ops=[{"name": "Optimizer.step#AdamW.step", "kind": "optimizer", "start_us": 0,
                   "duration_us": 9}]
    )  # fmt: skip
    assert training(optimizer_only) is True
    forward = [f"aten::op{i}" for i in range(MIN_FRAMEWORK_NAMES)]
    forward_operators = _profile(
        host_ops=[{"name": n, "kind": "aten", "start_us": 0, "duration_us": 9} for n in forward]
    )
    assert training(forward_operators) is False
    # a few kinds of operator show too little of the model to say it runs no backward pass
    few = _profile(host_ops=[{"name": n, "kind": "aten", "start_us": 0, "duration_us": 9}
                             for n in forward[:-1] * 3])  # fmt: skip
    assert training(few) is None


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # MindSpore GPU: a Momentum update kernel and the data-queue operator (it judged
        # this inference before)
        (REAL / "mindspore_legacy" / "profiler_misc", True),
        # GetNext and Add over nine steps: three kinds of operator
        (REAL / "mindspore_gpu_dynamic_shape", None),
    ],
    ids=["momentum-kernel", "three-operators"],
)
def test_small_mindspore_profiles(path, expected):
    assert training(_first_profile(path)) is expected


@pytest.mark.parametrize(
    ("path", "workload", "word"),
    [
        (REAL / "kineto" / "timeline_analysis__sampled_rank-0.json.gz", "training", "训练"),
        (REAL / "kineto_2025_h100_qwen_inference", "inference", "推理"),
        # the HCCL tasks of a rank and nothing else: no operator names to tell by
        (REAL / "msinsight_pytorch_level1_hccl" / "rank1_ascend_pt", None, None),
    ],
    ids=["training", "inference", "unknown"],
)
def test_reports_say_how_the_run_was_judged(path, workload, word):
    """The judgement words the advice ("the inference loop"), so the reports show it: the
    JSON report's profile.workload and the profile's heading in both languages."""
    report = advisor.analyze(path).analyses[0].report
    assert report["profile"]["workload"] == workload
    validate_report(report)
    label = profile_label(report["profile"], "zh")
    assert (word in label.split(" · ")) if word else label.split(" · ")[1] == "rank 1"
    if workload:
        assert profile_label(report["profile"]).split(" · ")[1] == workload
