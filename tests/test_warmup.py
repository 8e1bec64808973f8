"""Warm-up steps, and the last step the profiler cut off: found by advisor.steady, left out
of per-step figures, reported once.

The real case is MindSpore's 4-rank pipeline run: ranks 2 and 3 (stage 1) wait about 2 s in
step 1 for stage 0's first micro-batch and take about 177 ms per step after it, like ranks 0
and 1. Averaged in, that step made rank 3 a "slow rank" (617 ms against 178 ms) and its
bubble 72% of the step.
"""

from __future__ import annotations

import csv
import re
import statistics

import pandas as pd
import pytest
from conftest import REAL

import advisor
from advisor import steady

CLUSTER = REAL / "mindspore_cluster_4rank"
ROCM = REAL / "kineto" / "amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz"
CANN_TIMELINE = REAL / "cann_timeline"


def _raw_rows(rank: int) -> list[dict[str, str]]:
    """The numbered steps of the rank's step trace (its last row, step '-', is the mean)."""
    path = CLUSTER / f"step_trace_raw_{rank}_detail_time.csv"
    with path.open(newline="", encoding="utf-8") as fh:
        return [row for row in csv.DictReader(fh) if row["step_num"].isdigit()]


def _raw_step_us(rank: int) -> list[float]:
    """Step durations of a rank straight from step_trace_raw_<rank>_detail_time.csv (10 ns
    ticks): FP start to iteration end, fp_and_bp + tail (`total` adds the data wait before)."""
    return [(int(r["fp_and_bp"]) + int(r["tail"])) / 100 for r in _raw_rows(rank)]


@pytest.mark.parametrize(
    ("durations", "count"),
    [
        ([20.0, 2.0, 2.1, 1.9, 2.0], 1),
        ([30.0, 9.0, 2.0, 2.0, 2.0], 2),  # 9 > 2 x 2: the second step is warm-up too
        ([3.5, 2.0, 2.0, 2.0], 0),  # 1.75x: steady variation
        ([20.0, 2.0, 2.0], 0),  # too few steps after it to tell the steady state
        ([2.0, 2.0, 20.0, 2.0, 2.0], 0),  # a slow step later on is not warm-up
        ([], 0),
    ],
)
def test_warmup_count(durations: list[float], count: int) -> None:
    assert steady.warmup_count(durations) == count


def test_repeated_step_numbers_mark_no_warmup() -> None:
    """msprof numbers the steps of each model from 1: the first rows are not the run's
    first iterations, so nothing is marked."""
    steps = pd.DataFrame({"step": [1, 2, 3, 4, 1], "duration_us": [50.0, 2, 2, 2, 2]})
    assert not steady.warmup_mask(steps).any()
    assert steady.steady_steps(steps) is steps


@pytest.mark.parametrize(
    "step",
    [
        pd.array([5, 1, 2, 3, 4, 6], dtype="int64"),
        pd.array([5, 1, None, 3, 4, 6], dtype="Int64"),  # a missing number sorts last
        pd.array([5.5, 1.5, 2.0, 3.0, 4.0, 6.0], dtype="float64"),
        pd.array(["e", "a", "b", "c", "d", "f"], dtype="string"),  # not numbers: pandas sorts
        pd.array([5, 1, 1, 3, 4, 6], dtype="int64"),  # a repeated number: nothing marked
        pd.array([5, 1, None, None, 4, 6], dtype="Int64"),  # two missing ones repeat too
    ],
)
def test_warmup_rows_are_those_first_in_step_order(step: pd.api.extensions.ExtensionArray):
    """The rows are taken in step order as a stable sort of the table gives it, the warm-up
    rows marked where they lie in the table, whatever its index."""
    durations = [10.0, 100.0, 50.0, 10.2, 10.1, 10.3]  # slow in the order 1, 2 (3 is None)
    steps = pd.DataFrame({"step": step, "duration_us": durations}, index=[9, 3, 7, 1, 5, 8])
    expected = pd.Series(False, index=steps.index)
    if steps["step"].is_unique:
        ordered = steps.sort_values("step", kind="stable")
        count = steady.warmup_count(ordered["duration_us"].tolist())
        expected[ordered.index[:count]] = True
    marked = steady.warmup_mask(steps)
    pd.testing.assert_series_equal(marked, expected)
    assert marked.any() == steps["step"].is_unique
    no_steps = pd.DataFrame({"duration_us": pd.Series([], dtype="float64")})  # nor numbers
    assert steady.warmup_mask(no_steps).empty


