"""fusion_candidates (plugins/fusion_patterns.py) on real profiles, and the matching and
version rules it is built on. What the FUSE-* / HOST-005 rules do with the table is in
rules/fusion.case.yaml."""

from __future__ import annotations

import copy
import gzip
import json
import re
from functools import cache
from pathlib import Path

import pandas as pd
import pytest

import advisor
from advisor.model import Profile
from advisor.plugin_manager import PluginHost
from advisor.reading import read_inputs
from advisor_plugins import fusion_patterns
from advisor_plugins.fusion_patterns import (
    _top_level,
    availability,
    catalogue,
    find,
    fusion_candidates,
    version_key,
)

REAL = Path(__file__).parent / "fixtures" / "real"
NCCL_TRACE = REAL / "kineto" / "nccl_parser_config__nccl_data.json.gz"
ALEXNET = "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"


@cache
def _profile(path: Path) -> Profile:
    (profile,) = read_inputs([path], PluginHost()).profiles
    return profile


def _candidates(path: Path) -> pd.DataFrame:
    profile = _profile(path)
    fusion_candidates(profile)
    return profile.tables["fusion_candidates"]


def _pattern_ids() -> dict[str, fusion_patterns.Pattern]:
    return {p.id: p for p in catalogue()}


# -- matching and versions ------------------------------------------------------------------


def test_catalogue_ships_with_the_package_and_every_api_has_a_cann_version():
    patterns = _pattern_ids()
    assert {"rms_norm", "swiglu", "rotary_mul", "fusion_attention", "flash_attention"} <= set(
        patterns
    )
    for p in catalogue():
        if p.family == "affinity":
            assert version_key(p.cann) is not None, p.id


def test_optional_steps_match_and_a_name_only_matches_whole_tokens():
    rms = _pattern_ids()["rms_norm"]
    assert [(f, last) for _, f, last in find(["x", "rsqrt", "mul"], [rms])] == [(1, 3)]
    full = ["pow", "mean", "add", "rsqrt", "mul", "type_as"]
    assert [(f, last) for _, f, last in find(full, [rms])] == [(0, 6)]
    rotary = _pattern_ids()["rotary_mul"]
    # "_cat" is not "cat": the rotary sequence needs chunk|slice, neg, cat
    assert find(["chunk", "neg", "_cat", "add"], [rotary]) == []
    assert len(find(["chunk", "neg", "cat", "mul", "mul", "add"], [rotary])) == 1
    # mul{0,2}: three are one too many; every occurrence is found, each token used once
    assert find(["slice", "neg", "cat", "mul", "mul", "mul", "add"], [rotary]) == []
    tokens = ["x", "chunk", "neg", "cat", "add", "chunk", "neg", "cat", "mul", "add", "cat"]
    assert [(f, last) for _, f, last in find(tokens, [rotary])] == [(1, 5), (5, 10)]


def test_an_operator_belongs_to_the_first_matching_pattern_only():
    ids = _pattern_ids()
    tokens = ["chunk", "silu", "mul", "add"]
    found = find(tokens, [ids["swiglu"], ids["matmul_add"], ids["mul_mul_add"]])
    assert [(p.id, f, last) for p, f, last in found] == [("swiglu", 0, 3)]


def test_cann_versions_order_release_candidates_before_the_release():
    assert version_key("8.0.RC1") < version_key("8.0.RC3") < version_key("8.0.0")
    assert version_key("7.0.0") < version_key("8.0.RC1")
    assert version_key("8.0.RC2.alpha003") == version_key("8.0.RC2")
    assert version_key("unknown") is None
    assert availability("7.0.0", "6.3.RC2") == "upgrade"
    assert availability("7.0.0", "7.0.0") == "available"
    assert availability("7.0.0", None) == "unknown"


# -- real profiles --------------------------------------------------------------------------


