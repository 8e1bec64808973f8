"""MindSpore GPU profiler files in the old-layout reader, and the per-step dynamic-shape view
(`dynamic_shape_ops`, rule OP-013).

Fixtures: the genuine MindInsight samples `gpu_timeline_display_0.json` and
`dynamic_shape_info_0.json` (tests/fixtures/real, see PROVENANCE.md), and the hand-built GPU
folder tests/fixtures/mindspore_gpu/profiler (README.md there names each column's source).
Expected numbers are computed here from the raw files.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURE_DIR, traced_peak

from advisor.api import analyze
from advisor.derive import derive
from advisor.model import Profile, ProfileMeta, conform, contract_problems
from advisor_plugins.dynamic_shapes import PROVIDERS, _medians, _settled_medians
from advisor_plugins.mindspore_legacy import MindSporeLegacyReader

REAL = FIXTURE_DIR / "real"
TIMELINE = REAL / "mindspore_legacy" / "profiler_misc" / "gpu_timeline_display_0.json"
DYNAMIC = REAL / "mindspore_gpu_dynamic_shape" / "dynamic_shape_info_0.json"
GPU = FIXTURE_DIR / "mindspore_gpu" / "profiler"
READER = MindSporeLegacyReader()


def read_one(folder: Path) -> Profile:
    (profile,) = READER.read(folder)
    assert contract_problems(profile) == []
    return profile


def folder_with(tmp_path: Path, *files: Path) -> Path:
    for file in files:
        shutil.copy(file, tmp_path)
    return tmp_path


def test_gpu_files_make_a_mindspore_folder(tmp_path: Path) -> None:
    for name in (
        "gpu_timeline_display_3.json",
        "gpu_activity_data_3.csv",
        "gpu_op_detail_info_3.csv",
        "gpu_op_type_info_3.csv",
        "dynamic_shape_info_3.json",
    ):
        folder = tmp_path / name
        folder.mkdir()
        (folder / name).write_text("x")
        assert READER.detect(folder), name
    assert not READER.detect(
        tmp_path / "gpu_timeline_display_3.json" / "gpu_timeline_display_3.json"
    )


def test_real_gpu_timeline_kernel_and_operator(tmp_path: Path) -> None:
    events = json.loads(TIMELINE.read_text())
    op, kernel = events  # MindInsight's sample: one operator, one CUDA kernel
    profile = read_one(folder_with(tmp_path, TIMELINE))
    assert profile.meta.device_kind == "GPU" and profile.warnings == []
    (row,) = profile.tables["device_ops"].to_dict("records")
    assert row["name"] == kernel["name"] and row["core_type"] == "GPU"
    assert row["op_type"] == "ApplyMomentum"  # from Default/optimizer-Momentum/ApplyMomentum-op55
    assert row["duration_us"] == kernel["dur"] and row["stream"] == int(kernel["tid"])
    assert row["block_threads"] == 1024 and row["grid_blocks"] == 8  # "1024,1,1", "8,1,1"
    assert row["category"] == "compute"
    (host,) = profile.tables["host_ops"].to_dict("records")
    assert (host["name"], host["kind"], host["duration_us"]) == (op["name"], "aten", op["dur"])
    # both on the GPU clock, rebased together: the operator came first
    assert host["start_us"] == 0.0
    assert row["start_us"] == pytest.approx(kernel["ts"] - op["ts"])


def test_real_dynamic_shape_file_gives_steps_and_shapes(tmp_path: Path) -> None:
    raw = json.loads(DYNAMIC.read_text())
    profile = read_one(folder_with(tmp_path, DYNAMIC))
    assert profile.meta.device_kind == "GPU" and profile.warnings == []
    kernels = [k for items in raw["kernel"].values() for k in items]
    ops = profile.tables["device_ops"]
    assert list(ops["step"]) == [k["step"] for k in kernels]
    assert list(ops["duration_us"]) == [k["dur"] for k in kernels]
    # a kernel takes its operator's input shapes in that step: Add-op6 ran with [32, 1] twice
    assert set(ops["input_shapes"]) == {"32,1;32,1"}
    assert set(ops["op_type"]) == {"Add"} and "start_us" not in ops
    operators = [o for items in raw["operator"].values() for o in items]
    host = profile.tables["host_ops"]
    assert list(host["name"]) == [o["op_name"] for o in operators]
    assert host["duration_us"].sum() == pytest.approx(sum(o["dur"] for o in operators))
    assert host["input_shapes"].notna().sum() == sum(1 for o in operators if o["shape_info"])

    derive(profile, ["dynamic_shape_ops"], PROVIDERS)
    (row,) = profile.tables["dynamic_shape_ops"].to_dict("records")
    times = [k["dur"] for k in kernels]
    assert (row["source"], row["steps"], row["shapes"], row["variants"]) == ("device_ops", 9, 1, 1)
    assert row["changes"] == 0 and row["excess_us"] == 0.0
    assert row["total_us"] == pytest.approx(sum(times))
    assert (row["min_step_us"], row["max_step_us"]) == (min(times), max(times))
    assert row["median_step_us"] == pytest.approx(sorted(times)[4])
    assert row["shapes_per_step"].startswith("1: 32,1;32,1 (3.90 µs) | 2: 32,1;32,1")


def test_documented_gpu_folder_timeline_steps_and_shapes() -> None:
    timeline = json.loads((GPU / "gpu_timeline_display_0.json").read_text())
    profile = read_one(GPU)
    assert profile.meta.device_kind == "GPU" and profile.warnings == []
    steps = profile.tables["steps"]
    raw_steps = [e for e in timeline if e.get("tid") == 100000 and e["ph"] == "X"]
    assert list(steps["step"]) == [int(e["name"]) for e in raw_steps]
    assert list(steps["duration_us"]) == [e["dur"] for e in raw_steps]
    assert steps["start_us"].iloc[0] == 0.0  # rebased with the operators and kernels
    kernels = [e for e in timeline if "op_full_name" in e.get("args", {})]
    ops = profile.tables["device_ops"]
    assert len(ops) == len(kernels)  # scope-name and overlap-analysis bars are not tasks
    assert set(ops["stream"]) == {7, 8}
    nccl = ops[ops["name"].str.startswith("nccl")]
    assert list(nccl["category"]) == ["communication"] and list(nccl["step"]) == [2]
    add = ops[ops["op_type"] == "Add"]
    assert list(add["step"]) == [1, 2, 3, 4]
    assert list(add["input_shapes"]) == ["32,1;32,1", "32,1;32,1", "48,1;48,1", "48,1;48,1"]
    host = profile.tables["host_ops"]
    assert sorted(host["kind"].unique()) == ["aten", "cpu_kernel"]
    assert (host["kind"] == "aten").sum() == 8  # Add-op6 and MatMul-op1 in 4 steps


def test_op_013_fires_on_the_gpu_folder_with_gpu_advice() -> None:
    (analysis,) = analyze(GPU, select=["OP-013"]).analyses
    (finding,) = analysis.findings
    table = analysis.tables["dynamic_shape_ops"].set_index("op_type")
    # Add kernels per step 10, 10, 60 (new shape), 12 (the same shape, settled): 60 - 12 = 48
    # after the change (the median of all four steps, 11, would count the new shape's work too)
    assert table.loc["Add", "excess_us"] == 48.0 and table.loc["MatMul", "variants"] == 1
    assert table.loc["Add", "unmatched_changes"] == 0
    assert finding.impact_us == 48.0
    assert finding.values["ratio"] == pytest.approx(48 / 4000)  # 4 steps of 1000 µs
    assert "3: 48,1;48,1 (60.0 µs)" in finding.evidence["rows"][0][-1]
    assert any("Cell.set_inputs" in s for s in finding.suggestions)
    assert not any("torch" in s or "AOE" in s for s in finding.suggestions)


def test_csv_tables_without_a_timeline(tmp_path: Path) -> None:
    names = ("gpu_activity_data_0.csv", "gpu_op_detail_info_0.csv", "gpu_op_type_info_0.csv")
    profile = read_one(folder_with(tmp_path, *(GPU / n for n in names)))
    with open(GPU / names[0], newline="") as handle:
        activity = list(csv.DictReader(handle))
    ops = profile.tables["device_ops"]
    assert list(ops["name"]) == [r["name"] for r in activity]
    assert list(ops["duration_us"]) == [float(r["total_duration(us)"]) for r in activity]
    assert list(ops["op_type"]) == ["Add", "MatMul", "AllReduce"]
    assert list(ops["category"]) == ["compute", "compute", "communication"]
    with open(GPU / names[1], newline="") as handle:
        detail = list(csv.DictReader(handle))
    host = profile.tables["host_ops"]
    assert list(host["name"]) == [r["op_full_name"] for r in detail]
    assert list(host["count"]) == [int(r["op_occurrences"]) for r in detail]
    assert list(host["duration_us"]) == [float(r["op_total_time(us)"]) for r in detail]
    assert "op_stats" not in profile.tables  # derived from the kernels instead


def test_op_stats_from_the_type_table_alone(tmp_path: Path) -> None:
    profile = read_one(folder_with(tmp_path, GPU / "gpu_op_type_info_0.csv"))
    stats = profile.tables["op_stats"].set_index("op_type")
    assert list(stats.index) == ["Add", "MatMul"] and set(stats["core_type"]) == {"GPU"}
    assert stats.loc["Add", "count"] == 4 and stats.loc["MatMul", "total_us"] == 120.0
    assert stats.loc["MatMul", "ratio"] == pytest.approx(120 / 200)


@pytest.mark.parametrize(
    ("name", "text", "problem"),
    [
        ("gpu_timeline_display_0.json", "[{", "truncated or invalid JSON: no complete event"),
        ("gpu_timeline_display_0.json", '{"a": 1}', "no traceEvents array in this JSON object"),
        ("gpu_timeline_display_0.json", "[1, 2", "truncated or invalid JSON: no complete event"),
        ("dynamic_shape_info_0.json", '{"Add": 3}', "neither the GPU layout"),
        ("dynamic_shape_info_0.json", '{"Add": []}', "no operator or kernel rows"),
        ("gpu_activity_data_0.csv", "name,type\nk,cuLaunchKernel\n", "missing column"),
    ],
)
def test_bad_gpu_file_is_one_warning(tmp_path: Path, name: str, text: str, problem: str) -> None:
    (tmp_path / name).write_text(text)
    shutil.copy(GPU / "gpu_op_type_info_0.csv", tmp_path)  # something readable beside it
    profile = read_one(tmp_path)
    (warning,) = profile.warnings
    assert Path(warning.file).name == name and problem in warning.problem


def test_timeline_events_without_times_are_counted(tmp_path: Path) -> None:
    events = [
        {"name": "Add-op6", "ph": "X", "tid": 100002, "ts": 5.0, "dur": 2.0, "pid": 0},
        {"name": "Mul-op7", "ph": "X", "tid": 100002, "ts": "x", "dur": 2.0, "pid": 0},
        {"ph": "X", "tid": 100002, "ts": 1.0, "dur": 2.0, "pid": 0},
    ]
    (tmp_path / "gpu_timeline_display_0.json").write_text(json.dumps(events))
    profile = read_one(tmp_path)
    assert list(profile.tables["host_ops"]["name"]) == ["Add-op6"]
    (warning,) = profile.warnings
    assert warning.problem == "2 events without a name, ts or dur skipped"


def long_timeline(folder: Path, copies: int) -> Path:
    """The fixture's timeline (4 steps) written `copies` times, copy k shifted by k x 4 ms
    with its steps numbered on, its metadata once."""
    events = json.loads((GPU / "gpu_timeline_display_0.json").read_text())
    folder.mkdir()
    written = []
    for k in range(copies):
        for event in events:
            if event.get("ph") == "M":
                if not k:
                    written.append(json.dumps(event))
                continue
            moved = {**event, "ts": event["ts"] + k * 4000.0}
            if moved["tid"] == 100000:
                moved["name"] = str(int(moved["name"]) + 4 * k)
            written.append(json.dumps(moved))
    (folder / "gpu_timeline_display_0.json").write_text("[" + ", ".join(written) + "]")
    return folder


def test_a_long_timeline_is_read_a_batch_at_a_time(tmp_path: Path) -> None:
    """1,000 and 3,000 copies of the timeline (4 and 11 MB, both past one batch of events):
    the tables are that many times one copy's, and the peak of traced memory grows by less
    than twice the file (the kept columns and the tables; decoded whole, 17 times the file)."""
    one = read_one(long_timeline(tmp_path / "x1", 1)).tables  # also loads every module first

    def traced_read(copies: int) -> tuple[int, int]:
        folder = long_timeline(tmp_path / f"x{copies}", copies)
        profile, peak = traced_peak(lambda: read_one(folder))
        tables = profile.tables
        for table in ("device_ops", "host_ops", "steps"):
            assert len(tables[table]) == copies * len(one[table]) > 0, table
        return peak, (folder / "gpu_timeline_display_0.json").stat().st_size

    small_peak, small_size = traced_read(1_000)
    large_peak, large_size = traced_read(3_000)
    assert large_peak - small_peak < 2 * (large_size - small_size), (small_peak, large_peak)


def test_a_cut_timeline_keeps_its_events_up_to_the_cut(tmp_path: Path) -> None:
    folder = long_timeline(tmp_path / "cut", 10)
    path = folder / "gpu_timeline_display_0.json"
    whole = read_one(folder).tables["device_ops"]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    profile = read_one(folder)
    (warning,) = profile.warnings
    assert re.fullmatch(r"truncated timeline: \d+ events recovered", warning.problem)
    kernels = profile.tables["device_ops"]
    assert 0 < len(kernels) < len(whole)
    pd.testing.assert_series_equal(kernels["name"], whole["name"].iloc[: len(kernels)])


def profile_of(**tables: pd.DataFrame) -> Profile:
    return Profile(
        ProfileMeta("test", "memory"), {name: conform(name, df) for name, df in tables.items()}
    )


def test_shape_sets_per_step_not_per_run() -> None:
    """Two layers calling aten::mm with different shapes every step are not dynamic; a third
    shape appearing in one step is one change, and the change back another."""
    shapes = {"a": "[[8, 64], [64, 64]]", "b": "[[8, 64], [64, 256]]", "c": "[[6, 64], [64, 64]]"}
    runs = [(1, "a", 50), (1, "b", 90), (2, "a", 50), (2, "b", 90), (3, "c", 80), (3, "b", 90)]
    runs += [(4, "a", 50), (4, "b", 90)]
    host = pd.DataFrame(
        {
            "name": "aten::mm",
            "kind": "aten",
            "step": [s for s, _, _ in runs],
            "input_shapes": [shapes[k] for _, k, _ in runs],
            "duration_us": [float(d) for _, _, d in runs],
        }
    )
    profile = profile_of(host_ops=host)
    derive(profile, ["dynamic_shape_ops"], PROVIDERS)
    (row,) = profile.tables["dynamic_shape_ops"].to_dict("records")
    # per step: 140, 140, 170, 140. Step 3's set (c + b) runs in no other step, so its 30 µs
    # above the others cannot be told from c's work: not counted, an unmatched change; the
    # change back at step 4 costs nothing against steps 1 and 2
    assert (row["source"], row["shapes"], row["variants"], row["changes"]) == ("host_ops", 3, 2, 2)
    assert row["unmatched_changes"] == 1
    assert row["excess_us"] == 0.0 and row["total_us"] == 590.0
    steady = profile_of(host_ops=host[host["step"] != 3])
    derive(steady, ["dynamic_shape_ops"], PROVIDERS)
    assert steady.tables["dynamic_shape_ops"]["variants"].tolist() == [1]


def test_operators_seen_in_one_step_are_left_out() -> None:
    device = pd.DataFrame(
        {
            "name": ["x", "y", "y"],
            "core_type": "GPU",
            "category": "compute",
            "step": [1, 1, 2],
            "input_shapes": ["1", "2", "3"],
            "duration_us": [1.0, 2.0, 3.0],
        }
    )
    profile = profile_of(device_ops=device)
    derive(profile, ["dynamic_shape_ops"], PROVIDERS)
    assert profile.tables["dynamic_shape_ops"]["name"].tolist() == ["y"]


def write_ascend_dynamic_run(folder: Path, shapes: list[str]) -> None:
    """A 3-step MindSpore Ascend run in the old layout, hand-built from the documented files:
    step_trace_raw (10 ns ticks; the last row is MindSpore's average row), the AI Core
    timeline (ms) and dynamic_shape_info in the Ascend layout (DynamicFrameWorkParser: per
    operator its n-th run's op_summary Task Duration in µs and framework_raw shape text)."""
    trace = [
        "step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,fp_and_bp,tail"
    ]
    timeline = ["op_name, stream_id, start_time(ms), duration(ms)"]
    add_us = [10.0, 50.0, 12.0]
    for i, us in enumerate(add_us):
        start = 1_000_000 + i * 100_000  # ticks: one step per ms
        trace.append(
            f"{i + 1},{start},{start + 100_000},100000,{start},{start + 90_000},0,90000,10000"
        )
        ms = start / 100_000
        timeline.append(f"Default/network/Add-op6,5,{ms + 0.1},{us / 1000}")
        timeline.append(f"Default/network/MatMul-op1,5,{ms + 0.2},0.1")
    trace.append("-,0,0,0,0,0,0,0,0")
    (folder / "step_trace_raw_0_detail_time.csv").write_text("\n".join(trace) + "\n")
    (folder / "output_timeline_data_0.txt").write_text("\n".join(timeline) + "\n")
    dynamic = {
        "Add": [{"Add-op6": {"op_exe_time": add_us, "op_shape": shapes, "op_exe_occurrences": 3}}],
        "MatMul": [
            {
                "MatMul-op1": {
                    "op_exe_time": [100.0] * 3,
                    "op_shape": ["FLOAT,ND,32,64,FLOAT,ND,64,64"] * 3,
                    "op_exe_occurrences": 3,
                }
            }
        ],
        "op_type": {"Add": [24.0], "MatMul": [100.0]},
    }
    (folder / "dynamic_shape_info_0.json").write_text(json.dumps(dynamic))


def test_ascend_layout_gives_each_task_the_shape_of_its_run(tmp_path: Path) -> None:
    shapes = ["FLOAT,ND,32,1", "FLOAT,ND,48,1", "FLOAT,ND,48,1"]
    write_ascend_dynamic_run(tmp_path, shapes)
    profile = read_one(tmp_path)
    assert profile.meta.device_kind == "NPU" and profile.warnings == []
    ops = profile.tables["device_ops"].sort_values("start_us")
    add = ops[ops["name"].str.endswith("Add-op6")]
    assert list(add["input_shapes"]) == shapes
    assert list(add["duration_us"]) == pytest.approx([10.0, 50.0, 12.0])

    (analysis,) = analyze(tmp_path, select=["OP-013"]).analyses
    (finding,) = analysis.findings
    # Add-op6 per step 10, 50 (new shape), 12: median 12, 50 - 12 = 38 of 3 steps of 1 ms
    assert finding.impact_us == pytest.approx(38.0)
    assert finding.values["ratio"] == pytest.approx(38 / 3000)
    assert any("Cell.set_inputs" in s for s in finding.suggestions)


def test_ascend_layout_with_counts_that_do_not_match_keeps_framework_shapes(
    tmp_path: Path,
) -> None:
    write_ascend_dynamic_run(tmp_path, ["a", "b", "c"])
    raw = json.loads((tmp_path / "dynamic_shape_info_0.json").read_text())
    raw["Add"][0]["Add-op6"]["op_exe_time"] = [10.0, 50.0]  # two runs for three tasks
    raw["Add"][0]["Add-op6"]["op_shape"] = ["a", "b"]
    (tmp_path / "dynamic_shape_info_0.json").write_text(json.dumps(raw))
    ops = read_one(tmp_path).tables["device_ops"]
    assert ops.loc[ops["name"].str.endswith("Add-op6"), "input_shapes"].isna().all()


def test_ascend_layout_without_a_timeline_is_one_warning(tmp_path: Path) -> None:
    write_ascend_dynamic_run(tmp_path, ["a", "b", "c"])
    (tmp_path / "output_timeline_data_0.txt").unlink()
    profile = read_one(tmp_path)
    (warning,) = profile.warnings
    assert Path(warning.file).name == "dynamic_shape_info_0.json"
    assert "no operator timeline" in warning.problem


KINETO_DYNAMIC = FIXTURE_DIR / "kineto_own" / "dynamic_batch.pt.trace.json.gz"


def test_real_pytorch_trace_with_a_changing_batch() -> None:
    """A genuine torch 2.13 CPU trace whose batch goes 8, 8, 64, 64, 8, 8 over its profiled
    steps (make_traces.py --only dynamic_batch): aten::linear's per-step shape sets, times and
    the time each change's step took above the settled steps of its shapes, recomputed from
    the raw events."""
    import gzip

    events = json.loads(gzip.decompress(KINETO_DYNAMIC.read_bytes()))["traceEvents"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"], int(e["name"].split("#")[1]))
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    per_step: dict[int, list[tuple[str, float]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") == "aten::linear":
            step = next(n for lo, hi, n in steps if lo <= e["ts"] < hi)
            dims = json.dumps(e["args"]["Input Dims"], separators=(", ", ": "))
            per_step.setdefault(step, []).append((dims, e["dur"]))
    order = sorted(per_step)
    sets = [" + ".join(sorted({d for d, _ in per_step[s]})) for s in order]
    times = [sum(t for _, t in per_step[s]) for s in order]
    changed = [i for i in range(1, len(sets)) if sets[i] != sets[i - 1]]
    assert [order[i] for i in changed] == [4, 6]  # batch 8 -> 64 at step 4, back at step 6

    def settled(i: int) -> float:  # the median of the other steps of i's shapes, no change
        return float(
            pd.Series(
                [times[j] for j in range(len(sets)) if sets[j] == sets[i] and j not in changed]
            ).median()
        )

    (analysis,) = analyze(KINETO_DYNAMIC, select=["OP-013"]).analyses
    table = analysis.tables["dynamic_shape_ops"].set_index("name")
    row = table.loc["aten::linear"]
    assert (row["source"], row["steps"], row["variants"], row["changes"]) == (
        "host_ops",
        6,
        2,
        2,
    )
    assert row["shapes"] == 6  # three layers, two batch sizes
    assert row["total_us"] == pytest.approx(sum(times))
    assert row["excess_us"] == pytest.approx(sum(max(0.0, times[i] - settled(i)) for i in changed))
    assert row["unmatched_changes"] == 0  # steps 5 and 7 ran each batch size again
    # nested calls with shapes are left to their caller: aten::addmm runs inside aten::linear
    assert "aten::addmm" not in table.index and "AddmmBackward0" in table.index
    assert set(table["variants"]) == {1, 2}  # the optimizer's ops keep their shapes
    # the rule fires exactly when that first-time cost passes 1%
    dynamic = table[(table["variants"] >= 2) & (table["steps"] >= 3)]
    steps_table = analysis.tables["steps"]
    span = steps_table["end_us"].max() - steps_table["start_us"].min()
    ratio = dynamic["excess_us"].sum() / span
    assert analysis.evaluation.outcomes["OP-013"] == ("fired" if ratio > 0.01 else "passed")


def test_op_013_reads_in_chinese() -> None:
    (analysis,) = analyze(GPU, select=["OP-013"], lang="zh").analyses
    (finding,) = analysis.findings
    assert finding.message.startswith("1 个算子的输入 shape 在迭代之间变化（共 1 次变化）；变化后")
    assert "（4 个迭代中有 2 种 shape）。" in finding.message


@pytest.mark.parametrize("seed", range(5))
def test_per_operator_medians_are_numpy_medians(seed: int) -> None:
    """dynamic_shape_ops' medians of each operator's step times, from one sort of all of
    them, are np.median's to the bit (odd and even counts, ties, one step)."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 9, size=40)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    group = np.repeat(np.arange(len(sizes)), sizes)
    values = rng.choice([0.1, 0.2, 0.3, 1e-7, 123456.789, 3.0], size=int(sizes.sum()))
    expected = [np.median(values[a : a + n]) for a, n in zip(starts, sizes)]
    assert _medians(values, group, starts, sizes).tolist() == expected


@pytest.mark.parametrize("seed", range(5))
def test_settled_medians_are_each_shape_sets_numpy_median(seed: int) -> None:
    """Each per-step group's reference: np.median of its operator's settled groups (not
    right after a change) with its shape set, NaN where there are none."""
    rng = np.random.default_rng(seed)
    count = 60
    operator = np.sort(rng.integers(0, 6, size=count))
    set_codes = rng.integers(0, 4, size=count)
    changed = rng.random(count) < 0.4
    times = rng.choice([0.1, 0.2, 3.0, 1e-7, 123.456], size=count)
    expected = []
    for op, code in zip(operator.tolist(), set_codes.tolist()):
        same = times[(operator == op) & (set_codes == code) & ~changed]
        expected.append(float(np.median(same)) if len(same) else None)
    got = _settled_medians(times, operator, set_codes, changed)
    assert [None if np.isnan(v) else float(v) for v in got] == expected
