"""msprof-analyze's cluster output (cluster_analysis_output/) read as one profile per rank.

Fixture: the genuine output of a 16-rank run with two pipeline stages, published with
MindStudio Insight (tests/fixtures/real/PROVENANCE.md). Expected figures are read from the
raw files with the csv and json modules, never from the code under test.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURE_DIR

import advisor
from advisor.api import AnalysisResult, ProfileAnalysis
from advisor.errors import UnreadableInput
from advisor.model import contract_problems
from advisor_plugins.ascend_pt import AscendPtReader, ClusterOutputReader

OUTPUT = FIXTURE_DIR / "real" / "msinsight_cluster" / "cluster_analysis_output"


def csv_rows() -> list[dict[str, str]]:
    with open(OUTPUT / "cluster_step_trace_time.csv", newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def rank_rows() -> dict[int, dict[str, float]]:
    return {
        int(row["Index"]): {k: float(v) for k, v in row.items() if k not in ("Type", "Index")}
        for row in csv_rows()
        if row["Type"] == "rank"
    }


def step_time(row: dict[str, float]) -> float:
    """msprof-analyze's step time: what the step's computing, uncovered communication and
    free time add up to (its Stage plus Bubble)."""
    return row["Computing"] + row["Communication(Not Overlapped)"] + row["Free"]


@pytest.fixture(scope="module")
def result() -> AnalysisResult:
    return advisor.analyze(OUTPUT)


def by_rank(result: AnalysisResult) -> dict[int, ProfileAnalysis]:
    return {a.profile.meta.rank: a for a in result.analyses if a.profile.meta.rank is not None}


def test_every_rank_row_is_a_profile_with_its_step_breakdown() -> None:
    profiles = ClusterOutputReader().read(OUTPUT)
    expected = rank_rows()
    assert [p.meta.rank for p in profiles] == sorted(expected) == list(range(16))
    for profile in profiles:
        assert contract_problems(profile) == [] and profile.warnings == []
        row = expected[profile.meta.rank]
        (step,) = profile.tables["steps"].to_dict("records")
        assert step["step"] == row["Step"]
        assert step["duration_us"] == pytest.approx(step_time(row))
        assert step["duration_us"] == pytest.approx(row["Stage"] + row["Bubble"])
        assert step["computing_us"] == pytest.approx(row["Computing"])
        assert step["comm_not_overlapped_us"] == pytest.approx(row["Communication(Not Overlapped)"])
        assert step["bubble_us"] == pytest.approx(row["Bubble"])
        assert profile.meta.world_size == 16 and profile.meta.device_kind == "NPU"


def test_the_stage_rows_give_each_rank_its_pipeline_stage() -> None:
    stages = [
        sorted(int(r) for r in row["Index"].strip("()").split(","))
        for row in csv_rows()
        if row["Type"] == "stage"
    ]
    assert stages == [list(range(8)), list(range(8, 16))]
    for profile in ClusterOutputReader().read(OUTPUT):
        meta = profile.tables["metadata"]
        recorded = dict(zip(meta["key"], meta["value"]))
        assert recorded["distributed.pp_stage"] == str(profile.meta.rank // 8)


def test_each_rank_has_its_collectives_and_the_links_it_sends_on() -> None:
    data = json.loads((OUTPUT / "cluster_communication.json").read_text(encoding="utf-8"))
    matrix = json.loads((OUTPUT / "cluster_communication_matrix.json").read_text(encoding="utf-8"))
    ops: dict[int, list[str]] = {}
    for per_step in data.values():
        for entries in per_step.values():
            for key, ranks in entries.items():
                if not key.startswith("Total Op Info"):
                    for rank in ranks:
                        ops.setdefault(int(rank), []).append(key.partition("@")[0])
    links: dict[int, set[str]] = {}
    for per_step in matrix.values():
        for entries in per_step.values():
            for pairs in entries.values():
                for pair in pairs:
                    src, _, dst = pair.partition("-")
                    if src != dst:  # a rank's copy to itself is no link
                        links.setdefault(int(src), set()).add(f"{src}->{dst}")
    profiles = {p.meta.rank: p for p in ClusterOutputReader().read(OUTPUT)}
    assert ops and links
    for rank, profile in profiles.items():
        comm = profile.tables.get("comm_ops")
        names = [] if comm is None else comm.loc[comm["kind"] == "op", "name"].tolist()
        assert sorted(names) == sorted(ops.get(rank, [])), rank
        sent = set() if comm is None else set(comm.loc[comm["kind"] == "link", "name"])
        assert sent - {f"{rank}->{rank}"} == links.get(rank, set()), rank


def test_a_slow_rank_is_told_against_its_own_pipeline_stage(result) -> None:
    """Stage 1's steps hold the bubble (its wait for stage 0): across stages rank 11 (394 ms)
    looked 109 ms slower than rank 6 (285 ms). Within stage 0, rank 7 is the slowest."""
    rows = rank_rows()
    stage0 = {r: step_time(rows[r]) for r in range(8)}
    slow, fast = max(stage0, key=stage0.get), min(stage0, key=stage0.get)
    assert (slow, fast) == (7, 6)
    (cluster,) = [a for a in result.analyses if a.profile.meta.source_format == "cluster"]
    (finding,) = [f for f in cluster.findings if f.rule.id == "CLUSTER-001"]
    assert finding.values["slow_rank"] == slow
    assert finding.values["slowest_us"] == pytest.approx(stage0[slow])
    assert finding.values["fastest_us"] == pytest.approx(stage0[fast])
    assert finding.values["rank_count"] == 8
    assert "of its pipeline stage" in finding.message
    evidence = [dict(zip(finding.evidence["columns"], row)) for row in finding.evidence["rows"]]
    assert sorted(row["rank"] for row in evidence) == list(stage0)  # its stage, not rank 11's


def test_outliers_are_scored_within_the_stage_and_must_matter(result) -> None:
    """Within stage 1 rank 11's step is 13.5 ms (3.5%) above the stage's median; rank 8's
    computing time, 0.06% of its step above the median of a stage whose ranks agree within
    microseconds, scores z 5.3 but is noise."""
    rows = rank_rows()
    stage1 = sorted(step_time(rows[r]) for r in range(8, 16))
    median = (stage1[3] + stage1[4]) / 2
    (cluster,) = [a for a in result.analyses if a.profile.meta.source_format == "cluster"]
    ranks = cluster.profile.tables["ranks"].set_index("rank")
    assert ranks.loc[8, "straggler_z"] > 3.5  # an outlier by its score alone
    (finding,) = [f for f in cluster.findings if f.rule.id == "CLUSTER-003"]
    assert finding.values["stragglers"] == 1 and finding.values["straggler"] == 11
    assert finding.values["delta_us"] == pytest.approx(step_time(rows[11]) - median)


def test_the_bubble_is_the_pipeline_rules_not_uncovered_communication(result) -> None:
    """Rank 8's 216.7 ms of uncovered communication hold its 178.3 ms bubble: COMM-001 counts
    the profiler's "Communication(Not Overlapped and Exclude Receive)", PAR-003 the bubble,
    so the two no longer promise the same time twice."""
    row = rank_rows()[8]
    findings = {f.rule.id: f for f in by_rank(result)[8].findings}
    excluded = row["Communication(Not Overlapped and Exclude Receive)"]
    assert findings["COMM-001"].impact_us == pytest.approx(excluded)
    assert findings["COMM-001"].values["bubble_us"] == pytest.approx(row["Bubble"])
    assert findings["PAR-003"].values["total_bubble_us"] == pytest.approx(row["Bubble"])
    assert "receive waits" in findings["COMM-001"].message


def test_not_claimed_beside_the_rank_folders_it_summarises(tmp_path: Path) -> None:
    """msprof-analyze writes cluster_analysis_output/ into the folder of the rank folders:
    those are read, and the summary of them is not read again as more ranks."""
    shutil.copytree(OUTPUT, tmp_path / "cluster_analysis_output")
    (tmp_path / "rank0_123_ascend_pt" / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    reader = ClusterOutputReader()
    assert not reader.detect(tmp_path / "cluster_analysis_output")
    assert AscendPtReader().detect(tmp_path / "rank0_123_ascend_pt")
    renamed = shutil.copytree(OUTPUT, tmp_path.parent / f"{tmp_path.name}_summary")
    assert reader.detect(renamed)  # known by its CSV, whatever the folder's name


def test_no_rank_row_is_one_line_naming_the_file(tmp_path: Path) -> None:
    folder = shutil.copytree(OUTPUT, tmp_path / "cluster_analysis_output")
    lines = (folder / "cluster_step_trace_time.csv").read_text(encoding="utf-8").splitlines()
    kept = [line for line in lines if ",rank," not in line]
    (folder / "cluster_step_trace_time.csv").write_text("\n".join(kept) + "\n", encoding="utf-8")
    with pytest.raises(UnreadableInput) as caught:
        ClusterOutputReader().read(folder)
    assert Path(caught.value.path).name == "cluster_step_trace_time.csv"
    assert "rank" in caught.value.problem and "\n" not in caught.value.problem


def test_a_broken_communication_file_is_a_warning_on_every_rank(tmp_path: Path) -> None:
    folder = shutil.copytree(OUTPUT, tmp_path / "cluster_analysis_output")
    (folder / "cluster_communication.json").write_text('{"(0, 1)": {', encoding="utf-8")
    profiles = ClusterOutputReader().read(folder)
    assert len(profiles) == 16
    for profile in profiles:
        (warning,) = profile.warnings
        assert Path(warning.file).name == "cluster_communication.json" and warning.unread
        assert profile.has("steps", "duration_us")
        assert "cluster_communication.json" not in profile.meta.files_read


def test_the_pp_index_column_gives_the_stage_where_written(tmp_path: Path) -> None:
    """msprof-analyze adds `DP Index`, `PP Index`, `TP Index` where it knows the parallel
    layout: `PP Index` then gives the stage, stage rows or not."""
    folder = shutil.copytree(OUTPUT, tmp_path / "cluster_analysis_output")
    rows = [row for row in csv_rows() if row["Type"] == "rank"]  # no stage rows left
    with open(folder / "cluster_step_trace_time.csv", "w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, [*rows[0], "DP Index", "PP Index", "TP Index"])
        writer.writeheader()
        for row in rows:
            rank = int(row["Index"])
            writer.writerow({**row, "DP Index": rank % 8, "PP Index": 1 - rank // 8, "TP Index": 0})
    for profile in ClusterOutputReader().read(folder):
        meta = profile.tables["metadata"]
        recorded = dict(zip(meta["key"], meta["value"]))
        assert recorded["distributed.pp_stage"] == str(1 - profile.meta.rank // 8)


def test_rules_lacking_operators_say_the_rank_folders_hold_them(result) -> None:
    """The summary keeps no operator, host call or memory: a rule needing them is shown as
    missing data, with where it is, not hidden as data the format never records."""
    why = by_rank(result)[0].evaluation.inapplicable["OP-001"]
    assert why.reason == "missing"
    assert any("rank folders msprof-analyze summarised" in hint for hint in why.collect)


# -- the database export (msprof-analyze 26's default) ---------------------------------------

LEVEL2 = FIXTURE_DIR / "real" / "msinsight_level2_cluster"
DATABASE = LEVEL2 / "db" / "cluster_analysis_output"
TEXT = LEVEL2 / "text" / "cluster_analysis_output"


def test_the_database_export_is_read_as_the_text_export_of_the_same_run() -> None:
    """msprof-analyze's two exports of one 4-rank run: every rank's steps and metadata are
    equal, its collectives and links the same rows (the text rounds bandwidths to 4 decimals),
    and the findings and their messages identical."""
    assert ClusterOutputReader().detect(DATABASE) and ClusterOutputReader().detect(TEXT)
    from_db, from_text = (ClusterOutputReader().read(p) for p in (DATABASE, TEXT))
    assert [p.meta.rank for p in from_db] == [p.meta.rank for p in from_text] == [0, 1, 2, 3]
    for db, text in zip(from_db, from_text):
        assert contract_problems(db) == [] and db.warnings == []
        assert db.meta.files_read == ["cluster_analysis.db"]
        assert sorted(db.tables) == sorted(text.tables) == ["comm_ops", "metadata", "steps"]
        pd.testing.assert_frame_equal(db.tables["steps"], text.tables["steps"], rtol=1e-6)
        facts = [t.tables["metadata"][["key", "value"]].values.tolist() for t in (db, text)]
        assert facts[0] == facts[1]
        rows = [_comparable(t.tables["comm_ops"]) for t in (db, text)]
        pd.testing.assert_frame_equal(rows[0], rows[1], check_dtype=False, rtol=1e-6, atol=1.5e-4)
        totals = [t.meta.extra["comm_bandwidth"] for t in (db, text)]
        assert totals[0].keys() == totals[1].keys()
        for transport, figures in totals[0].items():
            assert figures == pytest.approx(totals[1][transport], nan_ok=True)
    findings = [
        [(a.profile.meta.rank, f.rule.id, f.message) for a in r.analyses for f in a.findings]
        for r in (advisor.analyze(DATABASE), advisor.analyze(TEXT))
    ]
    assert findings[0] == findings[1] and findings[0]


def _comparable(comm: pd.DataFrame) -> pd.DataFrame:
    """comm_ops rows in one order, bandwidths at the text export's 4 decimals."""
    rows = comm.assign(bandwidth_gbps=comm["bandwidth_gbps"].round(4))
    order = sorted(rows.columns)
    return rows[order].sort_values(order).reset_index(drop=True)


