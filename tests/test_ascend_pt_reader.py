"""The Ascend PyTorch / MindSpore (`*_ascend_pt`, `*_ascend_ms`) reader.

Expected numbers are computed here from the raw fixture files with json, csv and Decimal, never
by the code under test. Fixtures: tests/fixtures/real/ascend_pt (genuine torch_npu outputs: the
trace_view.json and the older kernel_details.csv of rank0_ascend_pt come from different runs,
and a2_kernel_details holds a newer kernel_details.csv).
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner
from conftest import FIXTURE_DIR

import advisor
from advisor.cli import main
from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.formats.decimal_clock import Clock, _same_layout_parts, exact_parts
from advisor.formats.stream import EventStream
from advisor.hookspecs import Reader
from advisor.locate import locate
from advisor.model import contract_problems
from advisor.plugin_manager import PluginHost
from advisor.render.json_report import validate_report
from advisor_plugins import ascend_pt
from advisor_plugins.ascend_pt import kinds
from advisor_plugins.ascend_pt.communication import MB, parse_communication
from advisor_plugins.ascend_pt.memory import read_memory_record
from advisor_plugins.ascend_pt.steps import fill_breakdown

SHARED = FIXTURE_DIR / "real" / "ascend_pt"
RANK0 = SHARED / "rank0_ascend_pt"
TRACE = RANK0 / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
OLD_KERNELS = RANK0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
A2_KERNELS = SHARED / "a2_kernel_details" / "kernel_details.csv"
SMALL_PROF = FIXTURE_DIR / "msprof" / "PROF_000001_20260105093000123_SMALLCASE"
OUT = "ASCEND_PROFILER_OUTPUT"


def read_one(path: Path):
    profiles = ascend_pt.AscendPtReader().read(path)
    assert len(profiles) == 1
    return profiles[0]


def rank_folder(tmp_path: Path, name: str = "w_1_ascend_pt", **files: Path | str) -> Path:
    """A rank folder whose ASCEND_PROFILER_OUTPUT holds the given files (path or text)."""
    folder = tmp_path / name
    (folder / OUT).mkdir(parents=True)
    for file_name, content in files.items():
        target = folder / OUT / file_name.replace("__", ".")
        if isinstance(content, Path):
            shutil.copy(content, target)
        else:
            target.write_text(content, encoding="utf-8")
    return folder


def problems(profile) -> list[tuple[str, str]]:
    return [(Path(w.file).name, w.problem) for w in profile.warnings]


def assert_contract(profile) -> None:
    assert contract_problems(profile) == []


def raw_trace() -> list[dict]:
    return json.loads(TRACE.read_text(encoding="utf-8"))


def process_events(events: list[dict], process: str) -> list[dict]:
    pids = {
        e["pid"]
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name" and e["args"]["name"] == process
    }
    return [e for e in events if e.get("ph") == "X" and e.get("pid") in pids]


def kernel_rows(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8-sig", newline="") as fh:
        return list(csv.DictReader(fh))


# ---------------------------------------------------------------------------------------------
# Plugin surface and detection


def test_hook_returns_the_rank_folder_and_cluster_output_readers() -> None:
    readers = ascend_pt.advisor_readers()
    assert all(isinstance(reader, Reader) for reader in readers)
    assert [reader.name for reader in readers] == ["ascend_pt", "msprof_analyze_cluster"]


def test_detects_rank_folders_by_name_only(tmp_path: Path) -> None:
    reader = ascend_pt.AscendPtReader()
    (tmp_path / "a_ascend_ms").mkdir()
    (tmp_path / "plain" / OUT).mkdir(parents=True)
    (tmp_path / "other").mkdir()
    (tmp_path / "file_ascend_pt").write_text("not a folder")
    assert reader.detect(RANK0)
    assert reader.detect(RANK0 / OUT)
    assert reader.detect(tmp_path / "a_ascend_ms")
    assert reader.detect(tmp_path / "plain")
    assert not reader.detect(tmp_path / "other")
    assert not reader.detect(tmp_path / "file_ascend_pt")
    assert not reader.detect(SMALL_PROF)


def test_prof_folder_inside_is_claimed_with_its_parent(tmp_path: Path) -> None:
    """The installed readers claim the rank folder once; its PROF_* is not read again."""
    folder = rank_folder(tmp_path, trace_view__json=TRACE)
    shutil.copytree(SMALL_PROF, folder / SMALL_PROF.name)
    problems_seen: list[str] = []
    claims = locate(tmp_path, PluginHost().readers(), problems_seen)
    assert [(c.path, c.plugin) for c in claims] == [(folder, "ascend_pt")]
    assert problems_seen == []


# ---------------------------------------------------------------------------------------------
# rank0_ascend_pt: the genuine trace_view.json (+ an older kernel_details.csv of another run)


def test_rank0_meta_and_contract() -> None:
    profile = read_one(RANK0)
    meta = profile.meta
    assert (meta.source_format, meta.framework, meta.device_kind) == ("ascend-pt", "PyTorch", "NPU")
    assert sorted(meta.files_read) == [f"{OUT}/kernel_details.csv", f"{OUT}/trace_view.json"]
    assert sorted(profile.tables) == ["device_ops", "host_ops", "steps"]
    assert_contract(profile)


def test_rank0_kernel_details_from_another_run_give_way_to_the_traces_tasks() -> None:
    """rank0's kernel_details.csv lies 4.6 million seconds from its trace: another run. Its
    tasks would lend another run's numbers to this one, so the trace's device tasks are the
    profile's, and two lines say so."""
    profile = read_one(RANK0)
    (times, unused) = problems(profile)
    assert times[0] == "kernel_details.csv" and "different runs or clocks" in times[1]
    hardware = process_events(raw_trace(), "Ascend Hardware")
    assert unused == (
        "kernel_details.csv",
        f"from another run, so not used: the device tasks are trace_view.json's {len(hardware)}",
    )
    ops = profile.tables["device_ops"]
    assert len(ops) == len(hardware) == 276 and ops["start_us"].notna().all()
    assert ops["duration_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in hardware))


def test_rank0_steps_from_profiler_step() -> None:
    events = raw_trace()
    steps_raw = [
        e for e in process_events(events, "Python") if e["name"].startswith("ProfilerStep#")
    ]
    steps = read_one(RANK0).tables["steps"]
    assert len(steps) == len(steps_raw) == 1
    assert steps["step"].tolist() == [int(e["name"].split("#")[1]) for e in steps_raw]
    assert steps["duration_us"].tolist() == pytest.approx([float(e["dur"]) for e in steps_raw])
    earliest = min(Decimal(str(e["ts"])) for e in events if e.get("ph") == "X")
    expected_start = [float(Decimal(e["ts"]) - earliest) for e in steps_raw]
    assert steps["start_us"].tolist() == pytest.approx(expected_start, abs=1e-6)
    assert (steps["end_us"] - steps["start_us"]).tolist() == pytest.approx(
        steps["duration_us"].tolist()
    )


def test_rank0_overlap_analysis_totals_fill_the_step_breakdown() -> None:
    totals: Counter[str] = Counter()
    for e in process_events(raw_trace(), "Overlap Analysis"):
        totals[e["name"]] += float(e["dur"])
    assert set(totals) == {"Computing", "Free"}  # a single card: no communication
    steps = read_one(RANK0).tables["steps"]
    assert steps["computing_us"].sum() == pytest.approx(totals["Computing"], abs=1e-6)
    assert steps["communication_us"].sum() == 0.0
    assert steps["comm_not_overlapped_us"].sum() == 0.0
    assert "bubble_us" not in steps


def test_rank0_free_time_is_all_of_the_step_without_device_work() -> None:
    """The Free track holds the gaps between tasks only: the 2.6 ms of the step before its
    first task and the 0.2 ms after its last one are idle too, and in free_us, so free time
    and computing add up to the step (STEP-003 and the critical path tell the same)."""
    events = raw_trace()
    free_track = sum(
        float(e["dur"]) for e in process_events(events, "Overlap Analysis") if e["name"] == "Free"
    )
    (step_raw,) = [
        e for e in process_events(events, "Python") if e["name"].startswith("ProfilerStep#")
    ]
    hardware = process_events(events, "Ascend Hardware")
    first = min(Decimal(e["ts"]) for e in hardware)
    last = max(Decimal(e["ts"]) + Decimal(str(e["dur"])) for e in hardware)
    lo = Decimal(step_raw["ts"])
    hi = lo + Decimal(str(step_raw["dur"]))
    before, after = float(first - lo), float(hi - last)
    assert before == pytest.approx(2615.19, abs=0.01) and after == pytest.approx(206.86, abs=0.01)
    (step,) = read_one(RANK0).tables["steps"].to_dict("records")
    assert step["free_us"] == pytest.approx(free_track + before + after, abs=1e-3)
    assert step["free_us"] + step["computing_us"] == pytest.approx(step["duration_us"], abs=0.01)


def test_a_table_breakdown_of_trace_steps_counts_the_whole_window_free() -> None:
    """step_trace_time.csv's (or analysis.db's) Free counts the gaps between a step's tasks;
    the window's time before its first task (Preparing) and after its last one is free too.
    A Free larger than the window's remainder (the table attributes work to steps its own
    way) is kept, and a step the table does not list gets no figure."""
    steps = pd.DataFrame({"step": [1, 2, 3, 4], "duration_us": [2000.0, 1000.0, 1500.0, 900.0]})
    table = pd.DataFrame(
        {
            "step": [1.0, 2.0, 4.0],
            "computing_us": [1200.0, 800.0, np.nan],
            "comm_not_overlapped_us": [300.0, 100.0, 0.0],
            "free_us": [400.0, 250.0, 100.0],
            "preparing_us": [80.0, 5.0, 0.0],
        }
    )
    filled = fill_breakdown(steps, table)
    assert filled["free_us"].tolist()[:2] == [2000.0 - 1200 - 300, 250.0]
    assert np.isnan(filled["free_us"].iloc[2])
    assert filled["free_us"].iloc[3] == 100.0  # no computing time: the table's Free as given
    assert filled["computing_us"].tolist()[:2] == [1200.0, 800.0]
    assert "preparing_us" not in filled


def test_rank0_host_ops_kinds_and_counts() -> None:
    events = raw_trace()
    cann = Counter(e["name"] for e in process_events(events, "CANN"))
    python = [
        e for e in process_events(events, "Python") if not e["name"].startswith("ProfilerStep#")
    ]
    host = read_one(RANK0).tables["host_ops"]
    assert len(host) == sum(cann.values()) + len(python)
    acl = host[host["level"] == "AscendCL"]
    counts = acl["name"].value_counts()
    assert cann["AscendCL@aclopCompileAndExecute"] == 11
    assert counts["aclopCompileAndExecute"] == 11
    assert counts["aclrtSynchronizeStream"] == cann["AscendCL@aclrtSynchronizeStream"] == 4
    # compile-and-execute calls run the operator too; the compile step inside is its own event
    assert set(acl[acl["kind"] == "compile_execute"]["name"]) == {"aclopCompileAndExecute"}
    assert set(acl[acl["kind"] == "compile"]["name"]) == {"opCompile"}
    assert (acl["kind"] == "compile").sum() == cann["AscendCL@opCompile"] == 11
    sync = acl[acl["kind"] == "sync"]
    assert len(sync) == sum(
        n
        for name, n in cann.items()
        if name.startswith(
            (
                "AscendCL@aclrtSynchronizeStream",
                "AscendCL@aclrtSynchronizeDevice",
                "AscendCL@aclrtSynchronizeEvent",
            )
        )
    )
    framework = host[host["level"].isna()]
    assert (framework["kind"] == "runtime").sum() == sum(
        e["cat"] in ("enqueue", "dequeue") for e in python
    )
    assert (framework["kind"] == "aten").sum() + (framework["kind"] == "dataloader").sum() + (
        framework["kind"] == "optimizer"
    ).sum() == sum(e["cat"] == "cpu_op" for e in python)
    assert set(host["step"].dropna()) == {1}


def test_rank0_string_ts_keeps_sub_microsecond_precision() -> None:
    events = raw_trace()
    earliest = min(Decimal(str(e["ts"])) for e in events if e.get("ph") == "X")
    cann = sorted(process_events(events, "CANN"), key=lambda e: Decimal(e["ts"]))
    host = read_one(RANK0).tables["host_ops"]
    starts = np.sort(host.loc[host["level"] == "AscendCL", "start_us"].to_numpy())
    expected = np.array([float(Decimal(e["ts"]) - earliest) for e in cann])
    assert len(starts) == len(expected)
    assert np.max(np.abs(starts - expected)) < 1e-6  # a float parse of ts would be ~0.1 off
    assert any(str(e["ts"]).split(".")[1] not in ("0", "25", "5", "75") for e in cann)


def test_rank0_device_ops_from_kernel_details_per_accelerator_core(tmp_path: Path) -> None:
    rows = kernel_rows(OLD_KERNELS)
    expected = Counter(r["Accelerator Core"] for r in rows)
    assert expected == {
        "AI_VECTOR_CORE": 520,
        "MIX_AIV": 25,
        "HCCL": 19,
        "AI_CORE": 13,
        "AI_CPU": 7,
        "DSA_SQE": 7,
    }
    ops = read_one(rank_folder(tmp_path, kernel_details__csv=OLD_KERNELS)).tables["device_ops"]
    assert ops["core_type"].value_counts().to_dict() == dict(expected)
    assert ops["duration_us"].sum() == pytest.approx(sum(float(r["Duration(us)"]) for r in rows))
    assert set(ops.loc[ops["core_type"] == "HCCL", "category"]) == {"communication"}
    assert set(ops.loc[ops["core_type"] != "HCCL", "category"]) == {"compute"}
    hccl = ops[ops["core_type"] == "HCCL"]
    assert hccl["stream"].isna().all() and hccl["task_id"].isna().all()  # N/A cells
    assert ops["step"].tolist() == [int(r["Step Id"]) for r in rows]
    assert ops["input_shapes"].iloc[0] == rows[0]["Input Shapes"].strip('"')


def test_trace_only_device_ops_per_task_type(tmp_path: Path) -> None:
    folder = rank_folder(tmp_path, trace_view__json=TRACE)
    hardware = process_events(raw_trace(), "Ascend Hardware")
    expected = Counter(e["args"]["Task Type"] for e in hardware)
    assert expected["AI_CPU"] == 2
    ops = read_one(folder).tables["device_ops"]
    assert ops["core_type"].value_counts().to_dict() == dict(expected)
    assert ops["duration_us"].sum() == pytest.approx(sum(float(e["dur"]) for e in hardware))
    assert set(ops["stream"]) == {int(e["args"]["Stream Id"]) for e in hardware}
    assert set(ops["category"]) == {"compute"}
    assert (ops["wait_us"] >= 0).all()


def test_trace_only_tasks_are_typed_by_their_names(tmp_path: Path) -> None:
    """Without a usable kernel_details.csv the op type comes from the task's name: rank0's
    graph-mode tasks (`Conv2D1`, `trans_Cast_7`, `MaxPoolWithArgmaxV12`) were untyped before,
    37% of its device time."""
    folder = rank_folder(tmp_path, trace_view__json=TRACE)
    ops = read_one(folder).tables["device_ops"]
    types = dict(zip(ops["name"], ops["op_type"]))
    assert set(ops.loc[ops["op_type"].isna(), "name"]) == {"MEMCPY_ASYNC"}
    assert (types["Conv2D1"], types["trans_Cast_7"]) == ("Conv2D", "Cast")
    assert (types["MaxPoolWithArgmaxV12"], types["ReduceSum7_MemSet"]) == (
        "MaxPoolWithArgmaxV1",
        "MemSet",
    )


def test_task_names_give_the_type_column_of_genuine_kernel_details() -> None:
    """Every genuine kernel_details.csv here names each task and its Type: the name gives the
    Type, or the framework's name of the CANN variant that ran, never another op."""
    pairs = {
        row["Name"]: row["Type"]
        for path in sorted((FIXTURE_DIR / "real").glob("**/kernel_details.csv"))
        for row in csv.DictReader(path.open(encoding="utf-8"))
        if not row["Type"].isdigit()  # CANN writes Type 0 for some atomic cleans (NonZero_MemSet)
    }
    typed = {name: (kinds.op_type_from_task(name), kind) for name, kind in pairs.items()}
    untyped = {name for name, (got, _) in typed.items() if got is None}
    assert all(n.startswith(("hcom_", "StatelessDropOutGenMask")) for n in untyped)
    same = sum(got == kind for got, kind in typed.values())
    variants = {(got, kind) for got, kind in typed.values() if got is not None and got != kind}
    assert same == 243 and len(typed) - len(untyped) == 280
    assert variants == {
        ("ReduceSum", "ReduceSumD"),
        ("StridedSlice", "StridedSliceD"),
        ("LayerNorm", "LayerNormV3"),
        ("MatMulV5", "MatMulV3"),
    }


# ---------------------------------------------------------------------------------------------
# a2_kernel_details: newer header, trailing tabs, MIX_AIC, PMU


def test_a2_kernel_details_cells(tmp_path: Path) -> None:
    rows = kernel_rows(A2_KERNELS)
    assert any(r["Start Time(us)"].endswith("\t") for r in rows)
    ops = read_one(rank_folder(tmp_path, kernel_details__csv=A2_KERNELS)).tables["device_ops"]
    assert len(ops) == len(rows)
    assert (
        (ops["core_type"] == "MIX_AIC").sum()
        == sum(r["Accelerator Core"] == "MIX_AIC" for r in rows)
        == 9
    )
    assert ops["block_dim"].tolist() == [int(r["Block Dim"]) for r in rows]
    starts = [Decimal(r["Start Time(us)"].strip()) for r in rows]
    expected = np.array([float(s - min(starts)) for s in starts])
    assert np.max(np.abs(ops["start_us"].to_numpy() - expected)) < 1e-6
    assert ops["mac_ratio"].tolist() == pytest.approx([float(r["aic_mac_ratio"]) for r in rows])
    assert ops["vec_ratio"].tolist() == pytest.approx([float(r["aiv_vec_ratio"]) for r in rows])
    unit = {"AI_VECTOR_CORE": "aiv"}  # vector kernels: 0 in every aic_ column
    for column in ("mte2_ratio", "scalar_ratio"):
        assert ops[column].tolist() == pytest.approx(
            [float(r[f"{unit.get(r['Accelerator Core'], 'aic')}_{column}"]) for r in rows]
        )
    assert ops["aicore_time_us"].tolist() == pytest.approx(
        [float(r["aicore_time(us)"]) for r in rows]
    )
    assert ops["op_state"].tolist() == [r["OP State"] for r in rows]
    assert ops["wait_us"].tolist() == pytest.approx([float(r["Wait Time(us)"]) for r in rows])
    assert ops["input_shapes"].iloc[0] == "81920,4096;8192,512"
    assert set(ops["step"]) == {19}


def test_block_num_header(tmp_path: Path) -> None:
    text = A2_KERNELS.read_text(encoding="utf-8").replace("Block Dim", "Block Num", 1)
    ops = read_one(rank_folder(tmp_path, kernel_details__csv=text)).tables["device_ops"]
    assert ops["block_dim"].tolist() == [int(r["Block Dim"]) for r in kernel_rows(A2_KERNELS)]


# ---------------------------------------------------------------------------------------------
# Bad input (on copies)


def complete_events(text: str) -> list[dict]:
    """The events of a cut JSON list that are complete, decoded one by one with json."""
    decoder = json.JSONDecoder()
    events, pos = [], text.index("[") + 1
    while True:
        while pos < len(text) and text[pos] in ", \n\r\t":
            pos += 1
        try:
            event, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return events
        events.append(event)


def test_truncated_trace_view_keeps_its_complete_events(tmp_path: Path) -> None:
    data = TRACE.read_bytes()
    cut = data[: len(data) // 2].decode("utf-8", "ignore")
    folder = rank_folder(tmp_path, kernel_details__csv=A2_KERNELS, trace_view__json=cut)
    profile = read_one(folder)
    kept = complete_events(cut)
    assert 0 < len(kept) < len(raw_trace())
    (trace_warning, kernel_warning, unused) = problems(profile)
    assert trace_warning == ("trace_view.json", f"truncated trace: {len(kept)} events recovered")
    # a2_kernel_details comes from another run than the trace: the trace's tasks are used
    assert kernel_warning[0] == "kernel_details.csv" and "different runs" in kernel_warning[1]
    assert unused[0] == "kernel_details.csv" and "so not used" in unused[1]
    assert len(profile.tables["device_ops"]) == len(process_events(kept, "Ascend Hardware"))
    python = [
        e for e in process_events(kept, "Python") if not e["name"].startswith("ProfilerStep#")
    ]
    cann = process_events(kept, "CANN")
    assert cann and python
    assert len(profile.tables["host_ops"]) == len(python) + len(cann)
    assert sorted(profile.meta.files_read) == [
        f"{OUT}/kernel_details.csv",
        f"{OUT}/trace_view.json",
    ]


def test_trace_cut_before_its_metadata_reads_the_other_files(tmp_path: Path) -> None:
    """No process is named before the cut: no event has a known role."""
    data = TRACE.read_bytes()
    cut = data[: len(data) // 4].decode("utf-8", "ignore")
    assert '"process_name"' not in cut
    folder = rank_folder(tmp_path, kernel_details__csv=A2_KERNELS, trace_view__json=cut)
    profile = read_one(folder)
    (truncated, unknown) = problems(profile)
    assert truncated == (
        "trace_view.json",
        f"truncated trace: {len(complete_events(cut))} events recovered",
    )
    assert unknown[0] == "trace_view.json" and "no timed events of a known process" in unknown[1]
    assert profile.meta.files_read == [f"{OUT}/kernel_details.csv"]
    assert len(profile.tables["device_ops"]) == len(kernel_rows(A2_KERNELS))


def test_nan_in_the_trace_is_read_with_a_warning(tmp_path: Path) -> None:
    events = synthetic_comm_trace()
    text = json.dumps(events).replace('"dur": 30.0', '"dur": NaN', 1)
    assert "NaN" in text
    profile = read_one(rank_folder(tmp_path, trace_view__json=text))
    found = problems(profile)
    assert ("trace_view.json", "1 events without a numeric 'ts' or 'dur' ignored") in found
    assert any("NaN or Infinity" in problem for _, problem in found)
    names = profile.tables["device_ops"]["name"].tolist()
    assert "aclnnMm_MatMulV2_MatMulV2" not in names and "EventWait" in names


def test_kernel_details_missing_column_falls_back_to_the_trace(tmp_path: Path) -> None:
    frame = pd.read_csv(A2_KERNELS, dtype=str, keep_default_na=False)
    text = frame.drop(columns=["Accelerator Core"]).to_csv(index=False)
    folder = rank_folder(tmp_path, kernel_details__csv=text, trace_view__json=TRACE)
    profile = read_one(folder)
    assert problems(profile) == [("kernel_details.csv", "missing column 'Accelerator Core'")]
    assert profile.warnings[0].column == "Accelerator Core"
    assert len(profile.tables["device_ops"]) == len(process_events(raw_trace(), "Ascend Hardware"))


def test_text_in_numeric_cells(tmp_path: Path) -> None:
    lines = A2_KERNELS.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    cells = lines[3].split(",")
    cells[header.index("Duration(us)")] = "abc"
    lines[3] = ",".join(cells)
    profile = read_one(rank_folder(tmp_path, kernel_details__csv="\n".join(lines) + "\n"))
    (warning,) = profile.warnings
    assert (Path(warning.file).name, warning.line, warning.column) == (
        "kernel_details.csv",
        4,
        "Duration(us)",
    )
    assert "'abc'" in warning.problem
    durations = profile.tables["device_ops"]["duration_us"]
    assert durations.isna().tolist() == [i == 2 for i in range(len(durations))]


def test_ragged_rows_are_told_once_under_the_files_own_name(tmp_path: Path, monkeypatch) -> None:
    """A kernel_details.csv with a row one cell short, in a folder named by a relative path:
    the CSV parser's warning named the file by its path joined to the profile's path again
    (`x/w_1_ascend_pt/x/w_1_ascend_pt/ASCEND_PROFILER_OUTPUT/...`)."""
    lines = A2_KERNELS.read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].rsplit(",", 1)[0]
    rank_folder(tmp_path, kernel_details__csv="\n".join(lines) + "\n")
    monkeypatch.chdir(tmp_path.parent)
    relative = Path(tmp_path.name) / "w_1_ascend_pt"
    (warning,) = read_one(relative).warnings
    assert "more or fewer cells" in warning.problem
    assert Path(warning.file) == relative / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"


def test_without_a_trace_files_of_another_run_are_told_against_kernel_details() -> None:
    """Rank 1 of MindStudio Insight's 16-rank run has no trace; its operator_memory.csv was
    written 134 days after its kernel_details.csv (January 2024 against September 2023) and
    its memory_record.csv holds times rounded to 1.69512E+15. Both were once kept (the
    allocations then fell outside every step, and a far-off-events warning named only the
    folder); now each is named with its problem and its times are left out."""
    rank = FIXTURE_DIR / "real" / "msinsight_pp16_ranks01" / "test_rank_1"
    profile = read_one(rank)
    told = dict(problems(profile))
    assert told["operator_memory.csv"].startswith(
        "times are 11,589,050 s away from kernel_details.csv's"
    )
    assert told["memory_record.csv"] == (
        "30 times are rounded in scientific notation (e.g. 1.69512E+15, as a spreadsheet saves "
        "them) and left out"
    )
    assert "op_allocations" not in profile.tables
    assert profile.tables["memory"]["time_us"].isna().all()


def test_times_in_scientific_notation_are_left_out_only_when_rounded(tmp_path: Path) -> None:
    """`1.69512E+15` (a spreadsheet's epoch µs) is worth 1e10 µs: left out, with one warning;
    `1.695115378710248E+15` keeps every microsecond and is a time like any other."""
    path = tmp_path / "memory_record.csv"
    path.write_text(
        "Component,Timestamp(us),Total Reserved(MB)\n"
        "PTA,1.69512E+15,1\nPTA,1.695115378710248E+15,2\nPTA,1695115378710249.5,3\n",
        encoding="utf-8",
    )
    told: list[str] = []
    memory = read_memory_record(path, path.name, Clock(), lambda f, p, **_: told.append(p))
    assert memory["time_us"].isna().tolist() == [True, False, False]
    assert told == [
        "1 time is rounded in scientific notation (e.g. 1.69512E+15, as a spreadsheet saves "
        "them) and left out"
    ]


def test_empty_output_folder_is_unreadable(tmp_path: Path) -> None:
    folder = rank_folder(tmp_path)
    with pytest.raises(UnreadableInput, match="no profiler output found") as info:
        read_one(folder)
    assert info.value.path == str(folder)
    assert "trace_view.json" in info.value.problem


def test_broken_files_only_name_their_problems(tmp_path: Path) -> None:
    folder = rank_folder(tmp_path, trace_view__json="[{", kernel_details__csv="")
    with pytest.raises(UnreadableInput, match="nothing readable") as info:
        read_one(folder)
    assert "trace_view.json" in info.value.problem and "kernel_details.csv" in info.value.problem


def test_without_output_reads_the_cann_export_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "w_ascend_pt"
    shutil.copytree(SMALL_PROF, folder / SMALL_PROF.name)
    (folder / "profiler_info_3.json").write_text('{"config": {}}')
    (profile,) = ascend_pt.AscendPtReader().read(folder)
    assert profile.meta.source_format.startswith("msprof")
    assert (profile.meta.framework, profile.meta.rank) == ("PyTorch", 3)
    assert "no ASCEND_PROFILER_OUTPUT folder" in profile.warnings[-1].problem
    assert "device_ops" in profile.tables


def test_without_output_and_msprof_blocked_reads_no_cann_export(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The export beside the folder is read by the installed reader that claims it, through
    the plugin host: a blocked msprof plugin runs no code, and the problem says why."""
    folder = tmp_path / "w_ascend_pt"
    shutil.copytree(SMALL_PROF, folder / SMALL_PROF.name)
    monkeypatch.setenv("ADVISOR_BLOCK_PLUGINS", "msprof")
    with pytest.raises(UnreadableInput, match="no installed reader claims it"):
        ascend_pt.AscendPtReader().read(folder)


# ---------------------------------------------------------------------------------------------
# Synthetic files for what the genuine fixtures lack (layouts from the research notes)

STEP_TRACE_TIME = """\
Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,\
Bubble,Communication(Not Overlapped and Exclude Receive),Preparing
0,19,1000.5,200,50,250,99.5,1100,10,190,5
"""

COMMUNICATION = {
    "step19": {
        "collective": {
            "hcom_allReduce__1_0_1@group_a": {
                "Communication Time Info": {
                    "Start Timestamp(us)": 1736413971558975.0,
                    "Elapse Time(ms)": 0.25,
                    "Transit Time(ms)": 0.1,
                    "Wait Time(ms)": 0.12,
                    "Synchronization Time(ms)": 0.01,
                    "Idle Time(ms)": 0.03,
                },
                "Communication Bandwidth Info": {
                    "HCCS": {
                        "Transit Size(MB)": 2.0,
                        "Transit Time(ms)": 0.1,
                        "Bandwidth(GB/s)": 20.0,
                        "Large Packet Ratio": 0.5,
                        "Size Distribution": {},
                    },
                    "RDMA": {
                        "Transit Size(MB)": 0,
                        "Transit Time(ms)": 0,
                        "Bandwidth(GB/s)": 0,
                        "Large Packet Ratio": 0,
                        "Size Distribution": {},
                    },
                },
            },
            "Total Op Info": {
                "Communication Time Info": {"Elapse Time(ms)": 0.25},
                "Communication Bandwidth Info": {
                    "HCCS": {
                        "Transit Size(MB)": 2.0,
                        "Transit Time(ms)": 0.1,
                        "Bandwidth(GB/s)": 20.0,
                    }
                },
            },
        },
        "p2p": {},
    }
}

MATRIX = {
    "step19": {
        "collective": {
            "allreduce-top1@group_a": {
                "0-1": {
                    "Transport Type": "HCCS",
                    "Transit Size(MB)": 1.5,
                    "Transit Time(ms)": 0.05,
                    "Bandwidth(GB/s)": 30.0,
                    "Op Name": "hcom_allReduce__1_0_1",
                }
            }
        }
    }
}

MEMORY_RECORD = """\
Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Total Active(MB),Stream Ptr,\
Device Type
PTA,1736413971558973.5\t,10,20,10,1,NPU:0
GE,1736413971558974.5\t,1,2,1,1,NPU:0
PTA,1736413971558980.25\t,12,20,12,1,NPU:0
"""


def test_synthetic_mindspore_folder(tmp_path: Path) -> None:
    folder = rank_folder(
        tmp_path,
        "rank-1_20250101_ascend_ms",
        kernel_details__csv=A2_KERNELS,
        step_trace_time__csv=STEP_TRACE_TIME,
        communication__json=json.dumps(COMMUNICATION),
        communication_matrix__json=json.dumps(MATRIX),
        memory_record__csv=MEMORY_RECORD,
    )
    (folder / "profiler_info_1.json").write_text(
        json.dumps(
            {
                "config": {"experimental_config": {"_profiler_level": "Level1"}},
                "ms_version": "2.5.0",
            }
        )
    )
    (folder / "profiler_metadata.json").write_text(
        json.dumps(
            {
                "ENV_VARIABLES": {"HCCL_BUFFSIZE": "200", "EMPTY": None},
                "distributed_args": {"world_size": 8, "rank": 1},
            }
        )
    )
    profile = read_one(folder)
    meta = profile.meta
    assert (meta.source_format, meta.framework, meta.rank, meta.world_size) == (
        "ascend-ms",
        "MindSpore",
        1,
        8,
    )
    assert meta.versions["MindSpore"] == "2.5.0"
    assert meta.extra["env"] == {"HCCL_BUFFSIZE": "200", "EMPTY": ""}
    assert meta.extra["profiler_level"] == "Level1"
    assert profile.warnings == []
    assert_contract(profile)

    starts = [Decimal(r["Start Time(us)"].strip()) for r in kernel_rows(A2_KERNELS)]
    origin = min(starts)
    (step,) = profile.tables["steps"].to_dict("records")
    assert step["step"] == 19
    assert step["computing_us"] == 1000.5 and step["free_us"] == 99.5
    assert step["communication_us"] == 250 and step["comm_not_overlapped_us"] == 200
    assert step["bubble_us"] == 10
    assert step["duration_us"] == pytest.approx(1000.5 + 200 + 99.5)
    # The step starts at its first kernel less Preparing: the profile's earliest time.
    assert step["start_us"] == 0.0
    assert profile.tables["device_ops"]["start_us"].min() == pytest.approx(5.0)

    comm = profile.tables["comm_ops"]
    op, link = comm.to_dict("records")
    assert (op["name"], op["group"], op["op"], op["transport"]) == (
        "hcom_allReduce__1_0_1",
        "group_a",
        "allreduce",
        "HCCS",
    )
    assert op["duration_us"] == pytest.approx(250) and op["wait_us"] == pytest.approx(120)
    assert op["transit_us"] == pytest.approx(100) and op["bytes"] == pytest.approx(2e6)
    assert op["bandwidth_gbps"] == 20.0
    assert op["start_us"] == pytest.approx(
        float(Decimal("1736413971558975.0") - origin) + 5.0, abs=1e-6
    )
    assert (link["name"], link["transport"], link["bytes"], link["bandwidth_gbps"]) == (
        "0->1",
        "HCCS",
        1.5e6,
        30.0,
    )
    assert (op["kind"], link["kind"]) == ("op", "link")
    assert meta.extra["comm_bandwidth"]["HCCS"]["bandwidth_gbps"] == pytest.approx(20.0)

    memory = profile.tables["memory"]
    assert memory["allocated_bytes"].tolist() == [10 * 2**20, 12 * 2**20]
    assert memory["device"].tolist() == ["NPU:0", "NPU:0"]
    expected = [
        float(Decimal(t) - origin) + 5.0 for t in ("1736413971558973.5", "1736413971558980.25")
    ]
    assert memory["time_us"].tolist() == pytest.approx(expected, abs=1e-6)


# MindSpore's host CPU operators: `full name;type;start_ns,duration_ms,thread ...` per line, as
# MindSpore's FrameworkParser / CpuOpTimelineCreator read FRAMEWORK/cpu_op_execute_timestamp_*.txt.
CPU_OP_LINES = (
    "Default/network-TrainOneStepCell/Add-op1;Add;1736413971558976500,0.0125,7 "
    "1736413971558990000,0.002,7\n"
    "\n"
    "Default/Cast-op2;Cast;1736413971558980250,0.5,8\n"
    "Default/broken;Broken;notanumber,1,7 1736413971558981000,-1,7\n"
    "only;two fields\n"
)


def test_mindspore_cpu_operators_from_framework_folder(tmp_path: Path) -> None:
    folder = rank_folder(tmp_path, "rank-0_20250101_ascend_ms", kernel_details__csv=A2_KERNELS)
    (folder / "FRAMEWORK").mkdir()
    (folder / "FRAMEWORK" / "cpu_op_execute_timestamp_0.txt").write_text(CPU_OP_LINES)
    profile = read_one(folder)
    host = profile.tables["host_ops"]
    cpu = host[host["kind"] == "cpu_kernel"]
    assert cpu["name"].tolist() == ["Default/network-TrainOneStepCell/Add-op1"] * 2 + [
        "Default/Cast-op2"
    ]
    assert cpu["duration_us"].tolist() == pytest.approx([12.5, 2.0, 500.0])
    assert cpu["thread"].tolist() == [7, 7, 8]
    # ns since the epoch, on the profile's clock: time 0 is the earliest kernel start
    origin = min(Decimal(r["Start Time(us)"].strip()) for r in kernel_rows(A2_KERNELS))
    assert profile.tables["device_ops"]["start_us"].min() == 0.0
    expected = [
        float(Decimal(ns) / 1000 - origin)
        for ns in (1736413971558976500, 1736413971558990000, 1736413971558980250)
    ]
    assert cpu["start_us"].tolist() == pytest.approx(expected, abs=1e-6)
    assert problems(profile) == [
        (
            "cpu_op_execute_timestamp_0.txt",
            "3 CPU operator executions not in the form "
            "start_ns,duration_ms,thread ignored (first on line 4)",
        )
    ]
    assert "FRAMEWORK/cpu_op_execute_timestamp_0.txt" in profile.meta.files_read
    assert_contract(profile)


def test_cpu_operators_in_the_trace_are_not_read_twice(tmp_path: Path) -> None:
    """MindSpore merges the same operators into trace_view.json as the `CPU OP` process."""
    events = synthetic_comm_trace()
    events += [
        {"ph": "M", "pid": 9000, "tid": 0, "name": "process_name", "args": {"name": "CPU OP"}},
        {"ph": "M", "pid": 9000, "tid": 0, "name": "process_labels", "args": {"labels": "CPU"}},
        {
            "ph": "X",
            "pid": 9000,
            "tid": 3,
            "name": "Default/Cast-op2",
            "ts": events[-1]["ts"],
            "dur": 4.5,
            "args": {"type": "Cast"},
        },
    ]
    folder = rank_folder(tmp_path, "rank-0_20250101_ascend_ms", trace_view__json=json.dumps(events))
    (folder / "FRAMEWORK").mkdir()
    (folder / "FRAMEWORK" / "cpu_op_execute_timestamp_0.txt").write_text(CPU_OP_LINES)
    profile = read_one(folder)
    host = profile.tables["host_ops"]
    cpu = host[host["kind"] == "cpu_kernel"]
    assert cpu[["name", "duration_us", "thread"]].values.tolist() == [["Default/Cast-op2", 4.5, 3]]
    assert not any("FRAMEWORK" in f for f in profile.meta.files_read)


def test_mindspore_pipeline_operators_in_the_new_layout(tmp_path: Path) -> None:
    """MindSpore >= 2.3 writes minddata_pipeline_raw_{rank}.csv into ASCEND_PROFILER_OUTPUT."""
    raw = (
        FIXTURE_DIR / "real" / "mindspore_legacy" / "run_2_profiler" / "minddata_pipeline_raw_1.csv"
    )
    folder = rank_folder(
        tmp_path,
        "rank-1_20250101_ascend_ms",
        kernel_details__csv=A2_KERNELS,
        minddata_pipeline_raw_1__csv=raw,
    )
    profile = read_one(folder)
    ops = profile.tables["pipeline_ops"]
    rows = kernel_rows(raw)
    assert ops["op_type"].tolist() == [r["op_type"] for r in rows]
    assert ops["workers"].tolist() == [int(r["num_workers"]) for r in rows]
    for op, row in zip_strict(ops.to_dict("records"), rows):
        sizes = json.loads(row["output_queue_size"])
        assert op["queue_usage"] == pytest.approx(
            sum(sizes) / len(sizes) / float(row["output_queue_length"])
        )
    assert "ASCEND_PROFILER_OUTPUT/minddata_pipeline_raw_1.csv" in profile.meta.files_read
    assert_contract(profile)


def test_reading_the_output_folder_itself(tmp_path: Path) -> None:
    folder = rank_folder(tmp_path, trace_view__json=TRACE)
    (folder / "profiler_info_5.json").write_text("{}")
    profile = read_one(folder / OUT)
    assert profile.meta.rank == 5
    assert profile.meta.files_read[-1] == "trace_view.json"


# ---------------------------------------------------------------------------------------------
# End to end


def test_cli_run_writes_a_schema_valid_report(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["run", str(RANK0), "-o", str(tmp_path / "out"), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    reports = sorted((tmp_path / "out").glob("prof_rule_*.json"))
    assert len(reports) == 1
    validate_report(json.loads(reports[0].read_text(encoding="utf-8")))


def synthetic_comm_trace() -> list[dict]:
    """Two collectives on a communication process, tasks on a compute and an HCCL stream, and
    the Overlap Analysis tracks torch_npu writes for them; no ProfilerStep."""
    base = 1_000_000_000_000_000

    def ts(us: str) -> str:
        return (
            f"{base + int(us.split('.')[0])}.{us.split('.')[1]}"
            if "." in us
            else str(base + int(us))
        )

    def meta(pid, tid, kind, name):
        return {"ph": "M", "pid": pid, "tid": tid, "name": kind, "args": {"name": name}}

    def x(pid, tid, name, start, dur, **args):
        return {
            "ph": "X",
            "pid": pid,
            "tid": tid,
            "name": name,
            "ts": ts(start),
            "dur": dur,
            "args": args,
        }

    return [
        meta(10, 0, "process_name", "Communication"),
        meta(10, 1, "thread_name", "Group hccl_world_group Communication"),
        meta(10, 2, "thread_name", "Plane 0"),
        meta(20, 0, "process_name", "Ascend Hardware"),
        meta(20, 3, "thread_name", "Stream 3"),
        meta(20, 7, "thread_name", "Stream 7"),
        meta(30, 0, "process_name", "Overlap Analysis"),
        x(10, 1, "hcom_allReduce__1_0_1", "100.125", 49.875),
        x(10, 1, "hcom_receive__2_0_1", "300", 20.0),
        x(
            10,
            2,
            "Memcpy",
            "110",
            10.0,
            **{"transport type": "SDMA", "size(Byte)": 1024, "stream id": 7},
        ),
        x(20, 7, "Memcpy", "110", 10.0, **{"Task Type": "SDMA_SQE", "Stream Id": 7}),
        x(
            20,
            3,
            "aclnnMm_MatMulV2_MatMulV2",
            "100",
            30.0,
            **{"Task Type": "AI_CORE", "Stream Id": 3, "Task Id": 1},
        ),
        x(
            20,
            3,
            "aclnnInplaceCopy_Copy",
            "200",
            5.0,
            **{"Task Type": "SDMA_SQE", "Stream Id": 3, "size(B)": 4096},
        ),
        x(20, 3, "EventWait", "210", 1.0, **{"Task Type": "EVENT_WAIT_SQE", "Stream Id": 3}),
        x(30, 0, "Computing", "100", 30.0),
        x(30, 1, "Communication", "100.125", 49.875),
        x(30, 1, "Communication", "300", 20.0),
        x(30, 2, "Communication(Not Overlapped)", "130", 20.0),
        x(30, 2, "Communication(Not Overlapped)", "300", 20.0),
        x(30, 3, "Free", "150", 150.0),
    ]


def test_communication_trace_without_profiler_step(tmp_path: Path) -> None:
    folder = rank_folder(tmp_path, trace_view__json=json.dumps(synthetic_comm_trace()))
    profile = read_one(folder)
    assert profile.warnings == []
    (step,) = profile.tables["steps"].to_dict("records")  # one step over the E2E span
    assert (step["step"], step["start_us"], step["end_us"]) == (0, 0.0, 220.0)
    assert step["computing_us"] == pytest.approx(30.0)
    assert step["communication_us"] == pytest.approx(69.875)
    assert step["comm_not_overlapped_us"] == pytest.approx(40.0)
    assert step["free_us"] == pytest.approx(150.0)
    assert step["bubble_us"] == pytest.approx(20.0)  # hcom_receive time

    comm = profile.tables["comm_ops"]
    assert comm["name"].tolist() == ["hcom_allReduce__1_0_1", "hcom_receive__2_0_1"]
    assert comm["op"].tolist() == ["allreduce", "receive"]
    assert comm["group"].tolist() == ["hccl_world_group"] * 2
    assert comm["start_us"].tolist() == [0.125, 200.0]
    assert comm["transport"].iloc[0] == "SDMA"

    ops = profile.tables["device_ops"]
    assert 7 not in set(ops["stream"].dropna())  # the collective's own tasks: stood for above
    by_name = ops.set_index("name")
    assert by_name.loc["aclnnMm_MatMulV2_MatMulV2", ["op_type", "category"]].tolist() == [
        "MatMulV2",
        "compute",
    ]
    assert by_name.loc["aclnnInplaceCopy_Copy", ["category", "bytes"]].tolist() == [
        "memcpy",
        4096.0,
    ]
    assert by_name.loc["EventWait", "category"] == "other"
    assert by_name.loc["hcom_allReduce__1_0_1", "category"] == "communication"


def test_op_statistic_and_api_statistic(tmp_path: Path) -> None:
    summaries = SMALL_PROF / "mindstudio_profiler_output"
    op_csv = next(summaries.glob("op_statistic_*.csv"))
    api_csv = next(summaries.glob("api_statistic_*.csv"))
    folder = rank_folder(tmp_path, op_statistic__csv=op_csv, api_statistic__csv=api_csv)
    profile = read_one(folder)
    assert sorted(profile.tables) == ["host_ops", "op_stats"]
    stats = profile.tables["op_stats"]
    rows = kernel_rows(op_csv)
    assert stats["op_type"].tolist() == [r["OP Type"] for r in rows]
    assert stats["ratio"].tolist() == pytest.approx([float(r["Ratio(%)"]) / 100 for r in rows])
    host = profile.tables["host_ops"]
    api_rows = kernel_rows(api_csv)
    assert host["name"].tolist() == [r["API Name"] for r in api_rows]
    assert host["count"].tolist() == [int(r["Count"]) for r in api_rows]
    sync = host["name"].str.startswith("aclrtSynchronize").fillna(False)
    assert set(host.loc[sync, "kind"]) <= {"sync"}


# ---------------------------------------------------------------------------------------------
# Streaming: batch boundaries and where the metadata sits change nothing


@dataclass
class SmallBatches(EventStream):
    """The decoder with batches of a few events, counting them."""

    chunk_bytes: int = 256
    seen: ClassVar[list[int]] = []

    def __iter__(self) -> Iterator[list]:
        for batch in super().__iter__():
            SmallBatches.seen.append(len(batch))
            yield batch


def odd_trace() -> list:
    """rank0 with what the typed decoder refuses scattered through it: a non-object, args that
    are no object, a number beyond 64 bits, null args values (read as missing)."""
    events: list = raw_trace()
    start = next(e["ts"] for e in events if e.get("ph") == "X")  # within the trace's span
    odd = [
        7,
        {
            "ph": "X",
            "pid": events[0].get("pid"),
            "tid": 1,
            "ts": start,
            "dur": 1,
            "name": "odd_args",
            "args": ["not", "an", "object"],
        },
        {
            "ph": "X",
            "pid": events[0].get("pid"),
            "tid": 1,
            "ts": 10**30,
            "dur": 1,
            "name": "huge_ts",
        },
        {
            "ph": "X",
            "pid": events[0].get("pid"),
            "tid": None,
            "ts": start,
            "dur": 2,
            "name": "null_args",
            "args": {"Thread Id": None, "size(B)": None},
        },
    ]
    for k, item in enumerate(odd):
        events.insert((k + 1) * len(events) // (len(odd) + 1), item)
    return events


@pytest.mark.parametrize("trace", ["rank0", "communication", "odd"])
def test_batches_and_late_metadata_give_the_same_tables(
    tmp_path: Path, monkeypatch, trace: str
) -> None:
    """Middle batches are decoded into structs, the last one (and fallbacks) into dicts: the
    tables are the same either way."""
    events = {"rank0": raw_trace, "communication": synthetic_comm_trace, "odd": odd_trace}[trace]()
    whole = read_one(rank_folder(tmp_path / "whole", trace_view__json=json.dumps(events)))
    metadata_last = [e for e in events if not isinstance(e, dict) or e.get("ph") != "M"] + [
        e for e in events if isinstance(e, dict) and e.get("ph") == "M"
    ]
    SmallBatches.seen.clear()
    monkeypatch.setattr("advisor.formats.trace_columns.EventStream", SmallBatches)
    batched = read_one(
        rank_folder(tmp_path / "batched", trace_view__json=json.dumps(metadata_last))
    )
    assert len(SmallBatches.seen) > 3 and sum(SmallBatches.seen) == len(events)
    assert problems(batched) == problems(whole)
    assert sorted(batched.tables) == sorted(whole.tables)
    for name, table in whole.tables.items():
        pd.testing.assert_frame_equal(batched.tables[name], table, check_exact=True)
    if trace == "odd":
        assert {"odd_args", "null_args"} <= set(batched.tables["host_ops"]["name"])
        # a timestamp of 10**30 µs is read, then dropped as far off and named
        assert "huge_ts" not in set(batched.tables["host_ops"]["name"])
        assert any("more than a day away" in p and "huge_ts" in p for _, p in problems(batched))


def test_exact_parts_of_every_kind_of_timestamp() -> None:
    values = [
        "1704161511420306.491",
        "1704161511420306.5",
        "17",
        7,
        1.5,
        " 12.5 ",
        "-1.25",
        "1e3",
        None,
        True,
        "abc",
        "3.",
    ]
    whole, frac = exact_parts(values)
    expected = [
        (1704161511420306, 0.491),
        (1704161511420306, 0.5),
        (17, 0.0),
        (7, 0.0),
        (1, 0.5),
        (12, 0.5),
        (-1, -0.25),
        (1000, 0.0),
        None,
        None,
        None,
        (3, 0.0),
    ]
    for w, f, want in zip_strict(whole, frac, expected):
        if want is None:
            assert np.isnan(w) and np.isnan(f)
        else:
            assert (w, f) == pytest.approx(want, abs=1e-12)
    # one layout for every value: read by fixed slices, to the same digits
    same = ["1704161511420306.491", "1704161511420307.000", "0000000000000001.999"]
    whole, frac = exact_parts(same)
    assert whole.tolist() == [1704161511420306.0, 1704161511420307.0, 1.0]
    assert frac.tolist() == [0.491, 0.0, 0.999]  # the digits as written, not 1.999 - 1


@pytest.mark.parametrize("whole_digits", [1, 16, 18, 19])
@pytest.mark.parametrize("frac_digits", [None, 0, 3, 9])
def test_the_fixed_layout_path_reads_what_the_regex_reads(whole_digits, frac_digits) -> None:
    """Timestamps of one layout are read as a byte matrix; a value of another layout sends
    them all through the regex, which must give the same numbers, bit for bit."""
    rng = np.random.default_rng(whole_digits * 10 + (frac_digits or 0))

    def text() -> str:
        digits = "".join(map(str, rng.integers(0, 10, whole_digits)))
        if frac_digits is None:
            return digits
        return digits + "." + "".join(map(str, rng.integers(0, 10, frac_digits)))

    values = [text() for _ in range(200)]
    fast = exact_parts(values)
    by_regex = exact_parts([*values, "1e3"])
    assert np.array_equal(fast[0], by_regex[0][:-1])
    assert np.array_equal(fast[1], by_regex[1][:-1])
    # a slice of an array (its cells start inside the buffer), and arrow's large strings
    for texts in (pa.array(["x", *values], pa.string())[1:], pa.array(values, pa.large_string())):
        parts = _same_layout_parts(texts)
        if whole_digits > 18:  # beyond an int64: the regex reads them
            assert parts is None
        else:
            assert parts is not None
            assert np.array_equal(parts[0], fast[0]) and np.array_equal(parts[1], fast[1])


# ---------------------------------------------------------------------------------------------
# Launches (torch_to_npu flows) and operator shapes (Input Dims)


def raw_launches(events: list[dict]) -> dict[tuple, dict]:
    """(pid, tid, ts) of the device task each torch_to_npu flow ends at -> the flow's start."""

    def is_flow(e: dict) -> bool:
        return "torch_to_npu" in (e.get("name"), e.get("cat"))

    starts = {e["id"]: e for e in events if e.get("ph") == "s" and is_flow(e)}
    return {
        (e["pid"], e["tid"], e["ts"]): starts[e["id"]]
        for e in events
        if e.get("ph") == "f" and is_flow(e) and e["id"] in starts
    }


def aten_holding(host: pd.DataFrame, time: float, thread: int) -> pd.DataFrame:
    aten = host[host["kind"] == "aten"]
    return aten[
        (aten["thread"] == thread)
        & (aten["start_us"] <= time)
        & (time < aten["start_us"] + aten["duration_us"])
    ]


def test_rank0_trace_tasks_get_their_launch_from_torch_to_npu(tmp_path: Path) -> None:
    events = raw_trace()
    flows = raw_launches(events)
    hardware = process_events(events, "Ascend Hardware")
    launched = [flows.get((e["pid"], e["tid"], e["ts"])) for e in hardware]
    assert sum(s is not None for s in launched) == 274 and len(hardware) == 276
    profile = read_one(rank_folder(tmp_path, trace_view__json=TRACE))
    assert_contract(profile)
    ops, host = profile.tables["device_ops"], profile.tables["host_ops"]
    assert ops["launch_us"].notna().tolist() == [s is not None for s in launched]
    assert ops["launch_thread"].notna().tolist() == [s is not None for s in launched]
    found = 0
    for task, start, row in zip_strict(hardware, launched, ops.itertuples()):
        if start is None:
            continue
        gap = float(Decimal(start["ts"]) - Decimal(task["ts"]))
        assert row.launch_us - row.start_us == pytest.approx(gap, abs=1e-6)
        assert row.launch_thread == start["tid"]
        found += not aten_holding(host, row.launch_us, row.launch_thread).empty
    assert found == 274
    assert set(ops["launch_thread"].dropna()) <= set(host["thread"].dropna())


def kernel_details_of(events: list[dict]) -> str:
    """kernel_details.csv (the older header) for the trace's hardware tasks, same start times."""
    header = (OLD_KERNELS.read_text(encoding="utf-8-sig").splitlines()[0]).split(",")
    lines = [",".join(header)]
    for e in process_events(events, "Ascend Hardware"):
        row = dict.fromkeys(header, "N/A")
        row.update(
            {
                "Step Id": "1",
                "Model ID": "4294967295",
                "Task ID": str(e["args"]["Task Id"]),
                "Stream ID": str(e["args"]["Stream Id"]),
                "Name": e["name"],
                "Type": e["name"].rsplit("_", 1)[-1],
                "Accelerator Core": "AI_VECTOR_CORE",
                "Start Time(us)": e["ts"],
                "Duration(us)": str(e["dur"]),
                "Wait Time(us)": "0",
                "Block Dim": "1",
            }
        )
        lines.append(",".join(row[h] for h in header))
    return "\n".join(lines) + "\n"


def test_kernel_details_rows_get_the_launch_of_the_task_at_their_start(tmp_path: Path) -> None:
    events = raw_trace()
    flows = raw_launches(events)
    hardware = process_events(events, "Ascend Hardware")
    folder = rank_folder(
        tmp_path, trace_view__json=TRACE, kernel_details__csv=kernel_details_of(events)
    )
    profile = read_one(folder)
    assert_contract(profile)
    ops, host = profile.tables["device_ops"], profile.tables["host_ops"]
    assert len(ops) == len(hardware)
    launched = [flows.get((e["pid"], e["tid"], e["ts"])) for e in hardware]
    assert ops["launch_us"].notna().tolist() == [s is not None for s in launched]
    for start, row in zip_strict(launched, ops.itertuples()):
        if start is not None:
            assert row.launch_thread == start["tid"]
            assert not aten_holding(host, row.launch_us, row.launch_thread).empty
    # the trace-only reading gives the same launches
    alone = read_one(rank_folder(tmp_path / "alone", trace_view__json=TRACE)).tables["device_ops"]
    pd.testing.assert_series_equal(ops["launch_us"], alone["launch_us"])
    pd.testing.assert_series_equal(ops["launch_thread"], alone["launch_thread"])


def test_kernel_details_parsed_before_the_trace_read_as_if_after_it(tmp_path: Path) -> None:
    """kernel_details.csv is parsed before trace_view.json (a read-ahead child folds the trace
    meanwhile), yet the trace warns first and is listed first, and the trace fixes the
    clock: the tasks' exact starts are the trace's own, and a file of another run moves none
    of the trace's times (with its origin they came out 0.0005 µs off)."""
    lines = kernel_details_of(raw_trace()).splitlines()
    header, bad = lines[0].split(","), lines[1].split(",")
    bad[header.index("Duration(us)")] = "abc"
    kernels = "\n".join([lines[0], ",".join(bad), *lines[2:]]) + "\n"
    cut = TRACE.read_text(encoding="utf-8")[:-3]  # a truncated trace warns too
    profile = read_one(rank_folder(tmp_path, trace_view__json=cut, kernel_details__csv=kernels))
    alone = read_one(rank_folder(tmp_path / "alone", trace_view__json=cut))
    files = [Path(w.file).name for w in profile.warnings]
    assert files == ["trace_view.json", "kernel_details.csv"]
    assert "truncated" in profile.warnings[0].problem and "'abc'" in profile.warnings[1].problem
    assert profile.meta.files_read == [f"{OUT}/trace_view.json", f"{OUT}/kernel_details.csv"]
    assert profile.meta.extra["time_origin_us"] == alone.meta.extra["time_origin_us"]
    pd.testing.assert_series_equal(
        profile.tables["device_ops"]["start_us"], alone.tables["device_ops"]["start_us"]
    )
    assert profile.tables["device_ops"]["duration_us"].isna().tolist()[:2] == [True, False]
    # a file of another run, 4.6 million seconds away, moves none of the trace's times
    other = rank_folder(tmp_path / "other", trace_view__json=cut, kernel_details__csv=OLD_KERNELS)
    pd.testing.assert_series_equal(
        read_one(other).tables["host_ops"]["start_us"], alone.tables["host_ops"]["start_us"]
    )


def test_rank0_kernel_details_of_another_run_get_no_launch(tmp_path: Path) -> None:
    """A kernel_details.csv of another run has no launch (its times cannot meet the trace's
    flows); the trace's own tasks, used in its place, get theirs from torch_to_npu flows."""
    folder = rank_folder(tmp_path, kernel_details__csv=OLD_KERNELS, trace_view__json=TRACE)
    ops = read_one(folder).tables["device_ops"]
    flows = [e for e in raw_trace() if e.get("name") == "torch_to_npu" and e.get("ph") == "f"]
    assert ops["launch_us"].notna().sum() == len(flows) == 274


def shaped_trace() -> list[dict]:
    """rank0 with `Input Dims` on its cpu_op events, as torch_npu writes them with
    record_shapes=True (rank0 was recorded without)."""
    events = raw_trace()
    for k, e in enumerate(e for e in events if e.get("cat") == "cpu_op"):
        e["args"]["Input Dims"] = [[k % 7 + 1, 64], [], [3]] if k % 3 else []
    return events


def test_input_shapes_of_cpu_ops(tmp_path: Path, monkeypatch) -> None:
    events = shaped_trace()
    text = json.dumps(events, separators=(",", ":"))  # compact in the file: the same text out
    want = Counter(
        (e["name"], json.dumps(e["args"]["Input Dims"]))
        for e in events
        if e.get("cat") == "cpu_op"
        and not e["name"].startswith(("ProfilerStep#", "Optimizer.", "enumerate(DataLoader)"))
    )
    host = read_one(rank_folder(tmp_path / "whole", trace_view__json=text)).tables["host_ops"]
    shaped = host.dropna(subset=["input_shapes"])
    assert (shaped["kind"] == "aten").all()
    assert Counter(zip_strict(shaped["name"], shaped["input_shapes"])) == want
    assert "[[2, 64], [], [3]]" in set(shaped["input_shapes"])
    assert host.loc[host["level"].notna(), "input_shapes"].isna().all()  # CANN calls
    # typed batches (raw JSON) and dict batches read alike
    monkeypatch.setattr("advisor.formats.trace_columns.EventStream", SmallBatches)
    batched = read_one(rank_folder(tmp_path / "batched", trace_view__json=text))
    pd.testing.assert_frame_equal(batched.tables["host_ops"], host, check_exact=True)


def test_trace_without_shapes_has_no_input_shapes() -> None:
    host = read_one(RANK0).tables["host_ops"]
    assert "input_shapes" not in host or host["input_shapes"].isna().all()


def test_dataloader_time_counts_the_outermost_call_once(tmp_path: Path) -> None:
    """torch_npu with with_stack=True records the Python frames inside the DataLoader call
    (torch/utils/data/dataloader.py ...): they are its call stack, not more loading, and a
    nested DataLoader annotation is the same time again."""
    events = raw_trace()
    outer = [e for e in events if e.get("name", "").startswith("enumerate(DataLoader)")]
    for call in outer:
        start, dur = float(call["ts"]), float(call["dur"])
        for depth, frame in enumerate(
            (
                "torch/utils/data/dataloader.py(631): __next__",
                "torch/utils/data/dataloader.py(675): _next_data",
            )
        ):
            events.append(
                {
                    **call,
                    "name": frame,
                    "cat": "python_function",
                    "ts": f"{start + depth + 1:.3f}",
                    "dur": dur - 2 * (depth + 1),
                }
            )
        events.append(
            {**call, "name": "DataLoader.fetch", "ts": f"{start + 5:.3f}", "dur": dur - 10}
        )
    folder = rank_folder(tmp_path, trace_view__json=json.dumps(events))
    host = read_one(folder).tables["host_ops"]
    frames = host[host["name"].str.startswith("torch/utils/data/")]
    assert len(frames) == 2 * len(outer) and set(frames["kind"]) == {"python"}
    (analysis,) = advisor.analyze(folder, select=["HOST-001"]).analyses
    (finding,) = analysis.findings
    assert finding.values["loader_us"] == pytest.approx(sum(float(e["dur"]) for e in outer))
    assert finding.values["loader_calls"] == len(outer)
    assert finding.values["with_workers"] is False


def test_compile_time_is_the_compile_events_not_the_compile_and_execute_calls() -> None:
    """rank0: 11 aclopCompileAndExecute calls of 0.6-1.1 ms each hold an opCompile event of
    14-28 µs; the compile time is the latter."""
    events = raw_trace()
    compiled = [float(e["dur"]) for e in events if e.get("name") == "AscendCL@opCompile"]
    host = read_one(RANK0).tables["host_ops"]
    (analysis,) = advisor.analyze(RANK0, select=["HOST-003"]).analyses
    assert analysis.evaluation.outcomes["HOST-003"] == "passed"  # 11 short ones: no finding
    compile_rows = host[host["kind"] == "compile"]
    assert compile_rows["duration_us"].sum() == pytest.approx(sum(compiled))
    calls = host[host["kind"] == "compile_execute"]["duration_us"].sum()
    assert calls > 10 * sum(compiled)  # what the rule used to claim as compile time


def test_communication_bytes_count_sdma_and_its_parts_once() -> None:
    """msprof-analyze's genuine cluster_communication.json: per operation and rank, SDMA is
    the sum of HCCS and PCIE (0.0639 + 0.0214 = 0.0853 MB); adding all three doubled the
    bytes and halved no bandwidth but doubled every figure built on bytes."""
    cluster = json.loads((SHARED / "cluster_communication.json").read_text(encoding="utf-8"))
    ops = cluster["(0, 1)"]["step"]
    key = next(k for k in ops if k.startswith("hcom_broadcast__501_0@"))
    block = ops[key]["0"]
    info = block["Communication Bandwidth Info"]
    assert info["SDMA"]["Transit Size(MB)"] == pytest.approx(
        info["HCCS"]["Transit Size(MB)"] + info["PCIE"]["Transit Size(MB)"]
    )
    if "Communication Time Info" not in block:  # the cluster file keeps only bandwidths
        block = {
            **block,
            "Communication Time Info": {
                "Start Timestamp(us)": 1.0,
                "Elapse Time(ms)": 0.5,
                "Transit Time(ms)": 0.035,
                "Wait Time(ms)": 0.4,
            },
        }
    comm, _ = parse_communication({"1": {"collective": {key: block}}}, Clock())
    (row,) = comm.to_dict("records")
    assert row["bytes"] == pytest.approx(info["SDMA"]["Transit Size(MB)"] * MB)
    assert row["transport"] == "HCCS"  # the part that moved most, not the SDMA total


def test_a_far_off_timestamp_in_the_trace_is_ignored_and_named(tmp_path: Path) -> None:
    """One task at ts = -1e18 in trace_view.json used to be the time origin of the profile."""
    events = raw_trace()
    task = next(e for e in process_events(events, "Ascend Hardware"))
    events.append({**task, "name": "broken_clock_task", "ts": "-1000000000000000000.000"})
    folder = rank_folder(tmp_path, trace_view__json=json.dumps(events))
    profile = read_one(folder)
    full = read_one(rank_folder(tmp_path, "w_2_ascend_pt", trace_view__json=TRACE))
    assert "broken_clock_task" not in set(profile.tables["device_ops"]["name"])
    assert len(profile.tables["device_ops"]) == len(full.tables["device_ops"])
    assert profile.tables["steps"]["start_us"].tolist() == pytest.approx(
        full.tables["steps"]["start_us"].tolist()
    )
    (far,) = [w for w in profile.warnings if "more than a day away" in w.problem]
    assert "1 event" in far.problem and "broken_clock_task" in far.problem
    assert far.file == str(folder)  # the folder, not folder/<its name> (which is no file)


def test_launch_flows_pair_ids_that_are_no_numbers_or_text() -> None:
    """No writer emits a list as a flow's id, pid or tid, but the structs take any JSON: such
    values are keyed by their text, so the flows still pair (and the task's pid and tid, as
    the columns encode them, are found)."""
    from advisor.formats.trace_columns import read_columns

    def flow(ph: str, ident: object, pid: object, tid: object, ts: str) -> dict:
        return {"ph": ph, "name": "torch_to_npu", "id": ident, "pid": pid, "tid": tid, "ts": ts}

    task = {"ph": "X", "name": "MatMul", "pid": [7], "tid": 3, "ts": "1000.500", "dur": 2}
    events = [
        task,
        flow("s", [1, 2], 5, [9], "990.250"),
        flow("f", [1, 2], [7], 3, "1000.500"),
        flow("s", "other", 5, 4, "991.000"),  # never ends: no launch
    ]
    columns = read_columns([events])
    columns.concatenate()
    clock = Clock()
    clock.us(["1000.500"])
    launches = columns.launch_flows(clock)
    assert launches is not None and len(launches) == 1
    row = launches.iloc[0]
    assert (row["pid"], row["tid"]) == (columns.number["pid"][0], columns.number["tid"][0])
    assert (row["start_us"], row["launch_us"]) == (0.5, -9.75)
    assert np.isnan(row["launch_thread"])  # a tid that is no number