def test_torch_npu_adam_step_is_left_to_host004_and_nothing_else_matches():
    """The real torch_npu LeNet trace: its forward (conv2d, relu, max_pool2d, linear ...) has
    no fused-API sequence, and the per-parameter arithmetic of Optimizer.step#Adam.step
    (mul_, add_, addcmul_, sqrt, div, addcdiv_) is HOST-004's, not searched here."""
    path = REAL / "ascend_pt" / "rank0_ascend_pt"
    profile = _profile(path)
    top = _top_level(profile)
    host = profile.tables["host_ops"]
    (step,) = host[host["name"] == "Optimizer.step#Adam.step"].itertuples()
    inside = top[
        (top["start_us"] >= step.start_us)
        & (top["start_us"] < step.start_us + step.duration_us)
        & (top["thread"] == step.thread)
    ]
    assert len(inside) > 0 and inside["in_optimizer"].all()
    assert {"aten::addcdiv_", "aten::addcmul_", "aten::sqrt"} <= set(inside["name"])
    # the only other optimizer record, Adam.zero_grad, holds the other calls flagged
    (zero,) = host[host["name"] == "Optimizer.zero_grad#Adam.zero_grad"].itertuples()
    flagged = top.drop(inside.index).query("in_optimizer")
    assert "aten::zero_" in set(flagged["name"])
    assert flagged["start_us"].between(zero.start_us, zero.start_us + zero.duration_us).all()

    table = _candidates(path)
    # no fused-API sequence; the kernel sequences the trace's own device tasks show (its
    # kernel_details.csv is of another run, so the trace's tasks are the profile's) are FUSE-003's
    assert set(table["kind"]) == {"scan", "kernel_sequence"}
    (scan,) = table[table["pattern"] == "affinity_api"].itertuples()
    assert scan.ops == (~top["in_optimizer"]).sum() == len(top) - len(inside) - len(flagged)
    result = advisor.analyze(path, select=["FUSE-001", "HOST-004"])
    outcomes = result.analyses[0].evaluation.outcomes
    assert outcomes["FUSE-001"] == "passed"  # evaluated and quiet, not "not applicable"
    assert [f.rule.id for f in result.findings] == ["HOST-004"]


