"""The SQLite exports: torch_npu / MindSpore's profiler database and msprof's msprof_*.db.

Fixtures (tests/fixtures/ascend_db/, where README.md says where every table comes from):
`rank0_ascend_pt` and `PROF_..._SMALLCASE` are the database twins of two text fixtures of this
repository, written by make_db.py with the standard library only; `level1_twin_ascend_pt` is
the twin of genuine text files published with MindStudio Insight (`msinsight/`);
`PROF_000001_20230818142704322_...` and `hccl_twin_ascend_pt` those of the genuine HCCL
timeline of `real/cann_timeline`, as msprof and torch_npu write it. Expected
numbers are computed from the text sources, never by the code under test.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import FIXTURE_DIR

import advisor
from advisor.cli import main
from advisor.errors import UnreadableInput
from advisor.model import Profile, contract_problems
from advisor.plugin_manager import PluginHost
from advisor.reading import read_inputs
from advisor_plugins import ascend_pt, msprof

DB_FIXTURES = FIXTURE_DIR / "ascend_db"
OUT = "ASCEND_PROFILER_OUTPUT"
RANK0_TEXT = FIXTURE_DIR / "real" / "ascend_pt" / "rank0_ascend_pt" / OUT / "trace_view.json"
RANK0_DB = DB_FIXTURES / "rank0_ascend_pt"
SMALLCASE = "PROF_000001_20260105093000123_SMALLCASE"
SMALLCASE_TEXT = FIXTURE_DIR / "msprof" / SMALLCASE
SMALLCASE_DB = DB_FIXTURES / SMALLCASE
LEVEL1_TEXT = DB_FIXTURES / "msinsight" / "text_level1_rank0_ascend_pt"
LEVEL1_DB = DB_FIXTURES / "level1_twin_ascend_pt"
HCCL_PROF = "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
HCCL_TEXT = FIXTURE_DIR / "real" / "cann_timeline" / HCCL_PROF
HCCL_MSPROF_DB = DB_FIXTURES / HCCL_PROF
HCCL_PT_DB = DB_FIXTURES / "hccl_twin_ascend_pt"
ALIGNMENT = ("copy_task_us", "unaligned_us", "unaligned_tasks")
PEER = ("waited_rank", "peer_wait_us")
SORT_KEYS = ("start_us", "time_us", "step", "name", "duration_us")


def read_pt(path: Path) -> Profile:
    (profile,) = ascend_pt.AscendPtReader().read(path)
    assert contract_problems(profile) == []
    return profile


def read_msprof(path: Path) -> list[Profile]:
    profiles = msprof.MsprofReader().read(path)
    assert all(contract_problems(p) == [] for p in profiles)
    return profiles


def problems(profile: Profile) -> list[tuple[str, str]]:
    return [(Path(w.file).name, w.problem) for w in profile.warnings]


def sorted_rows(frame: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in SORT_KEYS if c in frame]
    return frame.sort_values(keys, kind="stable").reset_index(drop=True)


def written(frame: pd.DataFrame) -> list[str]:
    """The columns holding a value (an all-missing column counts as absent)."""
    return [c for c in frame.columns if frame[c].notna().any()]


def assert_same_table(text: pd.DataFrame, db: pd.DataFrame, name: str) -> None:
    """Same rows, same written columns, values equal (numbers within 1 ns or 1e-9)."""
    assert sorted(written(text)) == sorted(written(db)), name
    assert len(text) == len(db), name
    text, db = sorted_rows(text), sorted_rows(db)
    for column in written(text):
        a, b = text[column], db[column]
        if pd.api.types.is_numeric_dtype(a) and pd.api.types.is_numeric_dtype(b):
            x, y = a.to_numpy(float, na_value=np.nan), b.to_numpy(float, na_value=np.nan)
            assert np.allclose(x, y, rtol=1e-9, atol=1e-3, equal_nan=True), (name, column)
        else:
            same = (a.astype(object) == b.astype(object)) | (a.isna() & b.isna())
            assert same.all(), (name, column, a[~same].head(3).tolist(), b[~same].head(3).tolist())


def findings(path: Path) -> list[tuple[str, float]]:
    (analysis,) = advisor.analyze(path).analyses
    return sorted((f.rule.id, round(f.impact_us or 0.0, 1)) for f in analysis.findings)


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


def trace_only(tmp_path: Path) -> Path:
    """rank0's text export as the twin's source: its trace_view.json (its kernel_details.csv
    comes from another run, which no database can hold)."""
    folder = tmp_path / "rank0_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    shutil.copy(RANK0_TEXT, folder / OUT / "trace_view.json")
    return folder


# ---------------------------------------------------------------------------------------------
# The database twin of a text export gives the same tables and the same findings


def test_torch_npu_database_gives_the_tables_of_its_text_export(tmp_path: Path) -> None:
    text, db = read_pt(trace_only(tmp_path)), read_pt(RANK0_DB)
    assert problems(text) == problems(db) == []
    assert db.meta.extra["source"] == "db" and "source" not in text.meta.extra
    assert set(text.tables) == set(db.tables) == {"steps", "device_ops", "host_ops"}
    for name in ("device_ops", "host_ops"):
        assert_same_table(text.tables[name], db.tables[name], name)
    # StepTraceTime always records a bubble (0 without receive ops); trace_view.json has a
    # bubble track only when there are receive ops, and a full text export's
    # step_trace_time.csv records the same 0
    steps = db.tables["steps"]
    assert (steps.pop("bubble_us") == 0).all()
    assert_same_table(text.tables["steps"], steps, "steps")
    # launches come from CONNECTION_IDS in the database, from torch_to_npu flows in the trace
    assert db.tables["device_ops"]["launch_us"].notna().sum() == 274


def test_torch_npu_database_gives_the_findings_of_its_text_export(tmp_path: Path) -> None:
    assert findings(RANK0_DB) == findings(trace_only(tmp_path))


def test_analysis_database_and_memory_record_give_the_tables_of_their_text_files() -> None:
    """Genuine communication.json, communication_matrix.json, memory_record.csv and
    operator_memory.csv against analysis.db's CommAnalyzer* tables, MEMORY_RECORD and OP_MEMORY
    made from them."""
    text, db = read_pt(LEVEL1_TEXT), read_pt(LEVEL1_DB)
    assert problems(text) == problems(db) == []
    assert set(text.tables) == set(db.tables) == {"comm_ops", "memory", "op_allocations"}
    for name in ("comm_ops", "memory", "op_allocations"):
        assert_same_table(text.tables[name], db.tables[name], name)
    totals = [t.meta.extra["comm_bandwidth"] for t in (text, db)]
    assert totals[0].keys() == totals[1].keys()
    for transport, values in totals[0].items():
        assert totals[1][transport] == pytest.approx(values, nan_ok=True), transport
    kinds = db.tables["comm_ops"]["kind"].value_counts().to_dict()
    assert kinds == {"link": 48, "op": 4}


def test_a_transport_the_database_leaves_out_moved_nothing(tmp_path: Path) -> None:
    """communication.json lists RDMA, PCIE and SIO with zeros; torch_npu's database leaves a
    transport that moved nothing out (MindStudio Insight's published level1 databases have
    HCCS and SDMA rows only). Without rdma_bytes the RDMA rules (COMM-004, COMM-005) asked
    for the text export, which says no more."""
    folder = tmp_path / "level1_twin_ascend_pt"
    shutil.copytree(LEVEL1_DB, folder)
    with sqlite3.connect(folder / OUT / "analysis.db") as db:
        db.execute(
            "DELETE FROM CommAnalyzerBandwidth WHERE transport_type IN ('RDMA', 'PCIE', 'SIO')"
        )
    text, dropped = read_pt(LEVEL1_TEXT), read_pt(folder)
    assert_same_table(text.tables["comm_ops"], dropped.tables["comm_ops"], "comm_ops")
    ops = dropped.tables["comm_ops"]
    assert (ops.loc[ops["kind"] == "op", "rdma_bytes"] == 0).all()
    (analysis,) = advisor.analyze(folder).analyses
    assert {analysis.evaluation.outcomes[r] for r in ("COMM-004", "COMM-005")} == {"passed"}


@pytest.mark.parametrize("folder", [LEVEL1_TEXT, LEVEL1_DB], ids=["text", "db"])
def test_communication_bandwidth_totals_are_written_in_the_report(
    folder: Path, tmp_path: Path
) -> None:
    """communication.json's "Total Op Info" (or analysis.db's rows of it) reach the JSON
    report as numbers: they once stayed NumPy floats, and writing any report of a rank with
    them stopped the run with an internal error."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(folder), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    (report,) = out.glob("prof_rule_*.json")
    hccs = json.loads(report.read_text())["profile"]["extra"]["comm_bandwidth"]["HCCS"]
    # the text export's step50 "Total Op Info": HCCS 427.596096 MB in 27.315705875 ms
    assert hccs["bytes"] == pytest.approx(427.596096e6)
    assert hccs["transit_us"] == pytest.approx(27_315.705875)
    assert hccs["bandwidth_gbps"] == pytest.approx(427.596096 / 27.315705875)
    totals = read_pt(folder).meta.extra["comm_bandwidth"]
    assert {type(v) for t in totals.values() for v in t.values()} == {float}


