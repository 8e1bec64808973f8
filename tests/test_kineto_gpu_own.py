"""Findings on our own traces of a real GPU (an H200, tests/fixtures/kineto_gpu_own): each
figure checked against the raw trace, or against the run its advice describes."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import advisor
from advisor.api import ProfileAnalysis
from advisor.engine.rules import Applies
from advisor.workload import TRAINING_NAMES

GPU_OWN = Path(__file__).parent / "fixtures" / "kineto_gpu_own"


@cache
def events(name: str) -> list[dict[str, Any]]:
    with gzip.open(GPU_OWN / f"{name}.pt.trace.json.gz", "rt", encoding="utf-8") as handle:
        return json.load(handle)["traceEvents"]


_ANALYSES: dict[tuple[str, int | None], ProfileAnalysis] = {}


@pytest.fixture(autouse=True, scope="module")
def _forget_analyses() -> Iterator[None]:
    """The analyses are shared by this module's tests and dropped after them (other modules
    count the findings alive)."""
    yield
    _ANALYSES.clear()


def analysed(name: str, *, max_syncs_per_step: int | None = None) -> ProfileAnalysis:
    key = (name, max_syncs_per_step)
    if key not in _ANALYSES:
        params = {"HOST-002": {"max_per_step": max_syncs_per_step}} if max_syncs_per_step else None
        path = GPU_OWN / f"{name}.pt.trace.json.gz"
        (_ANALYSES[key],) = advisor.analyze(path, params=params).analyses
    return _ANALYSES[key]


def steps_of(name: str) -> list[tuple[float, float]]:
    return [
        (e["ts"], e["ts"] + e["dur"])
        for e in events(name)
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")
    ]


def in_steps(name: str, event: dict[str, Any]) -> bool:
    return any(lo <= event["ts"] < hi for lo, hi in steps_of(name))


def finding(analysis: ProfileAnalysis, rule_id: str):
    return next((f for f in analysis.findings if f.rule.id == rule_id), None)


def test_the_traces_are_of_an_h200() -> None:
    analysis = analysed("healthy")
    assert analysis.profile.meta.device_name == "NVIDIA H200"
    assert analysis.profile.meta.device_kind == "GPU"
    assert len(analysis.profile.tables["steps"]) == 4


def test_synchronisations_are_counted_in_the_steps() -> None:
    """The loop reads the loss and 8 gradient norms with .item() and synchronises once per
    step: 10 calls in each of the 4 steps. The profiler adds its own cudaDeviceSynchronize
    when it stops, after the last step, which HOST-002 counted as an 11th call of the loop
    (10.25 per step, over its limit of 10)."""
    syncs = [
        e
        for e in events("sync_heavy")
        if e.get("cat") == "cuda_runtime" and e["name"].endswith("Synchronize")
    ]
    inside = [e for e in syncs if in_steps("sync_heavy", e)]
    assert (len(syncs), len(inside)) == (41, 40)
    assert finding(analysed("sync_heavy"), "HOST-002") is None  # 10 per step: not over 10
    fired = finding(analysed("sync_heavy", max_syncs_per_step=9), "HOST-002")
    assert fired is not None
    assert fired.values["syncs"] == 40 and fired.values["per_step"] == pytest.approx(10.0)
    assert fired.values["sync_us"] == pytest.approx(sum(e["dur"] for e in inside), rel=1e-6)
    # what it charges is the device idle time where the calls returned, at most what they
    # blocked (test_schedule_rules.py checks that figure call by call on a real trace)
    assert 0 < fired.impact_us == fired.values["idle_us"] <= fired.values["sync_us"]


def test_a_faster_device_saves_at_most_what_the_host_waited() -> None:
    """The float32 run's GEMMs run without Tensor Cores (GPU-002). Halving them would take
    the step from 4.40 to 2.50 ms, but the host's own work in each step (everything but its
    wait in cudaDeviceSynchronize) is about 2.8 ms: the same run with TF32 took 2.98 ms. The
    step time if fixed is bounded by that wait."""
    fp32, tf32 = analysed("fp32_matmul"), analysed("tf32_matmul")
    gpu_002 = finding(fp32, "GPU-002")
    assert gpu_002 is not None and finding(tf32, "GPU-002") is None
    steps = steps_of("fp32_matmul")
    step_us = sum(hi - lo for lo, hi in steps) / len(steps)
    waited = sum(
        e["dur"]
        for e in events("fp32_matmul")
        if e.get("cat") == "cuda_runtime"
        and e["name"] == "cudaDeviceSynchronize"
        and in_steps("fp32_matmul", e)
    ) / len(steps)
    assert gpu_002.step_time_if_fixed_us == pytest.approx(step_us - waited, rel=0.01)
    assert gpu_002.impact_us / len(steps) > waited  # what halving the GEMMs alone would save
    assert gpu_002.if_fixed_bounded_by == ["compute"]
    measured_tf32 = tf32.profile.tables["steps"]["duration_us"].mean()
    assert abs(gpu_002.step_time_if_fixed_us - measured_tf32) < 0.1 * measured_tf32
    bounds = fp32.profile.tables["step_bounds"]
    assert (bounds["compute_savable_us"] < bounds["compute_us"]).all()


def test_a_graph_replay_is_one_launch() -> None:
    """torch.compile(mode="reduce-overhead") replays each step's forward and backward as CUDA
    graphs: 8 cudaGraphLaunch calls start 144 kernels. Each call is one launch (SCHED-002
    counted 200 launches, 129 of them over 50 µs, where the trace holds 64 launching calls,
    7 of them over 50 µs), judged by all the kernels it started: the 7 graph launches over
    50 µs (48-66 µs) each started 167-269 µs of kernels, so none is a runtime outlier, nor
    short for its first kernel's 3 µs (SCHED-002 said so of 7 and 1, 467 µs of its 1,330)."""
    trace = events("cuda_graphs")
    calls = {
        e["args"]["correlation"]: e
        for e in trace
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    device = [e for e in trace if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    work: dict[int, float] = {}
    for e in device:
        work[e["args"]["correlation"]] = work.get(e["args"]["correlation"], 0.0) + e["dur"]
    launching = work.keys() & calls.keys()
    graph_launches = [c for c in launching if calls[c]["name"] == "cudaGraphLaunch"]
    assert (len(launching), len(graph_launches)) == (64, 8)
    slow_graphs = [c for c in graph_launches if calls[c]["dur"] > 50]
    assert len(slow_graphs) == 7 and all(work[c] > 2 * calls[c]["dur"] for c in slow_graphs)
    slow = sum(1 for c in launching if calls[c]["dur"] > 50 and c not in graph_launches)
    short = sum(1 for c in launching if calls[c]["dur"] <= 50 and work[c] < calls[c]["dur"])
    sched = finding(analysed("cuda_graphs"), "SCHED-002")
    assert sched is not None
    values = sched.values
    assert (values["launches"], values["graph_launches"]) == (64, 8)
    assert (values["slow_calls"], values["short_count"]) == (slow, short) == (0, 52)
    # no outlier to explain, and the fused AdamW is not told of foreach optimizers
    advice = " ".join(sched.suggestions)
    assert "Launch calls over the cutoff" not in advice and "foreach" not in advice
    ops = analysed("cuda_graphs").profile.tables["device_ops"]
    by_graph = ops[ops["launch_name"] == "cudaGraphLaunch"]
    assert by_graph["launch_delay_us"].notna().sum() == 8 < len(by_graph)
    # each launch's work is the device time of all the tasks its call started
    launch_work = sorted(ops["launch_work_us"].dropna().tolist())
    assert launch_work == pytest.approx(sorted(work[c] for c in launching))
    assert ops["launch_work_us"].notna().tolist() == ops["launch_delay_us"].notna().tolist()


def test_tiny_kernels_a_graph_replays_have_no_launch_overhead() -> None:
    """OP-007 said 124 of the CUDA-graph run's 192 kernels were tiny and their launches cost
    274 µs of device time; 84 of them a cudaGraphLaunch started, with no host launch each.
    Those left out, 40 individually launched tiny kernels remain, under the rule's 100."""
    trace = events("cuda_graphs")
    calls = {
        e["args"]["correlation"]: e["name"]
        for e in trace
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    kernels = [e for e in trace if e.get("cat") == "kernel" and in_steps("cuda_graphs", e)]
    tiny = [e for e in kernels if e["dur"] < 10]
    by_graph = [e for e in tiny if calls.get(e["args"]["correlation"]) == "cudaGraphLaunch"]
    assert (len(tiny), len(by_graph)) == (124, 84)
    assert finding(analysed("cuda_graphs"), "OP-007") is None
    # an eager run's tiny kernels are each launched by the host: the finding stands
    eager = finding(analysed("launch_bound"), "OP-007")
    assert eager is not None and eager.values["graph_kernels"] == 0


def test_a_run_with_a_fused_optimizer_is_not_told_to_fuse_it() -> None:
    """The fused AdamW of the dataloader-bound run (aten::_fused_adamw_ in each step) was told
    to use "fused optimizers such as foreach/fused AdamW", the GPT-2 run's "fused optimizers
    (fused=True)"; launch_bound's SGD takes the foreach path and still is."""
    assert any(e["name"] == "aten::_fused_adamw_" for e in events("dataloader_bound"))
    fused = _suggestions(analysed("dataloader_bound"), "OP-007")
    assert "fused optimizers" not in fused and "multi-tensor apply" not in fused
    assert "Fuse small operators (torch.compile, fused LayerNorm/GELU)." in fused
    foreach = _suggestions(analysed("launch_bound"), "OP-007")
    assert "fused optimizers such as foreach/fused AdamW" in foreach
    # the idle-device finding, on the fused GPT-2 run and on the foreach SGD run
    assert "fused=True" not in _suggestions(analysed("gpt2"), "STEP-003")
    assert "fused optimizers (fused=True)" in _suggestions(analysed("launch_bound"), "STEP-003")


@pytest.mark.parametrize(
    ("name", "execution"),
    [("healthy", "eager"), ("compiled", "compiled"), ("cuda_graphs", "graphs")],
)
def test_how_the_steps_ran_is_read(name: str, execution: str) -> None:
    analysis = analysed(name)
    assert analysis.profile.meta.extra["execution"] == execution
    metadata = analysis.profile.tables["metadata"]
    rows = metadata[metadata["key"] == "framework.execution"]
    assert list(rows["value"]) == [execution]


def _with_compiled_region(tmp_path: Path, share: str, generated: bool = True) -> Path:
    """The eager healthy run with one `Torch-Compiled Region` host record added on its
    training thread: around the launch of its shortest kernel ("sliver"), or around all of
    its steps ("all"); with `generated`, that shortest kernel renamed as Inductor names the
    Triton kernels it generates."""
    trace = json.loads(json.dumps({"traceEvents": events("healthy")}))
    calls = {
        e["args"]["correlation"]: e
        for e in trace["traceEvents"]
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    kernels = [e for e in trace["traceEvents"] if e.get("cat") == "kernel"]
    shortest = min(kernels, key=lambda e: e["dur"])
    call = calls[shortest["args"]["correlation"]]
    if generated:
        shortest["name"] = "triton_poi_fused_add_0"
    if share == "sliver":
        lo, hi = call["ts"] - 1, call["ts"] + call["dur"] + 1
    else:
        steps = steps_of("healthy")
        lo, hi = steps[0][0], steps[-1][1]
    region = {"ph": "X", "cat": "cpu_op", "name": "Torch-Compiled Region: 0/0"}
    region.update(pid=call["pid"], tid=call["tid"], ts=lo, dur=hi - lo)
    trace["traceEvents"].append(region)
    path = tmp_path / f"{share}.pt.trace.json"
    path.write_text(json.dumps(trace), encoding="utf-8")
    return path


@pytest.mark.parametrize(("share", "execution"), [("sliver", "eager"), ("all", "compiled")])
def test_a_compiled_region_must_launch_most_of_the_work(tmp_path, share, execution) -> None:
    """TraceLens' vLLM trace on a B200 holds one Torch-Compiled Region, which launched one 2
    µs kernel of 10.9 ms: advisor read the run as compiled and told it to look for graph
    breaks. A run is compiled (or replays graphs) where that code's kernels take at least
    half of the device's compute time."""
    (analysis,) = advisor.analyze(_with_compiled_region(tmp_path, share)).analyses
    assert analysis.profile.meta.extra["execution"] == execution


def test_compiled_regions_without_generated_kernels_run_eager(tmp_path) -> None:
    """HTA's df_index_resolver sample runs its steps in AOTAutograd's CompiledFunction regions
    that launch 11,280 aten kernels and no generated one (backend aot_eager): advisor read it
    as compiled and told it the host work lay outside the compiled code. The region around
    every step whose kernels are all eager's is eager; with one Triton kernel it is compiled
    (the test above)."""
    path = _with_compiled_region(tmp_path, "all", generated=False)
    (analysis,) = advisor.analyze(path).analyses
    assert analysis.profile.meta.extra["execution"] == "eager"
    assert "already runs code torch.compile made" not in _suggestions(analysis, "SCHED-001")


def _suggestions(analysis: ProfileAnalysis, rule_id: str) -> str:
    fired = finding(analysis, rule_id)
    assert fired is not None, rule_id
    return " ".join(fired.suggestions)


def test_a_compiled_run_is_not_told_to_compile() -> None:
    """The eager run is told to compile or capture its step; the torch.compile run and the
    CUDA-graph run are told what is left outside their compiled regions instead."""
    eager = _suggestions(analysed("healthy"), "SCHED-001")
    assert 'torch.compile(mode="reduce-overhead")' in eager and "already" not in eager
    compiled = _suggestions(analysed("compiled"), "SCHED-001")
    assert "already runs code torch.compile made" in compiled
    assert "Capture the steady-state step" not in compiled
    assert 'replay the regions as CUDA graphs (torch.compile(mode="reduce-overhead"))' in compiled
    graphs = _suggestions(analysed("cuda_graphs"), "SCHED-001")
    assert "already replays CUDA graphs" in graphs and "reduce-overhead" not in graphs
    for name in ("compiled", "cuda_graphs"):
        idle = _suggestions(analysed(name), "STEP-003")
        assert "Reduce per-operator dispatch cost with compiled graphs" not in idle
        # the host holds the device up for most of its idle time (STEP-004: 70-81% host)
        assert "the device still waits for the host" in idle
        # Inductor's kernels, fused already, are not offered for fusion again (FUSE-003 said
        # 21 kernels of CompiledFunctionBackward, GEMMs among them, would make one)
        assert finding(analysed(name), "FUSE-003") is None


def test_a_compiled_inference_run_is_not_pointed_at_its_optimizer_step(tmp_path) -> None:
    """xDiT's compiled SD 3.5 inference on an MI300X was told to bring "the optimizer step, the
    loss" inside its compiled regions. The compiled run without its backward pass and
    optimizer step (every event advisor.workload reads as training left out) is inference:
    its advice names the Python between the regions alone; the training run's names all."""
    trace = {
        "traceEvents": [
            e
            for e in events("compiled")
            if not (e.get("ph") == "X" and TRAINING_NAMES.search(str(e.get("name", ""))))
        ]
    }
    path = tmp_path / "compiled_forward.pt.trace.json"
    path.write_text(json.dumps(trace), encoding="utf-8")
    (forward,) = advisor.analyze(path).analyses
    assert forward.profile.meta.extra["execution"] == "compiled"
    for rule_id in ("STEP-003", "SCHED-001"):
        inference = _suggestions(forward, rule_id)
        assert "outside the compiled or captured regions (Python between them" in inference
        assert "optimizer" not in inference and "training" not in inference
        assert "the optimizer step, the loss, Python" in _suggestions(analysed("compiled"), rule_id)


def test_the_dataloader_bound_run_is_measured_from_its_loader_calls() -> None:
    """The Dataset sleeps 1 ms for each of the 16 samples of a batch: the loader's calls in
    the trace take about 17.6 ms of each 21 ms step, as HOST-001 says."""
    loader = [
        e
        for e in events("dataloader_bound")
        if e.get("cat") == "user_annotation"
        and e["name"].startswith("enumerate(DataLoader)")
        and in_steps("dataloader_bound", e)
    ]
    assert len(loader) == 4
    loading = sum(e["dur"] for e in loader)
    assert loading / 4 > 16_000  # 16 samples of at least 1 ms each
    fired = finding(analysed("dataloader_bound"), "HOST-001")
    assert fired is not None
    assert fired.impact_us == pytest.approx(loading, rel=0.01)


@pytest.mark.parametrize(
    ("execution", "shown"),
    [("eager", {"eager"}), (None, {"eager"}), ("compiled", {"done"}), ("graphs", {"done"})],
)
def test_suggestions_scoped_by_execution(execution: str | None, shown: set[str]) -> None:
    """A profile that does not say how it ran counts as eager: advice written for compiled
    runs says the run is compiled, so it must not reach one that may not be."""
    for_eager = Applies(("PyTorch",), ("GPU",), ("eager",))
    for_done = Applies(("PyTorch",), ("GPU",), ("compiled", "graphs"))
    fits = {
        label
        for label, applies in (("eager", for_eager), ("done", for_done))
        if applies.fits("PyTorch", "GPU", execution)
    }
    assert fits == shown
    assert Applies(("PyTorch",), ("GPU",)).fits("PyTorch", "GPU", execution)


def test_a_real_model_is_read_as_the_trace_says() -> None:
    """A 2-layer GPT-2 (transformers, SDPA attention, bf16): the device idles 21% of the
    steps (STEP-003, from the raw kernels); PyTorch's cuDNN attention kernels are attention,
    not convolutions (their names hold "fprop"); the embedding's backward, a CUB radix sort
    in 22 kernels, is no chain of short kernels to fuse; the logits' gradient of
    nll_loss_backward, 8 x 512 x 50,257 float32 in 2 MiB blocks, leads the peak memory."""
    trace = events("gpt2")
    busy: list[list[float]] = []
    for start, end in sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in trace
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    ):
        if busy and start <= busy[-1][1]:
            busy[-1][1] = max(busy[-1][1], end)
        else:
            busy.append([start, end])
    steps = steps_of("gpt2")
    step_us = sum(hi - lo for lo, hi in steps)
    computing = sum(max(0.0, min(b, hi) - max(a, lo)) for lo, hi in steps for a, b in busy)
    analysis = analysed("gpt2")
    idle = finding(analysis, "STEP-003")
    assert idle is not None and idle.impact_us == pytest.approx(step_us - computing, rel=1e-3)

    ops = analysis.profile.tables["device_ops"]
    attention = ops[ops["name"].str.contains("_sdpa_", na=False)]
    assert len(attention) == 16  # forward and backward of 2 layers in 4 steps
    assert set(attention["compute_class"]) == {"flash_attention"}

    sorting = [e for e in trace if e.get("cat") == "kernel" and "radix_sort" in e["name"]]
    assert len(sorting) == 4 * 10  # a histogram, an exclusive sum and 8 one-sweep passes a step
    fusion = finding(analysis, "FUSE-003")
    assert fusion is not None
    assert not any("Embedding" in row[0] for row in fusion.evidence["rows"])
    # nor a call running two GEMMs (AddmmBackward0: the input's and the weight's gradients)
    library = ("nvjet", "gemm", "sdpa")
    for row in fusion.evidence["rows"]:
        kernels = row[0].split(": ")[-1].split(" | ")
        assert sum(any(word in k for word in library) for k in kernels) <= 1, row[0]

    memory = finding(analysis, "MEM-005")
    assert memory is not None and memory.values["top_name"] == "aten::nll_loss_backward"
    logits_grad = 8 * 512 * 50257 * 4
    assert memory.values["top_bytes"] == -(-logits_grad // 2**21) * 2**21


def test_loader_advice_follows_the_loader_as_configured() -> None:
    """With no workers and pageable batches the run is told to use workers and pinned memory;
    with 2 workers, pin_memory=True and non_blocking copies (the copies are CUPTI's Pinned ->
    Device) it is told neither, but that its workers fall behind: the loader's calls grow from
    34 to 2,261 µs as the prefetched batches run out."""
    copies = [
        e["name"]
        for e in events("loader_workers")
        if e.get("cat") == "gpu_memcpy" and "HtoD" in e["name"]
    ]
    assert copies and set(copies) == {"Memcpy HtoD (Pinned -> Device)"}
    plain = _suggestions(analysed("dataloader_bound"), "HOST-001")
    assert "Use pin_memory=True" in plain and "Load in worker processes" in plain
    tuned = _suggestions(analysed("loader_workers"), "HOST-001")
    assert "Use pin_memory=True" not in tuned and "Load in worker processes" not in tuned
    assert f"already reach the device from pinned memory ({len(copies)} host-to-device" in tuned
    assert "already loads in worker processes" in tuned


def test_allocator_calls_of_a_short_profile_are_judged_by_their_share() -> None:
    """torch.cuda.empty_cache() after every step: the next step asks the driver again, 78
    cudaMalloc/cudaFree calls in the 4 steps, 31% of their time but 7.3 ms in all, under
    MEM-003's absolute limit of 10 ms (which alone let it pass)."""
    calls = [
        e
        for e in events("empty_cache")
        if e.get("cat") == "cuda_runtime"
        and e["name"] in ("cudaMalloc", "cudaFree")
        and in_steps("empty_cache", e)
    ]
    steps = steps_of("empty_cache")
    spent = sum(e["dur"] for e in calls)
    share = spent / sum(hi - lo for lo, hi in steps)
    assert len(calls) == 78 and spent < 10_000 and share > 0.3
    fired = finding(analysed("empty_cache"), "MEM-003")
    assert fired is not None
    assert fired.values["alloc_calls"] == 78
    assert fired.impact_us == pytest.approx(spent, rel=1e-6)
    assert fired.impact_ratio == pytest.approx(share, rel=1e-3)
    assert "Remove torch.cuda.empty_cache()" in " ".join(fired.suggestions)


def test_a_comparison_gives_its_verdict_before_its_note_on_profiling() -> None:
    """Both low and without impact: CMP-012 (how much faster the run with loader workers is)
    came after CMP-010 (the runs were profiled with shapes and stacks), ordered by id."""
    from advisor.compare import compare

    result = compare(
        GPU_OWN / "dataloader_bound.pt.trace.json.gz", GPU_OWN / "loader_workers.pt.trace.json.gz"
    )
    order = [f.rule.id for f in result.findings]
    assert {"CMP-010", "CMP-012"} <= set(order), order
    assert order.index("CMP-012") < order.index("CMP-010")
    assert [f.rank for f in result.findings] == list(range(1, len(order) + 1))
