"""Communication groups from parallel_group_info: HCCL's group ids, the peers and links of a
rank's communication data in global ranks (advisor/formats/comm_groups.py and the Ascend
readers)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import FIXTURE_DIR

import advisor
from advisor.cli import main
from advisor.formats.comm_groups import ParallelGroup, hccl_group_id, parallel_groups
from advisor.plugin_manager import PluginHost
from advisor.reading import read_inputs

REAL = FIXTURE_DIR / "real"
GROUPS_RUN = REAL / "msinsight_st_level2_groups"
LEVEL1_HCCL = REAL / "msinsight_pytorch_level1_hccl"
LEVEL1_GROUP = "17522688603477080586"
HCCL_TWIN = FIXTURE_DIR / "ascend_db" / "hccl_twin_ascend_pt"
OUT = "ASCEND_PROFILER_OUTPUT"


def read_one(path: Path) -> pd.DataFrame:
    (profile,) = read_inputs([path], PluginHost()).profiles
    return profile.tables["comm_ops"]


def test_hccl_names_a_group_by_the_hash_of_its_name():
    # MindStudio Insight's 4-rank run: rank 1's group_name_22 (pp) is this id in its
    # communication_matrix.json
    metadata = json.loads((GROUPS_RUN / "rank_1_ascend_pt" / "profiler_metadata.json").read_text())
    matrix = (GROUPS_RUN / "rank_1_ascend_pt" / OUT / "communication_matrix.json").read_text()
    assert hccl_group_id("group_name_22") == "3985310499963036764"
    assert metadata["parallel_group_info"]["group_name_22"]["group_name"] == "pp"
    assert "@3985310499963036764" in matrix
    # the 8-rank run's cluster output names this group's hash in communication_group.json
    key = "10.174.216.241%enp189s0f1_55000_0_1738895486152654"
    assert hccl_group_id(key) == "212011646445595226"


def test_groups_without_a_name_or_integer_ranks_are_left_out():
    info = {
        "a": {"group_name": "tp", "group_rank": 0, "global_ranks": [4, 5]},
        "b": {"group_name": "dp", "global_ranks": "0,1"},
        "c": {"global_ranks": [0, 1]},
        "d": {"group_name": "pp", "global_ranks": [0, "x"]},
        "e": "not a group",
    }
    assert parallel_groups(info) == {hccl_group_id("a"): ParallelGroup("tp", (4, 5))}
    assert parallel_groups(None) == {} and parallel_groups([1]) == {}
    assert ParallelGroup("tp", (4, 5)).global_rank(2) is None


def test_every_op_of_the_genuine_run_finds_its_group_and_every_link_starts_at_its_rank():
    """The profiler numbers a link's ends in its group: rank 3's pipeline link is `1-0` in
    communication_matrix.json (rank 1 of the pp group [1, 3] to rank 0), rank 3 to rank 1 of
    the job."""
    raw = json.loads(
        (GROUPS_RUN / "rank_3_ascend_pt" / OUT / "communication_matrix.json").read_text()
    )
    pp = "3985310499963036764"  # group_name_22: pp, global ranks [1, 3]
    assert any(
        key.endswith(f"@{pp}") and "1-0" in links for key, links in raw["step13"]["p2p"].items()
    )
    for rank in (1, 3):
        comm = read_one(GROUPS_RUN / f"rank_{rank}_ascend_pt")
        assert comm["parallel_group"].notna().all()
        links = comm[comm["kind"] == "link"]
        assert links["name"].str.startswith(f"{rank}->").all(), links["name"].unique()
    comm = read_one(GROUPS_RUN / "rank_3_ascend_pt")
    pp_links = comm[(comm["kind"] == "link") & (comm["group"] == pp)]
    assert set(pp_links["name"]) == {"3->3", "3->1"}
    assert set(comm.loc[comm["group"] == pp, "parallel_group"]) == {"pp"}


def test_the_cluster_links_are_the_ranks_links_not_group_numbers_merged():
    """Each link of the two genuine ranks is reported by the rank it starts at; numbered in
    their groups, rank 3's data-parallel link to rank 2 (3.38 GB) read as `1->0` and was
    merged with rank 1's links."""
    result = advisor.analyze(GROUPS_RUN, jobs=1)
    (links,) = [a.profile.tables["links"] for a in result.analyses if "links" in a.profile.tables]
    starts = links["name"].str.split("->").str[0]
    assert (starts == links["reported_by"]).all(), links[["name", "reported_by"]]
    dp = links.set_index("name").loc["3->2"]
    assert dp["bytes"] > 3e9 and dp["reported_by"] == "3"


def findings(report: Path, rule: str) -> list[dict]:
    data = json.loads(report.read_text())["data"]
    return [
        f for group in data.values() for e in group for f in e["result"] if f["rule_id"] == rule
    ]