def test_the_real_ranks_warm_up_in_stage_one_only() -> None:
    result = advisor.analyze(CLUSTER)
    by_rank = {a.profile.meta.rank: a for a in result.analyses}
    for rank in range(4):
        raw = _raw_step_us(rank)
        fired = {f.rule.id: f for f in by_rank[rank].findings}
        if rank < 2:  # 210 ms then 178 ms on rank 1: 1.18x is not warm-up
            assert raw[0] < 2 * statistics.median(raw[1:])
            assert "STEP-005" not in fired
            continue
        warm = fired["STEP-005"]
        assert warm.values["warmup_steps"] == 1
        assert warm.values["warmup_us"] == pytest.approx(raw[0])
        assert warm.values["steady_us"] == pytest.approx(statistics.median(raw[1:]))
        assert warm.values["excess_us"] == pytest.approx(raw[0] - statistics.median(raw[1:]))
        assert warm.impact_us is None
        # the steady bubble is 2-3 ms of ~177 ms: no pipeline-bubble finding
        assert "PAR-003" not in fired
        path = by_rank[rank].evaluation.critical_path
        assert path is not None and path.steps == 4
        # the steady mean step time, the gaps between steady steps included
        assert path.step_us == pytest.approx((sum(raw[1:]) + _gaps_after_first(rank)) / 4, rel=1e-6)


def _gaps_after_first(rank: int) -> float:
    """Time between the steady steps (end of one to FP start of the next) in the raw file."""
    rows = _raw_rows(rank)
    return sum((int(b["fp_point"]) - int(a["end_point"])) / 100 for a, b in zip(rows[1:], rows[2:]))


def test_the_cluster_compares_the_ranks_over_their_steady_steps() -> None:
    """Every rank's mean is taken over steps 2-5 (step 1 is warm-up on ranks 2 and 3), so no
    rank is slow; the stages' uneven computation remains the finding."""
    result = advisor.analyze(CLUSTER)
    cluster = result.analyses[-1]
    ranks = cluster.profile.tables["ranks"].set_index("rank")
    for rank in range(4):
        raw = _raw_step_us(rank)
        assert ranks.loc[rank, "steps"] == 4
        assert ranks.loc[rank, "warmup_steps"] == 1
        assert ranks.loc[rank, "warmup_us"] == pytest.approx(raw[0])
        assert ranks.loc[rank, "duration_us"] == pytest.approx(statistics.mean(raw[1:]))
    assert set(ranks["pipeline_stages"]) == {2}
    fired = {f.rule.id for f in cluster.findings}
    # slow rank, late rank and uneven compute across stages were artefacts of step 1 and of
    # comparing ranks of different pipeline stages
    assert not fired & {"CLUSTER-001", "CLUSTER-002", "CLUSTER-004"}
    assert "CLUSTER-006" in fired
    assert "CLUSTER-007" in fired  # says which steps were left out, and each rank's time in them


def test_a_breakdown_recorded_only_in_the_warm_up_step_is_not_given_as_the_steps_share():
    """The real msprof timeline holds device tasks for step 1 only (47.6 ms, 87% of it in an
    all-reduce no computation hides, the first collective setting up its links); steps 2-10
    take about 15 ms. The uncovered-communication share of step 1 is not the steady steps'."""
    (analysis,) = advisor.analyze(CANN_TIMELINE).analyses
    steps = analysis.profile.tables["steps"]
    with_breakdown = steps[steps["comm_not_overlapped_us"].notna()]
    assert with_breakdown["warmup"].all() and len(with_breakdown) == 1
    fired = {f.rule.id: f for f in analysis.findings}
    assert "COMM-001" not in fired
    warm = fired["STEP-005"]
    durations = steps["duration_us"].tolist()
    assert warm.values["warmup_us"] == durations[0]
    assert warm.values["steady_us"] == pytest.approx(statistics.median(durations[1:]))


