"""What the command line's read-ahead (advisor/formats/read_ahead.py) gives: `advisor run` on
the same input with it (the default) and without (`ADVISOR_DECODE_WORKERS=1`, one process
reading alone, as before it), in alternating rounds whose order flips each round; medians of
wall time, CPU time (the child included) and peak memory (PSS summed over the process tree,
run.py's measure), and the median of each round's ratio, which the machine's drift between
rounds moves less than the ratio of medians.

For inputs whose traces are under 64 MiB (ascend x50, a Kineto trace tiled 3 times): without
the read-ahead one process reads them alone, so "alone" is what every earlier version did.
With `--before ADVISOR`, the other side is that install (an earlier version) as a user runs
it, defaults and all, instead of this one alone: how the large traces, which earlier versions
decoded on spawned workers, compare.

    .venv/bin/python benchmarks/read_ahead.py /tmp/advisor-bench/ascend_x50 --rounds 9 \\
        [--advisor /tmp/ne/bin/advisor] [--before /tmp/ne0/bin/advisor] [--results out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from run import measure  # noqa: E402  (time and tree memory of a command)

Contender = tuple[str, dict[str, str]]
"""An advisor executable and the environment it runs with."""


def once(contender: Contender, path: Path, out: Path) -> dict:
    """One `advisor run` into a fresh folder, measured."""
    advisor, settings = contender
    shutil.rmtree(out, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "ADVISOR_DECODE_WORKERS"}
    env.update(settings)
    row = measure(
        [advisor, "run", str(path), "-o", str(out), "-q"],
        cwd=out.parent,
        timeout=600,
        poll=0.05,
        env=env,
    )
    if row["rc"] not in (0, 1):
        raise SystemExit(f"{path} ({advisor}): exit {row['rc']}: {row['stderr_tail']}")
    return row


def compare(contenders: dict[str, Contender], path: Path, rounds: int) -> dict:
    """Alternating rounds of both contenders ("alone" or "before", and "shared") on `path`:
    per contender the medians, and the median of the rounds' ratios (shared / the other)."""
    runs: dict[str, list[dict]] = {name: [] for name in contenders}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        for contender in contenders.values():  # byte code and rule cache, not recorded
            once(contender, path, out)
        for r in range(rounds):
            for name in list(contenders) if r % 2 == 0 else list(contenders)[::-1]:
                runs[name].append(once(contenders[name], path, out))
    result: dict = {"input": str(path), "rounds": rounds}
    for mode, rows in runs.items():
        result[mode] = {
            "wall_s": statistics.median(r["wall_s"] for r in rows),
            "cpu_s": statistics.median(r["cpu_s"] for r in rows),
            "peak_mb": max(r["peak_mb"] for r in rows),
            "walls": [r["wall_s"] for r in rows],
        }
    other = next(name for name in contenders if name != "shared")
    pairs = zip(runs[other], runs["shared"])
    result["wall_ratio"] = round(statistics.median(s["wall_s"] / a["wall_s"] for a, s in pairs), 3)
    result["memory_ratio"] = round(result["shared"]["peak_mb"] / result[other]["peak_mb"], 3)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--advisor", default=str(Path(sys.executable).parent / "advisor"))
    ap.add_argument("--before", help="compare with this advisor as it runs by default")
    ap.add_argument("--results", type=Path, help="also write the figures as JSON here")
    args = ap.parse_args(argv)
    other: tuple[str, Contender] = (
        ("alone", (args.advisor, {"ADVISOR_DECODE_WORKERS": "1"}))
        if args.before is None
        else ("before", (args.before, {}))
    )
    contenders = dict([other, ("shared", (args.advisor, {}))])
    name = other[0]
    print(
        f"{'input':<24} {name + ' s':>8} {'shared s':>9} {'ratio':>6} "
        f"{name + ' CPU':>10} {'shared CPU':>11} {name + ' MB':>9} {'shared MB':>10}"
    )
    results = []
    for path in args.inputs:
        row = compare(contenders, path, args.rounds)
        results.append(row)
        them, shared = row[name], row["shared"]
        print(
            f"{path.name[-24:]:<24} {them['wall_s']:>8.3f} {shared['wall_s']:>9.3f} "
            f"{row['wall_ratio']:>6.3f} {them['cpu_s']:>10.3f} {shared['cpu_s']:>11.3f} "
            f"{them['peak_mb']:>9.1f} {shared['peak_mb']:>10.1f}"
        )
    if args.results:
        args.results.write_text(json.dumps({"results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