def _kernels_launched_by(trace: Path, operator: str) -> list[list[tuple[str, float]]]:
    """From the raw Kineto JSON: per call of `operator`, the (name, dur) of the kernels whose
    launch (the cuda_runtime event with the kernel's correlation id) lies inside the call."""
    with gzip.open(trace) as raw:
        events = json.load(raw)["traceEvents"]
    calls = [e for e in events if e.get("cat") == "cpu_op" and e.get("name") == operator]
    launches = {
        e["args"]["correlation"]: e
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    kernels = sorted((e for e in events if e.get("cat") == "kernel"), key=lambda e: float(e["ts"]))
    per_call = []
    for call in calls:
        lo, hi = float(call["ts"]), float(call["ts"]) + float(call["dur"])
        per_call.append(
            [
                (k["name"], float(k["dur"]))
                for k in kernels
                if (launch := launches.get(k["args"].get("correlation"))) is not None
                and launch["tid"] == call["tid"]
                and lo <= float(launch["ts"]) <= hi
            ]
        )
    return per_call


def test_frequent_kernel_sequence_of_a_real_gpu_trace_matches_the_raw_launches():
    """HTA's own NCCL test trace (A100, 3 ProfilerSteps): every step's cross_entropy_loss
    launches the same short kernels; the row's count, kernels and time are checked against
    the kernels the raw JSON ties to each call through its correlation ids."""
    calls = _kernels_launched_by(NCCL_TRACE, "aten::cross_entropy_loss")
    assert len(calls) == 3 and len({tuple(n for n, _ in c) for c in calls}) == 1
    table = _candidates(NCCL_TRACE)
    rows = table[
        (table["kind"] == "kernel_sequence") & table["pattern"].str.startswith("cross_entropy")
    ]
    (row,) = rows.itertuples()
    assert row.occurrences == 3
    assert row.ops == len(calls[0]) >= fusion_patterns.MIN_KERNELS
    assert row.total_us == pytest.approx(sum(d for c in calls for _, d in c))
    assert row.saving_us == pytest.approx(
        sum(sum(d for _, d in c) - max(d for _, d in c) for c in calls)
    )
    assert "softmax_warp_forward" in row.pattern
    # template arguments are dropped, but for the generic launchers' functor, which the raw
    # kernel name holds: reduce_kernel<...sum_functor<...>...> reads reduce_kernel<sum_functor>
    functors = re.findall(r"(\w+)<([^<>]*)>", row.pattern)
    assert ("reduce_kernel", "sum_functor") in functors
    for launcher, functor in functors:
        assert any(re.search(rf"{launcher}<.*\b{functor}\b", n) for n, _ in calls[0])

    # all of it is short-kernel time: FUSE-003 reports it once its share threshold allows
    result = advisor.analyze(
        NCCL_TRACE, select=["FUSE-003"], params={"FUSE-003": {"min_share": 0.0}}
    )
    (finding,) = result.findings
    assert "cross_entropy_loss" in str(finding.evidence["rows"])


def test_a_library_convolution_of_several_kernels_is_no_sequence_to_fuse():
    """HTA's AlexNet trace (A100): cuDNN ran two convolutions as FFTs (fft2d_r2c twice, a
    complex GEMM, fft2d_c2r), one library operation of four kernels; the implicit-GEMM
    convolutions with the bias kernel after them (an epilogue) stay candidates."""
    patterns = _candidates(REAL / "kineto" / ALEXNET)["pattern"].dropna().tolist()
    convolutions = [p for p in patterns if p.startswith("conv2d:")]
    assert any("scudnn" in p for p in convolutions)
    assert any("fprop_implicit_gemm" in p for p in convolutions)
    assert not any("fft2d" in p for p in patterns)


@pytest.mark.parametrize(
    ("path", "library_kernel"),
    [  # our H200 GPT-2 run: cuDNN's attention backward with its helper kernels
        (REAL.parent / "kineto_gpu_own" / "gpt2.pt.trace.json.gz", "cudnn::fusion::"),
        # HTA's recommender trace: fbgemm_gpu's FP8 quantisation before the all-to-all
        (REAL / "kineto" / "timeline_analysis__sampled_rank-0.json.gz", "fbgemm_gpu::"),
    ],
)
def test_a_library_algorithm_of_several_kernels_is_no_sequence_to_fuse(path, library_kernel):
    """Both calls launch several short kernels of one library's algorithm; they are no
    chain one fused kernel replaces (the real traces hold them, the table does not)."""
    with gzip.open(path) as raw:
        events = json.load(raw)["traceEvents"]
    assert sum(e.get("cat") == "kernel" and library_kernel in e["name"] for e in events) > 1
    patterns = _candidates(path)["pattern"].dropna().tolist()
    assert patterns and not any(library_kernel in p for p in patterns)


def test_kernel_sequences_group_calls_by_kernels_in_start_order():
    """Three calls of one operator and one of another, their kernels listed out of start
    order: a call's kernels are read in start order, calls with the same kernels are one
    row whose first occurrence is the earliest call, a kernel without a name is a kernel of
    its own, and a call launching fewer than MIN_KERNELS kernels is no sequence."""
    top = pd.DataFrame(
        {
            "name": ["aten::foo", "aten::foo", "aten::foo", "aten::bar"],
            "start_us": [100.0, 0.0, 200.0, 300.0],
            "step": pd.array([2, 1, 3, 3], dtype="Int64"),
            "in_optimizer": False,
        },
        index=[10, 11, 12, 13],
    )
    kernels = [  # (call, name, start, duration)
        (10, "void k2<float>(int)", 112.0, 4.0),
        (10, "k1", 110.0, 1.0),
        (10, "k3", 114.0, 2.0),
        (11, "k1", 10.0, 3.0),
        (11, "void k2<float>(int)", 12.0, 5.0),
        (11, "k3", 14.0, 1.0),
        (12, "k1", 210.0, 1.0),
        (12, None, 212.0, 7.0),
        (12, "k3", 214.0, 1.0),
        (13, "k1", 310.0, 1.0),
        (13, "k3", 311.0, 1.0),
    ]
    device = pd.DataFrame(
        {
            "name": pd.array([k[1] for k in kernels], dtype="string"),
            "start_us": [k[2] for k in kernels],
            "duration_us": [k[3] for k in kernels],
        }
    )
    links = pd.DataFrame({"device": device.index, "top": [k[0] for k in kernels]})
    rows, scanned = fusion_patterns.kernel_sequence_rows(top, device, set(), links)
    assert scanned == len(kernels)
    by_pattern = {r["pattern"]: r for r in rows}
    assert sorted(by_pattern) == ["foo: k1 | <NA> | k3", "foo: k1 | k2 | k3"]
    both = by_pattern["foo: k1 | k2 | k3"]
    assert (both["occurrences"], both["ops"]) == (2, 3)
    assert both["total_us"] == 16.0 and both["fused_us"] == 9.0 and both["saving_us"] == 7.0
    assert (both["first_start_us"], both["step"]) == (10.0, 1)  # call 11, the earliest
    assert both["example"] == "k1 -> k2 -> k3"
    alone = by_pattern["foo: k1 | <NA> | k3"]
    assert (alone["occurrences"], alone["total_us"], alone["step"]) == (1, 9.0, 3)
    # a call already claimed by an affinity match is left out
    rows, _ = fusion_patterns.kernel_sequence_rows(top, device, {11}, links)
    assert {r["pattern"]: r["occurrences"] for r in rows}["foo: k1 | k2 | k3"] == 1


def test_a_kernel_repeated_in_a_row_is_written_once_with_its_count():
    """A call whose kernels repeat one name (HTA's sample trace: 15 element-wise kernels in
    binary_cross_entropy_with_logits) is shown as that name with its count, the kernels
    still counted one by one."""
    top = pd.DataFrame(
        {
            "name": ["aten::foo"] * 3,
            "start_us": [0.0, 100.0, 200.0],
            "end_us": [50.0, 150.0, 250.0],
            "thread": pd.array([1, 1, 1], dtype="Int64"),
            "step": pd.array([1, 1, 1], dtype="Int64"),
            "in_optimizer": False,
        },
        index=[10, 11, 12],
    )
    names = ["k1", "ew", "ew", "ew", "k3"]
    kernels = [(call, name) for call in (10, 11, 12) for name in names]
    device = pd.DataFrame(
        {
            "name": pd.array([k[1] for k in kernels], dtype="string"),
            "start_us": [100.0 * (c - 10) + i for i, (c, _) in enumerate(kernels)],
            "duration_us": 1.0,
        }
    )
    links = pd.DataFrame({"device": device.index, "top": [k[0] for k in kernels]})
    (row,), _ = fusion_patterns.kernel_sequence_rows(top, device, set(), links)
    assert row["pattern"] == "foo: k1 | ew ×3 | k3"
    assert (row["ops"], row["occurrences"]) == (5, 3)
    assert row["example"] == "k1 -> ew -> ew -> ew -> k3"


def test_graph_mode_profiles_get_device_sequences_and_eager_ones_do_not():
    """MindSpore AlexNet (real, graph mode): six Cast tasks run back to back on one stream;
    a PyTorch trace with framework operators is never searched that way."""
    alexnet = REAL / "mindspore_legacy" / "run_2_profiler"
    table = _candidates(alexnet)
    casts = table[table["pattern"] == "Cast-Cast{1,8}"]
    (row,) = casts.itertuples()
    names = row.example.split(" -> ")
    assert len(names) == row.ops == 6
    # the same six tasks, found in the stream's own order
    device = _profile(alexnet).tables["device_ops"]
    first = device[device["name"] == names[0]].iloc[0]
    stream = device[device["stream"] == first["stream"]].sort_values("start_us", kind="stable")
    at = list(stream["name"]).index(names[0])
    run = stream.iloc[at : at + 6]
    assert list(run["name"]) == names and set(run["op_type"]) == {"Cast"}
    assert stream.iloc[at + 6]["op_type"] != "Cast"
    assert row.total_us == pytest.approx(run["duration_us"].sum())
    assert row.saving_us == pytest.approx(run["duration_us"].sum() - run["duration_us"].max())
    assert "graph_fusion" not in set(_candidates(NCCL_TRACE)["kind"])

    result = advisor.analyze(alexnet, select=["FUSE-002"], params={"FUSE-002": {"min_share": 0.0}})
    (finding,) = result.findings
    assert finding.impact_us == pytest.approx(table["saving_us"].sum())


def test_a_gpu_graph_is_not_searched_for_ge_fusion_passes():
    """MindSpore on GPU (real, graph mode): GE never compiles its graph, so its element-wise
    chain is no candidate for TbeEltwiseFusionPass (the rule used to advise fusion_switch.cfg
    and GE to a GPU user); the same tasks on Ascend would be."""
    path = REAL / "mindspore_gpu_dynamic_shape"
    profile = copy.deepcopy(_profile(path))
    assert profile.meta.device_kind == "GPU"
    fusion_candidates(profile)
    assert "graph_fusion" not in set(profile.tables["fusion_candidates"]["kind"])
    assert not [f for f in advisor.analyze(path).findings if f.rule.id.startswith("FUSE")]
    profile.meta.device_kind = "NPU"
    fusion_candidates(profile)
    graph = profile.tables["fusion_candidates"]
    assert "TbeEltwiseFusionPass" in set(graph.loc[graph["kind"] == "graph_fusion", "fused_api"])


def test_an_eager_torch_npu_run_without_its_host_trace_is_not_searched_for_ge_passes():
    """MindStudio Insight's level-1 torch_npu rank, shared without trace_view.json: no
    framework operator tells it is eager, but its kernels are aclnn's (CANN's single-operator
    API, run outside any GE graph), so GE's fusion passes are no advice for it; the same
    tasks under graph-mode names would be searched."""
    path = REAL / "msinsight_pytorch_level1" / "rank0_ascend_pt"
    profile = copy.deepcopy(_profile(path))
    assert "host_ops" not in profile.tables
    names = profile.tables["device_ops"]["name"]
    assert names.str.startswith("aclnn").mean() >= 0.5
    fusion_candidates(profile)
    assert "graph_fusion" not in set(profile.tables["fusion_candidates"]["pattern"])
    profile.tables["device_ops"]["name"] = names.str.replace("aclnn", "", regex=False)
    fusion_candidates(profile)
    assert "graph_fusion" in set(profile.tables["fusion_candidates"]["pattern"])  # scan row


def test_widedeep_transdata_pairs_are_counted_per_stream():
    """MindSpore Wide&Deep (real): TransData pairs on one stream, each with its own time."""
    table = _candidates(REAL / "mindspore_run1_widedeep")
    (row,) = table[table["pattern"] == "TransData-TransData"].itertuples()
    assert row.occurrences > 1 and row.ops == 2
    assert 0 < row.saving_us < row.total_us
    assert (table["saving_us"] <= table["total_us"]).all()


def test_graph_rows_follow_each_stream_in_time_order() -> None:
    """Graph sequences are searched per stream (a missing stream is one more), in start order
    whatever the rows' order, over compute tasks only; each occurrence keeps its first task's
    start and step, its names and its times."""
    rows = [  # (stream, start, op_type, category, duration)
        (1, 30.0, "Cast", "compute", 3.0),
        (2, 10.0, "Conv2D", "compute", 5.0),
        (1, 10.0, "Cast", "compute", 1.0),
        (None, 5.0, "PadD", "compute", 2.0),
        (1, 20.0, "Relu", "compute", 2.0),
        (2, 15.0, "MemcpyAsync", "memcpy", 1.0),
        (2, 20.0, "Add", "compute", 4.0),
        (None, 6.0, "Conv2D", "compute", 7.0),
        (2, 30.0, "GroupNorm", "compute", 6.0),
    ]
    device = pd.DataFrame(
        {
            "stream": pd.array([r[0] for r in rows], dtype="Int64"),
            "start_us": [r[1] for r in rows],
            "op_type": [r[2] for r in rows],
            "category": [r[3] for r in rows],
            "duration_us": [r[4] for r in rows],
            "name": [f"{r[2]}_{i}" for i, r in enumerate(rows)],
            "step": pd.array([1] * len(rows), dtype="Int64"),
        }
    )
    found, scanned = fusion_patterns.graph_rows(device)
    assert scanned == 8
    by_api = {row["fused_api"]: row for row in found}
    assert set(by_api) == {
        "CastReluCastFusionPass",
        "Conv2DAddGroupNormFusionPass",
        "PadConv2dFusionPass",
    }
    cast = by_api["CastReluCastFusionPass"]
    assert (cast["occurrences"], cast["first_start_us"], cast["total_us"]) == (1, 10.0, 6.0)
    assert cast["example"].startswith("Cast_2")
    conv = by_api["Conv2DAddGroupNormFusionPass"]
    assert (conv["first_start_us"], conv["total_us"], conv["fused_us"]) == (10.0, 15.0, 6.0)
    pad = by_api["PadConv2dFusionPass"]
    assert (pad["first_start_us"], pad["total_us"], pad["step"]) == (5.0, 9.0, 1)


def test_a_generic_launcher_is_named_by_what_it_computes():
    """Our GPT-2 run on an H200 in bf16 autocast: each aten::addmm launched three
    at::native::vectorized_elementwise_kernel before its GEMM, the same name for every
    element-wise kernel; they are autocast's casts of the float32 input, weight and bias
    (bfloat16_copy_kernel_cuda in the template, aten::_to_copy in the host trace), and the
    pattern says so."""
    path = REAL.parent / "kineto_gpu_own" / "gpt2.pt.trace.json.gz"
    calls = _kernels_launched_by(path, "aten::addmm")
    # (the GEMM's launch, cuLaunchKernelEx, is a driver call this helper does not follow)
    first_three = {tuple(n for n, _ in c[:3]) for c in calls if len(c) >= 3}
    assert first_three and all(
        "vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda" in name
        for names in first_three
        for name in names
    )
    patterns = _candidates(path)["pattern"].dropna().tolist()
    cast = "addmm: at::native::vectorized_elementwise_kernel<bfloat16_copy_kernel_cuda> ×3 | "
    assert any(p.startswith(cast) for p in patterns), patterns
    assert not any("vectorized_elementwise_kernel " in f"{p} " for p in patterns)
