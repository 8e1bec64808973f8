"""Every built-in rule fires where the data says so and stays quiet elsewhere."""

from __future__ import annotations

import pandas as pd
import pytest

from advisor.derive import derive
from advisor.engine.evaluate import evaluate
from advisor.engine.functions import BUILTIN_FUNCTIONS
from advisor.engine.rules import DEVICES, FRAMEWORKS, load_rules
from advisor.model import Profile, ProfileMeta, conform
from advisor_plugins.builtin_rules import advisor_rule_paths
from advisor_plugins.step_metrics import PROVIDERS

RULES, ERRORS = load_rules(advisor_rule_paths(), BUILTIN_FUNCTIONS)
ROOT_RULES = advisor_rule_paths()[0]


def run(rule_id: str, device_kind: str = "unknown", **tables: pd.DataFrame):
    profile = Profile(ProfileMeta("test", "mem", device_kind=device_kind),
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
    (finding,) = run("OP-005", device_kind="NPU", device_ops=device)
    assert finding.values["top_type"] == "MatMulV2"
    assert finding.values["top_share"] == pytest.approx(1050 / 1400)
    assert finding.tune_ops == ["mm1", "mm2"]
    # the same operators on a GPU: AOE cannot tune them, so no names for its file
    (on_gpu,) = run("OP-005", device_kind="GPU", device_ops=device)
    assert on_gpu.tune_ops == []
    even = ops([(f"op{i}", f"T{i}", "AI_CORE", 100) for i in range(5)])
    assert run("OP-005", device_ops=even) == []


def breakdown(n: int, duration: float, **cols: float) -> pd.DataFrame:
    return steps(n, duration, **cols)


def test_uncovered_communication_fires_and_quiet():
    (finding,) = run("COMM-001", steps=breakdown(4, 10_000, communication_us=4_000,
                                                 comm_not_overlapped_us=2_000))
    assert finding.values["ratio"] == pytest.approx(0.2)
    assert finding.impact_us == pytest.approx(8_000)
    assert run("COMM-001", steps=breakdown(4, 10_000, communication_us=4_000,
                                           comm_not_overlapped_us=500)) == []


def test_uncovered_communication_ignores_steps_without_breakdown():
    frame = breakdown(4, 10_000, communication_us=3_000, comm_not_overlapped_us=2_000)
    frame.loc[2:, "comm_not_overlapped_us"] = float("nan")  # no task data for steps 3, 4
    (finding,) = run("COMM-001", steps=frame)
    assert finding.values["ratio"] == pytest.approx(4_000 / 20_000)


def test_free_time_fires_and_quiet():
    (finding,) = run("STEP-003", steps=breakdown(5, 10_000, free_us=3_000))
    assert finding.values["ratio"] == pytest.approx(0.3) and finding.impact_us == 15_000
    assert run("STEP-003", steps=breakdown(5, 10_000, free_us=500)) == []


def comm(rows: list[tuple[str, float, float]]) -> pd.DataFrame:
    """rows of (name, bytes, duration_us)."""
    df = pd.DataFrame(rows, columns=["name", "bytes", "duration_us"])
    df["bandwidth_gbps"] = df["bytes"] / df["duration_us"] / 1000
    df["op"] = "allreduce"
    df["kind"] = "op"
    df["transit_us"] = df["duration_us"]  # no waiting: all the time is transit
    return df


def test_low_bandwidth_only_for_large_messages():
    mib = 1024 * 1024
    # 64 MiB in 10 ms = 6.7 GB/s: slow; 64 MiB in 2 ms = 33.6 GB/s: fine; 1 MiB slow but small
    data = comm([("slow", 64 * mib, 10_000), ("fast", 64 * mib, 2_000), ("tiny", mib, 1_000)])
    (finding,) = run("COMM-002", comm_ops=data)
    assert finding.values["slow_count"] == 1 and finding.values["large_count"] == 2
    assert finding.impact_us == pytest.approx(10_000 - 64 * mib / 14_400)
    assert [r[0] for r in finding.evidence["rows"]] == ["slow"]
    assert run("COMM-002", comm_ops=comm([("fast", 64 * mib, 2_000)])) == []


def host(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    """rows of (name, kind, start_us, duration_us)."""
    return pd.DataFrame(rows, columns=["name", "kind", "start_us", "duration_us"])


def test_slow_dataloader_by_share_and_quiet():
    loads = [("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "dataloader",
              i * 10_000.0, 1_000.0) for i in range(4)]
    (finding,) = run("HOST-001", steps=steps(4, 10_000), host_ops=host(loads))
    assert finding.values["ratio"] == pytest.approx(0.1)
    assert finding.values["per_step_us"] == pytest.approx(1_000)
    quick = [(n, k, s, 100.0) for n, k, s, _ in loads]
    assert run("HOST-001", steps=steps(4, 10_000), host_ops=host(quick)) == []


def test_slow_dataloader_by_absolute_time():
    # 12 ms per step is only 4% of a 300 ms step, but above msprof-analyze's 10 ms
    loads = [("DataLoader", "dataloader", i * 300_000.0, 12_000.0) for i in range(2)]
    (finding,) = run("HOST-001", steps=steps(2, 300_000), host_ops=host(loads))
    assert finding.values["per_step_us"] == pytest.approx(12_000)


def test_frequent_sync_per_launch_and_quiet():
    calls = [("cudaLaunchKernel", "launch", float(i), 5.0) for i in range(10)]
    calls += [("cudaStreamSynchronize", "sync", 100.0 + i, 50.0) for i in range(6)]
    (finding,) = run("HOST-002", steps=steps(2, 1_000), host_ops=host(calls))
    assert finding.values["per_launch"] == pytest.approx(0.6)
    assert finding.impact_us == pytest.approx(300)
    calls = calls[:10] + calls[10:12]  # 2 syncs for 10 launches in 2 steps
    assert run("HOST-002", steps=steps(2, 1_000), host_ops=host(calls)) == []


def test_recompilation_above_msprof_analyze_threshold():
    compiles = [("AscendCL@opCompile", "compile", i * 200.0, 100.0) for i in range(21)]
    (finding,) = run("HOST-003", host_ops=host(compiles))
    assert finding.values["compiles"] == 21 and finding.impact_us == pytest.approx(2_100)
    assert run("HOST-003", host_ops=host(compiles[:11])) == []


def test_dynamic_shape_share():
    device = ops([(f"op{i}", "Add", "AI_CORE", 10.0) for i in range(4)])
    device["op_state"] = ["dynamic", "dynamic", "dynamic", "static"]
    (finding,) = run("OP-006", device_ops=device)
    assert finding.values["ratio"] == pytest.approx(0.75) and finding.severity == "medium"
    device["op_state"] = ["dynamic", "static", "static", "static"]
    assert run("OP-006", device_ops=device) == []


def test_tiny_kernels():
    tiny = [(f"k{i}", "add_kernel", "GPU", 3.0) for i in range(150)]
    big = [(f"g{i}", "gemm", "GPU", 500.0) for i in range(50)]
    (finding,) = run("OP-007", device_ops=ops(tiny + big, wait=2.0))
    assert finding.values["tiny_count"] == 150
    assert finding.values["count_share"] == pytest.approx(0.75)
    # 2 µs idle before each tiny kernel but the first: launching costs at most that
    assert finding.impact_us == pytest.approx(149 * 2.0)
    assert run("OP-007", device_ops=ops(tiny[:60] + big, wait=2.0)) == []
    assert run("OP-007", device_ops=ops(tiny + big)) == []  # back to back: the host keeps up


def test_pageable_copies():
    device = ops([("Memcpy HtoD (Pageable -> Device)", "Memcpy", "GPU", 80.0),
                  ("Memcpy HtoD (Pinned -> Device)", "Memcpy", "GPU", 20.0)])
    device["category"] = "memcpy"
    device["host_memory"] = ["pageable", "pinned"]
    device["memcpy_kind"] = "HtoD"
    (finding,) = run("MEM-001", device_ops=device)
    assert finding.values["pageable_count"] == 1 and finding.impact_us == 80
    device["host_memory"] = "pinned"
    assert run("MEM-001", device_ops=device) == []


def test_memory_near_capacity():
    gib = 1024 ** 3
    memory = pd.DataFrame({"time_us": [0.0, 1.0], "reserved_bytes": [30 * gib, 76 * gib],
                           "capacity_bytes": 80 * gib})
    (finding,) = run("MEM-002", memory=memory)
    assert finding.values["ratio"] == pytest.approx(0.95)
    memory["reserved_bytes"] = [30 * gib, 60 * gib]
    assert run("MEM-002", memory=memory) == []


def ranks(durations: list[float]) -> pd.DataFrame:
    return pd.DataFrame({"rank": range(len(durations)), "steps": 10,
                         "duration_us": durations})


def test_slow_rank_names_the_rank():
    (finding,) = run("CLUSTER-001", ranks=ranks([10_000, 10_100, 12_000, 10_050]))
    assert finding.values["slow_rank"] == 2
    assert finding.impact_us == pytest.approx(2_000 * 10)
    assert "Rank 2 is the slowest of 4 ranks" in finding.message
    assert run("CLUSTER-001", ranks=ranks([10_000, 10_100, 10_200])) == []


def test_late_rank_is_the_one_that_waits_least():
    table = ranks([50_000, 50_100, 49_900])
    table["communication_us"] = [25_000, 2_000, 24_000]
    (finding,) = run("CLUSTER-002", ranks=table)
    assert finding.values["late_rank"] == 1 and finding.values["waiting_rank"] == 0
    assert finding.impact_us == pytest.approx(23_000 * 10)
    table["communication_us"] = [2_100, 2_000, 2_050]
    assert run("CLUSTER-002", ranks=table) == []


@pytest.mark.parametrize("core", ["COMMUNICATION", "HCCL"])
def test_communication_is_never_the_dominant_operator(core):
    device = ops([("bcast", "hcom_broadcast_", core, 5_000), ("mm", "MatMulV2", "AI_CORE", 300),
                  ("add", "Add", "AI_VECTOR_CORE", 300), ("c", "Cast", "AI_VECTOR_CORE", 300),
                  ("s", "Sub", "AI_VECTOR_CORE", 300)])
    device.loc[0, "category"] = "communication"
    assert run("OP-005", device_ops=device) == []


def test_recompilation_by_share_of_profiled_time():
    # 5 compilations, far below 20, but 5 ms of a 20 ms step
    compiles = [("AscendCL@opCompile", "compile", i * 2_000.0, 1_000.0) for i in range(5)]
    (finding,) = run("HOST-003", steps=steps(1, 20_000), host_ops=host(compiles))
    assert finding.values["ratio"] == pytest.approx(0.25)
    quick = [(n, k, s, 10.0) for n, k, s, _ in compiles]
    assert run("HOST-003", steps=steps(1, 20_000), host_ops=host(quick)) == []


def test_unfused_optimizer_fires_for_plain_adam_only():
    calls = [("Optimizer.step#Adam.step", "optimizer", 0.0, 3_000.0)]
    (finding,) = run("HOST-004", steps=steps(1, 20_000), host_ops=host(calls))
    assert finding.values["calls"] == 1 and finding.impact_us == 3_000
    fused = [("Optimizer.step#NpuFusedAdam.step", "optimizer", 0.0, 3_000.0)]
    assert run("HOST-004", steps=steps(1, 20_000), host_ops=host(fused)) == []
    short = [("Optimizer.step#Adam.step", "optimizer", 0.0, 100.0)]
    assert run("HOST-004", steps=steps(1, 20_000), host_ops=host(short)) == []


def test_total_us_is_a_reserved_name(tmp_path):
    from advisor.engine.rules import load_rule_file

    text = (ROOT_RULES / "host.yaml").read_text(encoding="utf-8").replace(
        "max_share: 0.05    #", "total_us: 0.05    #")
    path = tmp_path / "host.yaml"
    path.write_text(text, encoding="utf-8")
    _, errors = load_rule_file(path, BUILTIN_FUNCTIONS)
    assert any("'total_us' is a built-in name" in str(e) for e in errors)


@pytest.mark.parametrize("device", [*DEVICES, "unknown"])
@pytest.mark.parametrize("framework", [*FRAMEWORKS, "CANN", "unknown"])
def test_every_rule_has_advice_for_every_framework_and_device(framework, device):
    """Scoping a suggestion to one stack must never leave another stack with no advice."""
    for rule in RULES.rules.values():
        for lang in ("en", "zh"):
            assert rule.suggestions_for(lang, framework, device), (rule.id, lang)


def test_unmeasured_rules_say_why_in_both_languages():
    for rule in RULES.rules.values():
        if rule.impact_us is None:
            assert rule.impact_note and rule.text("zh").impact_note, rule.id