def test_the_database_gives_the_figures_of_its_tables() -> None:
    """Each rank's step from ClusterStepTraceTime, a collective's time and the pipeline
    stage (pp_index), read with sqlite3 here."""
    import sqlite3

    with sqlite3.connect(DATABASE / "cluster_analysis.db") as con:
        steps = {
            int(r[0]): r[1:]
            for r in con.execute(
                "SELECT `index`, computing, communication_not_overlapped, free, pp_index "
                "FROM ClusterStepTraceTime WHERE type = 'rank'"
            )
        }
        op = con.execute(
            "SELECT rank_id, hccl_op_name, elapsed_time, wait_time FROM ClusterCommunicationTime "
            "WHERE hccl_op_name != 'Total Op Info' ORDER BY elapsed_time DESC LIMIT 1"
        ).fetchone()
    profiles = {p.meta.rank: p for p in ClusterOutputReader().read(DATABASE)}
    assert sorted(profiles) == sorted(steps)
    for rank, (computing, exposed, free, stage) in steps.items():
        step = profiles[rank].tables["steps"].iloc[0]
        assert step["duration_us"] == pytest.approx(computing + exposed + free)
        assert step["computing_us"] == pytest.approx(computing)
        meta = profiles[rank].tables["metadata"].set_index("key")["value"]
        assert meta["distributed.pp_stage"] == str(int(stage))
    comm = profiles[op[0]].tables["comm_ops"]
    (row,) = comm[(comm["kind"] == "op") & (comm["name"] == op[1])].itertuples()
    assert row.duration_us == pytest.approx(op[2] * 1e3)
    assert row.wait_us == pytest.approx(op[3] * 1e3)


