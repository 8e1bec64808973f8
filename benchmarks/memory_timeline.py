"""The memory timeline reader (issue 13: time linear in the input, memory not growing with the
event count): `advisor run` on one raw export of a long run, side by side with HTA's
MemoryAnalysis on the same file and, with --before REF, with advisor as of git REF; medians of
wall time, CPU time and peak memory (run.py's measure), and their ratios to advisor's.

The input is our own torch 2.13 export (tests/fixtures/memory_timeline_own/
mlp_adam_cpu.raw.json.gz: 733 events, three steps of an MLP with Adam) tiled along time: the
tensors alive before the profile (time -1) are written once; copy k's timed events are shifted
by k x (span + 1 ms) and followed by the releases of what they left held (Adam's state, the
gradients), so every copy starts where the first did, as the steps of a long run do. It goes
to <work>/memory_timeline_x<N>.raw.json.gz, never into the repository.

HTA's side is `MemoryAnalysis(path)._process_raw_events()`, all of its analysis before the
plot (which needs a browser or kaleido), run in HTA's virtualenv.

    .venv/bin/python benchmarks/memory_timeline.py --copies 2000 --repeat 3 \
        [--before REF] [--results out.json]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import many_ranks  # noqa: E402  (export_tree, Version: the --before advisor)
import run as bench  # noqa: E402  (measure: the figures mean the same as run.py's)

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests/fixtures/memory_timeline_own/mlp_adam_cpu.raw.json.gz"
DESTROY = 4  # the export's action of a release (1 alive before, 2 made, 3 a new version)
HTA_CODE = (
    "import sys\n"
    "from hta.memory_analysis import MemoryAnalysis\n"
    "times, sizes = MemoryAnalysis(sys.argv[1])._process_raw_events()\n"
    "print(len(times), max(sum(row) for row in sizes))\n"
)


def build(work: Path, copies: int) -> Path:
    """The fixture tiled `copies` times (see the module's docstring); kept when present."""
    path = work / f"memory_timeline_x{copies}.raw.json.gz"
    if path.is_file():
        return path
    events = json.loads(gzip.decompress(FIXTURE.read_bytes()))
    before = [e for e in events if e[0] < 0]
    timed = [e for e in events if e[0] >= 0]
    first, last = timed[0][0], timed[-1][0]
    shift = last - first + 1_000_000
    left: dict[int, int] = {}
    for _, _, size, kind in timed:
        left[kind] = left.get(kind, 0) + size
    releases = [[last + 1, DESTROY, -size, kind] for kind, size in sorted(left.items()) if size]
    work.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    tiled = (
        [t + k * shift, action, size, kind]
        for k in range(copies)
        for t, action, size, kind in timed + releases
    )
    with gzip.open(partial, "wt", compresslevel=1) as out:
        out.write("[")
        for i, event in enumerate(itertools.chain(before, tiled)):
            out.write(", " * bool(i) + json.dumps(event))
        out.write("]")
    partial.rename(path)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--copies", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--work", type=Path, default=Path("/tmp/advisor-bench"))
    ap.add_argument("--hta-venv", type=Path, default=Path("/tmp/peer-hta"))
    ap.add_argument("--before", metavar="REF", help="also time advisor as of this git ref")
    ap.add_argument("--results", type=Path, help="write the figures here as JSON")
    args = ap.parse_args(argv)

    path = build(args.work, args.copies)
    out = args.work / "outputs" / "memory_timeline"
    tools: dict[str, list[str]] = {}
    envs: dict[str, dict | None] = {}
    versions = [many_ranks.Version("advisor", args.work, None)]
    if args.before:
        commit, tree = many_ranks.export_tree(args.work, args.before)
        versions.append(many_ranks.Version(f"advisor {commit[:9]}", args.work, tree))
    for version in versions:
        tools[version.label] = version.command(
            "run", str(path), "-o", str(out), "--format", "json", "--quiet"
        )
        envs[version.label] = version.env
    hta_python = args.hta_venv / "bin" / "python"
    if hta_python.exists():
        tools["HTA MemoryAnalysis"] = [str(hta_python), "-c", HTA_CODE, str(path)]
        envs["HTA MemoryAnalysis"] = None
    else:
        print(f"HTA skipped: no {hta_python} (pip install HolisticTraceAnalysis there)")

    runs: dict[str, list[dict]] = {tool: [] for tool in tools}
    for _ in range(args.repeat + 1):  # the first round is not recorded (byte code, caches)
        for tool, cmd in tools.items():
            result = bench.measure(cmd, cwd=REPO.parent, timeout=3600, poll=0.1, env=envs[tool])
            if result["rc"] not in (0, 1):
                raise SystemExit(f"{tool} failed: {result['stderr_tail']}")
            runs[tool].append(result)
    for tool in runs:
        runs[tool] = runs[tool][1:]

    def median(tool: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[tool])

    mb = path.stat().st_size / 1e6
    print(f"input: {path} ({mb:.1f} MB gzipped, {args.copies} copies)")
    print(f"{'tool':<24} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'x wall':>7} {'x peak':>7}")
    rows = {}
    for tool in runs:
        row = {k: median(tool, k) for k in ("wall_s", "cpu_s", "peak_mb")}
        row["wall_ratio"] = row["wall_s"] / median("advisor", "wall_s")
        row["peak_ratio"] = row["peak_mb"] / median("advisor", "peak_mb")
        rows[tool] = row
        print(
            f"{tool:<24} {row['wall_s']:>8.2f} {row['cpu_s']:>8.2f} {row['peak_mb']:>8.0f} "
            f"{row['wall_ratio']:>7.2f} {row['peak_ratio']:>7.2f}"
        )
    if args.results:
        document = {
            "machine": bench.machine(),
            "input": {"path": str(path), "copies": args.copies, "gz_bytes": path.stat().st_size},
            "medians": rows,
            "runs": {
                t: [{k: r[k] for k in ("wall_s", "cpu_s", "peak_mb")} for r in rs]
                for t, rs in runs.items()
            },
        }
        args.results.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
