"""Many ranks (issue 13): the cost of a rank, and peak memory bounded by the jobs, not the ranks.

Every figure is one `advisor run INPUT -o OUT --format FORMATS --quiet` as a child process
(--formats: the command's default outputs json, html and traces; rounds 1-7 of
benchmarks/README.md measured json,html, without the findings' trace snippets),
measured by benchmarks/run.py's `measure` (wall time; CPU time of the process tree; peak
memory = max(PSS summed over the process tree, sampled; the largest single process's
ru_maxrss)):

* **tiny**: 1 rank against --ranks ranks (300) of a tiny real trace, in rounds (one of each per
  round, so a busy moment of the machine falls on both), medians of --repeat. The trace: the
  own 4-rank DDP run (tests/fixtures/kineto_own/ddp4_rank*.pt.trace.json.gz, torch 2.13 CPU,
  gloo) cut to its first 3 profiler steps (922 events, 0.27 MB); rank r is a copy of rank
  r mod 4 with distributedInfo's rank and world size rewritten. The target: N ranks in at most
  3x the time of one. With --before REF every round also runs advisor as of git REF (exported
  with `git archive`, run with `python -m advisor` from the same virtualenv), side by side;
  --after REF times that commit instead of the working tree.
* **memory**: --big ranks (16 and 64; --full adds 1024) of a 10 MB trace (the NCCL Kineto
  fixture of ../shared/fixtures, 9.8 MB of JSON, 40,573 events, distributedInfo rewritten per
  rank, stored gzipped to keep 1,024 ranks at about 0.8 GB of disk), at --jobs 1 and 2, locally
  and on a dask.distributed LocalCluster of that many single-threaded worker processes. The
  cluster is started by a wrapper (this script, --dask-child) inside the measured process
  tree, so its scheduler and workers count in the peak; the workers' statistical profiler is
  off (see dask_child) unless --dask-profiler. One run each. With --before REF, the smallest
  size is also run by that advisor at --jobs 2 (which keeps every rank's tables).

Inputs are built under --work (default /tmp/advisor-many-ranks) and reused while their
manifest matches; the rule cache of each advisor is a folder there, warmed by an unrecorded run.

    .venv/bin/python benchmarks/many_ranks.py --before HEAD~1 --results out.json
    .venv/bin/python benchmarks/many_ranks.py --full          # adds 1,024 x 10 MB (long)
    .venv/bin/python benchmarks/many_ranks.py --only tiny --ranks 300 --repeat 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import make_inputs  # noqa: E402
import run as bench  # noqa: E402  (measure, machine: the figures mean the same as run.py's)

TINY_SOURCE = sorted((REPO / "tests/fixtures/kineto_own").glob("ddp4_rank*.pt.trace.json.gz"))
TINY_STEPS = 3
BIG_SOURCE = make_inputs.KINETO_FIXTURE
BIG_RANK_KEY = b'"distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 2'
TARGET_RATIO = 3.0  # N tiny ranks in at most 3x the time of one
INPUT_VERSION = 1  # bump when the inputs change, so cached ones are rebuilt


# ---------------------------------------------------------------- inputs


def _cut_to_steps(doc: dict, steps: int) -> dict:
    """The trace with the events up to the end of its first `steps` ProfilerStep spans
    (metadata events kept)."""
    events = doc["traceEvents"]
    marks = sorted(
        (e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")),
        key=lambda e: float(e["ts"]),
    )
    end = float(marks[steps - 1]["ts"]) + float(marks[steps - 1]["dur"])
    kept = [e for e in events if "ts" not in e or e.get("ph") == "M" or float(e["ts"]) <= end]
    return {**doc, "traceEvents": kept}


def _built(folder: Path, expected: dict) -> bool:
    manifest = folder / ".manifest.json"
    try:
        return json.loads(manifest.read_text()) == expected
    except (OSError, ValueError):
        return False


def _fresh(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def build_tiny(work: Path, ranks: int) -> Path:
    """`ranks` tiny rank traces in one folder (one claim each)."""
    folder = work / f"tiny_x{ranks}"
    expected = {"version": INPUT_VERSION, "ranks": ranks, "steps": TINY_STEPS}
    if _built(folder, expected):
        return folder
    _fresh(folder)
    docs = []
    for path in TINY_SOURCE:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            docs.append(_cut_to_steps(json.load(fh), TINY_STEPS))
    for rank in range(ranks):
        doc = docs[rank % len(docs)]
        doc["distributedInfo"] = {**doc["distributedInfo"], "rank": rank, "world_size": ranks}
        (folder / f"rank{rank:04d}.pt.trace.json").write_text(json.dumps(doc), encoding="utf-8")
    (folder / ".manifest.json").write_text(json.dumps(expected))
    return folder


def build_big(work: Path, ranks: int) -> Path:
    """`ranks` gzipped copies of the 10 MB NCCL trace, distributedInfo rewritten per rank."""
    folder = work / f"big_x{ranks}"
    expected = {"version": INPUT_VERSION, "ranks": ranks, "source": str(BIG_SOURCE)}
    if _built(folder, expected):
        return folder
    if not BIG_SOURCE.is_file():
        raise SystemExit(f"{BIG_SOURCE} is missing (set ADVISOR_FIXTURES to ../shared/fixtures)")
    with gzip.open(BIG_SOURCE, "rb") as fh:
        raw = fh.read()
    if raw.count(BIG_RANK_KEY) != 1:
        raise SystemExit(f"{BIG_SOURCE}: its distributedInfo is not the expected one")
    _fresh(folder)
    for rank in range(ranks):
        info = b'"distributedInfo": {"backend": "nccl", "rank": %d, "world_size": %d' % (
            rank,
            ranks,
        )
        data = raw.replace(BIG_RANK_KEY, info)
        with gzip.open(folder / f"rank{rank:04d}.pt.trace.json.gz", "wb", compresslevel=1) as fh:
            fh.write(data)
    (folder / ".manifest.json").write_text(json.dumps(expected))
    return folder


# ---------------------------------------------------------------- advisor versions


def export_tree(work: Path, ref: str) -> tuple[str, Path]:
    """advisor as of git `ref`, exported into work/trees/<commit> (importable from there:
    `advisor_plugins` links to its plugins/ and `advisor_rules` to its rules/, as the installed
    package maps them; without its own rules an exported advisor would load the installed
    one's, and a change to the rules would not be measured)."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", ref], capture_output=True, text=True, check=True
    ).stdout.strip()
    tree = work / "trees" / commit[:12]
    if not (tree / "advisor_rules" / "__init__.py").is_file():
        _fresh(tree)
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", commit, "advisor", "plugins", "rules"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
        (tree / "advisor_plugins").symlink_to("plugins")
        (tree / "advisor_rules").symlink_to("rules")
    return commit, tree


