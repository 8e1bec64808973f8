"""Seed 003 to the letter (issue 19): the Lccl row and the "not minimal profiling" flag of the
overall comparison, the steps compared (--base-step / --comparison-step), the API and kernel
comparisons, and multi-rank sides (the slowest rank; one folder as both sides: fastest against
slowest).

Expected figures are computed from the raw files (trace JSON, kernel_details.csv) here, not
taken from advisor.
"""

from __future__ import annotations

import csv
import gzip
import json
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import replace
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
from conftest import FIXTURE_DIR

from advisor.compare import CompareOptions, StepError, compare
from advisor.compare.analysis import compare_tables
from advisor.compare.profiling import heavy_options
from advisor.model import Profile, ProfileMeta, conform
from advisor.render.compare_outputs import COMPARE_SCHEMA
from advisor.session import Session

OWN = FIXTURE_DIR / "kineto_own"
BASE = OWN / "compare_base.pt.trace.json.gz"
SLOW = OWN / "compare_slow.pt.trace.json.gz"
ASCEND_PT = FIXTURE_DIR / "real" / "ascend_pt" / "rank0_ascend_pt"
KERNEL_DETAILS = ASCEND_PT / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
METADATA_PT = FIXTURE_DIR / "metadata" / "node0_4242_20260101000000000_ascend_pt"


def _events(trace: Path) -> list[dict]:
    return json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]


def _steps(trace: Path) -> dict[int, dict]:
    """ProfilerStep#N events of a trace by N."""
    return {
        int(e["name"].split("#")[1]): e
        for e in _events(trace)
        if str(e.get("name", "")).startswith("ProfilerStep#")
    }


def _mean_step(trace: Path) -> float:
    durations = [e["dur"] for e in _steps(trace).values()]
    return sum(durations) / len(durations)


def _advisor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args], capture_output=True, text=True, timeout=300
    )


def _read(path: Path) -> Profile:
    return Session.open().read([path], jobs=1).profiles[0]


