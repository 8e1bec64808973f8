"""Where one `advisor run` spends its wall time: imports, opening the session and reading,
deriving, evaluating the rules, writing the outputs.

Each run is a fresh child process (imports count, as for a user), timed by marks placed
around `Session.derive`, `Session.evaluate` and `outputs.write_outputs`; one unrecorded run
first fills the rule cache (a temporary folder) and the byte code, then --repeat runs, and
the median of each stage is printed. "imports" starts at the script's first line (the
interpreter's own start, some 20 ms, is in no stage); "to evaluate" and "to write" are the
time between two stages (the report's analyses, the cluster); "exit", after the outputs.

    .venv/bin/python benchmarks/stages.py INPUT [INPUT ...] [--repeat 3] [--results out.json]
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()  # before any other import: the imports are a stage

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

STAGES = (
    "imports",
    "open and read",
    "derive",
    "to evaluate",
    "evaluate",
    "to write",
    "write",
    "exit",
)


def child(path: str, out: str) -> None:
    """Run advisor on `path` in this process and print each stage's seconds as JSON."""
    marks: list[float] = []

    import advisor.outputs as outputs
    import advisor.session as session
    from advisor.cli import main
    from advisor.collector import freeze_imports, tune_for_command_line

    tune_for_command_line()
    freeze_imports()  # pandas, as the command imports it before the session opens
    marks.append(time.perf_counter())

    def marked(owner: object, name: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: object, **kwargs: object) -> object:
            marks.append(time.perf_counter())
            try:
                return original(*args, **kwargs)
            finally:
                marks.append(time.perf_counter())

        setattr(owner, name, wrapper)

    marked(session.Session, "derive")
    marked(session.Session, "evaluate")
    marked(outputs, "write_outputs")
    with contextlib.suppress(SystemExit):  # exit 1: findings at --fail-on
        main.main(["run", path, "-o", out, "--quiet"], standalone_mode=False)
    marks.append(time.perf_counter())
    points = [STARTED, *marks]
    if len(points) != len(STAGES) + 1:
        raise SystemExit(f"expected one derive, evaluate and write, got {len(marks)} marks")
    seconds = {s: round(b - a, 4) for s, a, b in zip(STAGES, points, points[1:])}
    print(json.dumps(seconds))


def measure(path: str, repeat: int) -> dict[str, float]:
    """Median seconds of each stage over `repeat` child runs on `path`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    runs: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as work:
        env["ADVISOR_CACHE_DIR"] = os.path.join(work, "cache")
        argv = [sys.executable, __file__, "--child", path, os.path.join(work, "out")]
        for i in range(repeat + 1):
            proc = subprocess.run(argv, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(f"{path}: {proc.stderr.strip()[-2000:]}")
            if i:  # the first run fills the rule cache and the byte code
                runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    medians = {s: statistics.median(r[s] for r in runs) for s in STAGES}
    medians["total"] = statistics.median(sum(r.values()) for r in runs)
    return medians


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--results", help="write the medians here as JSON")
    args = ap.parse_args()
    results = {}
    print(f"{'input':<40}" + "".join(f"{s:>14}" for s in (*STAGES, "total")))
    for path in args.inputs:
        results[path] = medians = measure(path, args.repeat)
        name = os.path.basename(path.rstrip("/"))[-40:]
        print(f"{name:<40}" + "".join(f"{medians[s]:>14.3f}" for s in (*STAGES, "total")))
    if args.results:
        with open(args.results, "w") as fh:
            json.dump({"repeat": args.repeat, "seconds": results}, fh, indent=1)


if __name__ == "__main__":
    main()