class Version:
    """One advisor to time: the working tree's (installed) or an exported commit's."""

    def __init__(self, label: str, work: Path, tree: Path | None) -> None:
        self.label = label
        self.tree = tree
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("ADVISOR_")}
        self.env["ADVISOR_CACHE_DIR"] = str(work / "cache" / label)
        if tree is not None:
            self.env["PYTHONPATH"] = str(tree)

    def command(self, *args: str) -> list[str]:
        if self.tree is None:
            exe = Path(sys.executable).with_name("advisor")
            return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "advisor", *args]
        return [sys.executable, "-m", "advisor", *args]


def advisor_run(
    version: Version,
    folder: Path,
    out: Path,
    *,
    jobs: int | None = None,
    dask_workers: int | None = None,
    dask_profiler: bool = False,
    formats: str,
    timeout: float,
) -> dict:
    """One measured `advisor run` of `folder` (on a fresh LocalCluster with `dask_workers`)."""
    shutil.rmtree(out, ignore_errors=True)
    args = ["run", str(folder), "-o", str(out), "--format", formats, "--quiet"]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    cmd = version.command(*args)
    if dask_workers is not None:
        wrapper = [sys.executable, str(Path(__file__)), "--dask-child", str(dask_workers)]
        cmd = [*wrapper, "on" if dask_profiler else "off", "--", *cmd]
    result = bench.measure(cmd, cwd=REPO.parent, timeout=timeout, poll=0.1, env=version.env)
    result.pop("_stdout", None)
    reports = list(out.glob("prof_rule*.json")) if out.is_dir() else []
    result["reports"] = len(reports)
    result["ok"] = result["rc"] in (0, 1) and not result["timed_out"] and bool(reports)
    if result["ok"]:
        result.pop("stdout_tail", None)
        result.pop("stderr_tail", None)
    return result