def test_the_environment_in_meta_data_reaches_the_env_rules(tmp_path: Path) -> None:
    """torch_npu writes the environment into META_DATA's ENV_VARIABLES (a JSON object, as in
    MindStudio Insight's published level1 databases); the text export puts it in
    profiler_metadata.json. Read from the database it became meta.extra only, and the ENV
    rules said the profile never records it."""
    folder = tmp_path / "rank0_ascend_pt"
    shutil.copytree(RANK0_DB, folder)
    env = {"ACLNN_CACHE_LIMIT": "1000", "PYTORCH_NPU_ALLOC_CONF": "", "ASCEND_LAUNCH_BLOCKING": ""}
    with sqlite3.connect(folder / OUT / "ascend_pytorch_profiler_0.db") as db:
        db.execute("INSERT INTO META_DATA VALUES ('ENV_VARIABLES', ?)", (json.dumps(env),))
    (analysis,) = advisor.analyze(folder).analyses
    metadata = analysis.profile.tables["metadata"]
    recorded = metadata[metadata["key"].str.startswith("env.")]
    assert dict(zip(recorded["key"], recorded["value"])) == {f"env.{k}": v for k, v in env.items()}
    assert set(recorded["source"]) == {f"{OUT}/ascend_pytorch_profiler_0.db"}
    advice = analysis.profile.tables["env_advice"]
    assert set(advice["name"]) <= set(env) and len(advice)
    assert analysis.evaluation.outcomes["ENV-005"] == "fired"  # a small aclnn cache