def test_a_database_without_the_step_table_is_one_clear_error(tmp_path) -> None:
    import sqlite3

    folder = tmp_path / "cluster_analysis_output"
    folder.mkdir()
    with sqlite3.connect(folder / "cluster_analysis.db") as con:
        con.execute("CREATE TABLE ClusterBaseInfo (key TEXT, value TEXT)")
    assert ClusterOutputReader().detect(folder)
    with pytest.raises(UnreadableInput, match="no ClusterStepTraceTime table"):
        ClusterOutputReader().read(folder)
    (folder / "cluster_analysis.db").write_bytes(b"not a database at all" * 100)
    with pytest.raises(UnreadableInput, match="cluster_analysis.db"):
        ClusterOutputReader().read(folder)


def test_the_database_named_alone_is_read_as_its_folder() -> None:
    path = DATABASE / "cluster_analysis.db"
    assert ClusterOutputReader().detect(path)
    result = advisor.analyze(path)
    assert sorted(
        a.profile.meta.rank for a in result.analyses if a.profile.meta.rank is not None
    ) == [
        0,
        1,
        2,
        3,
    ]


def test_a_text_export_over_database_ranks_reads_its_recipe_csvs() -> None:
    """msprof-analyze 26 with --export_type text over ranks profiled into databases: the
    database holds the steps, each recipe its table as a CSV in its folder (same columns)."""
    folder = LEVEL2 / "recipes" / "cluster_analysis_output"
    profiles = ClusterOutputReader().read(folder)
    assert profiles[0].meta.files_read == [
        "cluster_analysis.db",
        "CommunicationTimeSum/cluster_communication_time.csv",
        "CommunicationTimeSum/cluster_communication_bandwidth.csv",
        "CommMatrixSum/cluster_communication_matrix.csv",
    ]
    assert all(contract_problems(p) == [] and p.warnings == [] for p in profiles)
    findings = [
        [(a.profile.meta.rank, f.rule.id, f.message) for a in r.analyses for f in a.findings]
        for r in (advisor.analyze(folder), advisor.analyze(TEXT))
    ]
    assert findings[0] == findings[1] and findings[0]


def test_the_tables_under_their_earlier_names_give_the_same_profiles(tmp_path: Path) -> None:
    """Without data simplification msprof-analyze names the communication tables
    ClusterCommAnalyzerTime, ...Bandwidth and ...Matrix, each with a rank_set column more."""
    import sqlite3

    folder = tmp_path / "cluster_analysis_output"
    shutil.copytree(DATABASE, folder)
    with sqlite3.connect(folder / "cluster_analysis.db") as con:
        for table in ("Time", "Bandwidth", "Matrix"):
            con.execute(
                f"ALTER TABLE ClusterCommunication{table} RENAME TO ClusterCommAnalyzer{table}"
            )
            con.execute(f"ALTER TABLE ClusterCommAnalyzer{table} ADD COLUMN rank_set TEXT")
    earlier, now = (ClusterOutputReader().read(p) for p in (folder, DATABASE))
    for old, new in zip(earlier, now):
        pd.testing.assert_frame_equal(old.tables["comm_ops"], new.tables["comm_ops"])
    assert len(earlier[0].tables["comm_ops"]) > 0