def dask_child(workers: int, cmd: list[str], profiler: bool) -> int:
    """Run `cmd --scheduler ADDRESS` against a LocalCluster of `workers` single-threaded
    worker processes started here (so they belong to the measured process tree). Without
    `profiler`, the workers' statistical profiler is off: it keeps a call tree per second of
    work for the last 1,000 seconds (distributed.admin.low-level-log-length), which on its
    own grew each busy worker by 0.7 to 0.85 GB in a 20 to 30 minute run."""
    import dask
    from distributed import LocalCluster

    dask.config.set({"distributed.worker.profile.enabled": profiler})
    with LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        return subprocess.run([*cmd, "--scheduler", cluster.scheduler_address]).returncode


# ---------------------------------------------------------------- the measurements


def _median(runs: list[dict], key: str) -> float | None:
    values = [r[key] for r in runs if r["ok"]]
    return round(statistics.median(values), 3) if values else None


def tiny_rounds(args, versions: list[Version], out: Path) -> dict:
    one, many = build_tiny(args.work, 1), build_tiny(args.work, args.ranks)
    runs: dict[str, dict[str, list[dict]]] = {v.label: {"1": [], "N": []} for v in versions}
    for version in versions:  # unrecorded: byte code and the rule cache are written
        advisor_run(version, one, out / "warm", formats=args.formats, timeout=args.timeout)
    for round_no in range(args.repeat):
        for version in versions:
            for key, folder in (("1", one), ("N", many)):
                run = advisor_run(
                    version, folder, out / "tiny", formats=args.formats, timeout=args.timeout
                )
                runs[version.label][key].append(run)
                print(
                    f"  tiny round {round_no + 1} {version.label:>7} {key:>1} rank(s): "
                    f"{run['wall_s']:7.2f} s wall, {run['cpu_s']:7.2f} s CPU, "
                    f"{run['peak_mb']:7.1f} MB{'' if run['ok'] else '  FAILED'}",
                    flush=True,
                )
    summary = {}
    for label, by in runs.items():
        figures = {
            f"{k}_{m}": _median(by[k], m)
            for k in ("1", "N")
            for m in ("wall_s", "cpu_s", "peak_mb")
        }
        ratio = (
            round(figures["N_wall_s"] / figures["1_wall_s"], 2)
            if figures["N_wall_s"] and figures["1_wall_s"]
            else None
        )
        per_rank_ms = (
            round((figures["N_wall_s"] - figures["1_wall_s"]) / (args.ranks - 1) * 1e3, 1)
            if figures["N_wall_s"] and figures["1_wall_s"]
            else None
        )
        summary[label] = {**figures, "ratio": ratio, "wall_ms_per_extra_rank": per_rank_ms}
    return {"ranks": args.ranks, "repeat": args.repeat, "runs": runs, "summary": summary}


