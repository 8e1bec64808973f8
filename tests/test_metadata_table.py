"""The `metadata` table: every reader's facts about its run, on real files, checked against the
raw files; and the env_advice table the ENV rules read."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from conftest import FIXTURE_DIR, REAL

import advisor
from advisor.cluster import build_cluster, pipeline_stage
from advisor.formats.metadata import MetadataRows
from advisor.model import Profile, ProfileMeta, contract_problems
from advisor_plugins.ascend_pt import AscendPtReader
from advisor_plugins.ascend_pt.meta import apply_metadata
from advisor_plugins.environment import catalogue, env_advice, slow
from advisor_plugins.kineto import KinetoReader
from advisor_plugins.mindspore_legacy import MindSporeLegacyReader
from advisor_plugins.msprof import MsprofReader

RANK_FOLDER = FIXTURE_DIR / "metadata" / "node0_4242_20260101000000000_ascend_pt"
CANN = REAL / "cann_timeline" / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
CANN_DEVICE1 = REAL / "cann_timeline_device1" / "PROF_000001_20230818142704567_GQFAMHBKGODKJMLA"
KINETO = sorted(
    p
    for folder in [REAL / "kineto", *REAL.glob("kineto_*")]
    for p in folder.iterdir()
    if p.suffix in (".json", ".gz")
)


def facts(profile: Profile) -> dict[str, tuple[str, str]]:
    """key -> (value, source) of a profile's metadata table."""
    table = profile.tables["metadata"]
    assert contract_problems(profile) == []
    assert table["key"].is_unique
    return {k: (v, s) for k, v, s in zip(table["key"], table["value"], table["source"])}


