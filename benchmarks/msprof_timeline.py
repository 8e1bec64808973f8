"""msprof timeline exports at growing sizes (issue 13: memory not growing with the event count):
`advisor run` on a CANN raw export whose `device_0/timeline/msprof_*.json` is a real one tiled
N times, medians of wall time and peak memory (run.py's measure) at each N, and the peak's
growth against the file's. A known gap: these timelines are read whole, as dicts
(plugins/msprof/export.py), where trace_view.json is folded into columns batch by batch.

The input: the real `tests/fixtures/real/cann_timeline` export (PROF_000001_..._COJGGGCANRMICFBC,
one step of a 2-rank job, msprof_0_2_1.json 274 KB, 1,108 events) copied with its other files
as they are; its msprof json's metadata written once and its other events N times, copy k
shifted by k x (span + 100 µs). Written under <work>/msprof_timeline_x<N>/, never into the
repository.

    .venv/bin/python benchmarks/msprof_timeline.py --copies 50,200 --repeat 3 \
        [--before REF] [--results out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import many_ranks  # noqa: E402  (export_tree, Version: the --before advisor)
import run as bench  # noqa: E402  (measure: the figures mean the same as run.py's)

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests/fixtures/real/cann_timeline/PROF_000001_20230818142704322_COJGGGCANRMICFBC"
TIMELINE = "device_0/timeline/msprof_0_2_1.json"


def build(work: Path, copies: int) -> Path:
    """The fixture with its msprof timeline tiled `copies` times; kept when present."""
    folder = work / f"msprof_timeline_x{copies}" / FIXTURE.name
    target = folder / TIMELINE
    if target.is_file():
        return folder.parent
    shutil.rmtree(folder.parent, ignore_errors=True)
    shutil.copytree(FIXTURE, folder)
    events = json.loads((FIXTURE / TIMELINE).read_text())
    metadata = [e for e in events if e.get("ph") == "M"]
    timed = [e for e in events if e.get("ph") != "M"]
    times = [float(e["ts"]) for e in timed if "ts" in e]
    shift = max(times) - min(times) + 100.0
    partial = target.with_suffix(".partial")
    with open(partial, "w") as out:
        out.write("[" + ", ".join(json.dumps(e) for e in metadata))
        for k in range(copies):
            for event in timed:
                if "ts" in event:
                    event = {**event, "ts": round(float(event["ts"]) + k * shift, 3)}
                out.write(", " + json.dumps(event))
        out.write("]")
    partial.replace(target)
    return folder.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", default="50,200", help="comma-separated tile counts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/advisor-bench"))
    ap.add_argument("--before", metavar="REF", help="also time advisor as of this git ref")
    ap.add_argument("--results", type=Path, help="write the figures here as JSON")
    args = ap.parse_args(argv)

    versions = [many_ranks.Version("advisor", args.work, None)]
    if args.before:
        commit, tree = many_ranks.export_tree(args.work, args.before)
        versions.append(many_ranks.Version(f"advisor {commit[:9]}", args.work, tree))
    out = args.work / "outputs" / "msprof_timeline"
    figures = []
    heads = ("timeline MB", "wall s", "peak MB", "peak/file")
    print(f"{'input':<22} {heads[0]:>11} {'tool':<20} {heads[1]:>7} {heads[2]:>8} {heads[3]:>9}")
    for copies in [int(n) for n in args.copies.split(",")]:
        folder = build(args.work, copies)
        size = (next(folder.iterdir()) / TIMELINE).stat().st_size / 1e6
        runs: dict[str, list[dict]] = {v.label: [] for v in versions}
        for _ in range(args.repeat + 1):  # the first round is not recorded (byte code, caches)
            for version in versions:
                cmd = version.command("run", str(folder), "-o", str(out), "--format", "json", "-q")
                result = bench.measure(
                    cmd, cwd=REPO.parent, timeout=3600, poll=0.1, env=version.env
                )
                if result["rc"] not in (0, 1):
                    raise SystemExit(f"{version.label} failed: {result['stderr_tail']}")
                runs[version.label].append(result)
        for label, rs in runs.items():
            wall = statistics.median(r["wall_s"] for r in rs[1:])
            peak = statistics.median(r["peak_mb"] for r in rs[1:])
            figures.append(
                {
                    "copies": copies,
                    "timeline_mb": round(size, 1),
                    "tool": label,
                    "wall_s": wall,
                    "peak_mb": peak,
                }
            )
            print(
                f"x{copies:<21} {size:>11.1f} {label:<20} {wall:>7.2f} {peak:>8.0f} "
                f"{peak / size:>9.1f}"
            )
    if args.results:
        document = {"machine": bench.machine(), "medians": figures}
        args.results.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
