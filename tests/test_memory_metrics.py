"""Memory of one run (plugins/memory_metrics.py, operator_memory.csv of the ascend_pt reader)
against real files: the PyTorch profiler traces of tests/fixtures/kineto_own (recorded with
profile_memory=True) and MindStudio Insight's genuine torch_npu export.

Expected numbers are worked out here from the raw files with the standard library only.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import shutil
import sqlite3
from collections import Counter, defaultdict
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURE_DIR

from advisor.model import Profile, ProfileMeta, conform
from advisor_plugins import memory_metrics
from advisor_plugins.ascend_pt import AscendPtReader
from advisor_plugins.kineto import KinetoReader

OWN = FIXTURE_DIR / "kineto_own"
TRACES = [OWN / f"{name}.pt.trace.json.gz" for name in ("healthy", "dataloader_bound", "ddp_rank0")]
NPU = FIXTURE_DIR / "ascend_db" / "msinsight" / "text_level1_rank0_ascend_pt"
OPERATOR_MEMORY = NPU / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv"
ALLOCATOR_CALLS = {
    "aten::empty",
    "aten::empty_strided",
    "aten::empty_like",
    "aten::new_empty",
    "aten::new_empty_strided",
    "aten::resize_",
}


def raw_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


def kineto_profile(path: Path):
    (profile,) = KinetoReader().read(path)
    return profile


# -- the Kineto reader keeps what each [memory] event allocated or freed ----------------------


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name.split(".")[0])
def test_memory_events_keep_bytes_address_and_thread(path: Path) -> None:
    events = [e for e in raw_events(path) if e.get("ph") == "i" and e.get("name") == "[memory]"]
    memory = kineto_profile(path).tables["memory"]
    assert len(memory) == len(events)
    assert memory["bytes"].tolist() == [float(e["args"]["Bytes"]) for e in events]
    assert memory["address"].tolist() == [e["args"]["Addr"] for e in events]
    assert memory["thread"].tolist() == [e["tid"] for e in events]


# -- blocks charged to operators --------------------------------------------------------------


def expected_blocks(path: Path) -> list[tuple[str, float, bool]]:
    """(operator, bytes, freed while profiling) of every allocation, the operator found by
    brute force: the shortest framework call on the allocating thread around it, allocation-
    only calls replaced by the shortest call around them."""
    events = raw_events(path)
    ops = [
        e
        for e in events
        if e.get("ph") == "X"
        and (e.get("cat") == "cpu_op" or str(e.get("name", "")).startswith("Optimizer."))
    ]

    def around(tid: int, ts: float, inside: dict | None = None) -> dict | None:
        found = [
            o
            for o in ops
            if o["tid"] == tid
            and o["ts"] <= ts < o["ts"] + o["dur"]
            and o is not inside
            and (inside is None or o["dur"] >= inside["dur"])
        ]
        return min(found, key=lambda o: (o["dur"], -o["ts"]), default=None)

    memory = [e for e in events if e.get("ph") == "i" and e.get("name") == "[memory]"]
    blocks = []
    for k, e in enumerate(memory):
        size = e["args"]["Bytes"]
        if size <= 0:
            continue
        op = around(e["tid"], e["ts"])
        while op is not None and op["name"] in ALLOCATOR_CALLS:
            outer = around(e["tid"], op["ts"], inside=op)
            if outer is None:
                break
            op = outer
        if op is None:
            continue
        addr = e["args"]["Addr"]
        later = [m for m in memory[k + 1 :] if m["args"]["Addr"] == addr]
        freed = bool(later) and later[0]["args"]["Bytes"] < 0
        blocks.append((op["name"], float(size), freed))
    return blocks


@pytest.mark.parametrize("path", TRACES[:2], ids=lambda p: p.name.split(".")[0])
def test_kineto_blocks_are_charged_to_the_operator_on_their_thread(path: Path) -> None:
    profile = kineto_profile(path)
    memory_metrics.op_allocations_from_memory(profile)
    blocks = profile.tables["op_allocations"]
    got = Counter(
        zip(blocks["name"].tolist(), blocks["bytes"].tolist(), blocks["end_us"].notna().tolist())
    )
    want = Counter(expected_blocks(path))
    assert got == want
    assert not any(name in ALLOCATOR_CALLS for name in blocks["name"].tolist())
    freed = blocks[blocks["end_us"].notna()]
    assert (freed["end_us"] > freed["start_us"]).all()


def test_kineto_op_memory_matches_the_blocks() -> None:
    path = TRACES[0]
    profile = kineto_profile(path)
    memory_metrics.op_allocations_from_memory(profile)
    memory_metrics.op_memory(profile)
    table = profile.tables["op_memory"]
    per_op: dict[str, list[float]] = defaultdict(list)
    unreleased: dict[str, float] = defaultdict(float)
    for name, size, freed in expected_blocks(path):
        per_op[name].append(size)
        unreleased[name] += 0.0 if freed else size
    assert set(table["name"]) == set(per_op)
    for row in table.itertuples():
        assert row.allocations == len(per_op[row.name])
        assert row.allocated_bytes == sum(per_op[row.name])
        assert row.max_bytes == max(per_op[row.name])
        assert row.unreleased_bytes == unreleased[row.name]
    peak = max(
        e["args"]["Total Allocated"]
        for e in raw_events(path)
        if e.get("name") == "[memory]" and e["args"]["Bytes"] > 0
    )
    assert set(table["peak_bytes"]) == {float(peak)}
    assert table["peak_held_bytes"].sum() <= peak
    assert table["peak_held_bytes"].is_monotonic_decreasing


# -- the memory curve per step -----------------------------------------------------------------


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name.split(".")[0])
def test_memory_steps_follow_the_raw_samples(path: Path) -> None:
    events = raw_events(path)
    samples = sorted(
        (e["ts"], e["args"]["Total Allocated"])
        for e in events
        if e.get("ph") == "i" and e.get("name") == "[memory]"
    )
    steps = sorted(
        (int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    profile = kineto_profile(path)
    memory_metrics.memory_steps(profile)
    table = profile.tables["memory_steps"]
    assert table["step"].tolist() == [s for s, _, _ in steps]
    previous_end = None
    for row, (_, start, end) in zip(table.itertuples(), steps):
        before = [v for t, v in samples if t < start]
        inside = [v for t, v in samples if start <= t < end]
        begin = before[-1] if before else inside[0]
        assert row.samples == len(inside)
        assert row.allocated_start_bytes == begin
        assert row.allocated_end_bytes == (inside[-1] if inside else begin)
        assert row.allocated_peak_bytes == max([begin, *inside])
        assert row.growth_bytes == row.allocated_end_bytes - begin
        if previous_end is None:
            assert math.isnan(row.end_growth_bytes)
        else:
            assert row.end_growth_bytes == row.allocated_end_bytes - previous_end
        previous_end = row.allocated_end_bytes


def test_memory_steps_draw_the_accelerator_beside_host_samples() -> None:
    profile = Profile(ProfileMeta("kineto", "test"))
    profile.tables["steps"] = pd.DataFrame({"step": [1], "start_us": [0.0], "end_us": [10.0]})
    profile.tables["memory"] = pd.DataFrame(
        {
            "time_us": [1.0, 2.0, 3.0],
            "allocated_bytes": [5e9, 100.0, 300.0],  # the host's CPU samples are the largest
            "device": ["cpu", "cuda:0", "cuda:0"],
        }
    )
    memory_metrics.memory_steps(profile)
    row = profile.tables["memory_steps"].iloc[0]
    assert row["device"] == "cuda:0"
    assert (row["allocated_start_bytes"], row["allocated_peak_bytes"]) == (100.0, 300.0)


# -- torch_npu operator_memory.csv ---------------------------------------------------------------


def raw_operator_memory() -> list[dict[str, str]]:
    with open(OPERATOR_MEMORY, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_operator_memory_csv_is_read_into_op_allocations() -> None:
    rows = raw_operator_memory()
    (profile,) = AscendPtReader().read(NPU)
    blocks = profile.tables["op_allocations"]
    assert "operator_memory.csv" in " ".join(profile.meta.files_read)
    assert len(blocks) == len(rows) == 184
    assert blocks["name"].tolist() == [r["Name"] for r in rows]
    assert blocks["bytes"].tolist() == [float(r["Size(KB)"]) * 1024 for r in rows]
    assert blocks["end_us"].isna().tolist() == [r["Release Time(us)"] == "" for r in rows]
    assert set(blocks["device"]) == {"NPU:0"}
    # times keep their digits on the folder's clock: durations as written
    start = [Decimal(r["Allocation Time(us)"].strip()) for r in rows]
    end = [Decimal(r["Release Time(us)"].strip() or "NaN") for r in rows]
    for got, first, last in zip((blocks["end_us"] - blocks["start_us"]).tolist(), start, end):
        if not last.is_nan():
            assert got == pytest.approx(float(last - first), abs=1e-3)


def test_op_memory_of_operator_memory_csv() -> None:
    rows = raw_operator_memory()
    (profile,) = AscendPtReader().read(NPU)
    memory_metrics.op_memory(profile)
    table = profile.tables["op_memory"].set_index("name")
    peak_row = max(rows, key=lambda r: float(r["Allocation Total Allocated(MB)"]))
    moment = Decimal(peak_row["Allocation Time(us)"].strip())
    per_op: dict[str, list[dict[str, str]]] = defaultdict(list)
    for r in rows:
        per_op[r["Name"]].append(r)
    assert set(table.index) == set(per_op)
    for name, own in per_op.items():
        sizes = [float(r["Size(KB)"]) * 1024 for r in own]
        held = sum(
            float(r["Size(KB)"]) * 1024
            for r in own
            if Decimal(r["Allocation Time(us)"].strip()) <= moment
            and (r["Release Time(us)"] == "" or Decimal(r["Release Time(us)"].strip()) > moment)
        )
        row = table.loc[name]
        assert row["allocations"] == len(own)
        assert row["allocated_bytes"] == sum(sizes)
        assert row["unreleased_bytes"] == sum(
            s for s, r in zip(sizes, own) if r["Release Time(us)"] == ""
        )
        assert row["peak_held_bytes"] == held
        assert row["peak_bytes"] == float(peak_row["Allocation Total Allocated(MB)"]) * 2**20
    assert table.index[0] == "aten::_foreach_add"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("Name,Allocation Time(us)\naten::mm,1\n", "missing column 'Size(KB)'"),
        ("Name,Size(KB),Allocation Time(us)\n", "no data rows"),
    ],
)
def test_a_bad_operator_memory_csv_is_a_warning(tmp_path: Path, text: str, problem: str) -> None:
    output = tmp_path / "w_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    output.mkdir(parents=True)
    (output / "memory_record.csv").write_bytes(
        (NPU / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").read_bytes()
    )
    (output / "operator_memory.csv").write_text(text, encoding="utf-8")
    (profile,) = AscendPtReader().read(tmp_path / "w_1_ascend_pt")
    assert "op_allocations" not in profile.tables
    told = [w for w in profile.warnings if w.file.endswith("operator_memory.csv")]
    assert told and all(w.problem for w in told)
    assert any(problem in w.problem for w in told)
    assert not profile.tables["memory"].empty


def test_op_memory_of_the_database_marks_a_zero_release_time_unreleased(tmp_path: Path) -> None:
    """OP_MEMORY of the level1 twin (made from operator_memory.csv by make_db.py) with the
    blocks never released written as 0 instead of NULL: the same 24 blocks stay unreleased."""
    twin = FIXTURE_DIR / "ascend_db" / "level1_twin_ascend_pt"
    copy = tmp_path / "level1_twin_ascend_pt"
    shutil.copytree(twin, copy)
    database = copy / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    with sqlite3.connect(database) as con:
        con.execute("UPDATE OP_MEMORY SET releaseTime = 0 WHERE releaseTime IS NULL")
    (profile,) = AscendPtReader().read(copy)
    assert profile.meta.extra["source"] == "db"
    blocks = profile.tables["op_allocations"]
    rows = raw_operator_memory()
    assert len(blocks) == len(rows)
    assert blocks["end_us"].isna().sum() == sum(r["Release Time(us)"] == "" for r in rows) == 24


def test_op_memory_by_hand_across_devices_and_missing_columns() -> None:
    """op_memory on five blocks worked out by hand: per (operator, device), the bytes each
    held at its device's allocated peak, largest first; without the level column the
    peak figures are missing and the order is by bytes allocated."""
    blocks = pd.DataFrame(
        {
            "name": ["a", "b", "a", "c", "b"],
            "bytes": [10.0, 20.0, 5.0, 7.0, 20.0],
            "start_us": [1.0, 2.0, 3.0, 4.0, 5.0],
            "end_us": [2.5, math.nan, math.nan, 6.0, 9.0],
            "device": ["g0", "g0", None, "g1", "g0"],
            "allocated_bytes": [10.0, 30.0, 5.0, 7.0, math.nan],
        }
    )

    def op_memory(frame: pd.DataFrame) -> list[tuple]:
        profile = Profile(
            ProfileMeta("test", "x"), {"op_allocations": conform("op_allocations", frame)}
        )
        memory_metrics.op_memory(profile)
        table = (
            profile.tables["op_memory"]
            .astype(object)
            .where(profile.tables["op_memory"].notna(), None)
        )
        return [tuple(row) for row in table.itertuples(index=False)]

    # g0 peaks at 30 bytes when b's first block is allocated (t=2): a's block (freed at 2.5)
    # and that block are alive, b's second (t=5) is not; the unnamed device and g1 peak at
    # their only block
    assert op_memory(blocks) == [
        ("b", "g0", 2, 40.0, 20.0, 20.0, 20.0, 30.0, 20.0 / 30.0),
        ("a", "g0", 1, 10.0, 10.0, 0.0, 10.0, 30.0, 10.0 / 30.0),
        ("c", "g1", 1, 7.0, 7.0, 0.0, 7.0, 7.0, 1.0),
        ("a", None, 1, 5.0, 5.0, 5.0, 5.0, 5.0, 1.0),
    ]
    assert op_memory(blocks.drop(columns="allocated_bytes")) == [
        ("b", "g0", 2, 40.0, 20.0, 20.0, None, None, None),
        ("a", "g0", 1, 10.0, 10.0, 0.0, None, None, None),
        ("c", "g1", 1, 7.0, 7.0, 0.0, None, None, None),
        ("a", None, 1, 5.0, 5.0, 5.0, None, None, None),
    ]
    assert op_memory(blocks.iloc[:0]) == []
