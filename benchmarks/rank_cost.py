"""Where one more rank's time goes: every stage, metric provider and rule, in one warm process.

The many-ranks target (300 tiny ranks in at most 3x the time of one) is set by what a worker
spends on each rank once it is started. This opens one session, then reads, derives,
evaluates and reduces each rank under FOLDER as a worker does (api._stage), timing each
stage, each metric provider's `compute` and each profile rule on its own; the first --skip
ranks warm the process and are left out of the medians.

    .venv/bin/python benchmarks/rank_cost.py /tmp/advisor-many-ranks/tiny_x300 --ranks 40
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from advisor.api import ProfileAnalysis
from advisor.cluster import rank_summary
from advisor.engine.rules import Rule
from advisor.hookspecs import MetricProvider
from advisor.locate import Claim
from advisor.metrics import profile_metrics
from advisor.model import PROFILE, Profile
from advisor.reading import Reading, find_claims, read_claim
from advisor.session import Session

Samples = dict[str, list[float]]


def _timed_provider(provider: MetricProvider, samples: Samples) -> MetricProvider:
    """The provider, its `compute` timed into `samples` under its name."""

    def compute(profile: Profile) -> None:
        started = time.perf_counter()
        try:
            provider.compute(profile)
        finally:
            samples[provider.name].append(time.perf_counter() - started)

    return dataclasses.replace(provider, compute=compute)


def _clock(samples: Samples, name: str, call: Callable[..., Any], *args: Any) -> Any:
    started = time.perf_counter()
    value = call(*args)
    samples[name].append(time.perf_counter() - started)
    return value


def _one_rank(
    session: Session, claim: Claim, rules: list[Rule], stages: Samples, rules_s: Samples
) -> None:
    """Stage one rank as a worker does, each stage timed into `stages`; then each rule again
    on its own, less an evaluation of no rule (the fixed part: the profile's time and
    critical path), into `rules_s`."""
    profile = _clock(stages, "read", read_claim, claim, session.tables)[0]
    present = _clock(stages, "derive", session.derive, profile)
    evaluation = _clock(stages, "evaluate", session.evaluate, profile, rules, None, present)
    metrics = _clock(stages, "metrics", profile_metrics, profile)
    summary = _clock(stages, "rank summary", rank_summary, profile)
    whole = ProfileAnalysis(profile, evaluation, rules, metrics, session.run)
    analysis = _clock(stages, "reduce", whole.without_tables, session.host)
    _clock(stages, "ship", session.ship, ([analysis, summary], []))
    started = time.perf_counter()
    session.evaluate(profile, [])
    fixed = time.perf_counter() - started
    for rule in rules:
        started = time.perf_counter()
        session.evaluate(profile, [rule])
        rules_s[rule.id].append(max(0.0, time.perf_counter() - started - fixed))


def measure(folder: Path, ranks: int, skip: int) -> dict[str, dict[str, float]]:
    """Median milliseconds per rank of each stage, provider and rule (past the first `skip`)."""
    session = Session.open()
    stages: Samples = defaultdict(list)
    providers: Samples = defaultdict(list)
    rules_s: Samples = defaultdict(list)
    session.providers = [_timed_provider(p, providers) for p in session.providers]
    rules = session.rules_for(PROFILE)
    claims = find_claims([folder], session.host, Reading())[:ranks]
    if len(claims) <= skip:
        raise SystemExit(f"{folder}: {len(claims)} rank(s), more than --skip {skip} needed")
    for index, claim in enumerate(claims):
        if index == skip:  # only the warm ranks count
            for samples in (stages, providers, rules_s):
                samples.clear()
        _one_rank(session, claim, rules, stages, rules_s)
    counted = len(claims) - skip

    def medians(samples: Samples) -> dict[str, float]:
        # a provider that did not run for a rank counts 0 there
        figures = {
            k: statistics.median(v + [0.0] * (counted - len(v))) * 1e3 for k, v in samples.items()
        }
        return dict(sorted(figures.items(), key=lambda kv: -kv[1]))

    return {"stages": medians(stages), "providers": medians(providers), "rules": medians(rules_s)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="a folder of ranks (e.g. many_ranks.py's tiny_x300)")
    ap.add_argument("--ranks", type=int, default=40, help="ranks to analyse (default 40)")
    ap.add_argument("--skip", type=int, default=5, help="warm-up ranks left out (default 5)")
    ap.add_argument("--top", type=int, default=12, help="providers and rules listed (default 12)")
    ap.add_argument("--results", type=Path, help="write every median as JSON here")
    args = ap.parse_args()
    figures = measure(args.folder, args.ranks, args.skip)
    for part, medians in figures.items():
        print(f"{part} (median ms per rank): {sum(medians.values()):.2f}")
        for name, ms in list(medians.items())[: args.top]:
            print(f"  {ms:8.2f}  {name}")
    if args.results:
        args.results.write_text(
            json.dumps({"ranks": args.ranks, "skip": args.skip, **figures}, indent=1)
        )


if __name__ == "__main__":
    main()