def _kernels_only(tmp_path: Path) -> Path:
    """rank0's kernel_details.csv alone: it comes from another run than the trace beside it,
    which would otherwise be used in its place."""
    folder = tmp_path / "rank0_ascend_pt"
    (folder / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    shutil.copy(KERNEL_DETAILS, folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    return folder


@pytest.fixture(scope="module")
def slowed():
    return compare(BASE, SLOW)


# -- the overall table: Lccl --------------------------------------------------------------


def _npu_run(kernels: list[tuple[str, str, float]]) -> Profile:
    """One step of device kernels: (name, compute class, duration)."""
    device = pd.DataFrame(
        [
            {
                "name": name,
                "category": "compute",
                "compute_class": klass,
                "start_us": 10.0 * i,
                "duration_us": us,
            }
            for i, (name, klass, us) in enumerate(kernels)
        ]
    )
    steps = pd.DataFrame({"step": [1], "start_us": [0.0], "end_us": [1000.0], "duration_us": [1e3]})
    return Profile(
        ProfileMeta("test", "npu", device_kind="NPU"),
        {"device_ops": conform("device_ops", device), "steps": steps},
    )


def test_lccl_kernels_are_their_own_row_apart_from_vector() -> None:
    base = _npu_run([("MatMul_1", "cube", 100.0), ("Add_2", "vector", 20.0)])
    comp = _npu_run(
        [
            ("MatMul_1", "cube", 100.0),
            ("Add_2", "vector", 20.0),
            ("kernel_aivec", "vector", 30.0),  # LCCL all-reduce on the vector cores
            ("Kernel_AIVEC", "vector", 12.0),
        ]
    )
    overall = compare_tables(base, comp, CompareOptions())["compare_overall"].set_index("metric")
    assert overall.loc["lccl", "base"] == 0.0 and overall.loc["lccl", "comparison"] == 42.0
    assert overall.loc["lccl", "comp_count"] == 2
    assert overall.loc["vector", "comparison"] == 20.0  # the LCCL kernels are not vector work
    metrics = list(overall.index)
    assert metrics.index("other_compute") < metrics.index("lccl")
    plain = compare_tables(base, base, CompareOptions())["compare_overall"]
    assert "lccl" not in set(plain["metric"])  # no row when neither run uses LCCL


# -- the overall table: not minimal profiling ----------------------------------------------


def test_kineto_header_switches_make_the_runs_not_minimal(slowed, tmp_path: Path) -> None:
    settings = slowed.tables["compare_profiling"]
    for side in ("baseline", "comparison"):
        rows = settings[settings["side"] == side].set_index("option")
        # make_traces.py profiles the pair with record_shapes, profile_memory and with_stack
        assert set(rows.index) == {"record_shapes", "profile_memory", "with_stack"}
    assert set(settings["value"]) == {"1"}  # as the trace header writes them
    assert set(settings["evidence"]) == {BASE.name, SLOW.name}
    finding = next(f for f in slowed.findings if f.rule.id == "CMP-010")
    assert finding.severity == "low" and finding.values["options"] == 6
    assert "baseline record_shapes=1" in finding.message
    extra = slowed.profile.meta.extra
    assert extra["baseline"]["minimal_profiling"] is False
    assert set(extra["comparison"]["profiling_options"]) == set(rows.index)
    done = _advisor("compare", str(BASE), str(SLOW), "-o", str(tmp_path / "o"))
    assert "E2E step time (not minimal profiling)" in done.stdout, done.stderr
    assert "Baseline was not profiled minimally (record_shapes, with_stack, profile_memory)" in (
        done.stdout
    )
    html = (tmp_path / "o" / "compare.html").read_text(encoding="utf-8")
    assert "E2E step time (not minimal profiling)" in html and 'id="profiling"' in html


def test_torch_npu_settings_and_recorded_options() -> None:
    stated = heavy_options(_read(METADATA_PT)).set_index("option")
    # profiler_info_0.json: Level1 and PipeUtilization (msprof-analyze: minimal only at Level0)
    assert stated.loc["profiler_level", "value"] == "Level1"
    assert stated.loc["aic_metrics", "value"] == "PipeUtilization"
    assert "profile_memory" not in stated.index and "with_stack" not in stated.index  # false
    real = _read(ASCEND_PT)  # no profiler_info: the CPU activity is seen from what it recorded
    recorded = heavy_options(real).set_index("option")
    cpu_ops = sum(
        1
        for e in json.loads((ASCEND_PT / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
        if e.get("cat") == "cpu_op"
    )
    count = int(recorded.loc["cpu_activity", "evidence"].split()[0].replace(",", ""))
    assert recorded.loc["cpu_activity", "value"] == "recorded" and 0 < count <= cpu_ops
    npu_only = replace(real, tables={k: v for k, v in real.tables.items() if k != "host_ops"})
    assert heavy_options(npu_only).empty  # NPU activity only: minimal
    on_gpu = replace(real, meta=replace(real.meta, device_kind="GPU"))
    assert "cpu_activity" not in set(heavy_options(on_gpu)["option"])  # needed on a GPU


# -- the steps compared ------------------------------------------------------------------


def _top_level_in(trace: Path, name: str, start: float, end: float) -> float:
    """Time of the top-level cpu_op `name` calls starting inside [start, end)."""
    by_thread = defaultdict(list)
    for e in _events(trace):
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            by_thread[e["tid"]].append(e)
    total = 0.0
    for ops in by_thread.values():
        ops.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_until = -1.0
        for e in ops:
            if e["ts"] >= open_until:
                if e["name"] == name and start <= e["ts"] < end:
                    total += e["dur"]
                open_until = e["ts"] + e["dur"]
    return total


def test_one_step_of_each_run() -> None:
    result = compare(BASE, SLOW, options=CompareOptions(base_step=3, comparison_step=4))
    base_step, comp_step = _steps(BASE)[3], _steps(SLOW)[4]
    overall = result.tables["compare_overall"].set_index("metric")
    assert overall.loc["e2e", "base"] == pytest.approx(base_step["dur"])
    assert overall.loc["e2e", "comparison"] == pytest.approx(comp_step["dur"])
    stats = result.tables["compare_op_stats"].set_index("name")
    for column, trace, step in (("base_us", BASE, base_step), ("comp_us", SLOW, comp_step)):
        expected = _top_level_in(trace, "aten::pow", step["ts"], step["ts"] + step["dur"])
        assert stats.loc["aten::pow", column] == pytest.approx(expected, rel=1e-6)
    assert stats.loc["aten::pow", "base_count"] == 1  # one forward pow per step
    extra = result.profile.meta.extra
    assert (extra["baseline"]["step"], extra["comparison"]["step"]) == (3, 4)
    assert (extra["options"]["base_step"], extra["options"]["comparison_step"]) == (3, 4)
    assert list(result.tables["steps"]["step"]) == [4]


def test_a_step_the_run_lacks_is_a_usage_error() -> None:
    with pytest.raises(StepError, match="has no step 9: it records steps 2, 3, 4"):
        compare(BASE, SLOW, options=CompareOptions(comparison_step=9))
    done = _advisor("compare", str(BASE), str(SLOW), "--base-step", "1", "--format", "text")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "baseline" in done.stderr and "has no step 1" in done.stderr


# -- API and kernel comparisons ------------------------------------------------------------


def test_api_comparison_counts_and_times_each_framework_api(slowed) -> None:
    apis = slowed.tables["compare_apis"].set_index("name")
    for column, trace in (("base", BASE), ("comp", SLOW)):
        steps = len(_steps(trace))
        pows = [
            e["dur"]
            for e in _events(trace)
            if e.get("cat") == "cpu_op" and e["name"] == "aten::pow"
        ]
        assert apis.loc["aten::pow", f"{column}_count"] == pytest.approx(len(pows) / steps)
        assert apis.loc["aten::pow", f"{column}_us"] == pytest.approx(sum(pows) / steps)
        assert apis.loc["aten::pow", f"{column}_avg_us"] == pytest.approx(sum(pows) / len(pows))
    assert apis.loc["aten::pow", "kind"] == "aten"
    assert apis.loc["aten::pow", "diff_us"] > 0
    # an operator's self time excludes the APIs inside it: linear runs addmm inside
    assert apis.loc["aten::linear", "base_self_us"] < 0.5 * apis.loc["aten::linear", "base_us"]
    assert (apis["base_self_us"].fillna(0) <= apis["base_us"] + 1e-6).all()


def _kernel_groups() -> dict[tuple[str, str], list[float]]:
    """Non-communication rows of kernel_details.csv by (Type, Input Shapes)."""
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    with KERNEL_DETAILS.open(encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["Accelerator Core"] == "HCCL":
                continue
            shapes = row["Input Shapes"].strip('"')
            groups[(row["Type"], "N/A" if shapes in ("", "N/A") else shapes)].append(
                float(row["Duration(us)"])
            )
    return groups


def test_kernel_comparison_groups_by_type_and_input_shape(tmp_path: Path) -> None:
    real = _read(_kernels_only(tmp_path))
    comp = replace(real, tables=dict(real.tables), providers_run=set())
    device = comp.tables["device_ops"].copy()
    matmul = device["op_type"].eq("MatMul").fillna(False)
    device.loc[matmul, "duration_us"] *= 1.5  # the same MatMuls, 50% slower
    comp.tables["device_ops"] = device
    kernels = compare_tables(real, comp, CompareOptions())["compare_kernels"]
    groups = _kernel_groups()
    assert len(kernels) == len(groups)
    table = kernels.set_index(["kernel", "input_shapes"])
    for (kind, shapes), durations in groups.items():
        row = table.loc[(kind, shapes)]
        assert row["base_count"] == len(durations)
        assert row["base_us"] == pytest.approx(sum(durations), abs=0.01)
        assert row["base_max_us"] == pytest.approx(max(durations))
        assert row["base_min_us"] == pytest.approx(min(durations))
        factor = 1.5 if kind == "MatMul" else 1.0
        assert row["comp_us"] == pytest.approx(factor * sum(durations), abs=0.01)
    slower = kernels[kernels["diff_us"] > 0.01]
    assert (
        set(slower["kernel"]) == {"MatMul"}
        and len(slower) == Counter(k for k, _ in groups)["MatMul"]
    )
    assert (slower["ratio"].round(6) == 1.5).all()
    assert kernels["diff_us"].iloc[0] == slower["diff_us"].max()  # largest regression first


def test_api_and_kernel_comparisons_in_the_outputs(tmp_path: Path) -> None:
    kernels = _kernels_only(tmp_path)
    done = _advisor("compare", str(kernels), str(kernels), "-o", str(tmp_path / "kernels"))
    assert done.returncode in (0, 1), done.stderr
    by_kernel = json.loads((tmp_path / "kernels" / "compare.json").read_text(encoding="utf-8"))
    assert len(by_kernel["tables"]["compare_kernels"]) == len(_kernel_groups())
    out = tmp_path / "cmp"
    done = _advisor("compare", str(ASCEND_PT), str(ASCEND_PT), "-o", str(out))
    assert done.returncode in (0, 1), done.stderr
    document = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    jsonschema.validate(document, COMPARE_SCHEMA)
    tables = document["tables"]
    assert tables["compare_kernels"]  # the trace's device tasks (the CSV is of another run)
    raw = Counter(
        e["name"]
        for e in json.loads((ASCEND_PT / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").read_text())
        if e.get("cat") == "cpu_op"
    )
    apis = {r["name"]: r for r in tables["compare_apis"]}
    for name, count in raw.most_common(5):  # one step: calls per step are the calls
        assert apis[name]["base_count"] == apis[name]["comp_count"] == count
    assert all(r["diff_us"] == 0 for r in tables["compare_kernels"])
    sheets = pd.read_excel(out / "performance_comparison_result.xlsx", sheet_name=None)
    assert len(sheets["KernelCompare"]) == len(tables["compare_kernels"])
    assert len(sheets["ApiCompare"]) == len(tables["compare_apis"])
    assert list(sheets["ProfilingOptions"]["Option"]) == ["cpu_activity", "cpu_activity"]
    html = (out / "compare.html").read_text(encoding="utf-8")
    assert 'id="apis"' in html and 'id="kernels"' in html


# -- multi-rank sides ----------------------------------------------------------------------


def _ranks(tmp_path: Path, name: str, pattern: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for trace in OWN.glob(pattern):
        shutil.copy(trace, folder)
    return folder


def test_multi_rank_sides_are_their_slowest_rank(tmp_path: Path) -> None:
    two = _ranks(tmp_path, "ddp", "ddp_rank*.pt.trace.json.gz")
    four = _ranks(tmp_path, "ddp4", "ddp4_rank*.pt.trace.json.gz")
    means = {p.name: _mean_step(p) for p in OWN.glob("ddp*_rank*.pt.trace.json.gz")}
    slowest_two = max((n for n in means if n.startswith("ddp_")), key=means.get)
    slowest_four = max((n for n in means if n.startswith("ddp4_")), key=means.get)
    assert slowest_four == "ddp4_rank2.pt.trace.json.gz"  # the rank that sleeps (README)
    result = compare(two, four)
    extra = result.profile.meta.extra
    assert Path(extra["baseline"]["path"]).name == slowest_two
    assert Path(extra["comparison"]["path"]).name == slowest_four
    choice = extra["comparison"]["rank_choice"]
    assert choice["picked"] == "slowest" and choice["of_ranks"] == 4
    assert choice["label"] == "rank 2"
    assert choice["mean_step_us"]["rank 2"] == pytest.approx(means[slowest_four], rel=1e-6)
    overall = result.tables["compare_overall"].set_index("metric")
    assert overall.loc["e2e", "comparison"] == pytest.approx(means[slowest_four])


def test_one_multi_rank_folder_as_both_sides_is_fastest_against_slowest(tmp_path: Path) -> None:
    four = _ranks(tmp_path, "ddp4", "ddp4_rank*.pt.trace.json.gz")
    means = {p.name: _mean_step(p) for p in four.iterdir()}
    result = compare(four, four)
    extra = result.profile.meta.extra
    assert Path(extra["baseline"]["path"]).name == min(means, key=means.get)
    assert Path(extra["comparison"]["path"]).name == max(means, key=means.get)
    assert extra["baseline"]["rank_choice"]["picked"] == "fastest"
    overall = result.tables["compare_overall"].set_index("metric")
    assert overall.loc["e2e", "diff"] == pytest.approx(max(means.values()) - min(means.values()))
    out = tmp_path / "out"
    done = _advisor("compare", str(four), str(four), "-o", str(out), "--lang", "zh")
    assert done.returncode in (0, 1), done.stderr
    assert "基线包含 4 个 rank：比对最快的 rank 0" in done.stdout
    assert "对比包含 4 个 rank：比对最慢的 rank 2" in done.stdout
    jsonschema.validate(json.loads((out / "compare.json").read_text("utf-8")), COMPARE_SCHEMA)


def test_a_step_narrows_every_rank_before_the_slowest_is_picked(tmp_path: Path) -> None:
    two = _ranks(tmp_path, "ddp", "ddp_rank*.pt.trace.json.gz")
    durations = {p.name: _steps(p)[5]["dur"] for p in two.iterdir()}
    result = compare(two, two, options=CompareOptions(base_step=5, comparison_step=5))
    extra = result.profile.meta.extra
    assert Path(extra["comparison"]["path"]).name == max(durations, key=durations.get)
    overall = result.tables["compare_overall"].set_index("metric")
    assert overall.loc["e2e", "comparison"] == pytest.approx(max(durations.values()))
    assert overall.loc["e2e", "base"] == pytest.approx(min(durations.values()))
