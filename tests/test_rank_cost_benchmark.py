"""benchmarks/rank_cost.py, the per-rank cost breakdown behind the many-ranks figures: it
times what a worker does (every stage, provider and rule) without changing what is derived."""

from __future__ import annotations

import shutil

from conftest import FIXTURE_DIR, load_benchmark


def test_rank_cost_times_every_stage_provider_and_rule_of_the_warm_ranks(tmp_path):
    for trace in sorted((FIXTURE_DIR / "kineto_own").glob("ddp4_rank*.pt.trace.json.gz")):
        shutil.copy(trace, tmp_path / trace.name)
    figures = load_benchmark("rank_cost").measure(tmp_path, ranks=4, skip=1)

    stages = figures["stages"]
    expected = {"read", "derive", "evaluate", "metrics", "rank summary", "reduce", "ship"}
    assert set(stages) == expected
    assert all(ms > 0 for ms in stages.values())
    # every run derives the critical path (session.RUN_NEEDS): its provider was timed
    assert figures["providers"]["step_bounds"] > 0
    costs = list(figures["providers"].values())
    assert costs == sorted(costs, reverse=True)
    # a rule that fires on these ranks costs something of its own
    assert figures["rules"]["STEP-004"] > 0
    # the derived work the providers timed is part of the derive stage
    assert sum(figures["providers"].values()) < stages["derive"] * 1.5