def load(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as file:
        return json.load(file)


# -- CANN msprof export: info.json.N ----------------------------------------------------------


@pytest.mark.parametrize("root", [CANN, CANN_DEVICE1], ids=["device0", "device1"])
def test_msprof_chip_facts_are_the_info_json_of_the_device(root: Path) -> None:
    (profile,) = MsprofReader().read(root)
    device = profile.meta.device_id
    info_path = root / f"device_{device}" / f"info.json.{device}"
    info = load(info_path)
    entry = next(d for d in info["DeviceInfo"] if str(d["id"]) == device)
    got = facts(profile)
    source = f"device_{device}/info.json.{device}"
    assert got["device.ai_core_num"] == (str(entry["ai_core_num"]), source)
    assert got["device.aiv_core_num"] == (str(entry["aiv_num"]), source)
    assert got["device.aicore_freq_mhz"] == (str(entry["aic_frequency"]), source)
    assert got["device.ai_cpu_core_num"][0] == str(entry["ai_cpu_core_num"])
    assert got["host.cpu_count"][0] == str(info["cpuNums"])
    assert got["host.memory_bytes"][0] == str(info["memoryTotal"] * 1024)  # kB in the file
    assert got["host.name"][0] == info["hostname"]


# -- torch_npu rank folder: profiler_info, profiler_metadata, PROF_*/device_N/info.json ---------


def test_ascend_pt_rank_folder_metadata() -> None:
    (profile,) = AscendPtReader().read(RANK_FOLDER)
    got = facts(profile)
    env = load(RANK_FOLDER / "profiler_metadata.json")["ENV_VARIABLES"]
    info = load(RANK_FOLDER / "profiler_info_0.json")
    assert {k[4:]: v for k, (v, _) in got.items() if k.startswith("env.")} == env
    assert got["env.ASCEND_LAUNCH_BLOCKING"] == ("1", "profiler_metadata.json")
    assert got["env.HCCL_ALGO"] == ("", "profiler_metadata.json")  # listed, unset
    assert got["version.torch_npu"] == (info["torch_npu_version"], "profiler_info_0.json")
    assert got["version.cann"] == (info["cann_version"], "profiler_info_0.json")
    assert got["profiler.profiler_level"][0] == "Level1"
    assert got["profiler.record_shapes"][0] == "true"
    assert got["distributed.pipeline_model_parallel_size"][0] == "2"
    # the chip facts of the CANN export beside the rank folder (a copy of the real info.json.0)
    chip = load(next(RANK_FOLDER.glob("PROF_*/device_0/info.json.0")))["DeviceInfo"][0]
    assert got["device.ai_core_num"][0] == str(chip["ai_core_num"])
    assert got["device.ai_core_num"][1].startswith("PROF_000001_") and got["device.ai_core_num"][
        1
    ].endswith("device_0/info.json.0")


def test_ascend_pt_folder_without_metadata_files_has_no_metadata_table() -> None:
    (profile,) = AscendPtReader().read(
        FIXTURE_DIR / "ascend_db" / "msinsight" / "text_level1_rank0_ascend_pt"
    )
    assert "metadata" not in profile.tables


def test_ascend_pt_damaged_info_json_is_one_warning(tmp_path: Path) -> None:
    import shutil

    folder = tmp_path / RANK_FOLDER.name
    shutil.copytree(RANK_FOLDER, folder)
    info = next(folder.glob("PROF_*/device_0/info.json.0"))
    info.write_text("{not json")
    (profile,) = AscendPtReader().read(folder)
    got = facts(profile)
    assert "device.ai_core_num" not in got and "env.ASCEND_LAUNCH_BLOCKING" in got
    assert [w for w in profile.warnings if w.file.endswith("info.json.0")]


# -- Kineto: header and deviceProperties ---------------------------------------------------------


@pytest.mark.parametrize("path", KINETO, ids=[p.name[:40] for p in KINETO])
def test_kineto_metadata_is_the_trace_header(path: Path) -> None:
    profile = KinetoReader().read(path)
    profile = profile[0] if isinstance(profile, list) else profile
    doc = load(path)
    got = facts(profile)
    assert {s for _, s in got.values()} == {path.name}
    info = doc.get("distributedInfo", {})
    for key in ("backend", "rank", "world_size"):
        assert got.get(f"distributed.{key}", (None,))[0] == (
            None if key not in info else str(info[key])
        )
    if "nccl_version" in info:
        assert got["version.nccl"][0] == info["nccl_version"]
    devices = doc.get("deviceProperties") or doc.get("computeProperties") or []
    if devices:
        device = devices[0]  # every sample trace is of one device
        assert got["device.name"][0] == device["name"]
        assert got["device.memory_bytes"][0] == str(device["totalGlobalMem"])
        if "numSms" in device:
            assert got["device.sm_count"][0] == str(device["numSms"])
    else:
        assert "device.name" not in got
    if "cuda_driver_version" in doc:
        assert got["version.driver"][0] == str(doc["cuda_driver_version"])


# -- MindSpore old layout: the cluster file's name and per-step figures -------------------------


def test_mindspore_pipeline_stages_and_step_figures_from_the_cluster_files() -> None:
    folder = REAL / "mindspore_cluster_4rank"
    profiles = MindSporeLegacyReader().read(folder)
    assert sorted(p.meta.rank for p in profiles) == [0, 1, 2, 3]
    for profile in profiles:
        rank = profile.meta.rank
        name = f"ascend_cluster_analyse_pipeline-parallel_2_4_{rank}.csv"
        got = facts(profile)
        assert got["distributed.pp_stage"] == (str(rank // 2), name)
        assert got["distributed.pp_stages"][0] == "2"
        assert got["distributed.parallel_mode"][0] == "pipeline-parallel"
        raw = pd.read_csv(folder / name)
        steps = profile.tables["steps"]
        n = len(steps)
        assert len(raw) == n + 1  # the steps, then a summary row
        assert steps["computing_us"].tolist() == pytest.approx(
            (raw["computation_time"].iloc[:n] * 1000).tolist()
        )
        assert steps["bubble_us"].tolist() == pytest.approx(
            (raw["receive_alone_time"].iloc[:n] * 1000).tolist()
        )
    ranks = build_cluster(profiles).tables["ranks"]
    assert ranks["pp_stage"].tolist() == [0, 0, 1, 1]
    assert ranks["stage_label"].tolist() == ["stage 0", "stage 0", "stage 1", "stage 1"]
    stage1 = ranks.loc[ranks["pp_stage"] == 1, "computing_us"].mean()
    assert ranks["stage_computing_us"].iloc[3] == pytest.approx(stage1)


def test_mindspore_data_parallel_file_gives_no_stage() -> None:
    (profile,) = MindSporeLegacyReader().read(REAL / "mindspore_legacy" / "run_2_profiler")
    got = facts(profile)
    assert got["distributed.parallel_mode"][0] == "data-parallel"
    assert "distributed.pp_stage" not in got  # rank 1 of a world of 1: no stage to infer
    assert "bubble_us" not in profile.tables["steps"]


# -- pipeline stages from Megatron arguments -----------------------------------------------------


def _rank_profile(rank: int, rows: dict[str, str], world: int | None = None) -> Profile:
    meta = ProfileMeta("test", f"rank{rank}", rank=rank, world_size=world)
    frame = pd.DataFrame({"key": list(rows), "value": list(rows.values()), "source": "x"})
    return Profile(meta, {"metadata": frame})


@pytest.mark.parametrize(
    ("rank", "rows", "world", "stage"),
    [
        (5, {"distributed.pipeline_model_parallel_size": "2"}, 8, 1),  # 4 ranks per stage
        (
            3,
            {"distributed.pipeline_model_parallel_size": "4", "distributed.world_size": "8"},
            None,
            1,
        ),
        (3, {"distributed.pp_stage": "0", "distributed.pipeline_model_parallel_size": "4"}, 8, 0),
        (3, {"distributed.pipeline_model_parallel_size": "3"}, 8, None),  # 8 % 3: no layout
        (3, {"distributed.pipeline_model_parallel_size": "1"}, 8, None),  # no pipeline
        (3, {}, 8, None),
    ],
)
def test_pipeline_stage(rank: int, rows: dict[str, str], world: int | None, stage: int | None):
    assert pipeline_stage(rank, _rank_profile(rank, rows, world)) == stage


# -- MetadataRows and the environment catalogue ---------------------------------------------------


def test_metadata_rows_first_file_wins_and_only_env_keeps_empty_values() -> None:
    rows = MetadataRows()
    rows.add("version.cann", "8.0", "a.json")
    rows.add("version.cann", "7.0", "b.json")
    rows.add("device.name", "", "a.json")
    rows.add("profiler.with_stack", True, "a.json")
    rows.add("device.sm_count", 132.0, "a.json")
    rows.add("device.props", {"nested": 1}, "a.json")
    rows.add_env({"HCCL_ALGO": None, "TASK_QUEUE_ENABLE": 2}, "m.json")
    frame = rows.frame()
    got = dict(zip(frame["key"], zip(frame["value"], frame["source"])))
    assert got == {
        "version.cann": ("8.0", "a.json"),
        "profiler.with_stack": ("true", "a.json"),
        "device.sm_count": ("132", "a.json"),
        "env.HCCL_ALGO": ("", "m.json"),
        "env.TASK_QUEUE_ENABLE": ("2", "m.json"),
    }
    assert MetadataRows().frame() is None


def test_catalogue_entries_are_complete() -> None:
    entries = catalogue()
    names = [e["name"] for e in entries]
    assert len(names) == len(set(names))
    for entry in entries:
        assert entry["area"] in ("launch", "logging", "communication", "memory", "cache")
        assert entry.get("reason_zh") and str(entry["recommended"])


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("ASCEND_LAUNCH_BLOCKING", "1", True),
        ("ASCEND_LAUNCH_BLOCKING", "0", False),
        ("ASCEND_LAUNCH_BLOCKING", "", False),
        ("ASCEND_GLOBAL_LOG_LEVEL", "1", True),
        ("ASCEND_GLOBAL_LOG_LEVEL", "3", False),
        ("ASCEND_GLOBAL_LOG_LEVEL", "", False),  # msprof-analyze: unset is not judged
        ("ASCEND_GLOBAL_LOG_LEVEL", "debug", False),
        ("HCCL_ALGO", "level1:ring", True),
        ("HCCL_ALGO", "", False),
        ("ACLNN_CACHE_LIMIT", "", False),  # CANN's default, 10000, which it advises keeping
        ("ACLNN_CACHE_LIMIT", "9999", True),
        ("ACLNN_CACHE_LIMIT", "10000", False),
        ("HOST_CACHE_CAPACITY", "0", True),
        ("HOST_CACHE_CAPACITY", "20", False),
        ("PYTORCH_NPU_ALLOC_CONF", "", True),
        ("PYTORCH_NPU_ALLOC_CONF", "expandable_segments:True", False),
        ("NCCL_DEBUG", "info", True),
        ("NCCL_DEBUG", "WARN", False),
    ],
)
def test_slow_values(name: str, value: str, expected: bool) -> None:
    entry = next(e for e in catalogue() if e["name"] == name)
    assert slow(entry, value) is expected


def test_expandable_segments_are_advised_where_the_allocator_churns() -> None:
    """PYTORCH_NPU_ALLOC_CONF unset is slow only with 10 or more allocator calls on the host
    timeline (msprof-analyze advises it on every profile)."""
    (profile,) = AscendPtReader().read(RANK_FOLDER)
    calls = ["aclMallocMemInner", "aclrtFree"] * 5
    profile.tables["host_ops"] = pd.DataFrame(
        {"name": calls, "kind": "memory", "start_us": range(10), "duration_us": 1.0}
    )
    env_advice(profile)
    table = profile.tables["env_advice"].set_index("name")
    assert bool(table.loc["PYTORCH_NPU_ALLOC_CONF", "slow"])
    assert table.loc["PYTORCH_NPU_ALLOC_CONF", "observed"] == "10 allocator calls on the timeline"
    profile.tables["host_ops"] = profile.tables["host_ops"].iloc[:9]
    env_advice(profile)
    assert not profile.tables["env_advice"].set_index("name").loc["PYTORCH_NPU_ALLOC_CONF", "slow"]


def test_env_advice_rows_on_the_rank_folder() -> None:
    (profile,) = AscendPtReader().read(RANK_FOLDER)
    env_advice(profile)
    table = profile.tables["env_advice"]
    assert contract_problems(profile) == []
    judged = dict(zip(table["name"], table["slow"]))
    # every recorded variable the catalogue knows, slow or not
    assert judged == {
        "ASCEND_LAUNCH_BLOCKING": True,
        "TASK_QUEUE_ENABLE": False,
        "ASCEND_GLOBAL_LOG_LEVEL": True,
        "HCCL_ALGO": False,
        "HCCL_RDMA_TC": False,
        "HCCL_RDMA_SL": False,
        # unset, but the folder has no host timeline: no allocator churn seen, so not advised
        "PYTORCH_NPU_ALLOC_CONF": False,
        "ACLNN_CACHE_LIMIT": False,  # unset: CANN's default of 10000
        "HOST_CACHE_CAPACITY": True,
    }
    assert set(table["source"]) == {"profiler_metadata.json"}


def test_env_rules_end_to_end_on_the_rank_folder() -> None:
    result = advisor.analyze(RANK_FOLDER, select=["environment"])
    (analysis,) = result.analyses
    by_id = {f.rule.id: f for f in analysis.findings}
    # HOST_CACHE_CAPACITY is unset, but the one step's shapes cannot have changed: ENV-005
    # has no cache to name
    assert set(by_id) == {"ENV-001", "ENV-002"}
    free_us = 1000 + 3000  # step_trace_time.csv Free
    assert by_id["ENV-001"].impact_us == pytest.approx(free_us)
    assert "ASCEND_LAUNCH_BLOCKING is 1 (use 0)" in by_id["ENV-001"].message
    assert analysis.evaluation.outcomes["ENV-004"] == "passed"  # no allocator calls recorded
    assert analysis.evaluation.outcomes["ENV-003"] == "passed"  # HCCL variables listed unset


def test_rank_folder_without_output_keeps_its_metadata_on_the_export(tmp_path: Path) -> None:
    """A rank folder whose profile comes from the CANN export beside it (no
    ASCEND_PROFILER_OUTPUT): the environment and versions join the export's chip facts."""
    import shutil

    folder = tmp_path / RANK_FOLDER.name
    folder.mkdir()
    for name in ("profiler_info_0.json", "profiler_metadata.json"):
        shutil.copy(RANK_FOLDER / name, folder / name)
    export = FIXTURE_DIR / "msprof" / "PROF_000001_20260105093000123_SMALLCASE"
    shutil.copytree(export, folder / export.name)
    (profile,) = AscendPtReader().read(folder)
    assert profile.meta.source_format.startswith("msprof")
    got = facts(profile)
    assert got["env.ASCEND_LAUNCH_BLOCKING"] == ("1", "profiler_metadata.json")
    assert got["version.torch_npu"][1] == "profiler_info_0.json"
    chip = load(export / "device_0" / "info.json.0")["DeviceInfo"][0]
    assert got["device.ai_core_num"][0] == str(chip["ai_core_num"])


def test_env_rules_name_the_files_a_folder_without_metadata_lacks() -> None:
    folder = FIXTURE_DIR / "ascend_db" / "msinsight" / "text_level1_rank0_ascend_pt"
    (analysis,) = advisor.analyze(folder, select=["ENV-004"]).analyses
    why = analysis.evaluation.inapplicable["ENV-004"]
    assert why.reason == "missing"
    assert any("profiler_metadata.json" in hint for hint in why.collect)


def test_msprof_sample_json_settings_and_driver_version(tmp_path: Path) -> None:
    """sample.json's collection settings become profiler.* rows; a damaged one is a warning."""
    import shutil

    export = tmp_path / "PROF_000001_20260105093000123_SMALLCASE"
    shutil.copytree(FIXTURE_DIR / "msprof" / export.name, export)
    info_path = export / "device_0" / "info.json.0"
    info = {**load(info_path), "drvVersion": "0x72313"}
    info_path.write_text(json.dumps(info))
    sample = {"ai_core_metrics": "PipeUtilization", "ai_core_profiling_mode": "task-based"}
    (export / "device_0" / "sample.json").write_text(json.dumps(sample))
    (profile,) = MsprofReader().read(export)
    got = facts(profile)
    assert got["profiler.ai_core_metrics"] == ("PipeUtilization", "device_0/sample.json")
    assert got["profiler.ai_core_profiling_mode"][0] == "task-based"
    assert got["version.driver"] == ("0x72313", "device_0/info.json.0")
    assert "device_0/sample.json" in profile.meta.files_read
    (export / "device_0" / "sample.json").write_text("{broken")
    (profile,) = MsprofReader().read(export)
    assert "profiler.ai_core_metrics" not in facts(profile)
    assert [w for w in profile.warnings if w.file.endswith("sample.json")]


def _world_group_metadata(rank: int, size: int) -> dict:
    """profiler_metadata.json of a plain data-parallel run on a newer torch_npu: no Megatron
    arguments, every communication group in parallel_group_info (the layout of MindStudio
    Insight's genuine server/src/test/test_data/metadata/profiler_metadata.json, whose
    Megatron run also writes distributed_args)."""
    return {
        "ENV_VARIABLES": {"HCCL_ALGO": ""},
        "parallel_group_info": {
            "10.0.0.1%eth0_55000_0_1738895486152654": {
                "group_name": "default_group",
                "group_rank": rank,
                "global_ranks": list(range(size)),
            },
            "10.0.0.1%eth0_55000_0_1738895521183247": {
                "group_name": "dp",
                "group_rank": rank,
                "global_ranks": [0, 1],
            },
        },
    }


def test_world_size_from_the_world_group_tells_a_cluster_of_some_ranks(tmp_path: Path) -> None:
    """Two ranks of eight, at profiler level 0 (no communication matrix to name the others):
    the world group of parallel_group_info gives the job's size, and CLUSTER-008 says that
    six ranks are missing; a group of two ranks only is not the world."""
    for rank in (0, 1):
        source = REAL / "msinsight_pytorch_level1" / f"rank{rank}_ascend_pt"
        target = tmp_path / source.name
        (target / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        for name in ("step_trace_time.csv", "kernel_details.csv"):
            data = (source / "ASCEND_PROFILER_OUTPUT" / name).read_bytes()
            (target / "ASCEND_PROFILER_OUTPUT" / name).write_bytes(data)
        (target / f"profiler_info_{rank}.json").write_bytes(
            (source / f"profiler_info_{rank}.json").read_bytes()
        )
        metadata = json.dumps(_world_group_metadata(rank, 8))
        (target / "profiler_metadata.json").write_text(metadata, encoding="utf-8")
    result = advisor.analyze(tmp_path, select=["CLUSTER-008"])
    ranks = [a.profile for a in result.analyses if a.profile.meta.source_format != "cluster"]
    assert [p.meta.world_size for p in ranks] == [8, 8]
    metadata = ranks[0].tables["metadata"]
    assert metadata.loc[metadata["key"] == "distributed.world_size", "value"].tolist() == ["8"]
    (finding,) = result.analyses[-1].findings
    assert finding.message.startswith("2 ranks were profiled of a job of at least 8")
    only_dp = _world_group_metadata(0, 8)
    only_dp["parallel_group_info"].pop("10.0.0.1%eth0_55000_0_1738895486152654")
    meta = ProfileMeta(source_format="ascend-pt", path="x")
    apply_metadata(meta, only_dp)
    assert meta.world_size is None


def test_world_size_from_the_database_meta_data(tmp_path: Path) -> None:
    """torch_npu's database keeps profiler_metadata.json's entries in META_DATA as JSON text:
    its parallel_group_info gives the world size as the file does."""
    rank = tmp_path / "rank0_ascend_pt"
    shutil.copytree(FIXTURE_DIR / "ascend_db" / "rank0_ascend_pt", rank)
    database = rank / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    with sqlite3.connect(database) as db:
        value = json.dumps(_world_group_metadata(0, 16)["parallel_group_info"])
        db.execute("INSERT INTO META_DATA VALUES ('parallel_group_info', ?)", (value,))
    (analysis,) = advisor.analyze(rank).analyses
    assert analysis.profile.meta.world_size == 16
