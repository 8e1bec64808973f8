"""The communication facts behind COMM-004..006: the per-transport figures of
communication.json (real files), the MatMul overlap of each collective, and the rules on real
profiles that lack them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURE_DIR, REAL

import advisor
from advisor import intervals
from advisor.formats.decimal_clock import Clock
from advisor.model import Profile, ProfileMeta, conform
from advisor_plugins.ascend_pt import AscendPtReader
from advisor_plugins.ascend_pt.communication import parse_communication
from advisor_plugins.comm_metrics import compute_overlap, covered_before

TEXT = FIXTURE_DIR / "ascend_db" / "msinsight" / "text_level1_rank0_ascend_pt"
DB_TWIN = FIXTURE_DIR / "ascend_db" / "level1_twin_ascend_pt"
PER_TRANSPORT = [
    "sdma_bytes",
    "sdma_transit_us",
    "sdma_bandwidth_gbps",
    "rdma_bytes",
    "rdma_transit_us",
    "rdma_bandwidth_gbps",
]


def raw_ops(path: Path) -> dict[str, dict]:
    """op name -> its `Communication Bandwidth Info` in a communication.json."""
    data = json.loads(path.read_text())
    return {
        key.partition("@")[0]: block["Communication Bandwidth Info"]
        for step in data.values()
        for kind in step.values()
        for key, block in kind.items()
        if not key.startswith("Total Op Info")
    }


def ops_of(profile: Profile) -> pd.DataFrame:
    comm = profile.tables["comm_ops"]
    return comm[comm["kind"] == "op"].set_index("name")


def test_per_transport_figures_are_the_files() -> None:
    (profile,) = AscendPtReader().read(TEXT)
    ops = ops_of(profile)
    raw = raw_ops(TEXT / "ASCEND_PROFILER_OUTPUT" / "communication.json")
    assert set(ops.index) == set(raw) and len(raw) == 4
    for name, info in raw.items():
        sdma, rdma = info["SDMA"], info["RDMA"]
        assert ops.at[name, "sdma_bytes"] == pytest.approx(sdma["Transit Size(MB)"] * 1e6)
        assert ops.at[name, "sdma_transit_us"] == pytest.approx(sdma["Transit Time(ms)"] * 1e3)
        assert ops.at[name, "sdma_bandwidth_gbps"] == pytest.approx(sdma["Bandwidth(GB/s)"])
        assert ops.at[name, "rdma_bytes"] == pytest.approx(rdma["Transit Size(MB)"] * 1e6)
        assert ops.at[name, "rdma_transit_us"] == pytest.approx(rdma["Transit Time(ms)"] * 1e3)
    links = profile.tables["comm_ops"].query("kind == 'link'")
    assert links[PER_TRANSPORT].isna().all().all()  # links carry their own transport


def test_database_twin_gives_the_same_per_transport_figures() -> None:
    (text,) = AscendPtReader().read(TEXT)
    (db,) = AscendPtReader().read(DB_TWIN)
    left, right = ops_of(text)[PER_TRANSPORT], ops_of(db)[PER_TRANSPORT].loc[ops_of(text).index]
    assert np.allclose(left.to_numpy(float), right.to_numpy(float), rtol=1e-9)


def test_sdma_parts_are_added_when_the_file_has_no_sdma_entry() -> None:
    block = {
        "Communication Time Info": {"Start Timestamp(us)": 1.0, "Elapse Time(ms)": 1.0},
        "Communication Bandwidth Info": {
            "HCCS": {"Transit Size(MB)": 3.0, "Transit Time(ms)": 0.2, "Bandwidth(GB/s)": 15},
            "PCIE": {"Transit Size(MB)": 1.0, "Transit Time(ms)": 0.2, "Bandwidth(GB/s)": 5},
        },
    }
    comm, _ = parse_communication({"step1": {"collective": {"hcom_allReduce_1@g": block}}}, Clock())
    row = comm.iloc[0]
    assert row["sdma_bytes"] == pytest.approx(4e6)
    assert row["sdma_transit_us"] == pytest.approx(400)
    assert row["sdma_bandwidth_gbps"] == pytest.approx(4.0 / 0.4)  # MB per ms is GB/s
    assert "rdma_bytes" not in comm  # no RDMA entry: unknown, not zero


def test_covered_before_counts_the_union_before_each_point() -> None:
    merged = intervals.merge(np.array([10.0, 30.0, 35.0]), np.array([20.0, 40.0, 38.0]))
    points = np.array([0.0, 10.0, 15.0, 20.0, 25.0, 30.0, 39.0, 50.0])
    assert covered_before(merged, points).tolist() == [0, 0, 5, 10, 10, 10, 19, 20]
    assert covered_before(intervals.merge(np.empty(0), np.empty(0)), points).tolist() == [0] * 8


def test_compute_overlap_counts_matmul_time_only() -> None:
    device_ops = pd.DataFrame(
        {
            "name": ["MatMul_a", "Add", "b_MatMul", "MatMul_c"],
            "op_type": ["MatMulV2", "Add", None, "MatMulV2"],
            "core_type": "AI_CORE",
            "category": ["compute", "compute", "compute", "communication"],
            "start_us": [0.0, 100.0, 200.0, 0.0],
            "duration_us": [150.0, 300.0, 50.0, 1000.0],
        }
    )
    comm = pd.DataFrame(
        {
            "name": ["allreduce", "broadcast", "0->1", "late"],
            "kind": ["op", "op", "link", "op"],
            "start_us": [100.0, 160.0, 100.0, np.nan],
            "duration_us": [200.0, 30.0, 200.0, 10.0],
        }
    )
    profile = Profile(
        ProfileMeta("test", "x"),
        {"device_ops": conform("device_ops", device_ops), "comm_ops": conform("comm_ops", comm)},
    )
    compute_overlap(profile)
    overlap = profile.tables["comm_ops"]["compute_overlap_us"].tolist()
    # allreduce 100-300: MatMul_a 100-150 (50) + b_MatMul by name 200-250 (50); the Add and the
    # communication task named MatMul_c do not count
    assert overlap[:2] == [100.0, 0.0]
    assert np.isnan(overlap[2]) and np.isnan(overlap[3])  # a link; an op without a start


def test_rules_need_the_per_transport_files() -> None:
    """Kineto records no per-transport figures: the rules say what is missing, and do not guess."""
    trace = REAL / "kineto" / "nccl_parser_config__nccl_data.json.gz"
    result = advisor.analyze(trace, select=["COMM-004", "COMM-005", "COMM-006"])
    (analysis,) = result.analyses
    outcomes = analysis.evaluation.outcomes
    assert {outcomes[r] for r in ("COMM-004", "COMM-005", "COMM-006")} == {"not_applicable"}
    missing = {rule.id: needs for rule, needs in analysis.evaluation.not_applicable}
    assert "comm_ops.sdma_bytes" in missing["COMM-004"]
    assert "comm_ops.rdma_transit_us" in missing["COMM-005"]


def test_packets_and_retransmission_pass_on_the_real_profile() -> None:
    (analysis,) = advisor.analyze(TEXT, select=["COMM-004", "COMM-005"]).analyses
    assert analysis.evaluation.outcomes == {"COMM-004": "passed", "COMM-005": "passed"}


def _hccl_trace() -> list[dict]:
    """One all-reduce on torch_npu's Communication process with three SDMA copy tasks on its
    plane: 1,000 bytes (off the 512-byte grid), 1,024 bytes, and an on-chip 1,000 bytes; and
    its notify tasks (rank 0's): a wait without ranks, longer waits with no peer (dst rank
    2**32 - 1) or on its own rank, a longer Notify_Record, and two waits of 8 µs on ranks 3 then
    2 (the earlier is the longest wait on a peer)."""
    base = 1_000_000_000_000_000

    def event(tid: int, name: str, start: int, dur: float, **args: object) -> dict:
        return {"ph": "X", "pid": 10, "tid": tid, "name": name, "ts": str(base + start),
                "dur": dur, "args": args}  # fmt: skip

    def task(start: int, dur: float, size: int, link: str) -> dict:
        args = {"transport type": "SDMA", "size(Byte)": size, "stream id": 7,
                "task type": "Memcpy", "link type": link}  # fmt: skip
        return event(2, "Memcpy", start, dur, **args)

    def notify(start: int, dur: float, kind: str, dst: int) -> dict:
        args = {"transport type": "LOCAL", "task type": kind, "src rank": 0, "dst rank": dst}
        return event(2, kind, start, dur, **args)

    return [
        {"ph": "M", "pid": 10, "tid": 0, "name": "process_name", "args": {"name": "Communication"}},
        {
            "ph": "M",
            "pid": 10,
            "tid": 1,
            "name": "thread_name",
            "args": {"name": "Group hccl_world_group Communication"},
        },  # fmt: skip
        {"ph": "M", "pid": 10, "tid": 2, "name": "thread_name", "args": {"name": "Plane 0"}},
        event(1, "hcom_allReduce__1_0_1", 100, 50.0),
        task(110, 10.0, 1000, "HCCS"),
        task(120, 4.0, 1024, "HCCS"),
        task(130, 2.0, 1000, "ON_CHIP"),
        event(
            2, "Notify_Wait", 140, 5.0, **{"transport type": "LOCAL", "task type": "Notify_Wait"}
        ),
        notify(141, 30.0, "Notify_Wait", 4294967295),
        notify(142, 20.0, "Notify_Wait", 0),
        notify(143, 40.0, "Notify_Record", 5),
        notify(144, 8.0, "Notify_Wait", 3),
        notify(145, 8.0, "Notify_Wait", 2),
    ]


@pytest.mark.parametrize("with_json", [False, True], ids=["trace", "communication.json"])
def test_byte_alignment_from_the_hccl_tasks_of_trace_view(tmp_path: Path, with_json: bool) -> None:
    out = tmp_path / "w_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "trace_view.json").write_text(json.dumps(_hccl_trace()))
    if with_json:  # the file's op wins and takes the trace's task figures by name
        block = {
            "Communication Time Info": {
                "Start Timestamp(us)": 1_000_000_000_000_100.0,
                "Elapse Time(ms)": 0.05,
                "Transit Time(ms)": 0.016,
            },
            "Communication Bandwidth Info": {
                "SDMA": {"Transit Size(MB)": 0.003024, "Transit Time(ms)": 0.016}
            },
        }
        data = {"step1": {"collective": {"hcom_allReduce__1_0_1@hccl_world_group": block}}}
        (out / "communication.json").write_text(json.dumps(data))
    (profile,) = AscendPtReader().read(out.parent)
    (op,) = profile.tables["comm_ops"].to_dict("records")
    assert op["copy_task_us"] == pytest.approx(14.0)  # 10 + 4: the ON_CHIP copy is left out
    assert op["unaligned_us"] == pytest.approx(10.0)
    assert op["unaligned_tasks"] == 1
    assert (op["sdma_bytes"] == pytest.approx(3024)) if with_json else pd.isna(op.get("sdma_bytes"))
    assert (op["waited_rank"], op["peer_wait_us"]) == (3, 8.0)  # the peer, not its own wait


def test_level0_trace_without_hccl_tasks_leaves_the_alignment_unknown(tmp_path: Path) -> None:
    """At level 0 torch_npu's trace holds the collectives and none of their plane tasks
    (MindStudio Insight's published level0 rank): the byte alignment is unknown, so COMM-003
    is not applicable (it passed on zeros before), and says to collect at level 1."""
    out = tmp_path / "w_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    events = [e for e in _hccl_trace() if e.get("tid") != 2]
    (out / "trace_view.json").write_text(json.dumps(events))
    (analysis,) = advisor.analyze(out.parent, select=["COMM-003"]).analyses
    (op,) = analysis.profile.tables["comm_ops"].to_dict("records")
    assert op["name"] == "hcom_allReduce__1_0_1" and "unaligned_tasks" not in op
    assert analysis.evaluation.outcomes == {"COMM-003": "not_applicable"}
    why = analysis.evaluation.inapplicable["COMM-003"]
    assert why.reason == "missing" and any("Level1" in hint for hint in why.collect)


LEVEL1_RUN = REAL / "msinsight_pytorch_level1"


def _time_info(rank: int) -> list[dict]:
    """The collectives' `Communication Time Info` of one rank's communication.json."""
    path = LEVEL1_RUN / f"rank{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "communication.json"
    data = json.loads(path.read_text())
    return [
        block["Communication Time Info"]
        for step in data.values()
        for name, block in step["collective"].items()
        if name != "Total Op Info"
    ]


def test_collectives_waiting_for_unprofiled_peers_are_measured_from_the_raw_file() -> None:
    """MindStudio Insight's 2-rank level1 run: 96% of each rank's all-reduce time moves no
    data (the ranks wait for a peer of their 8-rank group that was not profiled). COMM-007
    counts elapsed minus transit time; the profiler's own Wait Time holds little of it on
    rank 1, and COMM-001 says that its uncovered communication is this waiting."""
    result = advisor.analyze(LEVEL1_RUN, select=["COMM-001", "COMM-007"])
    ranks = {a.profile.meta.rank: a for a in result.analyses if a.profile.meta.rank is not None}
    assert sorted(ranks) == [0, 1]
    for rank, analysis in ranks.items():
        info = _time_info(rank)
        elapsed_us = sum(t["Elapse Time(ms)"] for t in info) * 1e3
        transit_us = sum(t["Transit Time(ms)"] for t in info) * 1e3
        findings = {f.rule.id: f for f in analysis.findings}
        waits = findings["COMM-007"]
        assert waits.impact_us == pytest.approx(elapsed_us - transit_us, rel=1e-9)
        assert waits.values["wait_share"] > 0.95
        assert "COMM-007" in findings["COMM-001"].message
    profiler_wait_us = sum(t["Wait Time(ms)"] for t in _time_info(1)) * 1e3
    assert profiler_wait_us < 200  # its Wait Time Ratio: 0.047
    assert "counts only 191 µs" in {f.rule.id: f for f in ranks[1].findings}["COMM-007"].message