def test_the_report_page_gives_the_steady_mean_and_marks_the_warm_up_bar():
    (rank3,) = [a for a in advisor.analyze(CLUSTER).analyses if a.profile.meta.rank == 3]
    raw = _raw_step_us(3)
    page = rank3._repr_html_()
    steady_ms = statistics.mean(raw[1:]) / 1000
    assert f"mean of the steady steps {steady_ms:.0f} ms" in page
    assert "1 warm-up step left out of the means" in page
    tooltips = re.findall(r"Step \d+: [^<]*", page)
    warm = [t for t in tooltips if "warm-up, left out of the means" in t]
    assert warm and all(t.startswith(f"Step 1: {raw[0] / 1000:,.0f} ms") for t in warm)


def _steps(durations: list[float]) -> pd.DataFrame:
    """Steps back to back, 10 µs apart, numbered from 1."""
    starts, at = [], 0.0
    for duration in durations:
        starts.append(at)
        at += duration + 10.0
    return pd.DataFrame(
        {
            "step": range(1, len(durations) + 1),
            "start_us": starts,
            "end_us": [a + d for a, d in zip(starts, durations)],
            "duration_us": durations,
        }
    )


def _tasks(*spans: tuple[float, float]) -> pd.DataFrame:
    return pd.DataFrame({"start_us": [a for a, _ in spans], "duration_us": [d for _, d in spans]})


@pytest.mark.parametrize(
    ("durations", "tasks", "fragment"),
    [
        ([1000.0, 1000.0, 40.0], [(100.0, 50.0), (1100.0, 50.0)], 2),  # the profiler's stop
        ([1000.0, 1000.0, 40.0], [(100.0, 50.0), (2025.0, 5.0)], None),  # a task in the last
        ([1000.0, 1000.0, 600.0], [(100.0, 50.0)], None),  # over half the median: a real step
        ([1000.0, 40.0], [(100.0, 50.0)], 1),  # two steps, as the real ROCm trace
        ([1000.0, 1000.0, 40.0], [(5000.0, 50.0)], None),  # no step ran device work
        ([1000.0, 1000.0, 40.0], [], None),  # a CPU-only profile
        ([40.0], [(10.0, 5.0)], None),  # one step: nothing to compare with
    ],
)
def test_trailing_fragment(durations: list[float], tasks: list, fragment: int | None) -> None:
    steps = _steps(durations)
    assert steady.trailing_fragment(steps, _tasks(*tasks)) == fragment
    assert steady.trailing_fragment(steps.iloc[::-1], _tasks(*tasks)) == fragment  # by start


def test_the_real_rocm_trace_leaves_out_the_step_the_profiler_stopped_in() -> None:
    """ProfilerStep#2 of the MI250 trace is 49 µs holding no event at all: the profiler's last
    step() opened it. Counted, it made the step time 4,687 µs for a 9,288 µs step (and "idle
    98.4% of step time, 9,139 µs", more than that step time)."""
    (analysis,) = advisor.analyze(ROCM).analyses
    steps = analysis.tables["steps"]
    assert steps["step"].tolist() == [1] and steps["duration_us"].round(3).tolist() == [9288.291]
    (note,) = [w for w in analysis.profile.warnings if "profiler stopped" in w.problem]
    assert "step 2 (49.1 µs)" in note.problem
    (idle,) = [f for f in analysis.findings if f.rule.id == "STEP-003"]
    base = idle.impact_us / idle.impact_ratio
    assert base == pytest.approx(9288.291, abs=0.01)
    assert idle.step_time_if_fixed_us == pytest.approx(9288.291 - idle.impact_us, abs=0.01)
