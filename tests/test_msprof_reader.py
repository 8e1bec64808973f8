"""The msprof reader and the shared file helpers, against hand-computed fixture values.

Expected numbers come from tests/fixtures/msprof/README.md (synthetic summaries) and from the
genuine raw-export timeline sample in tests/fixtures/real/cann_timeline.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DEMO, FIXTURE_DIR, traced_peak

from advisor.errors import UnreadableInput
from advisor.formats.cann_exports import parse_export_name, select_exports
from advisor.formats.csv_text import read_csv_strings
from advisor.formats.files import load_json
from advisor.formats.numbers import to_numbers
from advisor.hookspecs import Reader
from advisor.model import contract_problems
from advisor_plugins import msprof

FIXTURES = FIXTURE_DIR / "msprof"
SMALL = FIXTURES / "PROF_000001_20260105093000123_SMALLCASE"
MULTI = FIXTURES / "PROF_000002_20250610120000456_MULTIDEV"
RAW = FIXTURES / "PROF_000003_20250101000000000_RAWONLY"
REAL = FIXTURE_DIR / "real" / "cann_timeline" / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
SMALL_OP_SUMMARY = "mindstudio_profiler_output/op_summary_20260105093512.csv"


def read(path: Path) -> list:
    return msprof.MsprofReader().read(path)


def read_one(path: Path):
    profiles = read(path)
    assert len(profiles) == 1
    return profiles[0]


def copy_fixture(src: Path, tmp_path: Path) -> Path:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return dst


def relative(warning, profile) -> str:
    """The warned file relative to the profile folder (warnings carry the whole path)."""
    return Path(warning.file).relative_to(profile.meta.path).as_posix()


def problems(profile) -> list[tuple[str, str]]:
    return [(relative(w, profile), w.problem) for w in profile.warnings]


def assert_contract(profile) -> None:
    assert contract_problems(profile) == []


# ---------------------------------------------------------------------------------------------
# Plugin surface


def test_hook_returns_a_reader_with_name_and_formats() -> None:
    (reader,) = msprof.advisor_readers()
    assert isinstance(reader, Reader)
    assert reader.name == "msprof"
    assert reader.formats == ("CANN msprof export (PROF_XXX)",)


@pytest.mark.parametrize("path", [SMALL, MULTI, RAW, DEMO, REAL])
def test_detects_prof_folders(path: Path) -> None:
    assert msprof.MsprofReader().detect(path)


def test_detects_export_layout_without_prof_name(tmp_path: Path) -> None:
    (tmp_path / "run" / "device_3" / "timeline").mkdir(parents=True)
    assert msprof.MsprofReader().detect(tmp_path / "run")


def test_unrelated_folder_is_not_detected_and_not_read(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "device_x").mkdir()
    reader = msprof.MsprofReader()
    assert not reader.detect(tmp_path)
    assert not reader.detect(tmp_path / "data.csv")
    with pytest.raises(UnreadableInput, match="no msprof export found"):
        reader.read(tmp_path)


# ---------------------------------------------------------------------------------------------
# a. SMALLCASE: CANN 8.x merged summaries, hand-computed values


def test_small_meta() -> None:
    profile = read_one(SMALL)
    meta = profile.meta
    assert (meta.device_id, meta.source_format, meta.framework, meta.device_kind) == (
        "0",
        "msprof-summary",
        "CANN",
        "NPU",
    )
    assert sorted(meta.files_read) == sorted(
        [
            "device_0/info.json.0",
            *(
                f"mindstudio_profiler_output/{t}_20260105093512.csv"
                for t in ("op_summary", "step_trace", "op_statistic", "api_statistic")
            ),
        ]
    )
    assert meta.extra["ai_core_num"] == 24 and meta.extra["aiv_num"] == 48
    assert meta.extra["time_origin_us"] == 1767576605001000.0
    assert profile.warnings == []
    assert_contract(profile)


def test_small_steps_every_column() -> None:
    steps = read_one(SMALL).tables["steps"]
    expected = pd.DataFrame(
        {
            "step": [1, 2, 3, 4, 5],
            "start_us": [0.0, 9000, 19000, 28000, 39500],
            "end_us": [8000.0, 17000, 27500, 36500, 48500],
            "duration_us": [8000.0, 8000, 8500, 8500, 9000],
            "fp_bp_us": [6000.0, 6000, 6000, 6000, 7000],
            "grad_refresh_us": [2000.0, 2000, 2500, 2500, 2000],
            "data_aug_bound_us": [np.nan, 1000, 2000, 500, 3000],
            "reduce_us": [1400.0, 1400, 1600, 1400, 1000],
            "model_id": pd.array([1, 1, 1, 1, 1], dtype="Int64"),
        }
    )
    # the labels are equal; model.conform keeps them as an object Index (pandas 3: str)
    pd.testing.assert_frame_equal(
        steps[list(expected.columns)], expected, check_dtype=False, check_column_type=False
    )
    assert steps["step"].dtype == "int64" and steps["model_id"].dtype == "Int64"


def test_small_device_ops_per_core_type() -> None:
    ops = read_one(SMALL).tables["device_ops"]
    by_core = ops.groupby("core_type")["duration_us"].agg(["count", "sum"])
    assert by_core.to_dict("index") == {
        "AI_CORE": {"count": 10, "sum": 1500.0},
        "AI_VECTOR_CORE": {"count": 10, "sum": 400.0},
        "AI_CPU": {"count": 5, "sum": 120.0},
        "MIX_AIC": {"count": 2, "sum": 480.0},
        "COMMUNICATION": {"count": 9, "sum": 6800.0},
    }
    assert ((ops["core_type"] == "AI_CPU") & (ops["duration_us"] > 20)).sum() == 3
    assert ops["wait_us"].sum() == pytest.approx(38300.0)
    assert (ops["category"] == "communication").sum() == 9
    assert (ops["category"] == "compute").sum() == 27


def test_small_device_ops_cells() -> None:
    """Trailing tabs, quoted shapes, Block Num, N/A ids and PMU ratios of single rows."""
    ops = read_one(SMALL).tables["device_ops"].set_index("name")
    conv = ops.loc["model/layer1/conv1/Conv2D"]
    assert conv["start_us"] == 0.0  # `1767576605001000.000\t` parsed, then rebased
    assert conv["input_shapes"] == "8,3,224,224;64,3,7,7"
    assert conv["input_dtypes"] == "FLOAT16;FLOAT16"
    assert conv["output_shapes"] == "8,64,112,112"
    assert (conv["block_dim"], conv["stream"], conv["task_id"]) == (24, 2, 1)
    assert (conv["op_type"], conv["op_state"]) == ("Conv2D", "static")
    assert conv["mac_ratio"] == 0.8 and conv["aicore_time_us"] == 180.0
    assert pd.isna(conv["vec_ratio"])
    assert ops.loc["model/layer1/dense/MatMulV2", "start_us"] == 210.0
    assert ops.loc["model/layer1/attention/SoftmaxV2", "vec_ratio"] == 0.3
    assert ops.loc["model/layer1/attention/SoftmaxV2", "mte2_ratio"] == 0.9
    assert ops.loc["model/layer2/attention/FlashAttentionScore", "vec_ratio"] == 0.6
    assert ops.loc["model/layer3/NonZero", "op_state"] == "dynamic"
    comm = ops.loc["hcom_allReduce__010_0_1"]
    assert pd.isna(comm["stream"]) and pd.isna(comm["task_id"])
    assert (comm["category"], comm["start_us"], comm["duration_us"]) == (
        "communication",
        6100.0,
        800.0,
    )


def test_small_op_stats_ratio_is_a_fraction() -> None:
    stats = read_one(SMALL).tables["op_stats"].set_index(["op_type", "core_type"])
    assert stats["ratio"].to_dict() == pytest.approx(
        {
            ("Conv2D", "AI_CORE"): 0.4,
            ("MatMulV2", "AI_CORE"): 0.2,
            ("FlashAttentionScore", "MIX_AIC"): 0.192,
            ("SoftmaxV2", "AI_VECTOR_CORE"): 0.1,
            ("LayerNorm", "AI_VECTOR_CORE"): 0.06,
            ("DropOutGenMask", "AI_CPU"): 0.026,
            ("NonZero", "AI_CPU"): 0.012,
            ("GatherV2", "AI_CPU"): 0.01,
        }
    )
    row = stats.loc[("DropOutGenMask", "AI_CPU")]
    assert (row["count"], row["total_us"], row["avg_us"], row["min_us"], row["max_us"]) == (
        2,
        65.0,
        32.5,
        25.0,
        40.0,
    )


def test_small_host_ops_from_api_statistic() -> None:
    host = read_one(SMALL).tables["host_ops"]
    assert host[["name", "level", "kind", "duration_us", "count"]].values.tolist() == [
        ["aclmdlExecute", "AscendCL", "cann_api", 46000.0, 5],
        ["ModelExecute", "Model", "cann_api", 45500.0, 5],
        ["aclrtSynchronizeStream", "AscendCL", "cann_api", 2500.0, 5],
        ["rtStreamSynchronize", "Runtime", "cann_api", 2400.0, 5],
    ]


def test_merged_rows_split_by_device_id(tmp_path: Path) -> None:
    """A second Device_id in the merged files gives a second profile; host rows go to both."""
    prof = copy_fixture(SMALL, tmp_path)
    for path in (prof / "mindstudio_profiler_output").glob("*.csv"):
        lines = path.read_text().splitlines(keepends=True)
        extra = [f"1{line[1:]}" for line in lines[1:] if line.startswith("0,")]
        path.write_text("".join(lines + extra))
    first, second = read(prof)
    assert (first.meta.device_id, second.meta.device_id) == ("0", "1")
    for profile in (first, second):
        assert len(profile.tables["device_ops"]) == 36
        assert len(profile.tables["steps"]) == 5
        assert len(profile.tables["host_ops"]) == 4
    assert "ai_core_num" not in second.meta.extra  # no device_1/info.json.1


# ---------------------------------------------------------------------------------------------
# b. MULTIDEV: 7.x per-device summaries


def test_multidev_two_profiles_slices_and_newest_export() -> None:
    dev0, dev1 = read(MULTI)
    assert (dev0.meta.device_id, dev1.meta.device_id) == ("0", "1")
    assert (dev0.meta.rank, dev1.meta.rank) == (0, 1)
    for profile in (dev0, dev1):
        assert_contract(profile)
        assert len(profile.tables["steps"]) == 20
        assert profile.tables["device_ops"]["core_type"].value_counts().to_dict() == {
            "AI_CORE": 2740,
            "AI_CPU": 60,
            "COMMUNICATION": 40,
        }
        assert profile.meta.extra["ai_core_num"] == 32
    # slices: 1500 + 1340 rows, read in slice order
    assert "device_1/summary/op_summary_1_1_1_slice_1.csv" in dev1.meta.files_read
    assert dev1.tables["device_ops"]["start_us"].is_monotonic_increasing
    # newest op_statistic export wins, the older one is named in a warning
    stats = dev0.tables["op_stats"].set_index(["op_type", "core_type"])
    assert stats.loc[("MatMulV2", "AI_CORE"), "count"] == 940
    assert "device_0/summary/op_statistic_0_1_1_20250610120511.csv" in dev0.meta.files_read
    (warning,) = dev0.warnings
    assert relative(warning, dev0) == "device_0/summary/op_statistic_0_1_1_20250610115002.csv"
    assert "older export of op_statistic" in warning.problem
    assert dev1.warnings == []


def test_multidev_block_dim_and_unprefixed_pmu() -> None:
    ops = read(MULTI)[0].tables["device_ops"]
    core = ops[ops["core_type"] == "AI_CORE"]
    assert (core.loc[core["op_type"] != "Cast", "block_dim"] == 32).all()
    assert (core.loc[core["op_type"] == "Cast", "block_dim"] == 30).all()
    assert core["vec_ratio"].notna().all() and core["mac_ratio"].notna().all()
    assert ops.loc[ops["core_type"] == "AI_CPU", "mac_ratio"].isna().all()


def test_task_time_csv_used_without_op_summary(tmp_path: Path) -> None:
    prof = copy_fixture(MULTI, tmp_path)
    (prof / "device_0" / "summary" / "op_summary_0_1_1.csv").unlink()
    ops = read(prof)[0].tables["device_ops"]
    assert ops["core_type"].value_counts().to_dict() == {"AI_CORE": 2740, "AI_CPU": 60}
    assert (ops["category"] == "compute").all()
    assert ops["wait_us"].min() == 0.0 and ops["wait_us"].notna().all()


def test_old_header_start_time_in_ns(tmp_path: Path) -> None:
    """CANN <= 6.0: `Task Start Time` without unit is ns; `Block Dim`; no timestamp in name."""
    summary = tmp_path / "PROF_x" / "device_2" / "summary"
    summary.mkdir(parents=True)
    (summary / "op_summary_2_1_1.csv").write_text(
        "Model Name,Model ID,Task ID,Stream ID,Infer ID,Op Name,OP Type,Task Type,"
        "Task Start Time,Task Duration(us),Task Wait Time(us),Block Dim,Mix Block Dim\n"
        "resnet,1,3,2,1,conv1,Conv2D,AI_CORE,5000000000,10.5,0,32,0\n"
        "resnet,1,4,2,1,relu1,Relu,AI_CORE,5000012000,2,1.5,32,0\n"
    )
    profile = read_one(tmp_path / "PROF_x")
    assert profile.meta.device_id == "2"
    ops = profile.tables["device_ops"]
    assert ops["start_us"].tolist() == [0.0, 12.0]
    assert ops["block_dim"].tolist() == [32, 32]


# ---------------------------------------------------------------------------------------------
# The genuine raw-export timeline (MindSpore AlexNet, 2 devices, device 0 kept)


def test_real_timeline_steps() -> None:
    profile = read_one(REAL)
    assert profile.meta.source_format == "msprof-timeline"
    assert profile.meta.extra["ai_core_num"] == 32
    steps = profile.tables["steps"]
    assert len(steps) == 10
    first = steps.iloc[0]
    assert first["duration_us"] == pytest.approx(47587.81)
    assert first["fp_bp_us"] == pytest.approx(4236.1)
    assert first["grad_refresh_us"] == pytest.approx(43345.58)
    assert first["reduce_us"] == pytest.approx(41565.45)
    assert pd.isna(first["data_aug_bound_us"])
    assert steps.iloc[1]["data_aug_bound_us"] == pytest.approx(32134.95)
    assert first["end_us"] - first["start_us"] == pytest.approx(47587.81)
    assert (steps["model_id"] == 2).all()
    assert_contract(profile)


def test_real_timeline_device_comm_and_host_ops() -> None:
    profile = read_one(REAL)
    ops = profile.tables["device_ops"]
    counts = ops["core_type"].value_counts()
    assert (counts["AI_CORE"], counts["AI_CPU"], counts["COMMUNICATION"]) == (137, 2, 1)
    assert not ops["core_type"].str.startswith("NOTIFY").any()  # HCCL's own stream tasks
    cast = ops[ops["name"] == "Default/network-WithLossCell/_backbone-AlexNet/Cast-op239"]
    assert cast["op_type"].tolist() == ["Cast"]
    assert (cast["stream"].tolist(), cast["task_id"].tolist()) == ([2], [4])
    assert (ops["wait_us"] >= 0).all()
    (comm,) = profile.tables["comm_ops"].itertuples()
    assert (comm.name, comm.op, comm.transport) == (
        "Default/AllReduce-op534_0",
        "allreduce",
        "SDMA",
    )
    assert comm.duration_us == pytest.approx(41534.3)
    host = profile.tables["host_ops"]
    assert host[["name", "level", "kind"]].values.tolist() == [["Infer", "GE", "cann_api"]]
    assert profile.tables["steps"]["start_us"].min() >= 0
    assert min(t["start_us"].min() for t in profile.tables.values() if "start_us" in t) == 0.0


def test_raw_only_asks_for_export() -> None:
    with pytest.raises(UnreadableInput, match="msprof --export=on") as info:
        read(RAW)
    assert info.value.path == str(RAW)


def test_an_export_of_only_unread_kinds_is_refused_naming_its_files(tmp_path: Path) -> None:
    """A real vLLM Ascend export held only ai_core_utilization_*.csv: "no msprof export found
    (looked for ... mindstudio_profiler_output/*.csv ...)" read as if the CSV were not there."""
    prof = tmp_path / "PROF_000001_20260823165611236_00628059FDLKIHNK"
    (prof / "mindstudio_profiler_output").mkdir(parents=True)
    csv_file = prof / "mindstudio_profiler_output" / "ai_core_utilization_20260823165619.csv"
    csv_file.write_text("Device_id,Core ID,Metric,Value\n0,0,total_time(us),20.1\n")
    with pytest.raises(UnreadableInput) as info:
        read(prof)
    assert info.value.problem.startswith(
        "no msprof export advisor reads: mindstudio_profiler_output/"
        "ai_core_utilization_20260823165619.csv holds no table it reads (it reads "
    )
    assert "op_summary" in info.value.problem and "--task-time=on" in info.value.problem


# ---------------------------------------------------------------------------------------------
# Bad input: one warning naming the file and the problem, the other files still read


def test_empty_op_summary(tmp_path: Path) -> None:
    prof = copy_fixture(SMALL, tmp_path)
    (prof / SMALL_OP_SUMMARY).write_text("")
    profile = read_one(prof)
    assert (SMALL_OP_SUMMARY, "empty file (no header line)") in problems(profile)
    assert "device_ops" not in profile.tables
    assert len(profile.tables["steps"]) == 5 and "op_stats" in profile.tables


def test_header_only_op_summary(tmp_path: Path) -> None:
    prof = copy_fixture(SMALL, tmp_path)
    path = prof / SMALL_OP_SUMMARY
    path.write_text(path.read_text().splitlines(keepends=True)[0])
    profile = read_one(prof)
    assert (SMALL_OP_SUMMARY, "no data rows (header only)") in problems(profile)
    assert "device_ops" not in profile.tables


def test_truncated_task_time_json_falls_back_to_msprof_json(tmp_path: Path) -> None:
    """A cut task_time file gives its tasks up to the cut; the whole msprof json, which
    repeats them, stands in for it, and both lines say so."""
    prof = copy_fixture(REAL, tmp_path)
    path = prof / "device_0" / "timeline" / "task_time_0_2_1.json"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    profile = read_one(prof)
    assert problems(profile) == [
        ("device_0/timeline/task_time_0_2_1.json", "truncated trace: 243 events recovered"),
        (
            "device_0/timeline/task_time_0_2_1.json",
            "its device_ops are taken from device_0/timeline/msprof_0_2_1.json, which is complete",
        ),
    ]
    assert {w.reader for w in profile.warnings} == {"msprof"}
    counts = profile.tables["device_ops"]["core_type"].value_counts()
    assert (counts["AI_CORE"], counts["AI_CPU"]) == (137, 2)  # from msprof_0_2_1.json
    assert len(profile.tables["steps"]) == 10


def test_a_cut_timeline_with_no_whole_twin_gives_its_events_up_to_the_cut(
    tmp_path: Path,
) -> None:
    """The msprof json is the only source of the device tasks here: cut, its tasks before the
    cut are kept (one line says how many events), not the whole file dropped."""
    prof = copy_fixture(REAL, tmp_path)
    timeline = prof / "device_0" / "timeline"
    (timeline / "task_time_0_2_1.json").unlink()
    whole = read_one(copy_fixture(REAL, tmp_path / "whole")).tables["device_ops"]
    path = timeline / "msprof_0_2_1.json"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 3 // 4])
    profile = read_one(prof)
    ((file, problem),) = problems(profile)
    assert file == "device_0/timeline/msprof_0_2_1.json"
    assert re.fullmatch(r"truncated trace: \d+ events recovered", problem)
    ops = profile.tables["device_ops"]
    assert (
        0
        < (ops["category"] != "communication").sum()
        < (whole["category"] != "communication").sum()
    )
    assert "host_ops" in profile.tables


def test_op_summary_without_task_duration(tmp_path: Path) -> None:
    prof = copy_fixture(SMALL, tmp_path)
    path = prof / SMALL_OP_SUMMARY
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    drop = rows[0].index("Task Duration(us)")
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows([r[:drop] + r[drop + 1 :] for r in rows])
    profile = read_one(prof)
    (warning,) = profile.warnings
    assert (relative(warning, profile), warning.problem, warning.column) == (
        SMALL_OP_SUMMARY,
        "missing column 'Task Duration(us)'",
        "Task Duration(us)",
    )
    assert "device_ops" not in profile.tables
    assert {"steps", "op_stats", "host_ops"} <= set(profile.tables)


def test_text_in_numeric_column(tmp_path: Path) -> None:
    prof = copy_fixture(SMALL, tmp_path)
    path = prof / SMALL_OP_SUMMARY
    lines = path.read_text().splitlines(keepends=True)
    for number, bad in ((4, "abc"), (6, "12x")):  # file lines 4 and 6
        cells = next(csv.reader([lines[number - 1]]))
        cells[9] = bad  # Task Duration(us)
        lines[number - 1] = ",".join(f'"{c}"' if "," in c else c for c in cells) + "\n"
    path.write_text("".join(lines))
    profile = read_one(prof)
    (warning,) = profile.warnings
    assert (relative(warning, profile), warning.line, warning.column) == (
        SMALL_OP_SUMMARY,
        4,
        "Task Duration(us)",
    )
    assert warning.problem == "2 cells are not numbers (first: 'abc')"
    assert str(warning) == (
        f"{prof / SMALL_OP_SUMMARY}:4: 2 cells are not numbers (first: 'abc') "
        "(column 'Task Duration(us)')"
    )
    ops = profile.tables["device_ops"]
    assert ops["duration_us"].isna().sum() == 2 and len(ops) == 36
    assert len(profile.tables["steps"]) == 5


def test_unreadable_file(tmp_path: Path) -> None:
    prof = copy_fixture(SMALL, tmp_path)
    path = prof / "mindstudio_profiler_output" / "op_statistic_20260105093512.csv"
    path.chmod(0)
    try:
        profile = read_one(prof)
        if os.access(path, os.R_OK):  # root ignores the mode: the file is simply read
            assert profile.warnings == [] and "op_stats" in profile.tables
        else:
            (warning,) = profile.warnings
            assert (
                relative(warning, profile)
                == "mindstudio_profiler_output/op_statistic_20260105093512.csv"
            )
            assert warning.problem.startswith("cannot read file")
            assert "op_stats" not in profile.tables
        assert {"steps", "device_ops", "host_ops"} <= set(profile.tables)
    finally:
        path.chmod(0o644)


def test_all_files_broken_raises_with_the_problems(tmp_path: Path) -> None:
    prof = copy_fixture(SMALL, tmp_path)
    for path in (prof / "mindstudio_profiler_output").glob("*.csv"):
        path.write_text("")
    with pytest.raises(UnreadableInput, match="no readable msprof export.*empty file"):
        read(prof)


# ---------------------------------------------------------------------------------------------
# The bundled demo keeps the properties its README promises


def test_demo_shows_its_problems() -> None:
    profile = read_one(DEMO)
    assert_contract(profile)
    steps, ops = profile.tables["steps"], profile.tables["device_ops"]
    assert len(steps) == 10 and 300 <= len(ops) <= 600
    aug = steps["data_aug_bound_us"].mean() / steps["duration_us"].mean()
    assert 0.13 < aug < 0.17
    compute = ops[ops["category"] == "compute"]
    vector = compute[compute["core_type"] == "AI_VECTOR_CORE"]
    assert 0.37 < vector["duration_us"].sum() / compute["duration_us"].sum() < 0.45
    top = vector.groupby("op_type")["duration_us"].sum().nlargest(2).index
    assert set(top) == {"SoftmaxV2", "LayerNorm"}
    assert ((ops["core_type"] == "AI_CPU") & (ops["duration_us"] > 20)).sum() >= 3
    assert sum(p.stat().st_size for p in DEMO.rglob("*") if p.is_file()) < 300_000


# ---------------------------------------------------------------------------------------------
# advisor.formats: files, CSV text, numbers, export names


def test_load_json_repairs_only_known_trailers(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    for text, expected in (
        ('[{"a": 1}] [ true]', [{"a": 1}]),
        ("[1, 2]]", [1, 2]),
        ("[1, 2,]", [1, 2]),
    ):
        path.write_text(text)
        assert load_json(path) == expected
    for text, message in (
        ("", "empty file"),
        ("  \n", "empty file"),
        ('[{"a": 1}, {"b"', "truncated JSON (ends at byte 15)"),
        ('[1, 2] {"x": 1}', "invalid JSON at byte 7"),
        ("\xff\xfe", "invalid JSON at byte 0"),
    ):
        path.write_bytes(text.encode("latin-1"))
        with pytest.raises(UnreadableInput, match=message.replace("(", r"\(").replace(")", r"\)")):
            load_json(path)
    with pytest.raises(UnreadableInput, match="cannot read file"):
        load_json(tmp_path / "missing.json")


def test_read_csv_strings_duplicates_bom_tabs(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    path.write_bytes(
        '\ufeffID,Start(us),Dur,Start(us) ,Dur\t\n1,10.5\t,"1,5",20\t,N/A\n2, 11\t,3,,4\n'.encode()
    )
    names, frame = read_csv_strings(path)
    assert names == ["ID", "Start(us)", "Dur", "Start(us)", "Dur"]
    assert list(frame.columns) == ["ID", "Start(us)", "Dur", "Start(us)#2", "Dur#2"]
    assert frame.values.tolist() == [["1", "10.5", "1,5", "20", "N/A"], ["2", "11", "3", "", "4"]]
    path.write_text("a,b\n")
    names, frame = read_csv_strings(path)
    assert names == ["a", "b"] and frame.empty and list(frame.columns) == ["a", "b"]
    path.write_text("a,b\n1,2,3\n4\n")  # ragged rows: the C engine fallback
    told = []
    assert read_csv_strings(path, lambda f, p, **_: told.append(p))[1].values.tolist() == [
        ["1", "2"],
        ["4", ""],
    ]
    assert len(told) == 1 and "extra cells ignored" in told[0]


def test_to_numbers_reports_bad_cells_once() -> None:
    calls = []

    def warn(file, problem, *, line=None, column=None):
        calls.append((file, problem, line, column))

    cells = pd.Series(["1", " N/A", "2.5\t", "inf", "", "-", "None", "nan", "x", "-3e2"])
    values = to_numbers(cells, file="f.csv", column="c", warn=warn)
    assert values.dtype == "float64"
    assert values[[0, 2, 9]].tolist() == [1.0, 2.5, -300.0]
    assert values[[1, 3, 4, 5, 6, 7, 8]].isna().all()
    assert calls == [("f.csv", "2 cells are not numbers (first: 'inf')", 5, "c")]
    assert to_numbers(pd.Series(["1"]), file="f", column="c", warn=warn).tolist() == [1.0]
    assert len(calls) == 1


def test_a_renamed_summary_without_timestamp_is_read(tmp_path: Path) -> None:
    """A merged op_summary copied out and renamed `op_summary.csv` (TileLang's published
    trace_data does so): read as the export it is, where advisor said it 'holds no table it
    reads (it reads ... op_summary ...)'."""
    prof = tmp_path / "PROF_000001_NOTS"
    (prof / "mindstudio_profiler_output").mkdir(parents=True)
    shutil.copy(SMALL / SMALL_OP_SUMMARY, prof / "mindstudio_profiler_output" / "op_summary.csv")
    ops = read_one(prof).tables["device_ops"]
    expected = read_one(SMALL).tables["device_ops"]
    assert len(ops) == len(expected) > 0
    assert ops["duration_us"].sum() == pytest.approx(expected["duration_us"].sum())


def test_export_names_and_newest_selection(tmp_path: Path) -> None:
    name = parse_export_name("op_summary_1_1_1_slice_2_20250610120511.csv")
    assert (name.type, name.device, name.model, name.iteration, name.slice, name.timestamp) == (
        "op_summary",
        1,
        1,
        1,
        2,
        "20250610120511",
    )
    merged = parse_export_name("step_trace_slice_1_20260105093512.csv")
    assert (merged.type, merged.device, merged.slice) == ("step_trace", None, 1)
    old = parse_export_name("l2_cache_0_3.csv")
    assert (old.type, old.device, old.model, old.iteration) == ("l2_cache", 0, None, 3)
    assert parse_export_name("op_summary.csv") is None
    assert parse_export_name("op_summary.csv", bare=["op_summary"]).timestamp == ""
    assert parse_export_name("report.csv", bare=["op_summary"]) is None
    assert parse_export_name("info.json.0") is None
    files = [
        Path(n)
        for n in (
            "op_summary_slice_1_20260105093512.csv",
            "op_summary_slice_0_20260105093512.csv",
            "op_summary_20260101000000.csv",
            "op_summary_slice_0_20251231000000.csv",
            "msprof_0_2_1.json",
            "msprof_0_2_2.json",
            "README.md",
        )
    ]
    chosen, superseded = select_exports(files)
    assert chosen["op_summary"] == [
        Path("op_summary_slice_0_20260105093512.csv"),
        Path("op_summary_slice_1_20260105093512.csv"),
    ]
    assert chosen["msprof"] == [Path("msprof_0_2_1.json"), Path("msprof_0_2_2.json")]
    (old_export,) = superseded
    assert old_export.ignored == (
        Path("op_summary_20260101000000.csv"),
        Path("op_summary_slice_0_20251231000000.csv"),
    )


def test_a_far_off_task_time_is_ignored_and_named(tmp_path: Path) -> None:
    """One task at ts = -1e18 in task_time_*.json used to be the origin of every time."""
    import json
    import shutil

    folder = tmp_path / REAL.name
    shutil.copytree(REAL, folder)
    task_file = folder / "device_0" / "timeline" / "task_time_0_2_1.json"
    events = json.loads(task_file.read_text(encoding="utf-8"))
    task = next(e for e in events if e.get("ph") == "X")
    events.append({**task, "name": "broken_clock_task", "ts": -1e18})
    task_file.write_text(json.dumps(events), encoding="utf-8")
    profile, full = read_one(folder), read_one(REAL)
    assert "broken_clock_task" not in set(profile.tables["device_ops"]["name"])
    assert profile.tables["steps"]["start_us"].tolist() == pytest.approx(
        full.tables["steps"]["start_us"].tolist()
    )
    assert any(
        "more than a day away" in w.problem and "broken_clock_task" in w.problem
        for w in profile.warnings
    )


def test_split_devices_by_device_id_in_order_of_appearance() -> None:
    """Rows of a merged summary go to their Device_id's frame (first seen, first given);
    a missing or corrupt id is one warning naming the first such line, its rows dropped."""
    from advisor.formats.cann_csv import DEVICE_COLUMN
    from advisor_plugins.msprof.summaries import split_devices

    ids = ["1", "host", "0", "1", None, "x1", "0", "", "1"]
    frame = pd.DataFrame({"name": [f"op{i}" for i in range(len(ids))], DEVICE_COLUMN: ids})
    frame[DEVICE_COLUMN] = frame[DEVICE_COLUMN].astype(pd.Series(["text"]).dtype)
    told: list[tuple[str, int | None]] = []
    parts = split_devices(frame, "op_summary.csv", lambda f, p, **kw: told.append((p, kw["line"])))
    assert [(device, rows["name"].tolist()) for device, rows in parts] == [
        ("1", ["op0", "op3", "op8"]),
        ("host", ["op1"]),
        ("0", ["op2", "op6"]),
    ]
    assert all(rows.index.equals(pd.RangeIndex(len(rows))) for _, rows in parts)
    assert told == [("3 rows without a Device_id ignored", 6)]
    one = frame.iloc[[0, 3]].reset_index(drop=True)
    [(device, rows)] = split_devices(one, "op_summary.csv", lambda *a, **k: None)
    assert device == "1"
    pd.testing.assert_frame_equal(rows, one)


def msprof_json_only(tmp_path: Path, copies: int) -> Path:
    """The real export with only its msprof json, whose events are written `copies` times,
    copy k shifted by k x (span + 100 µs)."""
    prof = copy_fixture(REAL, tmp_path / f"x{copies}")
    timeline = prof / "device_0" / "timeline"
    for kind in ("hccl", "step_trace", "task_time"):
        (timeline / f"{kind}_0_2_1.json").unlink()
    events = json.loads((REAL / "device_0/timeline/msprof_0_2_1.json").read_text())
    timed = [e for e in events if e.get("ph") != "M"]
    times = [float(e["ts"]) for e in timed if "ts" in e]
    shift = max(times) - min(times) + 100.0
    with open(timeline / "msprof_0_2_1.json", "w") as out:
        out.write("[" + ", ".join(json.dumps(e) for e in events if e.get("ph") == "M"))
        for k in range(copies):
            for e in timed:
                moved = {**e, "ts": float(e["ts"]) + k * shift} if "ts" in e else e
                out.write(", " + json.dumps(moved))
        out.write("]")
    return prof


def test_a_timeline_is_folded_into_columns_not_held_as_dicts(tmp_path: Path) -> None:
    """The real msprof json tiled 10 and 50 times (11,000 and 55,000 events): the tables are
    10 and 50 times the one copy's, and the peak of traced memory grows by less than the
    file does (held as dicts, it grew five to eight times as much)."""
    one = read_one(msprof_json_only(tmp_path, 1)).tables  # also loads every module first

    def traced_read(copies: int) -> tuple[int, int]:
        prof = msprof_json_only(tmp_path, copies)
        profile, peak = traced_peak(lambda: read_one(prof))
        tables = profile.tables
        for table in ("device_ops", "host_ops", "comm_ops"):
            assert len(tables[table]) == copies * len(one[table]) > 0, table
        return peak, (prof / "device_0/timeline/msprof_0_2_1.json").stat().st_size

    small_peak, small_size = traced_read(10)
    large_peak, large_size = traced_read(50)
    assert large_peak - small_peak < large_size - small_size, (small_peak, large_peak)