def with_groups(tmp_path: Path, global_ranks: list[int]) -> Path:
    """MindStudio Insight's level-1 ranks 0 and 1 (HCCL tasks kept) with their group named as
    torch_npu names a described one (`group_name_0`, hashed) and a parallel_group_info that
    gives it `global_ranks`: the run's own metadata describes no group."""
    folder = tmp_path / "ranks"
    shutil.copytree(LEVEL1_HCCL, folder)
    group = hccl_group_id("group_name_0")
    for rank in (0, 1):
        root = folder / f"rank{rank}_ascend_pt"
        for path in (root / OUT).glob("*.json"):
            path.write_text(path.read_text().replace(LEVEL1_GROUP, group))
        meta = json.loads((root / "profiler_metadata.json").read_text())
        meta["parallel_group_info"] = {
            "group_name_0": {"group_name": "dp", "group_rank": rank, "global_ranks": global_ranks}
        }
        (root / "profiler_metadata.json").write_text(json.dumps(meta))
    return folder


def test_the_waited_peer_is_named_by_its_rank_in_the_job(tmp_path: Path):
    """Both ranks waited longest for rank 5 of their 8-rank group (COMM-007, CLUSTER-008);
    where the group's global ranks are known, that is rank 17 of the job."""
    folder = with_groups(tmp_path, [0, 1, 8, 9, 16, 17, 24, 25])
    comm = read_one(folder / "rank1_ascend_pt")
    ops = comm[comm["kind"] == "op"]
    assert ops["waited_rank"].tolist() == [5, 5, 0, 5]
    assert ops["waited_global_rank"].tolist() == [17, 17, 0, 17]
    assert set(comm["parallel_group"]) == {"dp"}
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["run", str(folder), "-o", str(out), "--format", "json"])
    assert result.exit_code == 0, result.output
    (rank1,) = [
        p for p in out.glob("prof_rule_*.json") if json.loads(p.read_text())["profile"]["rank"] == 1
    ]
    (wait,) = findings(rank1, "COMM-007")
    group = hccl_group_id("group_name_0")
    assert f"was for rank 17 of the job (rank 5 of the dp group {group})" in wait["message"]
    assert "Profile rank 17 with this one" in wait["suggestions"][0]
    (coverage,) = findings(out / "prof_rule_cluster.json", "CLUSTER-008")
    peer = "the same rank of the job in its collectives, rank 17, a peer in their dp group"
    assert peer in coverage["message"]


def test_the_database_gives_the_groups_of_its_metadata(tmp_path: Path):
    """torch_npu's database keeps profiler_metadata.json's entries in META_DATA: the HCCL
    twin's all-reduce (which waited for rank 2 of its group), named in a described group."""
    folder = tmp_path / "rank0_ascend_pt"
    shutil.copytree(HCCL_TWIN, folder)
    group = hccl_group_id("group_name_7")
    info = {"group_name_7": {"group_name": "tp", "group_rank": 0, "global_ranks": [0, 3, 6, 9]}}
    with sqlite3.connect(folder / OUT / "ascend_pytorch_profiler_0.db") as db:
        db.execute("INSERT INTO STRING_IDS (id, value) VALUES (9999, ?)", (group,))
        db.execute("UPDATE COMMUNICATION_OP SET groupName = 9999")
        db.execute(
            "INSERT INTO META_DATA (name, value) VALUES ('parallel_group_info', ?)",
            (json.dumps(info),),
        )
    comm = read_one(folder)
    assert comm["group"].tolist() == [group]
    assert comm["waited_rank"].tolist() == [2] and comm["waited_global_rank"].tolist() == [6]
    assert comm["parallel_group"].tolist() == ["tp"]


def test_the_communication_time_of_each_parallel_group():
    """parallel_comm on the genuine last stage: its 25 operations take 261.498 ms, the embd
    group's one all-reduce 120.942 ms of it; every operation has a described group, so the
    shares add up to one."""
    from advisor_plugins.comm_metrics import parallel_comm

    (profile,) = read_inputs([GROUPS_RUN / "rank_3_ascend_pt"], PluginHost()).profiles
    parallel_comm(profile)
    table = profile.tables["parallel_comm"].set_index("parallel_group")
    assert table.index[0] == "embd" and table.loc["embd", "ops"] == 1
    assert table.loc["embd", "duration_us"] == pytest.approx(120942.12)
    assert table.loc["embd", "share"] == pytest.approx(120.94212 / 261.49844)
    assert table.loc["pp", "main_op"] == "batchsendrecv"
    assert table["share"].sum() == pytest.approx(1.0)
    assert set(table.index) == {"embd", "pp", "dp_cp", "dp", "default_group", "mp", "tp"}