def test_msprof_database_gives_the_tables_of_its_text_export() -> None:
    (text,), (db,) = read_msprof(SMALLCASE_TEXT), read_msprof(SMALLCASE_DB)
    assert db.meta.device_id == text.meta.device_id == "0"
    assert db.meta.extra["source"] == "db"
    assert db.meta.files_read == ["device_0/info.json.0", "msprof_20260105093512.db"]
    assert db.meta.extra["ai_core_num"] == text.meta.extra["ai_core_num"]  # info.json.0
    # msprof_*.db has no iteration or operator-statistic table: step_trace and op_statistic
    # exist in text only (op_stats is then derived from the tasks)
    assert set(text.tables) - set(db.tables) == {"steps", "op_stats"}
    assert_same_table(text.tables["host_ops"], db.tables["host_ops"], "host_ops")
    ops = text.tables["device_ops"]
    communication = ops["core_type"] == "COMMUNICATION"
    assert (ops.loc[communication, "block_dim"] == 0).all()  # op_summary writes Block Num 0
    ops = ops.assign(block_dim=ops["block_dim"].mask(communication))  # the db has none
    assert_same_table(ops, db.tables["device_ops"], "device_ops")


def test_msprof_database_counter_becomes_each_devices_aicore_freq(tmp_path: Path) -> None:
    """AICORE_FREQ of msprof's database (deviceId, timestampNs, freq in MHz, the msprof
    database reference's form) gives the device's aicore_freq table as the timeline's
    `AI Core Freq` counter does: its own samples only, on its tasks' clock, the last holding
    to the end of its last task or collective, rated at info.json's aic_frequency (1800)."""
    folder = shutil.copytree(SMALLCASE_DB, tmp_path / SMALLCASE)
    (path,) = folder.glob("msprof_*.db")
    with sqlite3.connect(path) as con:
        first, last = con.execute("SELECT MIN(startNs), MAX(endNs) FROM TASK").fetchone()
        middle = (first + last) // 2
        con.execute(
            "CREATE TABLE AICORE_FREQ (deviceId INTEGER, timestampNs INTEGER, freq INTEGER)"
        )
        rows = [(0, middle, 1000), (0, first, 1800), (1, first + 1000, 500)]
        con.executemany("INSERT INTO AICORE_FREQ VALUES (?, ?, ?)", rows)
    (profile,) = read_msprof(folder)
    freq = profile.tables["aicore_freq"]
    origin = profile.tables["device_ops"]["start_us"].min()  # the first task starts at `first`
    assert freq["freq_mhz"].tolist() == [1800.0, 1000.0]  # device 1's sample left out
    assert (freq["start_us"] - origin).tolist() == pytest.approx([0.0, (middle - first) / 1000])
    ops = profile.tables["device_ops"]
    end = (ops["start_us"] + ops["duration_us"]).max()  # a collective's, after the last task
    assert end - origin > (last - first) / 1000
    assert freq["end_us"].tolist()[1] == pytest.approx(end)
    assert freq["rated_mhz"].tolist() == [1800.0, 1800.0]
    assert "msprof_20260105093512.db" in profile.meta.files_read
    assert "aicore_freq" not in read_msprof(SMALLCASE_DB)[0].tables  # no table: none


