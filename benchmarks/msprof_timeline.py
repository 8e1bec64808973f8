"""msprof timelines at growing sizes (issue 13: memory not growing with the event count):
`advisor run` on a CANN export whose msprof timeline is a real one tiled N times, medians of
wall time and peak memory (run.py's measure) at each N, and the peak against the file. Until
round 34 these timelines were read whole, as dicts; they are now folded into columns batch by
batch, as trace_view.json is (advisor.formats.trace_columns): `--before REF` times the older
advisor on the same input, `--msprof-venv DIR` msprof-analyze's advisor (26.2.0).

The input: the real `tests/fixtures/real/cann_timeline` export (PROF_000001_..._COJGGGCANRMICFBC,
one step of a 2-rank job, msprof_0_2_1.json 274 KB, 1,108 events), its msprof json's metadata
written once and its other events N times, copy k shifted by k x (span + 100 µs). Two layouts
(`--layout`): `raw`, the export as it is with the tiled `device_0/timeline/msprof_0_2_1.json`
beside its other timeline files; `merged`, CANN 8's `mindstudio_profiler_output/msprof_*.json`
alone (with device_0's info.json), the layout msprof-analyze reads (on the raw one it says
"Unknown profiling type" and reads no timeline, so the peer runs on `merged` only). Written
under <work>/msprof_timeline[_merged]_x<N>/, never into the repository.

    .venv/bin/python benchmarks/msprof_timeline.py --copies 50,200 --repeat 3 \
        [--layout merged] [--msprof-venv /tmp/peer-msprof] [--before REF] [--results out.json]
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


MERGED = "mindstudio_profiler_output/msprof_20230818142704.json"


def build(work: Path, copies: int, layout: str = "raw") -> Path:
    """The fixture with its msprof timeline tiled `copies` times, in the layout; kept when
    present."""
    suffix = "" if layout == "raw" else f"_{layout}"
    folder = work / f"msprof_timeline{suffix}_x{copies}" / FIXTURE.name
    target = folder / (TIMELINE if layout == "raw" else MERGED)
    if target.is_file():
        return folder.parent
    shutil.rmtree(folder.parent, ignore_errors=True)
    if layout == "raw":
        shutil.copytree(FIXTURE, folder)
    else:
        (folder / "device_0").mkdir(parents=True)
        (folder / MERGED).parent.mkdir()
        shutil.copy(FIXTURE / "device_0/info.json.0", folder / "device_0/info.json.0")
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


class Peer:
    """msprof-analyze's advisor, from its own virtualenv, as run.py runs it."""

    label = "msprof-analyze"
    env = None

    def __init__(self, venv: Path) -> None:
        self.exe = venv / "bin" / "msprof-analyze"
        if not self.exe.exists():
            raise SystemExit(f"{self.exe} missing: pip install msprof-analyze==26.2.0 there")

    def command(self, folder: Path, out: Path) -> list[str]:
        return [str(self.exe), "advisor", "all", "-d", str(folder), "-o", str(out), "-l", "en"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", default="50,200", help="comma-separated tile counts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--layout", choices=("raw", "merged"), default="raw")
    ap.add_argument("--work", type=Path, default=Path("/tmp/advisor-bench"))
    ap.add_argument("--before", metavar="REF", help="also time advisor as of this git ref")
    ap.add_argument("--msprof-venv", type=Path, help="also time msprof-analyze from this venv")
    ap.add_argument("--results", type=Path, help="write the figures here as JSON")
    args = ap.parse_args(argv)

    tools: list[many_ranks.Version | Peer] = [many_ranks.Version("advisor", args.work, None)]
    if args.before:
        commit, tree = many_ranks.export_tree(args.work, args.before)
        tools.append(many_ranks.Version(f"advisor {commit[:9]}", args.work, tree))
    if args.msprof_venv:
        if args.layout != "merged":
            raise SystemExit("msprof-analyze reads no raw-export timeline: use --layout merged")
        tools.append(Peer(args.msprof_venv))
    out = args.work / "outputs" / "msprof_timeline"
    figures = []
    heads = ("timeline MB", "wall s", "peak MB", "peak/file")
    print(f"{'input':<22} {heads[0]:>11} {'tool':<20} {heads[1]:>7} {heads[2]:>8} {heads[3]:>9}")
    for copies in [int(n) for n in args.copies.split(",")]:
        folder = build(args.work, copies, args.layout)
        timeline = TIMELINE if args.layout == "raw" else MERGED
        size = (next(folder.iterdir()) / timeline).stat().st_size / 1e6
        runs: dict[str, list[dict]] = {t.label: [] for t in tools}
        for _ in range(args.repeat + 1):  # the first round is not recorded (byte code, caches)
            for tool in tools:
                if isinstance(tool, Peer):
                    cmd = tool.command(next(folder.iterdir()), out / "peer")
                else:
                    cmd = tool.command("run", str(folder), "-o", str(out), "--format", "json", "-q")
                result = bench.measure(cmd, cwd=REPO.parent, timeout=3600, poll=0.1, env=tool.env)
                if result["rc"] not in (0, 1):
                    raise SystemExit(f"{tool.label} failed: {result['stderr_tail']}")
                runs[tool.label].append(result)
        for label, rs in runs.items():
            wall = statistics.median(r["wall_s"] for r in rs[1:])
            peak = statistics.median(r["peak_mb"] for r in rs[1:])
            figures.append(
                {
                    "copies": copies,
                    "layout": args.layout,
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
        ours = figures[-len(runs)]
        for other in figures[-len(runs) + 1 :]:
            speedup = other["wall_s"] / ours["wall_s"]
            memory = ours["peak_mb"] / other["peak_mb"]
            versus = f"against {other['tool']}"
            print(f"{'':<34} {versus}: {speedup:.2f}x faster, {memory:.2f}x its peak")
    if args.results:
        document = {"machine": bench.machine(), "medians": figures}
        args.results.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
