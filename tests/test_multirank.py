"""Several ranks: parallel reading gives the serial result; the cluster profile finds slow ranks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

import advisor
from advisor import progress
from advisor.derive import derive
from advisor.model import Profile, ProfileMeta, conform
from advisor.progress import FileProgress
from advisor_plugins.step_metrics import PROVIDERS

ROOT = Path(__file__).parents[1]
SMALL = ROOT / "tests/fixtures/msprof/PROF_000001_20260105093000123_SMALLCASE"
STEP_TRACE = "mindstudio_profiler_output/step_trace_20260105093512.csv"


def rank_copy(tmp_path: Path, rank: int, slow_by_us: float = 0.0) -> Path:
    """The small fixture as rank `rank`, optionally with every iteration made longer."""
    target = tmp_path / f"PROF_00000{rank}_20260105093000123_RANK{rank}"
    shutil.copytree(SMALL, target)
    info = target / "device_0/info.json.0"
    info.write_text(info.read_text().replace('"rank_id":0', f'"rank_id":{rank}'))
    if slow_by_us:
        csv = target / STEP_TRACE
        frame = pd.read_csv(csv, dtype=str)
        frame["Iteration Time(us)"] = (frame["Iteration Time(us)"].astype(float)
                                       + slow_by_us).map("{:.3f}".format)
        csv.write_text(frame.to_csv(index=False))
    return target


def summary(result) -> list[tuple]:
    return [(a.profile.meta.rank, a.profile.meta.source_format,
             {k: len(v) for k, v in a.tables.items()},
             [(f.rule.id, round(f.impact_us or 0, 3)) for f in a.findings])
            for a in result.analyses]


def test_parallel_reading_equals_serial(tmp_path):
    paths = [rank_copy(tmp_path, 0), rank_copy(tmp_path, 1), rank_copy(tmp_path, 2)]
    serial = advisor.analyze(*paths, jobs=1)
    parallel = advisor.analyze(*paths, jobs=2)
    assert summary(parallel) == summary(serial)
    assert [a.profile.meta.rank for a in parallel.analyses[:3]] == [0, 1, 2]


def test_parallel_reading_reports_a_corrupt_rank_and_keeps_the_others(tmp_path):
    good = [rank_copy(tmp_path, 0), rank_copy(tmp_path, 1)]
    bad = tmp_path / "PROF_000009_BROKEN"
    (bad / "device_0" / "data").mkdir(parents=True)
    (bad / "device_0" / "data" / "Framework.task_desc_info.0.slice_0").write_bytes(b"\x00\x01")
    result = advisor.analyze(*good, bad, jobs=2)
    assert [a.profile.meta.rank for a in result.analyses[:2]] == [0, 1]
    (error,) = result.input_errors
    assert str(bad) in str(error) and "msprof --export=on" in str(error)


def test_cluster_names_the_slow_rank(tmp_path):
    paths = [rank_copy(tmp_path, 0), rank_copy(tmp_path, 1, slow_by_us=1_500),
             rank_copy(tmp_path, 2)]
    result = advisor.analyze(*paths)
    cluster = result.analyses[-1]
    assert cluster.profile.meta.source_format == "cluster"
    ranks = cluster.tables["ranks"].set_index("rank")
    # mean iteration time of the fixture is (8000+8000+8500+8500+9000)/5 = 8400 µs
    assert ranks.loc[0, "duration_us"] == pytest.approx(8400)
    assert ranks.loc[1, "duration_us"] == pytest.approx(9900)
    (finding,) = cluster.findings
    assert finding.rule.id == "CLUSTER-001" and finding.values["slow_rank"] == 1
    assert finding.impact_us == pytest.approx(1_500 * 5)
    assert [f.rule.id for a in result.analyses[:-1] for f in a.findings
            if f.rule.id == "CLUSTER-001"] == []


def test_cluster_report_is_written(tmp_path):
    from click.testing import CliRunner

    from advisor.cli import main

    paths = [rank_copy(tmp_path, 0), rank_copy(tmp_path, 1, slow_by_us=2_000)]
    result = CliRunner().invoke(main, ["run", *map(str, paths), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out/prof_rule_cluster.json").read_text(encoding="utf-8"))
    assert report["data"]["Communication"][0]["result"][0]["rule_id"] == "CLUSTER-001"
    assert "Rank 1 is the slowest of 2 ranks" in result.output


def test_compute_classes_follow_the_compare_tool():
    ops = pd.DataFrame({
        "name": ["FlashAttentionScore_1", "Conv2D_3", "MatMulV2_1", "Add_1", "Relu", "DropOut",
                 "hcom_allReduce", "MemcpyAsync", "ampere_sgemm_128x64_nn", "elementwise_add"],
        "op_type": ["FlashAttentionScore", "Conv2D", "MatMulV2", "Add", "Relu",
                    "DropOutGenMask", "hcom_allReduce_", None, None, None],
        "core_type": ["MIX_AIC", "AI_CORE", "AI_CORE", "AI_VECTOR_CORE", "AI_CORE", "AI_CPU",
                      "COMMUNICATION", "SDMA", "GPU", "GPU"],
        "category": ["compute"] * 6 + ["communication", "memcpy", "compute", "compute"],
        "duration_us": 1.0})
    profile = Profile(ProfileMeta("t", "mem"), {"device_ops": conform("device_ops", ops)})
    derive(profile, ["device_ops.compute_class"], PROVIDERS)
    assert profile.tables["device_ops"]["compute_class"].tolist() == [
        "flash_attention", "conv", "matmul", "vector", "cube", "aicpu", "communication",
        "memcpy", "matmul", "other_compute"]


def test_progress_only_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    shown = FileProgress("big.json", 100 * 2**20)
    shown.read(50 * 2**20)
    shown.decoded(1234)
    shown.close()
    assert "big.json: 50/100 MB read, 1,234 events decoded" in capsys.readouterr().err
    progress.set_quiet(True)
    try:
        quiet = FileProgress("big.json", 100 * 2**20)
        quiet.decoded(5)
        assert not quiet.active and capsys.readouterr().err == ""
    finally:
        progress.set_quiet(False)
    assert not FileProgress("small.json", 1000).active


def test_own_ddp_traces_name_the_delayed_rank(tmp_path):
    """Rank 1 of the gloo DDP run sleeps before backward (tests/fixtures/kineto_own)."""
    for rank in (0, 1):
        shutil.copy(ROOT / f"tests/fixtures/kineto_own/ddp_rank{rank}.pt.trace.json.gz", tmp_path)
    result = advisor.analyze(tmp_path)
    cluster = result.analyses[-1]
    assert cluster.profile.meta.source_format == "cluster"
    findings = {f.rule.id: f for f in cluster.findings}
    assert findings["CLUSTER-002"].values["late_rank"] == 1


def test_cluster_communication_fallback_ignores_link_rows():
    from advisor.cluster import build_cluster

    def rank(number: int, op_us: float) -> Profile:
        steps = pd.DataFrame({"step": [1, 2], "start_us": [0.0, 100.0], "end_us": [100.0, 200.0],
                              "duration_us": [100.0, 100.0]})
        comm = pd.DataFrame({"name": ["allreduce", "0->1"], "kind": ["op", "link"],
                             "duration_us": [op_us, 1_000.0]})
        meta = ProfileMeta("t", f"/r{number}", rank=number)
        return Profile(meta, {"steps": conform("steps", steps),
                              "comm_ops": conform("comm_ops", comm)})

    cluster = build_cluster([rank(0, 60.0), rank(1, 20.0)])
    assert cluster.tables["ranks"]["communication_us"].tolist() == [30.0, 10.0]