def test_msprof_database_gives_the_findings_of_the_same_text_tables(tmp_path: Path) -> None:
    text = shutil.copytree(SMALLCASE_TEXT, tmp_path / SMALLCASE)
    for kind in ("step_trace", "op_statistic"):  # what the database has no table for
        for path in (text / "mindstudio_profiler_output").glob(f"{kind}_*.csv"):
            path.unlink()
    assert findings(SMALLCASE_DB) == findings(text)
    assert any(rule == "OP-005" for rule, _ in findings(SMALLCASE_DB))


def hccl_copies_in_the_raw_timeline() -> tuple[int, float, float]:
    """(unaligned copy tasks, their µs, all copy µs) counted on the genuine HCCL timeline's
    task args directly: SDMA Memcpy / Reduce_Inline over 512 bytes, not ON_CHIP."""
    events = json.loads((HCCL_TEXT / "device_0" / "timeline" / "hccl_0_2_1.json").read_text())
    copies = [
        e
        for e in events
        if e.get("ph") == "X"
        and e.get("args", {}).get("task type") in ("Memcpy", "Reduce_Inline")
        and e["args"]["transport type"] == "SDMA"
        and e["args"]["link type"] != "ON_CHIP"
        and e["args"]["size(Byte)"] > 512
    ]
    unaligned = [e for e in copies if e["args"]["size(Byte)"] % 512]
    return len(unaligned), sum(e["dur"] for e in unaligned), sum(e["dur"] for e in copies)


def longest_peer_wait_in_the_raw_timeline() -> tuple[int, float]:
    """(dst rank, µs) of the longest Notify_Wait on another rank in the genuine HCCL timeline,
    read from its task args directly (its one all-reduce holds every task)."""
    events = json.loads((HCCL_TEXT / "device_0" / "timeline" / "hccl_0_2_1.json").read_text())
    waits = [
        e
        for e in events
        if e.get("name") == "Notify_Wait"
        and e["args"]["dst rank"] not in (e["args"]["src rank"], 4294967295)
    ]
    longest = max(waits, key=lambda e: e["dur"])
    return longest["args"]["dst rank"], longest["dur"]


