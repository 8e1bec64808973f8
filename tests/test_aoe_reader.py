"""The AOE reader: every documented result shape, repeated report keys, and broken samples."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import FIXTURE_DIR

from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.model import contract_problems
from advisor.plugin_manager import PluginHost
from advisor.reading import read_inputs
from advisor_plugins.aoe import AoeReader

HERE = FIXTURE_DIR / "aoe"
GOOD = HERE / "good"
BAD = HERE / "malformed"
OPAT_63 = GOOD / "aoe_result_opat_20260105103000123_pid4242.json"
OPAT_601 = GOOD / "aoe_result_opat_20230301120000000_pid77.json"
INFERENCE = GOOD / "aoe_result_opat_20230601090000000_pid3.json"
SGAT = GOOD / "aoe_result_opat_20260105110000000_pid9001.json"
READER = AoeReader()


def read_one(path: Path):
    (profile,) = READER.read(path)
    assert contract_problems(profile) == []
    return profile


def rows(path: Path, kind: str) -> list[dict]:
    table = read_one(path).tables["tuning"]
    return table[table["kind"] == kind].to_dict("records")


def raw_tasks(path: Path) -> list[tuple[str, list]]:
    """(report key, sections) pairs, repeated keys kept, with the standard json module."""
    return json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=list)


def test_detects_result_files_and_result_folders_only(tmp_path):
    assert READER.detect(OPAT_63) and READER.detect(GOOD)
    assert not READER.detect(HERE)  # has sub-folders: searched, each file claimed on its own
    other = tmp_path / "trace.json"
    other.write_text('{"traceEvents": []}', encoding="utf-8")
    assert not READER.detect(other)
    renamed = tmp_path / "tuned.json"
    renamed.write_text(SGAT.read_text(encoding="utf-8"), encoding="utf-8")
    assert READER.detect(renamed)  # no AOE name, but AOE sections in the first bytes
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(OPAT_63, mixed)
    (mixed / "trace.json").write_text("{}", encoding="utf-8")
    assert not READER.detect(mixed)  # other data next to it: each file on its own


def test_repeated_report_keys_are_all_kept():
    pairs = raw_tasks(OPAT_63)
    assert len(pairs) == 2 and pairs[0][0] == pairs[1][0]  # the same key twice
    assert len(json.loads(OPAT_63.read_text(encoding="utf-8"))) == 1  # a plain parser loses one
    tasks = rows(OPAT_63, "task")
    assert [t["name"] for t in tasks] == [
        dict(dict(s)["basic"])["tuning_name"] for _, sections in pairs for s in sections[:1]
    ]
    assert [t["status"] for t in tasks] == ["completed", "failed"]
    summaries = [dict(dict(dict(sections[1])["OPAT"])["repo_summary"]) for _, sections in pairs]
    assert [t["repo_total"] for t in tasks] == [s["total_num"] for s in summaries]
    assert [t["repo_unsatisfied"] for t in tasks] == [s["repo_unsatisfied_num"] for s in summaries]


def test_cann63_operators_one_row_per_tuning_mode():
    (_, sections), _ = raw_tasks(OPAT_63)
    ops = dict(dict(sections[1])["OPAT"])["repo_modified_operators"]
    expected = [
        (dict(op)["op_name"], mode, dict(perf))
        for op in ops
        for mode, perf in dict(op)["tune_performance"]
    ]
    got = [r for r in rows(OPAT_63, "op") if r["status"] != "failed"]
    assert len(got) == len(expected) == 5
    for row, (name, mode, perf) in zip_strict(got, expected):
        assert (row["name"], row["mode"]) == (name, mode)
        assert row["before_us"] == perf["performance_before_tune(us)"]
        assert row["after_us"] == perf["performance_after_tune(us)"]
        assert row["improvement_pct"] == pytest.approx(
            float(perf["performance_improvement"].rstrip("%"))
        )
        assert row["update_mode"] == perf["update_mode"]
        slower = perf["performance_after_tune(us)"] > perf["performance_before_tune(us)"]
        assert row["status"] == ("regressed" if slower else "improved")
    fused = [r for r in got if r["name"] == "model/fc/MatMul_fused_add"]
    assert {r["op_type"] for r in fused} == {"MatMulV2,Add"}  # several op types joined


def test_failed_operators_become_failed_rows():
    (_, _), (_, sections) = raw_tasks(OPAT_63)
    failed = dict(dict(sections[1])["OPAT"])["tuning_failed_operators"]
    got = [r for r in rows(OPAT_63, "op") if r["status"] == "failed"]
    assert [r["name"] for r in got] == failed
    assert all(r["task"] == raw_tasks(OPAT_63)[1][0] for r in got)


def test_cann601_add_and_update_lists():
    report = json.loads(OPAT_601.read_text(encoding="utf-8"))
    ((key, sections),) = report.items()
    modified = sections[1]["OPAT"]["repo_modified_operators"]
    got = rows(OPAT_601, "op")
    expected = [(op, "add") for op in modified["add_repo_operators"]] + [
        (op, "update") for op in modified["update_repo_operators"]
    ]
    assert [(r["name"], r["update_mode"]) for r in got] == [
        (op["op_name"], mode) for op, mode in expected
    ]
    for row, (op, _) in zip_strict(got, expected):
        assert row["after_us"] == op["performance_after_tune(us)"]
        assert row["task"] == key
    assert rows(OPAT_601, "task")[0]["status"] == "completed"  # "tune success", no model times


def test_offline_inference_list_with_model_times():
    doc = json.loads(INFERENCE.read_text(encoding="utf-8"))
    opat = doc[1]["OPAT"]
    (task,) = rows(INFERENCE, "task")
    assert task["before_us"] == pytest.approx(opat["model_baseline_performance(ms)"] * 1000)
    assert task["after_us"] == pytest.approx(opat["model_result_performance(ms)"] * 1000)
    assert task["status"] == "regressed"  # 4.0 ms -> 4.4 ms
    assert task["name"] == doc[0]["basic"]["tuning_name"]
    (op,) = rows(INFERENCE, "op")
    assert op["name"] == opat["repo_modified_operators"]["add_repo_operators"][0]["op_name"]


def test_subgraph_results_in_microseconds():
    ((_, sections),) = json.loads(SGAT.read_text(encoding="utf-8")).items()
    sgat = sections[1]["SGAT"]
    graphs = (
        sgat["repo_modified_subgraphs"]["add_repo_subgraphs"]
        + sgat["repo_modified_subgraphs"]["update_repo_subgraphs"]
    )
    got = rows(SGAT, "subgraph")
    assert [r["name"] for r in got] == [g["repo_key"] for g in graphs]
    for row, graph in zip_strict(got, graphs):
        assert row["before_us"] == pytest.approx(graph["performance_before_tune(ms)"] * 1000)
        assert row["after_us"] == pytest.approx(graph["performance_after_tune(ms)"] * 1000)
        assert row["mode"] == "SGAT"
    assert [r["update_mode"] for r in got] == ["add", "update"]
    (task,) = rows(SGAT, "task")
    assert task["improvement_pct"] == pytest.approx(55.12)
    assert task["repo_unsatisfied"] == sgat["repo_summary"]["repo_unsatisfied_num"]


def test_folder_reads_every_file_into_one_profile():
    profile = read_one(GOOD)
    assert sorted(profile.meta.files_read) == sorted(p.name for p in GOOD.glob("*.json"))
    kinds = profile.tables["tuning"]["kind"]
    assert int((kinds == "task").sum()) == 2 + 1 + 1 + 1  # tasks of the four files
    assert profile.warnings == []


def test_missing_comma_is_assumed_with_one_warning():
    profile = read_one(BAD / "aoe_result_opat_missing_comma.json")
    (warning,) = profile.warnings
    text = str(warning)
    assert "\n" not in text and "aoe_result_opat_missing_comma.json" in text
    assert "line 22" in text and "missing comma" in text
    # everything the comma separated is kept: both subgraph lists
    assert int((profile.tables["tuning"]["kind"] == "subgraph").sum()) == 2


def test_stray_brackets_keep_every_section_that_parses():
    profile = read_one(BAD / "aoe_result_opat_stray_brackets.json")
    (warning,) = profile.warnings
    assert "invalid JSON at line 43" in str(warning) and "kept the 4 of 4" in str(warning)
    tasks = profile.tables["tuning"][profile.tables["tuning"]["kind"] == "task"]
    assert list(tasks["name"]) == ["resnet_tune", "resnet_tune_2"]


def test_truncated_file_keeps_what_was_written_and_marks_it_incomplete():
    profile = read_one(BAD / "aoe_result_opat_truncated.json")
    assert "aoe_result_opat_truncated.json" in str(profile.warnings[0])
    (task,) = profile.tables["tuning"].to_dict("records")
    assert task["status"] == "incomplete"


def test_interrupted_task_and_bad_numbers():
    profile = read_one(BAD / "aoe_result_opat_interrupted.json")
    table = profile.tables["tuning"]
    assert list(table["status"]) == ["incomplete", "incomplete"]  # no tuning_time(s); no times
    (warning,) = profile.warnings  # 'fast' is reported, N/A is a documented "no value"
    assert "performance_after_tune(us) is not a number ('fast')" in str(warning)


@pytest.mark.parametrize(
    "content, problem",
    [
        ("", "empty file"),
        ('{"report_1": [', "no AOE section could be read"),
        ('{"x": 1}', "no AOE tuning task found"),
    ],
)
def test_unreadable_single_file_is_one_clear_error(tmp_path, content, problem):
    path = tmp_path / "aoe_result_opat_1.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UnreadableInput) as info:
        READER.read(path)
    assert problem in str(info.value) and str(path) in str(info.value)


def test_broken_file_in_a_folder_is_a_warning_not_a_failure(tmp_path):
    shutil.copy(SGAT, tmp_path)
    (tmp_path / "aoe_result_opat_2.json").write_text("", encoding="utf-8")
    profile = read_one(tmp_path)
    assert [str(w) for w in profile.warnings] == [
        f"{tmp_path / 'aoe_result_opat_2.json'}: empty file"
    ]
    assert len(profile.tables["tuning"]) == 3


def test_run_never_writes_into_the_input_and_plugin_is_registered(tmp_path):
    folder = tmp_path / "results"
    shutil.copytree(GOOD, folder)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir())
    result = read_inputs([folder], PluginHost())
    profiles = result.profiles
    assert result.input_errors == [] and len(profiles) == 1
    assert profiles[0].meta.source_format == "aoe"
    assert sorted((p.name, p.stat().st_mtime_ns) for p in folder.iterdir()) == before