def memory_runs(args, versions: list[Version], out: Path) -> list[dict]:
    sizes = sorted({*args.big, *([1024] if args.full else [])})
    rows = []
    for ranks in sizes:
        folder = build_big(args.work, ranks)
        for version in versions:
            if version.label == "before" and ranks != sizes[0]:
                continue  # the old advisor keeps every rank's tables: the smallest size shows it
            modes = [("local", 2)] if version.label == "before" else []
            modes = modes or [(m, j) for m in args.modes for j in args.jobs]
            for mode, jobs in modes:
                run = advisor_run(
                    version,
                    folder,
                    out / "big",
                    jobs=jobs if mode == "local" else None,
                    dask_workers=jobs if mode == "dask" else None,
                    dask_profiler=args.dask_profiler,
                    formats=args.formats,
                    timeout=args.big_timeout,
                )
                row = {"advisor": version.label, "ranks": ranks, "mode": mode, "jobs": jobs, **run}
                if mode == "dask":
                    row["dask_profiler"] = args.dask_profiler
                rows.append(row)
                print(
                    f"  memory {version.label:>7} {ranks:5d} ranks {mode:>5} jobs {jobs}: "
                    f"{run['wall_s']:8.1f} s wall, {run['cpu_s']:8.1f} s CPU, "
                    f"{run['peak_mb']:8.1f} MB peak{'' if run['ok'] else '  FAILED'}",
                    flush=True,
                )
    return rows


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--dask-child"]:
        return dask_child(int(argv[1]), argv[4:], profiler=argv[2] == "on")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/advisor-many-ranks"))
    ap.add_argument("--ranks", type=int, default=300, help="tiny ranks against one")
    ap.add_argument("--repeat", type=int, default=3, help="rounds of the tiny runs (medians)")
    ap.add_argument("--big", type=lambda s: [int(x) for x in s.split(",")], default=[16, 64])
    ap.add_argument("--jobs", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    ap.add_argument("--full", action="store_true", help="memory runs at 1,024 ranks too")
    ap.add_argument(
        "--formats",
        default="json,html,traces",
        help="the outputs of each run (advisor run --format; default: the command's default)",
    )
    ap.add_argument(
        "--modes",
        type=lambda s: [m for m in s.split(",") if m in ("local", "dask")],
        default=["local", "dask"],
        help="memory runs here (local), on a LocalCluster (dask), or both (local,dask)",
    )
    ap.add_argument("--only", choices=("tiny", "memory"), help="one of the two measurements")
    ap.add_argument(
        "--dask-profiler",
        action="store_true",
        help="leave the Dask workers' statistical profiler on (Dask's default)",
    )
    ap.add_argument("--before", metavar="REF", help="also time advisor as of this git ref")
    ap.add_argument(
        "--after", metavar="REF", help="time advisor as of this git ref, not the working tree"
    )
    ap.add_argument("--timeout", type=float, default=600, help="limit per tiny run (s)")
    ap.add_argument("--big-timeout", type=float, default=7200, help="limit per memory run (s)")
    ap.add_argument("--results", type=Path, default=Path("/tmp/many-ranks-results.json"))
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix="many-ranks-out-"))
    after: dict = {"tree": "working tree (the installed advisor)"}
    versions = [Version("after", args.work, None)]
    if args.after:
        commit, tree = export_tree(args.work, args.after)
        versions = [Version("after", args.work, tree)]
        after = {"ref": args.after, "commit": commit}
    before = None
    if args.before:
        commit, tree = export_tree(args.work, args.before)
        versions.append(Version("before", args.work, tree))
        before = {"ref": args.before, "commit": commit}
    results: dict = {
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": bench.machine(),
        "after": after,
        "before": before,
        "formats": args.formats,
    }
    t0 = time.perf_counter()
    try:
        if args.only in (None, "tiny"):
            results["tiny"] = tiny_rounds(args, versions, out)
            for label, s in results["tiny"]["summary"].items():
                print(
                    f"tiny {label}: 1 rank {s['1_wall_s']} s, {args.ranks} ranks {s['N_wall_s']} s "
                    f"-> {s['ratio']}x (target <= {TARGET_RATIO}); "
                    f"{s['wall_ms_per_extra_rank']} ms per extra rank"
                )
        if args.only in (None, "memory"):
            results["memory"] = memory_runs(args, versions, out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
        results["total_s"] = round(time.perf_counter() - t0, 1)
        args.results.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results: {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
