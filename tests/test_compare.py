"""advisor compare: operators matched across two runs, the breakdown, rules and outputs.

The own CPU traces `compare_base` / `compare_slow` differ only in `x.pow(p)` (p = 2.0 vs 2.5,
same shapes), so the slowed operators are known and their magnitude can be measured from the
raw trace independently of advisor.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import jsonschema
import numpy as np
import pandas as pd
import pytest
from conftest import FIXTURE_DIR, ROOT

from advisor.compare import CompareOptions, compare
from advisor.compare.analysis import compare_tables
from advisor.compat import zip_strict
from advisor.model import Profile, ProfileMeta, conform
from advisor.render.compare_outputs import COMPARE_SCHEMA, SHEETS, compare_document

OWN = FIXTURE_DIR / "kineto_own"
BASE = OWN / "compare_base.pt.trace.json.gz"
SLOW = OWN / "compare_slow.pt.trace.json.gz"
SHARED = FIXTURE_DIR / "real"
KINETO_GPU = (
    SHARED / "kineto" / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
)
ASCEND_PT = SHARED / "ascend_pt" / "rank0_ascend_pt"
POW_BACKWARD = "autograd::engine::evaluate_function: PowBackward0"


def top_level_per_step(trace: Path) -> dict[str, float]:
    """Per-step time of each top-level cpu_op name (not inside another cpu_op on its
    thread), straight from the trace JSON: the reference advisor's figures must match."""
    events = json.loads(gzip.decompress(trace.read_bytes()))["traceEvents"]
    steps = sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    by_thread: dict[object, list[dict]] = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") == "cpu_op":
            by_thread[e["tid"]].append(e)
    totals: dict[str, float] = defaultdict(float)
    for ops in by_thread.values():
        ops.sort(key=lambda e: (e["ts"], -e["dur"]))
        open_until = -1.0
        for e in ops:
            if e["ts"] >= open_until:  # not inside the last top-level op
                totals[e["name"]] += e["dur"]
                open_until = e["ts"] + e["dur"]
    return {name: total / steps for name, total in totals.items()}


@pytest.fixture(scope="module")
def slowed() -> object:
    return compare(BASE, SLOW)


def test_slowed_operators_named_with_their_measured_magnitude(slowed) -> None:
    stats = slowed.tables["compare_op_stats"].set_index("name")
    base, slow = top_level_per_step(BASE), top_level_per_step(SLOW)
    for name in ("aten::pow", POW_BACKWARD):
        assert stats.loc[name, "base_us"] == pytest.approx(base[name], rel=1e-6)
        assert stats.loc[name, "comp_us"] == pytest.approx(slow[name], rel=1e-6)
        assert stats.loc[name, "diff_us"] == pytest.approx(slow[name] - base[name], rel=1e-6)
    assert stats.loc["aten::pow", "ratio"] > 5  # pow(x, 2.5) against a square
    assert stats.loc[POW_BACKWARD, "ratio"] > 2
    # the two slowed operators are the largest regressions, well ahead of the rest
    top = stats.sort_values("diff_us", ascending=False)
    assert set(top.index[:2]) == {"aten::pow", POW_BACKWARD}
    assert top["diff_us"].iloc[2] < 0.5 * top["diff_us"].iloc[1]
    finding = next(f for f in slowed.findings if f.rule.id == "CMP-002")
    names = [
        dict(zip_strict(finding.evidence["columns"], row))["name"]
        for row in finding.evidence["rows"][:2]
    ]
    assert set(names) == {"aten::pow", POW_BACKWARD}
    assert "aten::pow" in finding.message
    module = next(f for f in slowed.findings if f.rule.id == "CMP-008")
    assert module.values["worst"] == "Sequential_0/Pow_0"


def test_same_shapes_match_by_name_and_by_shape(slowed) -> None:
    ops = slowed.tables["compare_ops"]
    assert (ops["status"] == "matched").all()
    by_shape = compare(BASE, SLOW, options=CompareOptions(use_input_shape=True))
    shaped = by_shape.tables["compare_ops"]
    assert (shaped["status"] == "matched").all()
    pow_rows = shaped[shaped["name"] == "aten::pow"]
    assert (pow_rows["base_input_shapes"] == pow_rows["comp_input_shapes"]).all()
    assert pow_rows["base_input_shapes"].str.startswith("[[256, 1024]").all()