@pytest.mark.parametrize("folder", [HCCL_MSPROF_DB, HCCL_PT_DB], ids=["msprof", "torch_npu"])
def test_hccl_tasks_of_a_database_give_the_byte_alignment_of_its_timeline(folder: Path) -> None:
    """COMMUNICATION_TASK_INFO (with TASK's times and the HCCL enums) gives each collective
    the transport and SDMA copy figures the text export's HCCL timeline gives: COMM-003 fires
    on a database export with the timeline's figures (it was not applicable there before)."""
    count, unaligned_us, copy_us = hccl_copies_in_the_raw_timeline()
    assert count == 14  # the genuine timeline does hold unaligned copies
    (text,) = advisor.analyze(HCCL_TEXT).analyses
    (db,) = advisor.analyze(folder).analyses
    columns = ["name", "op", "transport", "duration_us", *ALIGNMENT, *PEER]
    assert_same_table(
        text.profile.tables["comm_ops"][columns], db.profile.tables["comm_ops"][columns], "comm"
    )
    # and the peer its longest wait waited for: rank 2 (32.8 ms of the 41.5 ms all-reduce)
    rank, wait_us = longest_peer_wait_in_the_raw_timeline()
    assert (rank, wait_us) == (2, 32754.55)
    for analysis in (text, db):
        comm = analysis.profile.tables["comm_ops"]
        assert comm["waited_rank"].tolist() == [rank]
        assert comm["peer_wait_us"].tolist() == pytest.approx([wait_us])
    (finding,) = [f for f in db.findings if f.rule.id == "COMM-003"]
    assert finding.values["task_count"] == count
    assert finding.values["unaligned_total_us"] == pytest.approx(unaligned_us)
    assert finding.values["copy_us"] == pytest.approx(copy_us)
    (same,) = [f for f in text.findings if f.rule.id == "COMM-003"]
    assert finding.message == same.message


def test_level0_hccl_tasks_give_no_alignment_not_an_alignment_of_zero(tmp_path: Path) -> None:
    """At level 0 the task rows carry N/A for transport and link and no size (the database
    reference): the figures are unknown, so COMM-003 is not applicable and says what to
    collect, instead of passing on zeros."""
    folder = shutil.copytree(HCCL_PT_DB, tmp_path / "hccl_twin_ascend_pt")
    with sqlite3.connect(folder / OUT / "ascend_pytorch_profiler_0.db") as con:
        con.execute(
            "UPDATE COMMUNICATION_TASK_INFO SET transportType = 65534, linkType = 65534, size = 0"
        )
    (analysis,) = advisor.analyze(folder).analyses
    comm = analysis.profile.tables["comm_ops"]
    assert len(comm) == 1 and not {*ALIGNMENT, *PEER} & set(written(comm))
    assert analysis.evaluation.outcomes["COMM-003"] == "not_applicable"


def test_analysis_database_ops_take_the_alignment_of_their_hccl_tasks(tmp_path: Path) -> None:
    """With analysis.db's CommAnalyzerTime (communication.json's twin) beside the profiler
    database, the ops come from it, and take the byte alignment of the HCCL tasks of the op of
    the same name, as the text export's ops take the trace's."""
    folder = shutil.copytree(HCCL_PT_DB, tmp_path / "hccl_twin_ascend_pt")
    with sqlite3.connect(folder / OUT / "analysis.db") as con:
        con.execute(
            "CREATE TABLE CommAnalyzerTime (hccl_op_name TEXT, group_name TEXT, "
            "start_timestamp NUMERIC, elapse_time NUMERIC, transit_time NUMERIC, "
            "wait_time NUMERIC, synchronization_time NUMERIC, idle_time NUMERIC, step TEXT, "
            "type TEXT)"
        )
        # the op's own start (µs) and length (ms), its time split made up: only its name
        # and place matter here
        con.execute(
            "INSERT INTO CommAnalyzerTime VALUES ('Default/AllReduce-op534_0', 'group', "
            "56635868946.3, 41.5343, 30.0, 10.0, 1.0, 0.5, 'step', 'collective')"
        )
    comm = read_pt(folder).tables["comm_ops"]
    ops = comm[comm["kind"] == "op"]
    assert len(ops) == 1 and ops["wait_us"].tolist() == [10_000.0]  # analysis.db's row
    count, unaligned_us, copy_us = hccl_copies_in_the_raw_timeline()
    assert ops["unaligned_tasks"].tolist() == [count]
    assert ops["unaligned_us"].tolist() == pytest.approx([unaligned_us])
    assert ops["copy_task_us"].tolist() == pytest.approx([copy_us])
    assert ops["waited_rank"].tolist() == [longest_peer_wait_in_the_raw_timeline()[0]]


