"""MindSpore old-layout profiler folder reader.

Fixtures: tests/fixtures/real/mindspore_legacy (genuine MindInsight test resources, see its
PROVENANCE.md). Expected numbers are computed here from the raw files with the csv module.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURE_DIR

from advisor.api import analyze
from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.model import contract_problems
from advisor_plugins.mindspore_legacy import MindSporeLegacyReader

SHARED = FIXTURE_DIR / "real" / "mindspore_legacy"
RUN2 = SHARED / "run_2_profiler"
MISC = SHARED / "profiler_misc"
READER = MindSporeLegacyReader()


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh, skipinitialspace=True))


def by_rank(path: Path) -> dict[int, object]:
    return {p.meta.rank: p for p in READER.read(path)}


def test_detects_profiler_folders_by_names_only(tmp_path: Path) -> None:
    assert READER.detect(RUN2) and READER.detect(MISC)
    assert not READER.detect(tmp_path)
    (tmp_path / "framework_raw_0.csv").write_text("x\n")
    assert not READER.detect(tmp_path)  # operator info alone is not a profile
    assert not READER.detect(RUN2 / "step_trace_raw_1_detail_time.csv")


def test_one_profile_per_rank_and_contract() -> None:
    profiles = by_rank(MISC)
    assert sorted(profiles) == [0, 1, 10]
    for profile in profiles.values():
        assert contract_problems(profile) == []
        assert profile.warnings == []
    assert set(profiles[0].tables) == {
        "steps",
        "pipeline_ops",
        "queues",
        "cpu_usage",
        "utilization",
        "device_ops",  # the GPU kernel and operator of gpu_timeline_display_0.json
        "host_ops",
        "metadata",  # framework.mode graph: the step trace
    }
    assert set(profiles[1].tables) == {"device_ops"}


def test_steps_drop_the_average_row_and_convert_ticks() -> None:
    raw = rows(MISC / "step_trace_raw_0_detail_time.csv")
    real = [r for r in raw if r["step_num"] != "-"]
    assert raw[-1]["step_num"] == "-"
    steps = by_rank(MISC)[0].tables["steps"]
    assert list(steps["step"]) == [int(r["step_num"]) for r in real]
    origin = min(int(r["fp_point"]) for r in real)
    second = real[1]
    got = steps.iloc[1]
    # 10 ns ticks -> µs; a step starts at FP start, the data wait before it is separate
    assert got["start_us"] == pytest.approx((int(second["fp_point"]) - origin) / 100)
    assert got["duration_us"] == pytest.approx(
        (int(second["fp_and_bp"]) + int(second["tail"])) / 100
    )
    assert got["data_aug_bound_us"] == pytest.approx(int(second["iteration_interval"]) / 100)
    assert got["grad_refresh_us"] == pytest.approx(int(second["tail"]) / 100)
    reduce_cols = [c for c in second if c.startswith("stream_") and not c.endswith("_point")]
    assert len(reduce_cols) == 4
    assert got["reduce_us"] == pytest.approx(sum(int(second[c]) for c in reduce_cols) / 100)


def test_a_step_trace_marks_the_run_as_graph_mode(tmp_path: Path) -> None:
    """MindSpore writes a step trace in graph mode only (its PyNative profiling gives
    operators, the timeline and the data pipeline): a rank with one is recorded as graph mode,
    so rules do not advise graph mode to it; without one nothing is claimed."""
    metadata = by_rank(RUN2)[1].tables["metadata"]
    (row,) = metadata[metadata["key"] == "framework.mode"].itertuples()
    assert (row.value, row.source) == ("graph", "step_trace_raw_1_detail_time.csv")
    without = tmp_path / "profiler"
    shutil.copytree(RUN2, without)
    (without / "step_trace_raw_1_detail_time.csv").unlink()
    for profile in READER.read(without):
        table = profile.tables.get("metadata")
        assert table is None or "framework.mode" not in set(table["key"])


def test_average_row_with_zero_step_is_not_a_step() -> None:
    raw = rows(RUN2 / "step_trace_raw_1_detail_time.csv")
    assert raw[-1]["step_num"] == "0"
    steps = by_rank(RUN2)[1].tables["steps"]
    assert list(steps["step"]) == [1]
    assert steps["duration_us"].iloc[0] == pytest.approx(int(raw[0]["total"]) / 100)


def test_host_and_device_queues() -> None:
    profile = by_rank(RUN2)[1]
    queues = profile.tables["queues"]
    host = queues[queues["queue"] == "host"]
    lines = [
        line.split() for line in (RUN2 / "device_queue_profiling_1.txt").read_text().splitlines()
    ]
    sizes = [ln for ln in lines if ln[0] == "1"]
    assert list(host["size"]) == [float(ln[3]) for ln in sizes]
    assert list(host["capacity"]) == [float(ln[1]) for ln in sizes]
    assert list(host["empty"]) == [ln[3] == "0" for ln in sizes]
    device = queues[queues["queue"] == "device"].reset_index(drop=True)
    getnext = [ln.split() for ln in (RUN2 / "minddata_aicpu_1.txt").read_text().splitlines()]
    assert list(device["size"]) == [float(g[3]) for g in getnext]
    assert list(device["step"]) == [1, 2, 3]
    assert list(device["wait_us"]) == [float(int(g[2]) - int(g[1])) for g in getnext]
    # GetNext µs and step-trace ticks share the device clock: rebased on one origin
    step_trace = rows(RUN2 / "step_trace_raw_1_detail_time.csv")[0]
    fp_us = int(step_trace["fp_point"]) / 100
    origin = min(
        fp_us,
        int(getnext[0][1]),
        min(int(r["run_start"]) for r in rows(RUN2 / "aicpu_intermediate_1.csv")),
    )
    assert device["time_us"].iloc[0] == pytest.approx(int(getnext[0][1]) - origin)
    assert profile.tables["steps"]["start_us"].iloc[0] == pytest.approx(fp_us - origin)


def test_pipeline_operators_with_input_queue_usage() -> None:
    ops = by_rank(MISC)[0].tables["pipeline_ops"].set_index("op_id")
    raw = {int(r["op_id"]): r for r in rows(MISC / "minddata_pipeline_raw_0.csv")}
    assert list(ops["op_type"]) == [raw[i]["op_type"] for i in sorted(raw)]
    assert ops.loc[2, "workers"] == int(raw[2]["num_workers"])
    assert ops.loc[1, "queue_usage"] == pytest.approx((10 + 20 + 30) / 3 / 64)
    assert ops.loc[1, "children"] == 2 and ops.loc[2, "children"] == 0
    assert ops.loc[1, "parent"] == 0
    # Shuffle reads both TFReaders' queues: mean of their usages
    assert ops.loc[1, "input_queue_usage"] == pytest.approx(20 / 64)
    assert ops.loc[0, "input_queue_usage"] == pytest.approx(20 / 64)
    assert ops["queue_usage"].isna().loc[0]  # Batch writes no queue of its own here
    assert ops.loc[2, "queue_empty_ratio"] == 0.0
    run2 = by_rank(RUN2)[1].tables["pipeline_ops"].set_index("op_id")
    assert run2.loc[0, "queue_empty_ratio"] == 0.5  # sizes [0, 2]
    assert run2.loc[0, "queue_samples"] == 2


def test_device_ops_from_timeline_aicpu_and_framework_info() -> None:
    profile = by_rank(RUN2)[1]
    ops = profile.tables["device_ops"]
    timeline = rows(RUN2 / "output_timeline_data_1.txt")
    aicpu = rows(RUN2 / "aicpu_intermediate_1.csv")
    assert len(ops) == len(timeline) + len(aicpu)
    core = ops[ops["core_type"] == "AI_CORE"]
    assert core["duration_us"].sum() == pytest.approx(
        sum(float(r["duration(ms)"]) for r in timeline) * 1000
    )
    cpu = ops[ops["core_type"] == "AI_CPU"]
    assert list(cpu["duration_us"]) == [
        float(int(r["run_end"]) - int(r["run_start"])) for r in aicpu
    ]
    framework = {r["full_op_name"]: r for r in rows(RUN2 / "framework_raw_1.csv")}
    first = core.iloc[0]
    assert first["op_type"] == framework[first["name"]]["op_type"]
    assert first["block_dim"] == int(framework[first["name"]]["block_dim"])
    trans = core[core["name"] == "Default/TransData-op118"].iloc[0]
    assert trans["input_shapes"] == "2,3,227,227"
    assert trans["output_shapes"] == "2,1,227,227,16"


def test_operator_totals_without_a_timeline() -> None:
    ops = by_rank(MISC)[1].tables["device_ops"]
    detail = rows(MISC / "aicore_intermediate_1_detail.csv")
    assert ops["duration_us"].sum() == pytest.approx(
        sum(float(r["execution_time"]) for r in detail) * 1000
    )
    assert "start_us" not in ops.columns
    assert set(ops["op_type"]) >= {"MatMul", "Conv2D", "Cast"}


def test_op_stats_from_type_file_when_no_operator_rows(tmp_path: Path) -> None:
    shutil.copy(MISC / "aicore_intermediate_1_type.csv", tmp_path)
    (profile,) = READER.read(tmp_path)
    stats = profile.tables["op_stats"].set_index("op_type")
    raw = {r["kernel_type"]: r for r in rows(MISC / "aicore_intermediate_1_type.csv")}
    total = sum(float(r["total_time"]) for r in raw.values())
    assert stats.loc["MatMul", "total_us"] == pytest.approx(
        float(raw["MatMul"]["total_time"]) * 1000
    )
    assert stats.loc["MatMul", "count"] == 9
    assert stats.loc["MatMul", "ratio"] == pytest.approx(float(raw["MatMul"]["total_time"]) / total)


def test_bad_input_warns_and_keeps_the_rest(tmp_path: Path) -> None:
    shutil.copy(RUN2 / "minddata_pipeline_raw_1.csv", tmp_path / "minddata_pipeline_raw_1.csv")
    (tmp_path / "device_queue_profiling_1.txt").write_text(
        "1 64 1 0 10\ngarbage here\n1 64 2 5 20\n1 64 x 5 20\n"
    )
    (tmp_path / "minddata_aicpu_1.txt").write_text(
        "GetNext_dequeue_wait 100 150 0\nGetNext_dequeue_wait 200\n"
    )
    (tmp_path / "step_trace_raw_1_detail_time.csv").write_text(
        "step_num,start_point,end_point\n1,2,3\n"
    )
    (profile,) = READER.read(tmp_path)
    messages = [str(w) for w in profile.warnings]
    assert all("\n" not in m for m in messages)
    assert any(
        "device_queue_profiling_1.txt:2" in m and "2 lines are not" in m and "garbage here" in m
        for m in messages
    )
    assert any("minddata_aicpu_1.txt:2" in m and "1 line is not" in m for m in messages)
    assert any(
        "step_trace_raw_1_detail_time.csv" in m and "missing column 'total'" in m for m in messages
    )
    queues = profile.tables["queues"]
    assert list(queues["size"]) == [0.0, 5.0, 0.0]
    assert list(queues["queue"]) == ["host", "host", "device"]
    assert "pipeline_ops" in profile.tables and "steps" not in profile.tables


def test_cut_short_step_trace_and_bad_cells(tmp_path: Path) -> None:
    (tmp_path / "step_trace_raw_2_detail_time.csv").write_text(
        "step_num,start_point,end_point,total,fp_point,bp_point,iteration_interval,"
        "fp_and_bp,tail\n"
        "1,1000,2000,1000,1000,1800,0,800,200\n"
        "oops,1,1,1,1,1,1,1,1\n"
        "2,2000,3500,1500,2300,3200,300,900,300\n"
    )
    (profile,) = READER.read(tmp_path)
    messages = [str(w) for w in profile.warnings]
    assert any(":4" in m and "no average row" in m for m in messages)
    assert any(":3" in m and "'oops'" in m for m in messages)
    steps = profile.tables["steps"]
    assert list(steps["step"]) == [1, 2]
    assert list(steps["duration_us"]) == [10.0, 12.0]  # (2000-1000)/100, (3500-2300)/100


def test_folder_with_nothing_readable_raises_one_line(tmp_path: Path) -> None:
    (tmp_path / "minddata_pipeline_raw_3.csv").write_text("")
    with pytest.raises(UnreadableInput) as info:
        READER.read(tmp_path)
    assert str(tmp_path) in str(info.value) and "\n" not in str(info.value)


def test_cli_reports_data_rules_on_the_real_fixture(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from advisor.cli import main

    result = CliRunner().invoke(main, ["run", str(RUN2), "-o", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    (report,) = [json.loads(p.read_text()) for p in tmp_path.glob("prof_rule_*.json")]
    # the host queue was sampled once and each pipeline queue twice: data rules that judge
    # shares of samples need more (min_batches, min_samples), so they pass, not fire
    assert report["rules"]["DATA-001"]["outcome"] == "passed"
    assert report["rules"]["DATA-003"]["outcome"] == "passed"
    assert report["rules"]["OP-005"]["outcome"] == "fired"  # MatMul, 86% of operator time


def test_cpu_utilisation_per_scope_and_sample() -> None:
    raw = json.loads((MISC / "minddata_cpu_utilization_0.json").read_text())
    profile = by_rank(MISC)[0]
    cpu = profile.tables["cpu_usage"]
    system = cpu[cpu["scope"] == "system"]
    device = raw["device_info"]
    assert list(system["sample"]) == list(range(len(raw["time_stamp"])))
    assert list(system["user_pct"]) == device["user_utilization"]
    assert list(system["sys_pct"]) == device["sys_utilization"]
    assert list(system["io_pct"]) == device["io_utilization"]
    assert list(system["idle_pct"]) == device["idle_utilization"]
    assert list(system["runnable"]) == device["runable_processes"]
    assert list(system["context_switches"]) == device["context_switch_count"]
    assert set(cpu["cpus"]) == {raw["cpu_processor_num"]}
    process = cpu[cpu["scope"] == "process"]
    assert list(process["user_pct"]) == raw["process_info"]["user_utilization"]
    assert process["io_pct"].isna().all()
    op = raw["op_info"][0]
    pipeline = {int(r["op_id"]): r for r in rows(MISC / "minddata_pipeline_raw_0.csv")}
    op_rows = cpu[cpu["scope"] == "pipeline_op"]
    assert set(op_rows["op_id"]) == {op["op_id"]}
    assert set(op_rows["op_type"]) == {pipeline[op["op_id"]]["op_type"]}
    assert set(op_rows["workers"]) == {int(pipeline[op["op_id"]]["num_workers"])}
    # pipeline_ops.cpu_pct: mean over samples of user + sys, as MindSpore's analyser sums it
    busy = [
        u + s
        for u, s in zip_strict(op["metrics"]["user_utilization"], op["metrics"]["sys_utilization"])
    ]
    ops = profile.tables["pipeline_ops"].set_index("op_id")
    assert ops.loc[op["op_id"], "cpu_pct"] == pytest.approx(sum(busy) / len(busy))
    assert ops["cpu_pct"].drop(op["op_id"]).isna().all()  # no samples for the others


def test_cpu_file_alone_skips_op_id_minus_one(tmp_path: Path) -> None:
    data = {
        "cpu_processor_num": 8,
        "time_stamp": [1, 2],
        "device_info": {"user_utilization": [40, 60], "sys_utilization": [5, 7]},
        "op_info": [
            {"op_id": -1, "metrics": {"user_utilization": [9, 9]}},
            {"op_id": 0, "metrics": {"user_utilization": [70, 90], "sys_utilization": [10, 10]}},
        ],
    }
    (tmp_path / "minddata_cpu_utilization_4.json").write_text(json.dumps(data))
    assert READER.detect(tmp_path)
    (profile,) = READER.read(tmp_path)
    assert contract_problems(profile) == [] and profile.warnings == []
    cpu = profile.tables["cpu_usage"]
    assert list(cpu["scope"]) == ["system", "system", "pipeline_op", "pipeline_op"]
    assert list(cpu["op_id"].dropna()) == [0, 0]
    assert "pipeline_ops" not in profile.tables


def test_bad_cpu_file_warns_and_keeps_the_rest(tmp_path: Path) -> None:
    shutil.copy(MISC / "minddata_pipeline_raw_0.csv", tmp_path / "minddata_pipeline_raw_0.csv")
    data = {
        "cpu_processor_num": 8,
        "device_info": {"user_utilization": [40, 60], "sys_utilization": "high"},
        "process_info": [1, 2],
        "op_info": [
            {"op_id": 1, "metrics": {"user_utilization": [50, 70]}},
            {"metrics": {}},
            "junk",
        ],
    }
    (tmp_path / "minddata_cpu_utilization_0.json").write_text(json.dumps(data))
    (profile,) = READER.read(tmp_path)
    messages = [str(w) for w in profile.warnings]
    assert all("\n" not in m and "minddata_cpu_utilization_0.json" in m for m in messages)
    assert any("'device_info.sys_utilization' is not a list of numbers" in m for m in messages)
    assert any("'process_info' is not an object" in m for m in messages)
    assert any("2 op_info entries without op_id or metrics" in m for m in messages)
    cpu = profile.tables["cpu_usage"]
    assert list(cpu["user_pct"]) == [40.0, 60.0, 50.0, 70.0]
    assert "sys_pct" not in cpu  # the only sys list was unreadable
    assert profile.tables["pipeline_ops"].set_index("op_id").loc[1, "cpu_pct"] == 60.0


def test_cpu_file_that_is_not_json_warns(tmp_path: Path) -> None:
    shutil.copy(MISC / "minddata_pipeline_raw_0.csv", tmp_path / "minddata_pipeline_raw_0.csv")
    (tmp_path / "minddata_cpu_utilization_0.json").write_text('{"device_info": ')
    (profile,) = READER.read(tmp_path)
    (warning,) = profile.warnings
    assert "minddata_cpu_utilization_0.json" in str(warning) and "not valid JSON" in str(warning)
    assert "cpu_usage" not in profile.tables and "pipeline_ops" in profile.tables


def test_flops_per_operator_and_summary() -> None:
    profile = by_rank(MISC)[1]
    ops = profile.tables["device_ops"].set_index("name")
    with open(MISC / "flops_1.txt", newline="") as fh:
        flops = list(csv.reader(fh, skipinitialspace=True))
    header = flops[0]
    counts = [i for i, name in enumerate(header) if name.startswith("MFLOPs")]
    assert len(counts) == 2  # cube and vector
    for line in flops[1:]:
        assert ops.loc[line[0], "flops"] == pytest.approx(sum(float(line[i]) for i in counts) * 1e6)
    summary = json.loads((MISC / "flops_summary_0.json").read_text())
    assert by_rank(MISC)[0].meta.extra["flops_summary"] == pytest.approx(summary)
    assert "flops_summary" not in profile.meta.extra


def test_old_flops_header_and_bad_cells(tmp_path: Path) -> None:
    shutil.copy(MISC / "aicore_intermediate_1_detail.csv", tmp_path)
    (tmp_path / "flops_1.txt").write_text(
        "full_kernel_name, FLOPs, FLOPS, FLOPS utilization\n"
        "Default/Cast-op10, 12.5, 1, 1\n"
        "Default/TransData-op11, lots, 1, 1\n"
    )
    (tmp_path / "flops_summary_1.json").write_text("[1, 2]")
    (profile,) = READER.read(tmp_path)
    messages = [str(w) for w in profile.warnings]
    assert any("flops_1.txt:3" in m and "'lots'" in m for m in messages)
    assert any("flops_summary_1.json" in m and "not a JSON object" in m for m in messages)
    ops = profile.tables["device_ops"].set_index("name")
    assert ops.loc["Default/Cast-op10", "flops"] == 12.5e6
    assert pd.isna(ops.loc["Default/TransData-op11", "flops"])
    assert ops["flops"].notna().sum() == 1


def test_peak_memory_against_capacity_from_the_memory_summary(tmp_path: Path) -> None:
    """memory_usage_summary_{rank}.json holds GiB (MindSpore divides bytes by 1024**3)."""
    shutil.copy(MISC / "step_trace_raw_0_detail_time.csv", tmp_path)
    (tmp_path / "memory_usage_summary_0.json").write_text(
        json.dumps(
            {
                "capacity": 32.0,
                "allocations": 120,
                "deallocations": 118,
                "peak_mem": 30.5,
                "static_mem": 1.25,
            }
        )
    )
    (profile,) = READER.read(tmp_path)
    (row,) = profile.tables["memory"].to_dict("records")
    assert row["reserved_bytes"] == 30.5 * 1024**3
    assert row["capacity_bytes"] == 32 * 1024**3
    assert row["device"] == "NPU:0"
    assert "memory_usage_summary_0.json" in profile.meta.files_read
    assert contract_problems(profile) == []
    (finding,) = [f for f in analyze(tmp_path).findings if f.rule.id == "MEM-002"]
    assert finding.values["ratio"] == pytest.approx(30.5 / 32)


def test_memory_summary_without_a_number_warns(tmp_path: Path) -> None:
    shutil.copy(MISC / "step_trace_raw_0_detail_time.csv", tmp_path)
    (tmp_path / "memory_usage_summary_0.json").write_text('{"capacity": 32, "peak_mem": "x"}')
    (profile,) = READER.read(tmp_path)
    assert "memory" not in profile.tables and "steps" in profile.tables
    assert [(Path(w.file).name, w.problem) for w in profile.warnings] == [
        ("memory_usage_summary_0.json", "peak_mem is not a number of GiB: 'x'")
    ]


def test_flops_utilization_of_the_real_summary_feeds_eff_003() -> None:
    summary = json.loads((MISC / "flops_summary_0.json").read_text(encoding="utf-8"))
    profile = by_rank(MISC)[0]
    table = profile.tables["utilization"].set_index("measure")
    assert table.loc["flops_utilization", "value"] == summary["FLOPS_Utilization"]
    assert table.loc["flops_per_s", "value"] == pytest.approx(summary["FLOPS"] * 1e9)
    (finding,) = [f for f in analyze(MISC).findings if f.rule.id == "EFF-003"]  # rank 0 only
    assert finding.values["utilization_pct"] == summary["FLOPS_Utilization"]