def test_overall_breakdown_of_cpu_runs(slowed) -> None:
    overall = slowed.tables["compare_overall"].set_index("metric")
    steps = [json.loads(gzip.decompress(p.read_bytes()))["traceEvents"] for p in (BASE, SLOW)]
    means = [
        np.mean([e["dur"] for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")])
        for ev in steps
    ]
    assert overall.loc["e2e", "base"] == pytest.approx(means[0])
    assert overall.loc["e2e", "comparison"] == pytest.approx(means[1])
    assert overall.loc["operators", "diff"] > 0
    assert "computing" not in overall.index  # no device timeline in a CPU run


# -- hand-made runs: kernels attached through their launches --------------------------------


def _run(ops: list[tuple], kernels: list[tuple], steps: int = 1) -> Profile:
    """ops: (name, start, duration, input_shapes); kernels: (name, duration, launch_us)."""
    host = pd.DataFrame(
        [
            {
                "name": n,
                "kind": "aten",
                "start_us": s,
                "duration_us": d,
                "thread": 1,
                "input_shapes": shapes,
            }
            for n, s, d, shapes in ops
        ]
    )
    device = pd.DataFrame(
        [
            {
                "name": n,
                "core_type": "GPU",
                "category": "compute",
                "start_us": 1000.0 + i,
                "duration_us": d,
                "launch_us": at,
                "launch_thread": 1,
            }
            for i, (n, d, at) in enumerate(kernels)
        ]
    )
    span = 200.0 * steps
    return Profile(
        ProfileMeta("test", "run"),
        {
            "host_ops": conform("host_ops", host),
            "device_ops": conform("device_ops", device),
            "steps": pd.DataFrame(
                {
                    "step": range(steps),
                    "start_us": [200.0 * i for i in range(steps)],
                    "end_us": [200.0 * (i + 1) for i in range(steps)],
                    "duration_us": [span / steps] * steps,
                }
            ),
        },
    )


BASE_OPS = [
    ("aten::linear", 0, 100, "[[8, 64]]"),
    ("aten::addmm", 10, 80, "[[8, 64]]"),
    ("aten::relu", 100, 20, "[[8, 256]]"),
]
BASE_KERNELS = [("gemm_kernel", 50.0, 20.0), ("relu_kernel", 5.0, 105.0)]


def test_kernels_are_charged_to_the_operator_that_launched_them() -> None:
    comp = _run(
        [
            *BASE_OPS[:2],
            ("aten::relu", 100, 20, "[[8, 512]]"),
            ("aten::_to_copy", 120, 10, "[[8]]"),
        ],
        [("gemm_kernel", 80.0, 20.0), ("relu_kernel", 6.0, 101.0), ("copy_kernel", 10.0, 125.0)],
    )
    tables = compare_tables(_run(BASE_OPS, BASE_KERNELS), comp, CompareOptions())
    ops = tables["compare_ops"].set_index("name")
    assert ops.loc["aten::linear", "base_time_us"] == 50.0  # its addmm's kernel
    assert ops.loc["aten::linear", "comp_time_us"] == 80.0
    assert ops.loc["aten::linear", "diff_us"] == 30.0
    assert ops.loc["aten::linear", "comp_top_kernels"] == "gemm_kernel (80.0 µs)"
    assert ops.loc["aten::relu", "status"] == "matched"
    assert ops.loc["aten::_to_copy", "status"] == "comparison_only"
    assert ops.loc["aten::_to_copy", "diff_us"] == 10.0
    overall = tables["compare_overall"].set_index("metric")
    assert overall.loc["other_compute", "diff"] == pytest.approx(41.0)  # 96 - 55: all kernels
    # matched by shape, the relu with other input shapes has no counterpart
    shaped = compare_tables(
        _run(BASE_OPS, BASE_KERNELS), comp, CompareOptions(use_input_shape=True)
    )["compare_ops"]
    relu = shaped[shaped["name"] == "aten::relu"]
    assert sorted(relu["status"]) == ["baseline_only", "comparison_only"]


def test_op_name_map_pairs_equivalent_names() -> None:
    comp = _run(
        [
            ("aten::linear", 0, 100, None),
            ("aten::addmm", 10, 80, None),
            ("npu::fused_relu", 100, 20, None),
        ],
        [("gemm_kernel", 50.0, 20.0), ("relu_kernel", 9.0, 105.0)],
    )
    options = CompareOptions(op_name_map={"aten::relu": "npu::fused_relu"})
    stats = compare_tables(_run(BASE_OPS, BASE_KERNELS), comp, options)["compare_op_stats"]
    row = stats.set_index("name").loc["aten::relu"]
    assert (row["base_us"], row["comp_us"], row["diff_us"]) == (5.0, 9.0, 4.0)
    assert "npu::fused_relu" not in set(stats["name"])


def test_max_kernel_num_descends_into_operators_launching_many_kernels() -> None:
    ops = [("Optimizer.step#SGD.step", 0, 150, None)] + [
        (f"aten::add_{i}", 10 + 20 * i, 10, None) for i in range(6)
    ]
    kernels = [(f"k{i}", 1.0 + i, 12 + 20 * i) for i in range(6)]
    run = _run(ops, kernels)
    coarse = compare_tables(run, run, CompareOptions())["compare_ops"]
    assert list(coarse["name"]) == ["Optimizer.step#SGD.step"]
    assert coarse["base_kernels"].iloc[0] == 6
    fine = compare_tables(run, run, CompareOptions(max_kernel_num=4))["compare_ops"]
    assert list(fine["name"]) == [f"aten::add_{i}" for i in range(6)]
    assert list(fine["base_time_us"]) == [1.0 + i for i in range(6)]


def test_statistics_are_per_step() -> None:
    twice = _run(
        BASE_OPS + [(n, s + 200, d, sh) for n, s, d, sh in BASE_OPS],
        BASE_KERNELS + [(n, d, at + 200) for n, d, at in BASE_KERNELS],
        steps=2,
    )
    stats = compare_tables(_run(BASE_OPS, BASE_KERNELS), twice, CompareOptions())[
        "compare_op_stats"
    ].set_index("name")
    assert stats.loc["aten::linear", "comp_count"] == 1.0
    assert stats.loc["aten::linear", "diff_us"] == 0.0


# -- end to end through the command line ----------------------------------------------------


def _advisor(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "advisor", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_gpu_kineto_against_ascend_pt_end_to_end(tmp_path: Path) -> None:
    out = tmp_path / "cmp"
    done = _advisor("compare", str(KINETO_GPU), str(ASCEND_PT), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    names = {p.name for p in out.iterdir() if p.name != ".advisor-manifest.json"}
    assert names == {
        "compare.json",
        "prof_rule_compare.json",
        "compare.html",
        "performance_comparison_result.xlsx",
    }
    document = json.loads((out / "compare.json").read_text(encoding="utf-8"))
    jsonschema.validate(document, COMPARE_SCHEMA)
    assert document["baseline"]["source_format"] == "kineto"
    assert document["comparison"]["source_format"] == "ascend-pt"
    overall = {r["metric"]: r for r in document["tables"]["compare_overall"]}
    # rank0's kernel_details.csv is of another run: its trace's device tasks are compared
    assert overall["computing"]["comparison"] > 0 and overall["cube"]["base"] > 0
    report = json.loads((out / "prof_rule_compare.json").read_text(encoding="utf-8"))
    fired = {
        r["rule_id"] for group in report["data"].values() for item in group for r in item["result"]
    }
    assert fired and fired <= {f"CMP-{i:03d}" for i in range(1, 14)}
    sheets = pd.read_excel(out / "performance_comparison_result.xlsx", sheet_name=None)
    expected = {SHEETS[t] for t in document["tables"]}
    assert set(sheets) == expected and "OperatorCompareStatistic" in sheets
    stats = sheets["OperatorCompareStatistic"]
    assert len(stats) == len(document["tables"]["compare_op_stats"])
    html = (out / "compare.html").read_text(encoding="utf-8")
    assert 'id="overall-table"' in html and 'data-metric="vector"' in html
    assert html.count('class="finding ') == len(fired)
    assert "Baseline" in done.stdout and "Vector" in done.stdout
    # a GPU's GEMMs fill the cube row: its name says what it holds on either device
    assert "Cube (matrix multiply)" in done.stdout and "Cube (matrix multiply)" in html


def test_chinese_compare(tmp_path: Path) -> None:
    result = compare(BASE, SLOW, lang="zh")
    finding = next(f for f in result.findings if f.rule.id == "CMP-002")
    assert "个算子在对比数据中每个迭代多耗时" in finding.message


def test_bad_sides_are_one_line_errors_and_inputs_stay_untouched(tmp_path: Path) -> None:
    missing = _advisor("compare", str(tmp_path / "nope"), str(SLOW), "-o", str(tmp_path / "o"))
    assert missing.returncode == 3
    assert missing.stderr.count("\n") == 1 and "baseline" in missing.stderr
    assert "nope" in missing.stderr and "Traceback" not in missing.stderr
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for rank in (0, 1):
        shutil.copy(OWN / f"ddp_rank{rank}.pt.trace.json.gz", ranks)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in ranks.iterdir())
    several = _advisor("compare", str(BASE), str(ranks), "-o", str(tmp_path / "o"))
    assert several.returncode in (0, 1), several.stderr  # its slowest rank (test_compare_seed003)
    assert "Comparison holds 2 ranks: compared the slowest" in several.stdout
    inside = _advisor("compare", str(BASE), str(ranks), "-o", str(ranks / "out"))
    assert inside.returncode == 2 and "inside the input" in inside.stderr
    assert sorted((p.name, p.stat().st_mtime_ns) for p in ranks.iterdir()) == before
    bad_map = _advisor("compare", str(BASE), str(SLOW), "--op-name-map", "[1, 2]")
    assert bad_map.returncode == 2 and "mapping of operator names" in bad_map.stderr


def test_compare_rules_stay_out_of_single_runs() -> None:
    from advisor import analyze

    result = analyze(SLOW)
    skipped = {r["rule_id"] for r in result.reports[0]["not_applicable"]}
    assert not any(rule_id.startswith("CMP-") for rule_id in skipped)
    assert not any(f.rule.id.startswith("CMP-") for f in result.findings)
    assert not any(r.startswith("CMP-") for r in result.reports[0]["rules"])


@pytest.mark.parametrize(
    "pair",
    [
        (
            "advisor/examples/PROF_000001_20260105100000000_DEMO",
            "tests/fixtures/msprof/PROF_000001_20260105093000123_SMALLCASE",
        ),
        (
            "tests/fixtures/megengine/static/profiling.json",
            "tests/fixtures/kineto_own/healthy.pt.trace.json.gz",
        ),
        (
            "tests/fixtures/real/mindspore_legacy/run_2_profiler",
            "advisor/examples/PROF_000001_20260105100000000_DEMO",
        ),
    ],
    ids=["msprof-msprof", "megengine-kineto", "mindspore-msprof"],
)
def test_any_two_formats_compare(pair: tuple[str, str], tmp_path: Path) -> None:
    """Formats without host threads or operator timelines still give the breakdown."""
    root = ROOT
    result = compare(root / pair[0], root / pair[1])
    assert not result.evaluation.errors
    assert not result.tables["compare_overall"].empty
    document = compare_document(result.tables, result.report["profile"], result.report["advisor"])
    jsonschema.validate(document, COMPARE_SCHEMA)


def _check_alignment(pairs, base, comp) -> int:
    """Every row of both sides once, in order on both sides; matched pairs have equal keys.
    Returns how many pairs matched."""
    assert [b for b, _ in pairs if b is not None] == list(range(len(base)))
    assert [c for _, c in pairs if c is not None] == list(range(len(comp)))
    matched = [(b, c) for b, c in pairs if b is not None and c is not None]
    assert all(base[b] == comp[c] for b, c in matched)
    return len(matched)


def test_alignment_of_long_repetitive_sequences_is_split_and_complete(monkeypatch):
    """difflib aligns 20,000 calls of one operator in minutes (quadratic in repeated names);
    the alignment splits long stretches at anchors first, so difflib only ever sees
    stretches of at most DIFFLIB_CELLS base x comparison operators."""
    import random

    from advisor.compare import operators
    from advisor.compare.operators import _difflib_pairs, _pairs

    cells: list[int] = []

    def counted(base, comp, b0, b1, c0, c1):
        cells.append((b1 - b0) * (c1 - c0))
        return _difflib_pairs(base, comp, b0, b1, c0, c1)

    monkeypatch.setattr(operators, "_difflib_pairs", counted)
    pairs = _pairs(["aten::add"] * 20_000, ["aten::add"] * 19_000)
    assert _check_alignment(pairs, ["aten::add"] * 20_000, ["aten::add"] * 19_000) == 19_000
    # a training step of 200 operators repeated 60 times; the comparison drops 2% of the
    # calls and inserts a copy after another 2%
    rng = random.Random(1)
    step = [f"op{rng.randint(0, 30)}" for _ in range(200)]
    base, comp = step * 60, []
    for key in base:
        roll = rng.random()
        if roll < 0.02:
            continue
        comp.append(key)
        if roll > 0.98:
            comp.append("aten::_to_copy")
    matched = _check_alignment(_pairs(base, comp), base, comp)
    assert cells and max(cells) <= operators.DIFFLIB_CELLS
    small = base[:600], comp[:600]  # small enough for difflib: its result, unchanged
    assert _pairs(*small) == _difflib_pairs(*small, 0, 600, 0, 600)
    assert matched > 0.6 * len(comp)  # difflib itself keeps 1,380 pairs here
