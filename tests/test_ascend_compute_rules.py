"""Reader and derivation side of the Ascend computation rules (rules/ascend_compute.yaml):
the AI Core Freq counter as the aicore_freq table, each task's clock, the shape and number
functions, the PMU ratios those rules read, and the rules on the real A2 kernel_details.csv
and traces. What the rules do on given rows is in rules/ascend_compute.case.yaml."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from advisor.derive import derive
from advisor.engine.evaluate import evaluate
from advisor.engine.functions import BUILTIN_FUNCTIONS, number, shape_dim
from advisor.engine.rules import load_rule_file
from advisor.formats.aicore_freq import freq_samples, task_frequency, with_rated
from advisor.formats.decimal_clock import Clock
from advisor.model import Profile, ProfileMeta, conform
from advisor_plugins.ascend_pt import AscendPtReader
from advisor_plugins.ascend_pt.kernel_details import read_kernel_details
from advisor_plugins.kineto import KinetoReader
from advisor_plugins.msprof import MsprofReader
from advisor_plugins.schedule_metrics import PROVIDERS as SCHEDULE_PROVIDERS
from advisor_plugins.step_metrics import PROVIDERS

ROOT = Path(__file__).parents[1]
FIXTURES = Path(__file__).parent / "fixtures"
FREQ = FIXTURES / "aicore_freq"
A2_KERNELS = FIXTURES / "real" / "ascend_pt" / "a2_kernel_details" / "kernel_details.csv"
RULES, ERRORS = load_rule_file(ROOT / "rules" / "ascend_compute.yaml", BUILTIN_FUNCTIONS)


def read(path: Path) -> Profile:
    reader = AscendPtReader() if path.name.endswith("_ascend_pt") else MsprofReader()
    (profile,) = reader.read(path)
    return profile


def run(profile: Profile, rule_id: str):
    rules = [r for r in RULES if r.id == rule_id]
    needs = [need for rule in rules for need in rule.needs()]
    derive(profile, needs, [*PROVIDERS, *SCHEDULE_PROVIDERS])
    return evaluate(profile, rules, functions=BUILTIN_FUNCTIONS)


def evidence(finding, column: str) -> list:
    index = finding.evidence["columns"].index(column)
    return [row[index] for row in finding.evidence["rows"]]


def test_rule_file_loads():
    assert ERRORS == []
    assert [r.id for r in RULES] == ["OP-008", "OP-009", "OP-010", "OP-011", "MEM-003"]


# -- the counter as a table ----------------------------------------------------------------------


def test_samples_hold_until_the_next_and_the_last_until_the_timeline_end():
    # out of order, a repeated time (the later wins), a NaN time and a zero frequency
    freq = freq_samples(
        np.array([50.0, 0.0, 50.0, np.nan, 80.0]),
        np.array([1000.0, 1800.0, 900.0, 1800.0, 0.0]),
        end_us=200.0,
    )
    assert freq["start_us"].tolist() == [0.0, 50.0]
    assert freq["end_us"].tolist() == [50.0, 200.0]
    assert freq["duration_us"].tolist() == [50.0, 150.0]
    assert freq["freq_mhz"].tolist() == [1800.0, 900.0]
    assert freq["rated_mhz"].tolist() == [1800.0, 1800.0]  # no rated clock: the highest sample


def test_last_sample_after_the_timeline_end_has_no_length():
    freq = freq_samples(np.array([0.0, 300.0]), np.array([1800.0, 900.0]), end_us=200.0)
    assert freq["end_us"].tolist() == [300.0, 300.0]
    assert freq_samples(np.array([np.nan]), np.array([1800.0]), end_us=None) is None


def test_rated_clock_from_chip_facts_only_when_it_is_a_positive_number():
    freq = freq_samples(np.array([0.0]), np.array([1800.0]), end_us=10.0)
    assert with_rated(freq, "1850")["rated_mhz"].tolist() == [1850.0]
    for bad in (None, "", "N/A", 0, -5):
        assert with_rated(freq, bad)["rated_mhz"].tolist() == [1800.0]


def test_task_frequency_is_the_time_weighted_mean_over_its_span():
    freq = pd.DataFrame(
        {"start_us": [0.0, 1000.0], "end_us": [1000.0, 2000.0], "freq_mhz": [1800.0, 900.0]}
    )
    starts = np.array([100.0, 800.0, 1200.0, 1500.0, -50.0, 2500.0, np.nan])
    ends = np.array([500.0, 1200.0, 1800.0, 1500.0, -10.0, 2600.0, 10.0])
    mhz = task_frequency(starts, ends, freq)
    assert mhz[:4].tolist() == [1800.0, 1350.0, 900.0, 900.0]  # 1500..1500: the clock at 1500
    assert np.isnan(mhz[4:]).all()  # before the first sample, after the last, no start


def test_trace_view_counter_becomes_the_aicore_freq_table():
    profile = read(FREQ / "rank0_ascend_pt")
    freq = profile.tables["aicore_freq"]
    # 1800 MHz from the first sample (the trace's earliest event, 0), 900 MHz from 1000 µs to
    # the end of the last device task (1850 + 100); the "N/A" sample is dropped with a warning
    assert freq["freq_mhz"].tolist() == [1800.0, 900.0]
    assert freq["start_us"].tolist() == [0.0, 1000.0]
    assert freq["end_us"].tolist() == [1000.0, 1950.0]
    assert freq["rated_mhz"].tolist() == [1800.0, 1800.0]
    warnings = [w for w in profile.warnings if "AI Core Freq" in w.problem]
    assert len(warnings) == 1 and warnings[0].file.endswith("trace_view.json")


def test_trace_view_takes_the_rated_clock_from_the_exports_info_json(tmp_path):
    # torch_npu writes the CANN export (PROF_*/device_N/info.json.N) inside the rank folder;
    # its aic_frequency (1850) stands for the rated clock instead of the highest sample (1800)
    folder = tmp_path / "rank0_ascend_pt"
    shutil.copytree(FREQ / "rank0_ascend_pt", folder)
    device = folder / "PROF_000001_20240415174447255_FREQTEST" / "device_0"
    device.mkdir(parents=True)
    export = FREQ / "PROF_000001_20240415174447255_FREQTEST" / "device_0" / "info.json.0"
    shutil.copy(export, device / "info.json.0")
    profile = read(folder)
    assert profile.tables["aicore_freq"]["rated_mhz"].tolist() == [1850.0, 1850.0]
    (finding,) = run(profile, "OP-008").findings
    assert finding.values["slowed_count"] == 3  # the 1800 MHz task is below 1850 too


def test_msprof_timeline_counter_takes_the_rated_clock_from_info_json():
    profile = read(FREQ / "PROF_000001_20240415174447255_FREQTEST")
    freq = profile.tables["aicore_freq"]
    assert freq["freq_mhz"].tolist() == [1800.0, 900.0]
    assert freq["duration_us"].tolist() == [1000.0, 950.0]
    assert freq["rated_mhz"].tolist() == [1850.0, 1850.0]  # info.json aic_frequency


def test_frequency_drop_on_the_trace_view_names_the_slowed_matmuls():
    (finding,) = run(read(FREQ / "rank0_ascend_pt"), "OP-008").findings
    # MatMulV2 at 100..500 runs at 1800 MHz, MatMulV2 at 800..1200 half at 900 (1350 MHz),
    # MatMulV3 at 1200..1800 at 900: 400 x 0.25 + 600 x 0.5 lost; the AI CPU task not counted
    assert finding.impact_us == pytest.approx(400.0)
    assert finding.values["core_us"] == pytest.approx(1400.0)
    assert evidence(finding, "name") == [
        "aclnnMatmul_MatMulV3Common_MatMulV3",
        "aclnnMatmul_MatMulCommon_MatMulV2",
    ]
    assert evidence(finding, "aicore_mhz") == [900.0, 1350.0]


def test_frequency_drop_against_info_json_counts_the_full_speed_task_too():
    (finding,) = run(read(FREQ / "PROF_000001_20240415174447255_FREQTEST"), "OP-008").findings
    # rated 1850: 400 x (1 - 1800/1850) + 400 x (1 - 1350/1850) + 600 x (1 - 900/1850)
    expected = 400 * (1 - 1800 / 1850) + 400 * (1 - 1350 / 1850) + 600 * (1 - 900 / 1850)
    assert finding.impact_us == pytest.approx(expected)
    assert finding.values["slowed_count"] == 3


# -- functions the rules use -----------------------------------------------------------------------


def test_shape_dim_reads_cann_and_json_shape_texts():
    shapes = pd.Series(
        ["81920,4096;8192,512", "[[8, 64], [256, 64], []]", None, '"2,3"', "[8, 64]", ";"],
        dtype="string",
    )
    assert shape_dim(shapes, 0, -1).tolist()[:2] == [4096.0, 64.0]
    assert shape_dim(shapes, 1, 0).tolist()[:2] == [8192.0, 256.0]
    assert shape_dim(shapes, 0, 1).tolist()[3:5] == [3.0, 64.0]
    assert np.isnan(shape_dim(shapes, 0, 3)).all()  # no fourth dim anywhere
    assert np.isnan(shape_dim(shapes, 0, 0)[[2, 5]]).all()  # missing text, empty tensors
    assert shape_dim("4096,2,512;4096,2,512", 1, 2) == 512.0
    with pytest.raises(TypeError):
        shape_dim(shapes, 0.5, 0)


def test_number_parses_metadata_text():
    values = number(pd.Series(["24", "1850.5", "N/A", None], dtype="string"))
    assert values.tolist()[:2] == [24.0, 1850.5]
    assert values.isna().tolist()[2:] == [True, True]
    assert number("48") == 48.0 and np.isnan(number(True)) and np.isnan(number("x"))


# -- the real A2 kernel_details.csv ----------------------------------------------------------------


@pytest.fixture(scope="module")
def a2_kernels() -> pd.DataFrame:
    warnings: list[str] = []
    details = read_kernel_details(
        A2_KERNELS, "kernel_details.csv", lambda *a, **k: warnings.append(a[1])
    )
    assert details is not None and warnings == []
    return details.on(Clock())


def a2_profile(ops: pd.DataFrame, **tables: pd.DataFrame) -> Profile:
    frames = {"device_ops": ops, **tables}
    return Profile(ProfileMeta("a2", "ascend-pt"), {n: conform(n, df) for n, df in frames.items()})


def test_a2_kernel_details_fill_the_mte1_mte3_and_fixpipe_ratios(a2_kernels):
    # row 1 of the file: MatMulV2 with aic_mte1_ratio 0.648, aic_fixpipe_ratio 0.031, no MTE3
    # on the cube core; an Add on the vector core takes aiv_mte3_ratio (0.132)
    first = a2_kernels.iloc[0]
    assert (first["mte1_ratio"], first["fixpipe_ratio"], first["mte3_ratio"]) == (0.648, 0.031, 0)
    add = a2_kernels[a2_kernels["op_type"] == "Add"].iloc[0]
    assert add["mte3_ratio"] == 0.132


def test_a2_unaligned_shapes_are_the_15365_matmuls_and_the_odd_flash_attention(a2_kernels):
    (finding,) = run(a2_profile(a2_kernels), "OP-009").findings
    names = evidence(finding, "name")
    shapes = evidence(finding, "input_shapes")
    # four MatMulV3 on an inner axis of 15365, one varlen (TND) FlashAttentionScore with D 511
    assert finding.evidence["total_rows"] == 5
    assert sorted(set(shapes)) == [
        "4096,2,511;4096,2,512;4096,2,512;;;;4096,4096;;;;;",
        "8192,15365;8192,4096",
    ]
    assert names.count("aclnnMatmul_MatMulV3Common_MatMulV5") == 4
    assert finding.values["cube_count"] == 4 and finding.values["fa_count"] == 1
    fa = 405.228 * (1 - 511 / 512)
    mm = 4 * 521.31 * (1 - 15365 / 15616)
    assert finding.impact_us == pytest.approx(fa + mm)


def test_a2_unbound_operators_are_the_flash_attention_grads(a2_kernels):
    (finding,) = run(a2_profile(a2_kernels), "OP-011").findings
    assert set(evidence(finding, "op_type")) == {"FlashAttentionScoreGrad"}
    assert finding.evidence["total_rows"] == 4
    grads = a2_kernels[a2_kernels["op_type"] == "FlashAttentionScoreGrad"]
    busiest = grads[
        ["mac_ratio", "vec_ratio", "scalar_ratio", "mte1_ratio", "mte2_ratio", "mte3_ratio"]
    ].max(axis=1)
    assert (busiest < 0.8).all()
    expected = (grads["duration_us"] * (1 - busiest / 0.8)).sum()
    assert finding.impact_us == pytest.approx(expected)


def test_a2_block_dims_against_a_20_core_chip(a2_kernels):
    # the file's chip runs MatMulV3 and FlashAttention on 20 blocks and the Adds on 40: a
    # 20 AI Core / 40 vector core A2; the MatMulV2 tasks use 16 of the 20 cores
    metadata = pd.DataFrame(
        {"key": ["device.ai_core_num", "device.aiv_core_num"], "value": ["20", "40"]}
    )
    (finding,) = run(a2_profile(a2_kernels, metadata=metadata), "OP-010").findings
    assert set(evidence(finding, "op_type")) == {"MatMulV2"}
    assert set(evidence(finding, "block_dim")) == {16}
    v2 = a2_kernels.loc[a2_kernels["op_type"] == "MatMulV2", "duration_us"]
    assert finding.impact_us == pytest.approx(v2.sum() * (1 - 16 / 20))
    # without the core count the rule cannot judge
    result = run(a2_profile(a2_kernels), "OP-010")
    assert result.outcomes["OP-010"] == "not_applicable"


# -- allocation calls in real traces ---------------------------------------------------------------


def raw_events(path: Path) -> list[dict]:
    text = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    doc = json.loads(text)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def test_cuda_malloc_and_free_of_the_real_alexnet_start_up_step_are_warm_up():
    path = (
        FIXTURES
        / "real"
        / "kineto"
        / ("critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz")
    )
    events = raw_events(path)
    # the trace has no ProfilerStep: the reader's step is the device's span, first kernel to
    # last; the allocation calls counted are those that start in it
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    first = min(e["ts"] for e in device)
    last = max(e["ts"] + e["dur"] for e in device)
    calls = [
        e for e in events if e.get("name") in ("cudaMalloc", "cudaFree") and first <= e["ts"] < last
    ]
    assert len(calls) == 28

    def device_busy(call: dict) -> float:
        end = call["ts"] + call["dur"]
        return sum(max(0, min(end, e["ts"] + e["dur"]) - max(call["ts"], e["ts"])) for e in device)

    # calls of half a second or more while the device ran nothing are start-up (STEP-006): the
    # 6 s cudaFree that loads cuDNN, another of 525 ms, two cudaMalloc of 561 and 764 ms
    startup = [e for e in calls if e["dur"] >= 500000 and device_busy(e) <= 0.01 * e["dur"]]
    assert sorted(e["dur"] for e in startup) == [525034, 560913, 764486, 6008692]
    allocator = [e for e in calls if e not in startup]
    assert len(allocator) == 24 and max(e["dur"] for e in allocator) == 277144  # cudaMalloc
    # the one step holds the start-up: the run began there, and the caching allocator filled
    # its empty cache with those 24 calls (625 ms), warm-up no later step repeats
    (profile,) = KinetoReader().read(path)
    assert len(profile.tables["steps"]) == 1
    assert run(profile, "MEM-003").outcomes["MEM-003"] == "passed"


def test_one_short_acl_malloc_in_the_real_torch_npu_trace_stays_below_the_limit():
    path = FIXTURES / "real" / "ascend_pt" / "rank0_ascend_pt"
    events = raw_events(path / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")
    (malloc,) = [e for e in events if e.get("name") == "AscendCL@aclMallocMemInner"]
    profile = read(path)
    result = run(profile, "MEM-003")
    assert result.outcomes["MEM-003"] == "passed"  # 72.8 µs, far below 10 ms
    rules = [r for r in RULES if r.id == "MEM-003"]
    (finding,) = evaluate(
        profile, rules, functions=BUILTIN_FUNCTIONS, overrides={"MEM-003": {"max_total_us": 50}}
    ).findings
    assert finding.values["alloc_calls"] == 1
    assert finding.values["alloc_us"] == pytest.approx(float(malloc["dur"]))


def test_torch_npu_database_counter_becomes_the_aicore_freq_table(tmp_path):
    # the database twin of the real torch_npu trace, with an AICORE_FREQ table added in the
    # form the msprof database reference gives it (timestampNs, freq in MHz)
    folder = tmp_path / "rank0_ascend_pt"
    shutil.copytree(FIXTURES / "ascend_db" / "rank0_ascend_pt", folder)
    path = folder / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    with sqlite3.connect(path) as con:
        first, last = con.execute("SELECT MIN(startNs), MAX(endNs) FROM TASK").fetchone()
        middle = (first + last) // 2
        con.execute(
            "CREATE TABLE AICORE_FREQ (deviceId INTEGER, timestampNs INTEGER, freq INTEGER)"
        )
        con.executemany("INSERT INTO AICORE_FREQ VALUES (0, ?, ?)", [(middle, 900), (first, 1800)])
    profile = read(folder)
    freq = profile.tables["aicore_freq"]
    origin = profile.tables["device_ops"]["start_us"].min()  # the first task starts at `first`
    assert freq["freq_mhz"].tolist() == [1800.0, 900.0]
    assert (freq["start_us"] - origin).tolist() == pytest.approx([0.0, (middle - first) / 1000])
    assert (freq["end_us"] - origin).tolist()[1] == pytest.approx((last - first) / 1000)
    assert freq["rated_mhz"].tolist() == [1800.0, 1800.0]
