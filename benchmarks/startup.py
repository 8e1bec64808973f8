"""Times advisor's fixed costs against `python -c "import pandas"`, side by side in one run.

The commands, each run as a child process, in rounds (one of each per round, so that a busy
moment of the machine falls on every command alike), the median of --repeat rounds kept:

* ``python -c "import pandas"``: the yardstick (issue 13 sets each target as a ratio to it);
* ``advisor --version``, ``advisor --help``, ``advisor rules list``: target at most 0.3×;
* ``advisor run DEMO`` with an empty cache (cold: what a first run pays; the built-in rules,
  pages and catalogues come checked, compiled and parsed with advisor, the messages of the
  rules that fire are compiled and cached) and with a filled one (warm: what every later run
  pays): target at most 1.6×;
* ``rules list`` and ``run`` with ADVISOR_NO_CACHE=1, what they cost without the rule cache;
* with --before REF, ``run`` cold and warm by advisor as of git REF (exported as
  many_ranks.py exports it) and by the working tree in the same rounds, both started as
  ``python -P -m advisor``: a change's effect on the fixed costs, side by side.

The rule cache is a fresh temporary folder (ADVISOR_CACHE_DIR), never the user's. Before the
timed rounds every command runs once, unrecorded, so no figure pays for writing byte code;
PYTHONDONTWRITEBYTECODE is dropped from the children's environment, since with it set every
run would compile advisor's sources again (an installed package has its byte code; pandas
always had, so the ratios were unfair to advisor before 2026-11-27). Each command's CPU time
(user + sys, from wait4) is kept beside its wall time: on a loaded machine it is the steadier.

    .venv/bin/python benchmarks/startup.py [--repeat 5] [--results out.json] [--before REF]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of one child process; it must exit 0 or 1 (1: findings at
    --fail-on)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode()}")
    return elapsed, _children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the median is kept)")
    parser.add_argument("--results", type=Path, help="also write the figures as JSON here")
    parser.add_argument("--before", metavar="REF", help="also run the demo as of git REF")
    args = parser.parse_args()
    advisor = advisor_command()
    work = Path(tempfile.mkdtemp(prefix="advisor-startup-"))
    out = work / "out"
    left_out = ("ADVISOR_NO_CACHE", "ADVISOR_RULES", "PYTHONDONTWRITEBYTECODE")
    base = {k: v for k, v in os.environ.items() if k not in left_out}
    base["ADVISOR_CACHE_DIR"] = str(work / "warm-cache")
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
    envs = {name: base for name in commands}
    if args.before:
        from many_ranks import export_tree

        commit, tree = export_tree(work, args.before)
        module = [sys.executable, "-P", "-m", "advisor", *run[len(advisor) :]]
        for label, extra in (("working tree", {}), (commit[:12], {"PYTHONPATH": str(tree)})):
            cache = {"ADVISOR_CACHE_DIR": str(work / f"warm-cache-{label}")}
            for kind in ("cold", "warm"):
                commands[f"run ({kind}) {label}"] = module
                envs[f"run ({kind}) {label}"] = {**base, **extra, **cache}
    try:
        for name, argv in commands.items():  # byte code written, warm caches filled
            timed(argv, envs[name])
        times: dict[str, list[float]] = {name: [] for name in commands}
        cpu: dict[str, list[float]] = {name: [] for name in commands}
        for round_ in range(args.repeat):
            for name, argv in commands.items():
                env = envs[name]
                if name.startswith("run (cold)"):
                    env = {**env, "ADVISOR_CACHE_DIR": str(work / f"cold-{round_}-{name}")}
                elif name.endswith("(no cache)"):
                    env = {**env, "ADVISOR_NO_CACHE": "1"}
                wall, used = timed(argv, env)
                times[name].append(wall)
                cpu[name].append(used)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    medians = {name: statistics.median(ts) for name, ts in times.items()}
    cpu_medians = {name: statistics.median(ts) for name, ts in cpu.items()}
    yardstick, cpu_yardstick = medians["import pandas"], cpu_medians["import pandas"]
    print(f"{'command':<22} {'wall s':>7} {'× pandas':>9} {'cpu s':>7} {'× pandas':>9}  target")
    for name, median in medians.items():
        ratio, cpu_ratio = median / yardstick, cpu_medians[name] / cpu_yardstick
        target = TARGETS.get(name)
        verdict = "" if target is None else f"{target:.1f}× {'ok' if ratio <= target else 'MISSED'}"
        print(
            f"{name:<22} {median:>7.3f} {ratio:>8.2f}× {cpu_medians[name]:>7.3f} "
            f"{cpu_ratio:>8.2f}×  {verdict}"
        )
    side_by_side = {}
    if args.before:
        for kind in ("cold", "warm"):
            after, before = (
                medians[f"run ({kind}) working tree"],
                medians[f"run ({kind}) {commit[:12]}"],
            )
            side_by_side[kind] = after / before
            print(
                f"run ({kind}): working tree {after:.3f} s, {args.before} = {commit[:12]} "
                f"{before:.3f} s, {after / before:.2f}x"
            )
    if args.results:
        args.results.write_text(
            json.dumps(
                {
                    "python": sys.version.split()[0],
                    "cpus": os.cpu_count(),
                    "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
                    "repeat": args.repeat,
                    "seconds": times,
                    "cpu_seconds": cpu,
                    "median_s": medians,
                    "cpu_median_s": cpu_medians,
                    "ratio_to_import_pandas": {n: m / yardstick for n, m in medians.items()},
                    "cpu_ratio_to_import_pandas": {
                        n: m / cpu_yardstick for n, m in cpu_medians.items()
                    },
                    "targets": TARGETS,
                    "before": args.before and commit,
                    "working_tree_to_before": side_by_side,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
