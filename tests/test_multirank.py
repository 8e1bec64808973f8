"""Several ranks: parallel reading gives the serial result; the cluster profile finds slow ranks."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from clirunner import separate_runner
from conftest import FIXTURE_DIR, ROOT

import advisor
from advisor import progress
from advisor.cli import main
from advisor.derive import derive
from advisor.model import Profile, ProfileMeta, conform
from advisor.progress import FileProgress
from advisor.render.json_report import validate_report
from advisor_plugins.step_metrics import PROVIDERS

SMALL = FIXTURE_DIR / "msprof/PROF_000001_20260105093000123_SMALLCASE"
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
        frame["Iteration Time(us)"] = (frame["Iteration Time(us)"].astype(float) + slow_by_us).map(
            "{:.3f}".format
        )
        csv.write_text(frame.to_csv(index=False))
    return target


def summary(result) -> list[tuple]:
    return [
        (
            a.profile.meta.rank,
            a.profile.meta.source_format,
            {k: len(v) for k, v in a.tables.items()},
            [(f.rule.id, round(f.impact_us or 0, 3)) for f in a.findings],
        )
        for a in result.analyses
    ]


@pytest.mark.integration
def test_parallel_reading_equals_serial(tmp_path):
    paths = [rank_copy(tmp_path, 0), rank_copy(tmp_path, 1), rank_copy(tmp_path, 2)]
    serial = advisor.analyze(*paths, jobs=1)
    parallel = advisor.analyze(*paths, jobs=2)
    assert summary(parallel) == summary(serial)
    assert [a.profile.meta.rank for a in parallel.analyses[:3]] == [0, 1, 2]


@pytest.mark.integration
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
    paths = [
        rank_copy(tmp_path, 0),
        rank_copy(tmp_path, 1, slow_by_us=1_500),
        rank_copy(tmp_path, 2),
    ]
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
    assert [
        f.rule.id for a in result.analyses[:-1] for f in a.findings if f.rule.id == "CLUSTER-001"
    ] == []


def test_cluster_report_is_written(tmp_path):
    from click.testing import CliRunner

    from advisor.cli import main

    paths = [rank_copy(tmp_path, 0), rank_copy(tmp_path, 1, slow_by_us=2_000)]
    result = CliRunner().invoke(main, ["run", *map(str, paths), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out/prof_rule_cluster.json").read_text(encoding="utf-8"))
    assert report["data"]["Communication"][0]["result"][0]["rule_id"] == "CLUSTER-001"
    assert "Rank 1 is the slowest of 2 ranks" in result.output


@pytest.mark.parametrize(
    ("name", "expected"),
    [  # kernels of public traces (TraceLens' H100 and MI300 samples, DeepSeek's train.json)
        (
            "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, "
            "128, 4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, "
            "128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, false, true, false>"
            "(pytorch_flash::Flash_fwd_params)",
            "flash_attention",
        ),
        (
            "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1, "
            "cutlass::bfloat16_t, 128>, true, flash::SingleTileScheduler>",
            "flash_attention",
        ),
        ("igemm_wrw_gtcx3_nhwc_bf16_bx0_ex0_bt256x128x32_wt32x32x8", "conv"),
        (
            "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_ptp128c::GemmKernel>",
            "matmul",
        ),
        # cuBLASLt's GEMMs on our H200 (tests/fixtures/kineto_gpu_own), a Tensile GEMM of
        # hipBLASLt, an Inductor mm template; their names hold no "gemm" or "matmul"
        ("nvjet_sm90_tst_128x256_64x4_2x1_v_bz_coopA_NTN", "matmul"),
        ("Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI16x16x16x1_SN_1LDSB1", "matmul"),
        ("triton_tem_fused_mm_0", "matmul"),
        ("triton_poi_fused__to_copy_1", "other_compute"),
        # cuDNN's implicit-GEMM and FFT convolutions of HTA's AlexNet trace (A100)
        ("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "conv"),
        ("void fft2d_c2r_32x32<float, false, false, 0u, false, false>(float*)", "conv"),
        ("void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>", "other_compute"),
        # fbgemm_gpu's embedding and quantisation kernels of HTA's recommender trace
        ("void fbgemm_gpu::permute_2D_lengths_kernel<int>(int, int, int const*)", "other_compute"),
        (
            "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, "
            "false, long, 2ul, 32ul>(fbgemm_gpu::FixedDivisor)",
            "other_compute",
        ),
        # cuDNN's attention backward on our H200 (gpt2): a conversion, no convolution
        ("void cudnn::fusion::convert_dq_to_16bits<true>(void const*, void*)", "other_compute"),
        # ... while a GEMM in that namespace still is one (a made-up name)
        ("void fbgemm_gpu::grouped_gemm_kernel<float>(float const*)", "matmul"),
    ],
)
def test_gpu_kernels_compute_classes(name: str, expected: str) -> None:
    ops = pd.DataFrame({"name": [name], "core_type": "GPU", "category": "compute"})
    profile = Profile(ProfileMeta("t", "mem"), {"device_ops": conform("device_ops", ops)})
    derive(profile, ["device_ops.compute_class"], PROVIDERS)
    assert profile.tables["device_ops"]["compute_class"].tolist() == [expected]


def test_compute_classes_follow_the_compare_tool():
    ops = pd.DataFrame(
        {
            "name": [
                "FlashAttentionScore_1",
                "Conv2D_3",
                "MatMulV2_1",
                "Add_1",
                "Relu",
                "DropOut",
                "hcom_allReduce",
                "MemcpyAsync",
                "ampere_sgemm_128x64_nn",
                "elementwise_add",
            ],
            "op_type": [
                "FlashAttentionScore",
                "Conv2D",
                "MatMulV2",
                "Add",
                "Relu",
                "DropOutGenMask",
                "hcom_allReduce_",
                None,
                None,
                None,
            ],
            "core_type": [
                "MIX_AIC",
                "AI_CORE",
                "AI_CORE",
                "AI_VECTOR_CORE",
                "AI_CORE",
                "AI_CPU",
                "COMMUNICATION",
                "SDMA",
                "GPU",
                "GPU",
            ],
            "category": ["compute"] * 6 + ["communication", "memcpy", "compute", "compute"],
            "duration_us": 1.0,
        }
    )
    profile = Profile(ProfileMeta("t", "mem"), {"device_ops": conform("device_ops", ops)})
    derive(profile, ["device_ops.compute_class"], PROVIDERS)
    assert profile.tables["device_ops"]["compute_class"].tolist() == [
        "flash_attention",
        "conv",
        "matmul",
        "vector",
        "cube",
        "aicpu",
        "communication",
        "memcpy",
        "matmul",
        "other_compute",
    ]
    # rows are classified per distinct (op type, name, core, category), missing values alike
    twice = pd.concat([ops, ops.iloc[::-1]], ignore_index=True)
    twice.loc[len(twice)] = {"name": None, "category": "compute", "duration_us": 1.0}
    twice.loc[len(twice)] = {"name": "Conv2D_3", "category": None, "duration_us": 1.0}
    profile = Profile(ProfileMeta("t", "mem"), {"device_ops": conform("device_ops", twice)})
    derive(profile, ["device_ops.compute_class"], PROVIDERS)
    classes = profile.tables["device_ops"]["compute_class"].tolist()
    assert classes[10:20] == classes[9::-1]
    assert classes[20:] == ["other_compute", "other"]


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


def test_a_cluster_of_some_ranks_says_how_many_the_job_has(tmp_path):
    """Two of the four ranks of the own gloo DDP run: their traces record world_size 4, so the
    cluster says that two ranks of the job are missing (CLUSTER-008); all four say nothing."""
    for rank in (0, 2):
        shutil.copy(ROOT / f"tests/fixtures/kineto_own/ddp4_rank{rank}.pt.trace.json.gz", tmp_path)
    cluster = advisor.analyze(tmp_path, select=["CLUSTER-008"]).analyses[-1]
    assert cluster.tables["ranks"]["job_ranks"].tolist() == [4, 4]
    (finding,) = cluster.findings
    assert finding.message.startswith("2 ranks were profiled of a job of at least 4")
    for rank in (1, 3):
        shutil.copy(ROOT / f"tests/fixtures/kineto_own/ddp4_rank{rank}.pt.trace.json.gz", tmp_path)
    assert advisor.analyze(tmp_path, select=["CLUSTER-008"]).analyses[-1].findings == []


def test_cluster_communication_fallback_ignores_link_rows():
    from advisor.cluster import build_cluster

    def rank(number: int, op_us: float) -> Profile:
        steps = pd.DataFrame(
            {
                "step": [1, 2],
                "start_us": [0.0, 100.0],
                "end_us": [100.0, 200.0],
                "duration_us": [100.0, 100.0],
            }
        )
        comm = pd.DataFrame(
            {"name": ["allreduce", "0->1"], "kind": ["op", "link"], "duration_us": [op_us, 1_000.0]}
        )
        meta = ProfileMeta("t", f"/r{number}", rank=number)
        return Profile(
            meta, {"steps": conform("steps", steps), "comm_ops": conform("comm_ops", comm)}
        )

    cluster = build_cluster([rank(0, 60.0), rank(1, 20.0)])
    assert cluster.tables["ranks"]["communication_us"].tolist() == [30.0, 10.0]


def test_the_peer_a_rank_waited_for_is_summed_over_its_collectives():
    """ranks.waited_rank: the peer whose waits (each collective's longest on another rank)
    add up to the most, not the one of the single longest wait; per group, since a rank is
    numbered in its group; a rank whose tasks name no peer has none."""
    from advisor.cluster import build_cluster

    steps = pd.DataFrame(
        {"step": [1], "start_us": [0.0], "end_us": [100.0], "duration_us": [100.0]}
    )

    def rank(number: int, waits: list[tuple[str, int | None, float]]) -> Profile:
        comm = pd.DataFrame(
            {
                "name": [f"allreduce_{i}" for i in range(len(waits))],
                "kind": "op",
                "group": [group for group, _, _ in waits],
                "duration_us": 50.0,
                "waited_rank": pd.array([peer for _, peer, _ in waits], dtype="Int64"),
                "peer_wait_us": [us for _, _, us in waits],
            }
        )
        meta = ProfileMeta("t", f"/r{number}", rank=number)
        tables = {"steps": conform("steps", steps), "comm_ops": conform("comm_ops", comm)}
        return Profile(meta, tables)

    cluster = build_cluster(
        [
            rank(0, [("g", 5, 30.0), ("g", 6, 20.0), ("g", 6, 20.0)]),  # 6: 40 us in all
            rank(1, [("g", 5, 30.0), ("h", 6, 20.0), ("g", 6, 20.0)]),  # 5 of g: 30 us
            rank(2, [("g", None, float("nan"))]),
        ]
    )
    ranks = cluster.tables["ranks"]
    assert ranks["waited_rank"].tolist()[:2] == [6, 5] and pd.isna(ranks["waited_rank"][2])
    assert ranks["waited_group"].tolist()[:2] == ["g", "g"] and pd.isna(ranks["waited_group"][2])


def test_robust_z_falls_back_to_the_mean_absolute_deviation():
    from advisor.cluster import robust_z

    spread = robust_z(pd.Series([1000.0, 1000.0, 1010.0, 990.0, 1500.0]))
    assert spread.iloc[4] == pytest.approx(0.6745 * 500 / 10)  # MAD 10
    flat = robust_z(pd.Series([1000.0] * 5 + [1500.0]))  # MAD 0: mean absolute deviation
    assert flat.iloc[5] == pytest.approx(500 / (1.2533 * 500 / 6))
    assert robust_z(pd.Series([7.0, 7.0, 7.0])).tolist() == [0.0, 0.0, 0.0]


def test_cluster_names_the_straggler_metric(tmp_path):
    from advisor.cluster import build_cluster

    def rank(number: int, computing: float) -> Profile:
        steps = pd.DataFrame(
            {
                "step": [1, 2],
                "start_us": [0.0, 1000.0],
                "end_us": [1000.0, 2000.0],
                "duration_us": [1000.0, 1000.0],
                "computing_us": computing,
                "free_us": 100.0,
            }
        )
        return Profile(
            ProfileMeta("t", f"/r{number}", rank=number), {"steps": conform("steps", steps)}
        )

    cluster = build_cluster([rank(r, 800.0 + 400 * (r == 3) + r) for r in range(5)])
    ranks = cluster.tables["ranks"].set_index("rank")
    assert ranks.loc[3, "straggler_metric"] == "computing_us"
    assert ranks.loc[3, "straggler_delta_us"] == pytest.approx(1203 - 802)  # median 802
    assert ranks["duration_z"].tolist() == [0.0] * 5 and ranks["free_z"].tolist() == [0.0] * 5


def test_stragglers_are_scored_within_their_pipeline_stage():
    """Stage 1 computes 20% more on all its 8 ranks (the loss head, say) and rank 3 40% more
    than the rest of stage 0. Scored across the 16 ranks the two stages split the median and
    the MAD, and rank 3 (z 1.31) was lost among them (every stage-0 rank scored about -1.4);
    within the stages it is the one rank that stands out."""
    from advisor.cluster import build_cluster
    from advisor.formats.metadata import MetadataRows

    def rank(number: int) -> Profile:
        computing = 1000.0 * (1.2 if number >= 8 else 1.0) * (1.4 if number == 3 else 1.0)
        computing += number  # no two ranks alike
        steps = pd.DataFrame(
            {
                "step": [1],
                "start_us": [0.0],
                "end_us": [3000.0],
                "duration_us": [3000.0],
                "computing_us": [computing],
            }
        )
        rows = MetadataRows()
        rows.add("distributed.pp_stage", number // 8, "test")
        tables = {"steps": conform("steps", steps), "metadata": rows.frame()}
        return Profile(ProfileMeta("t", f"/r{number}", rank=number), tables)

    ranks = build_cluster([rank(r) for r in range(16)]).tables["ranks"].set_index("rank")
    assert ranks["pp_stage"].tolist() == [0] * 8 + [1] * 8
    outliers = ranks.index[ranks["straggler_z"].abs() > 3.5].tolist()
    assert outliers == [3]
    assert ranks.loc[3, "straggler_delta_us"] == pytest.approx(1403 - 1004.5)  # stage 0's median
    assert ranks.loc[8:, "computing_z"].abs().max() < 1.5


def test_uneven_computing_is_told_within_a_pipeline_stage():
    """Stage 1 computes 20% more on all its ranks (CLUSTER-006's finding, not uneven work) and
    rank 3 10% more than the rest of stage 0: CLUSTER-004 names rank 3 against its stage's
    mean and least, where it was silent under every pipeline before."""
    from advisor.cluster import build_cluster
    from advisor.engine.evaluate import evaluate
    from advisor.engine.functions import BUILTIN_FUNCTIONS
    from advisor.engine.rules import load_rule_file
    from advisor.formats.metadata import MetadataRows

    def rank(number: int) -> Profile:
        computing = 1000.0 * (1.2 if number >= 4 else 1.0) * (1.1 if number == 3 else 1.0)
        steps = pd.DataFrame(
            {
                "step": [1, 2],
                "start_us": [0.0, 3000.0],
                "end_us": [3000.0, 6000.0],
                "duration_us": [3000.0, 3000.0],
                "computing_us": [computing, computing],
            }
        )
        rows = MetadataRows()
        rows.add("distributed.pp_stage", number // 4, "test")
        tables = {"steps": conform("steps", steps), "metadata": rows.frame()}
        return Profile(ProfileMeta("t", f"/r{number}", rank=number), tables)

    cluster = build_cluster([rank(r) for r in range(8)])
    ranks = cluster.tables["ranks"].set_index("rank")
    assert ranks.loc[0, "stage_least_computing_us"] == pytest.approx(1000.0)
    assert ranks.loc[7, "stage_least_computing_us"] == pytest.approx(1200.0)
    rules, errors = load_rule_file(ROOT / "rules" / "cluster.yaml", BUILTIN_FUNCTIONS)
    assert not errors
    uneven = [r for r in rules if r.id == "CLUSTER-004"]
    (finding,) = evaluate(cluster, uneven, functions=BUILTIN_FUNCTIONS).findings
    assert finding.values["busy_rank"] == 3 and finding.values["idle_rank"] == 0
    assert finding.values["mean_us"] == pytest.approx(1025.0)  # stage 0's mean
    assert finding.impact_us == pytest.approx((1100.0 - 1025.0) * 2)
    rank_column = finding.evidence["columns"].index("rank")
    assert sorted(row[rank_column] for row in finding.evidence["rows"]) == [0, 1, 2, 3]
    assert "the least of the 4 ranks of its pipeline stage" in finding.message


def test_the_cluster_names_each_rank_folders_files_once(tmp_path):
    """Rank folders name their files alike (ASCEND_PROFILER_OUTPUT/...): the cluster's list
    says whose each is; ranks read from one folder list its files once."""
    from advisor.cluster import build_cluster

    def rank(number: int, folder: Path) -> Profile:
        folder.mkdir(exist_ok=True)
        steps = pd.DataFrame(
            {"step": [1], "start_us": [0.0], "end_us": [1.0], "duration_us": [1.0]}
        )
        meta = ProfileMeta("t", str(folder), rank=number)
        meta.files_read = ["ASCEND_PROFILER_OUTPUT/step_trace_time.csv"]
        return Profile(meta, {"steps": conform("steps", steps)})

    apart = build_cluster([rank(r, tmp_path / f"rank{r}_ascend_pt") for r in range(2)])
    assert apart.meta.files_read == [
        f"rank{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/step_trace_time.csv" for r in range(2)
    ]
    together = build_cluster([rank(r, tmp_path / "cluster_analysis_output") for r in range(2)])
    assert together.meta.files_read == ["ASCEND_PROFILER_OUTPUT/step_trace_time.csv"]


def test_cluster_links_name_the_slow_link(tmp_path):
    """tests/fixtures/cluster_links: four ranks of a ring, link 2->3 at 5 GB/s, others 20."""
    folder = tmp_path / "cluster_links"
    shutil.copytree(FIXTURE_DIR / "cluster_links", folder)
    result = advisor.analyze(folder, select=["cluster"])
    cluster = result.analyses[-1]
    links = cluster.tables["links"].set_index("name")
    assert links.loc["2->3", "bandwidth_gbps"] == pytest.approx(5.0)
    assert links.loc["0->1", "bandwidth_gbps"] == pytest.approx(20.0)
    assert links.loc["2->3", "reported_by"] == "2,3" and links.loc["2->3", "ops"] == 2
    # a rank's LOCAL copy to itself is no link between ranks: never judged, never "slow"
    assert "0->0" not in links.index and "LOCAL" not in set(links["transport"])
    (finding,) = cluster.findings
    assert finding.rule.id == "CLUSTER-005" and finding.values["slowest"] == "2->3"


def test_cluster_links_ignore_summary_rows_and_latency_bound_messages(tmp_path):
    """The matrix's per-rank summary rows (0-top1, 0-total ...) are not links, and a link that
    only carried a few hundred bytes is not judged slow (nor does it lower the median)."""
    folder = tmp_path / "cluster_links"
    shutil.copytree(FIXTURE_DIR / "cluster_links", folder)
    matrix = next(folder.glob("node0_1000_*/ASCEND_PROFILER_OUTPUT/communication_matrix.json"))
    data = json.loads(matrix.read_text(encoding="utf-8"))
    for step in data.values():
        for op in step["collective"].values():
            template = dict(op["0-1"])
            for summary in ("0-top1", "0-middle", "0-bottom1", "0-total"):
                op[summary] = {**template, "Transit Time(ms)": 50.0}  # "slow" if read
            op["0-2"] = {**template, "Transit Size(MB)": 0.0005, "Transit Time(ms)": 0.01}
    matrix.write_text(json.dumps(data), encoding="utf-8")
    cluster = advisor.analyze(folder, select=["cluster"]).analyses[-1]
    links = cluster.tables["links"].set_index("name")
    assert not [n for n in links.index if not re.fullmatch(r"\d+->\d+", n)]
    assert links.loc["0->2", "message_bytes"] < 1024  # read, but latency-bound
    (finding,) = cluster.findings
    assert finding.values["slowest"] == "2->3" and finding.values["slow_links"] == 1
    assert finding.values["median_gbps"] == pytest.approx(20.0)


@pytest.mark.integration
def test_own_ddp4_traces_parallel_reading_equals_serial(tmp_path):
    """Four gloo ranks (rank 2 delayed): `jobs=2` reads them in processes, as --jobs does."""
    for trace in sorted((FIXTURE_DIR / "kineto_own").glob("ddp4_rank*.pt.trace.json.gz")):
        shutil.copy(trace, tmp_path)
    serial = advisor.analyze(tmp_path, jobs=1)
    parallel = advisor.analyze(tmp_path, jobs=2)
    assert summary(parallel) == summary(serial)
    assert parallel.analyses[-1].tables["ranks"].equals(serial.analyses[-1].tables["ranks"])
    assert serial.analyses[-1].tables["ranks"]["rank"].tolist() == [0, 1, 2, 3]
    # the delayed rank is named by the spread, the late-arrival and the z-score rules
    findings = {f.rule.id: f for f in serial.analyses[-1].findings}
    assert findings["CLUSTER-001"].values["slow_rank"] == 2
    assert findings["CLUSTER-002"].values["late_rank"] == 2
    straggler = findings["CLUSTER-003"].values
    assert (straggler["straggler"], straggler["metric"]) == (2, "communication_us")
    assert straggler["worst_z"] < -3.5


OWN = FIXTURE_DIR / "kineto_own"


def copy_traces(folder: Path, *names: str) -> Path:
    folder.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(OWN / f"{name}.pt.trace.json.gz", folder)
    return folder


def test_profiles_of_several_runs_are_not_compared_as_ranks(tmp_path):
    """The own 2-rank and 4-rank DDP runs in one folder: ranks 0 and 1 are each in two
    profiles, so no cluster is built (its "slow rank" would be another run's) and the run
    says why, naming the profiles; every profile is still analysed."""
    copy_traces(tmp_path, "ddp_rank0", "ddp_rank1", *(f"ddp4_rank{r}" for r in range(4)))
    result = advisor.analyze(tmp_path)
    assert len(result.analyses) == 6 and all(a.evaluation.outcomes for a in result.analyses)
    assert {a.profile.meta.source_format for a in result.analyses} == {"kineto"}
    (note,) = result.notes
    assert note.startswith(
        "no cross-rank analysis: rank 0 is in 2 profiles (ddp4_rank0.pt.trace.json.gz, "
        f"ddp_rank0.pt.trace.json.gz in {tmp_path}), so they are not the ranks of one run"
    )
    assert '<p class="run-note break">no cross-rank analysis' in result._repr_html_()


def test_runs_of_different_sizes_are_not_compared_as_ranks(tmp_path):
    """Ranks 1 of the 2-rank run and 0 and 2 of the 4-rank run: no rank repeats, but the
    traces' world sizes (2, 4) tell the runs apart."""
    copy_traces(tmp_path, "ddp_rank1", "ddp4_rank0", "ddp4_rank2")
    result = advisor.analyze(tmp_path)
    assert [a.profile.meta.world_size for a in result.analyses] == [4, 2, 4]
    assert result.notes == [
        "no cross-rank analysis: the profiles come from runs of 2 and 4 ranks, not from one "
        "run; give advisor one run's folder to compare its ranks"
    ]
    (note,) = advisor.analyze(tmp_path, lang="zh").notes
    assert "2、4" in note and note.startswith("未做跨 rank 分析")


def test_a_rank_read_twice_tells_runs_apart_even_without_steps_in_one():
    """MindInsight's test resources: profiler_misc holds ranks 0, 1 and 10 (rank 1 only its
    operator tables, no steps) and run_2_profiler is another run's rank 1. Comparing rank 0,
    run_2's rank 1 and rank 10 as one job blamed "rank 1" for arriving late (0 µs of
    communication against 2,665) and called its step time an outlier (z-score -458.6)."""
    result = advisor.analyze(FIXTURE_DIR / "real" / "mindspore_legacy")
    ranked = [(a.profile.meta.rank, Path(a.profile.meta.path).name) for a in result.analyses]
    assert sorted(ranked) == [
        (0, "profiler_misc"),
        (1, "profiler_misc"),
        (1, "run_2_profiler"),
        (10, "profiler_misc"),
    ]
    (note,) = result.notes
    assert note.startswith("no cross-rank analysis: rank 1 is in 2 profiles (profiler_misc, ")


def test_mixed_runs_counts_each_place_a_rank_was_read_once():
    """Summaries of ranks 0 and 1; rank 1 read again elsewhere without steps: two runs. The
    same folder holding several ranks (one MindSpore profiler folder) is one run."""
    from advisor.cluster import RankSummary, mixed_runs

    def meta(rank: int, path: str) -> ProfileMeta:
        return ProfileMeta(source_format="mindspore_legacy", path=path, rank=rank)

    def summary(rank: int, path: str) -> RankSummary:
        return RankSummary(rank, {}, frozenset(), None, None, meta(rank, path))

    summaries = [summary(0, "/a"), summary(1, "/a")]
    assert mixed_runs(summaries) is None
    assert mixed_runs(summaries, [meta(0, "/a"), meta(1, "/a"), meta(10, "/a")]) is None
    mixed = mixed_runs(summaries, [meta(0, "/a"), meta(1, "/a"), meta(1, "/b")])
    assert mixed is not None and (mixed.rank, mixed.paths) == (1, ("/a", "/b"))
    assert mixed_runs(summaries[:1], [meta(0, "/a"), meta(0, "/b")]) is None  # no cluster


def test_some_ranks_of_one_run_are_compared(tmp_path):
    """Ranks 0 and 2 of the 4-rank run: a subset of one job's ranks is one run."""
    copy_traces(tmp_path, "ddp4_rank0", "ddp4_rank2")
    result = advisor.analyze(tmp_path)
    assert not result.notes
    assert result.analyses[-1].tables["ranks"]["rank"].tolist() == [0, 2]


def test_the_command_line_and_the_page_give_the_note(tmp_path):
    inputs = copy_traces(tmp_path / "in", "ddp_rank0", "ddp4_rank0", "ddp4_rank1")
    out = tmp_path / "out"
    result = separate_runner().invoke(main, ["run", str(inputs), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    assert "note: no cross-rank analysis: rank 0 is in 2 profiles" in result.stderr
    assert "cluster of" not in result.stdout
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '<p class="run-note break">no cross-rank analysis: rank 0 is in 2 profiles' in page
    assert not (out / "prof_rule_cluster.json").exists()
    # a reader of the JSON alone is told too: in each report, which the schema allows
    reports = sorted(out.glob("prof_rule_*.json"))
    assert len(reports) == 3
    for path in reports:
        report = json.loads(path.read_text(encoding="utf-8"))
        (note,) = report["run_notes"]
        assert note.startswith("no cross-rank analysis: rank 0 is in 2 profiles")
        validate_report(report)
    printed = separate_runner().invoke(main, ["run", str(inputs), "-o", "-", "-q"])
    assert [r["run_notes"] for r in json.loads(printed.stdout)["reports"]] == [[note]] * 3


def test_a_run_without_notes_writes_none(tmp_path):
    inputs = copy_traces(tmp_path / "in", "ddp4_rank0", "ddp4_rank2")
    out = tmp_path / "out"
    assert separate_runner().invoke(main, ["run", str(inputs), "-o", str(out)]).exit_code == 0
    reports = [json.loads(p.read_text(encoding="utf-8")) for p in out.glob("prof_rule_*.json")]
    assert len(reports) == 3 and not any("run_notes" in r for r in reports)