def test_a_database_named_on_its_own_reads_like_its_folder(tmp_path: Path) -> None:
    """`advisor run .../ascend_pytorch_profiler_0.db` or `.../msprof_*.db`: the file is
    claimed and read alone, giving the tables the folder gives."""
    pt_file = RANK0_DB / OUT / "ascend_pytorch_profiler_0.db"
    (alone,), folder = read_inputs([pt_file], PluginHost()).profiles, read_pt(RANK0_DB)
    assert alone.meta.path == str(pt_file) and alone.meta.extra["source"] == "db"
    assert set(alone.tables) == set(folder.tables)
    for name in folder.tables:
        assert_same_table(folder.tables[name], alone.tables[name], name)
    (ms_file,) = SMALLCASE_DB.glob("msprof_*.db")
    (ms_alone,) = read_inputs([ms_file], PluginHost()).profiles
    (ms_folder,) = read_msprof(SMALLCASE_DB)
    assert ms_file.name in ms_alone.meta.files_read and ms_alone.meta.extra["source"] == "db"
    assert_same_table(ms_folder.tables["device_ops"], ms_alone.tables["device_ops"], "device_ops")
    result = CliRunner().invoke(main, ["run", str(pt_file), "-o", str(tmp_path / "out"), "-q"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "prof_rule_0.json").is_file()


def test_a_broken_database_named_on_its_own_is_one_line_exit_3(tmp_path: Path) -> None:
    broken = tmp_path / "ascend_pytorch_profiler_3.db"
    broken.write_bytes(b"not a database at all" * 100)
    result = CliRunner().invoke(main, ["run", str(broken), "-o", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert f"advisor: {broken}: " in result.output and "Traceback" not in result.output


# ---------------------------------------------------------------------------------------------
# Which source is read when both are there


def test_torch_npu_folder_with_both_reads_the_database(tmp_path: Path) -> None:
    folder = trace_only(tmp_path)
    for path in (RANK0_DB / OUT).iterdir():
        shutil.copy(path, folder / OUT / path.name)
    profile = read_pt(folder)
    assert profile.meta.extra["source"] == "db"
    assert profile.meta.files_read == [
        f"{OUT}/ascend_pytorch_profiler_0.db",
        f"{OUT}/analysis.db",
    ]
    result = CliRunner().invoke(main, ["inspect", str(folder)])
    assert result.exit_code == 0
    assert f"files read: 2 (source: db): {OUT}/ascend_pytorch_profiler_0.db" in result.output


def test_msprof_folder_with_both_reads_the_csvs(tmp_path: Path) -> None:
    folder = shutil.copytree(SMALLCASE_TEXT, tmp_path / SMALLCASE)
    shutil.copy(next(SMALLCASE_DB.glob("msprof_*.db")), folder)
    (profile,) = read_msprof(folder)
    assert "source" not in profile.meta.extra
    assert not any(f.endswith(".db") for f in profile.meta.files_read)
    assert findings(folder) == findings(SMALLCASE_TEXT)


def test_msprof_database_only_for_devices_no_csv_gave(tmp_path: Path) -> None:
    """step_trace without op_summary: the tasks from the database, the steps from the CSV."""
    folder = shutil.copytree(SMALLCASE_TEXT, tmp_path / SMALLCASE)
    merged = folder / "mindstudio_profiler_output"
    for kind in ("op_summary", "api_statistic"):
        next(merged.glob(f"{kind}_*.csv")).unlink()
    shutil.copy(next(SMALLCASE_DB.glob("msprof_*.db")), folder)
    (profile,) = read_msprof(folder)
    assert profile.meta.extra["source"] == "db"
    assert {"steps", "device_ops", "host_ops", "op_stats"} <= set(profile.tables)
    assert findings(folder) == findings(SMALLCASE_TEXT)


# ---------------------------------------------------------------------------------------------
# Genuine databases (MindStudio Insight's test data)


# ---------------------------------------------------------------------------------------------
# Read-only, and robust


def test_reading_never_writes_to_the_input_folder(tmp_path: Path) -> None:
    folders = [
        shutil.copytree(RANK0_DB, tmp_path / "rank0_ascend_pt"),
        shutil.copytree(SMALLCASE_DB, tmp_path / SMALLCASE),
    ]
    before = [snapshot(f) for f in folders]
    result = read_inputs(folders, PluginHost())
    assert result.input_errors == [] and len(result.profiles) == 2
    assert [snapshot(f) for f in folders] == before  # no -journal, -wal or -shm, no mtime


def test_a_read_only_or_locked_database_still_reads(tmp_path: Path) -> None:
    folder = shutil.copytree(RANK0_DB, tmp_path / "rank0_ascend_pt")
    db = folder / OUT / "ascend_pytorch_profiler_0.db"
    writer = sqlite3.connect(db)
    writer.execute("BEGIN EXCLUSIVE")  # another process writing: the file is locked
    try:
        for path in (db, db.parent):
            path.chmod(0o555 if path.is_dir() else 0o444)
        assert len(read_pt(folder).tables["device_ops"]) == 276
    finally:
        writer.rollback()
        writer.close()
        db.parent.chmod(0o755)
        db.chmod(0o644)


def test_a_write_ahead_log_beside_the_database_is_named(tmp_path: Path) -> None:
    folder = shutil.copytree(RANK0_DB, tmp_path / "rank0_ascend_pt")
    (folder / OUT / "ascend_pytorch_profiler_0.db-wal").write_bytes(b"\0" * 64)
    profile = read_pt(folder)
    assert problems(profile) == [
        (
            "ascend_pytorch_profiler_0.db",
            "ascend_pytorch_profiler_0.db-wal beside it is not read (was the profiler still "
            "writing?)",
        )
    ]


@pytest.mark.parametrize("content", [b"", b"not a database at all\n" * 40])
def test_a_file_that_is_no_database_is_one_warning_and_the_text_is_read(
    tmp_path: Path, content: bytes
) -> None:
    folder = trace_only(tmp_path)
    (folder / OUT / "ascend_pytorch_profiler_0.db").write_bytes(content)
    profile = read_pt(folder)
    ((file, problem),) = problems(profile)
    assert file == "ascend_pytorch_profiler_0.db" and "\n" not in problem
    assert "source" not in profile.meta.extra and len(profile.tables["device_ops"]) == 276


def test_a_folder_with_only_a_broken_database_is_unreadable_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "w_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    (folder / OUT / "ascend_pytorch_profiler_0.db").write_bytes(b"garbage " * 100)
    with pytest.raises(UnreadableInput) as caught:
        ascend_pt.AscendPtReader().read(folder)
    assert "ascend_pytorch_profiler_0.db" in caught.value.problem
    assert "\n" not in str(caught.value)
    prof = tmp_path / "PROF_000001_20260101000000000_BROKEN"
    prof.mkdir()
    (prof / "msprof_20260101000000.db").write_bytes(b"garbage " * 100)
    with pytest.raises(UnreadableInput) as caught:
        msprof.MsprofReader().read(prof)
    assert "msprof_20260101000000.db" in caught.value.problem
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize("kept", [0.25, 0.5, 0.9])
def test_a_truncated_database_is_named_in_one_line_not_a_crash(tmp_path: Path, kept: float) -> None:
    """Cut short, a database either opens (what can be read is, each failing table one
    warning) or is unreadable in one line; the reader never fails."""
    folder = shutil.copytree(RANK0_DB, tmp_path / "rank0_ascend_pt")
    db = folder / OUT / "ascend_pytorch_profiler_0.db"
    db.write_bytes(db.read_bytes()[: int(db.stat().st_size * kept)])
    result = read_inputs([folder], PluginHost())
    lines = [e.problem for e in result.input_errors] + [
        w.problem for p in result.profiles for w in p.warnings if Path(w.file).name == db.name
    ]
    assert lines and all(db.name in line or "malformed" in line for line in lines)
    assert all("\n" not in line and " failed: " not in line for line in lines)


def edited(tmp_path: Path, source: Path, *statements: str) -> Path:
    folder = shutil.copytree(source, tmp_path / source.name)
    db = next(folder.rglob("ascend_pytorch_profiler_0.db"), None) or next(folder.glob("*.db"))
    con = sqlite3.connect(db)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()
    return folder


def test_missing_tables_and_columns_are_absent_tables_and_columns(tmp_path: Path) -> None:
    """Older or newer CANN: no PMU table, no opState, a renamed block count, an unknown table
    and column; nothing is a warning, each missing piece is missing from the tables."""
    folder = edited(
        tmp_path,
        SMALLCASE_DB,
        "DROP TABLE TASK_PMU_INFO",
        "ALTER TABLE COMPUTE_TASK_INFO DROP COLUMN opState",
        "ALTER TABLE COMPUTE_TASK_INFO RENAME COLUMN blockNum TO blockDim",
        "ALTER TABLE TASK ADD COLUMN depth INTEGER",
        "CREATE TABLE NEWER_THAN_US (x INTEGER)",
    )
    (profile,) = read_msprof(folder)
    assert problems(profile) == []
    ops = profile.tables["device_ops"]
    assert "op_state" not in written(ops) and "vec_ratio" not in written(ops)
    assert ops["block_dim"].notna().sum() == 27


@pytest.mark.parametrize(
    "statement, table",
    [
        ("DROP TABLE PYTORCH_API", "steps"),
        ("DROP TABLE STEP_TIME", "device_ops"),
        ("DROP TABLE TASK", "host_ops"),
        ("DROP TABLE CANN_API", "device_ops"),
    ],
)
def test_a_torch_npu_database_without_a_table_reads_the_rest(
    tmp_path: Path, statement: str, table: str
) -> None:
    profile = read_pt(edited(tmp_path, RANK0_DB, statement))
    assert problems(profile) == [] and table in profile.tables


def test_a_missing_string_table_leaves_names_unknown_not_a_crash(tmp_path: Path) -> None:
    folder = edited(tmp_path, SMALLCASE_DB, "DROP TABLE STRING_IDS")
    profiles = msprof.MsprofReader().read(folder)
    assert profiles and all(p.tables["device_ops"]["name"].isna().all() for p in profiles)


def test_a_mindspore_database_is_read_as_mindspore(tmp_path: Path) -> None:
    folder = tmp_path / "rank-0_1_ascend_ms"
    shutil.copytree(RANK0_DB / OUT, folder / OUT)
    (folder / OUT / "ascend_pytorch_profiler_0.db").rename(
        folder / OUT / "ascend_mindspore_profiler_0.db"
    )
    profile = read_pt(folder)
    assert profile.meta.framework == "MindSpore" and profile.meta.source_format == "ascend-ms"
    assert len(profile.tables["device_ops"]) == 276


def test_database_files_are_found_by_rank(tmp_path: Path) -> None:
    folder = tmp_path / "w_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    for rank in (1, 3):
        shutil.copy(
            RANK0_DB / OUT / "ascend_pytorch_profiler_0.db",
            folder / OUT / f"ascend_pytorch_profiler_{rank}.db",
        )
    (folder / "profiler_info_3.json").write_text('{"rank_id": 3}', encoding="utf-8")
    profile = read_pt(folder)
    assert profile.meta.files_read[-1] == f"{OUT}/ascend_pytorch_profiler_3.db"
    assert profile.meta.rank == 3


def test_no_file_is_opened_for_writing(tmp_path: Path, monkeypatch) -> None:
    """Belt and braces for the read-only URI: every connection is to a read-only URI."""
    seen: list[str] = []
    real = sqlite3.connect

    def spy(target, *args, **kwargs):
        seen.append(str(target))
        return real(target, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", spy)
    read_pt(RANK0_DB)
    assert seen and all("mode=ro" in s and "immutable=1" in s for s in seen)
    assert os.access(RANK0_DB / OUT / "analysis.db", os.R_OK)
