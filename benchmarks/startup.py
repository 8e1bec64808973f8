"""Times advisor's fixed costs against `python -c "import pandas"`, side by side in one run.

The commands, each run as a child process, in rounds (one of each per round, so that a busy
moment of the machine falls on every command alike), the median of --repeat rounds kept:

* ``python -c "import pandas"``: the yardstick (issue 13 sets each target as a ratio to it);
* ``advisor --version``, ``advisor --help``, ``advisor rules list``: target at most 0.3×;
* ``advisor run DEMO`` with an empty rule cache (cold: every rule file checked and cached)
  and with a filled one (warm: what every later run pays): target at most 1.6×;
* ``rules list`` and ``run`` with ADVISOR_NO_CACHE=1, what they cost without the rule cache.

The rule cache is a fresh temporary folder (ADVISOR_CACHE_DIR), never the user's. Before the
timed rounds every command runs once, unrecorded, so no figure pays for writing byte code.

    .venv/bin/python benchmarks/startup.py [--repeat 5] [--results out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "advisor" / "examples" / "PROF_000001_20260105100000000_DEMO"
TARGETS = {"--version": 0.3, "--help": 0.3, "rules list": 0.3, "run (cold)": 1.6, "run (warm)": 1.6}


def advisor_command() -> list[str]:
    """The installed `advisor` script beside this Python (what a user types), else -m."""
    script = Path(sys.executable).with_name("advisor")
    return [str(script)] if script.exists() else [sys.executable, "-m", "advisor"]


def timed(argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one child process; it must exit 0 or 1 (1: findings at --fail-on)."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the median is kept)")
    parser.add_argument("--results", type=Path, help="also write the figures as JSON here")
    args = parser.parse_args()
    advisor = advisor_command()
    work = Path(tempfile.mkdtemp(prefix="advisor-startup-"))
    warm_cache, out = work / "warm-cache", work / "out"
    base = {k: v for k, v in os.environ.items() if k not in ("ADVISOR_NO_CACHE", "ADVISOR_RULES")}
    base["ADVISOR_CACHE_DIR"] = str(warm_cache)
    run = [*advisor, "run", str(DEMO), "-o", str(out), "-q"]
    commands: dict[str, list[str]] = {
        "import pandas": [sys.executable, "-c", "import pandas"],
        "--version": [*advisor, "--version"],
        "--help": [*advisor, "--help"],
        "rules list": [*advisor, "rules", "list"],
        "rules list (no cache)": [*advisor, "rules", "list"],
        "run (cold)": run,
        "run (warm)": run,
        "run (no cache)": run,
    }
    try:
        for argv in commands.values():  # byte code written, warm cache filled: unrecorded
            timed(argv, base)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(args.repeat):
            for name, argv in commands.items():
                env = base
                if name == "run (cold)":
                    env = {**base, "ADVISOR_CACHE_DIR": str(work / f"cold-{round_}")}
                elif name.endswith("(no cache)"):
                    env = {**base, "ADVISOR_NO_CACHE": "1"}
                times[name].append(timed(argv, env))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    yardstick = medians["import pandas"]
    print(f"{'command':<22} {'median s':>9} {'× pandas':>9} {'target':>7}  runs (s)")
    for name, median in medians.items():
        ratio = median / yardstick
        target = TARGETS.get(name)
        verdict = (
            "" if target is None else f"{target:>5.1f}× {'ok' if ratio <= target else 'MISSED'}"
        )
        runs = " ".join(f"{t:.3f}" for t in times[name])
        print(f"{name:<22} {median:>9.3f} {ratio:>8.2f}× {verdict:<10} {runs}")
    if args.results:
        args.results.write_text(
            json.dumps(
                {
                    "python": sys.version.split()[0],
                    "cpus": os.cpu_count(),
                    "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
                    "repeat": args.repeat,
                    "seconds": times,
                    "median_s": medians,
                    "ratio_to_import_pandas": {n: m / yardstick for n, m in medians.items()},
                    "targets": TARGETS,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
