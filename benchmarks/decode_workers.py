"""advisor on the same large inputs decoded by one process and by several, side by side.

One large uncompressed trace is cut into parts and decoded on several cores
(advisor/formats/parallel.py, ADVISOR_DECODE_WORKERS). This times `advisor run` on each input
with ADVISOR_DECODE_WORKERS=1 and with each other count asked for, one run of each per round
(so a busy moment of a shared machine falls on all alike), and prints medians and the ratio
to one process. Wall and CPU time and peak memory are measured as run.py measures them (the
whole process tree, workers included).

    .venv/bin/python benchmarks/decode_workers.py                     # kineto x46, ascend x400
    .venv/bin/python benchmarks/decode_workers.py --workers 2,4 --rounds 5 \
        --input /tmp/advisor-bench/kineto_x46 --results /tmp/decode-workers.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import make_inputs  # noqa: E402
import run  # noqa: E402

DEFAULT_INPUTS = [
    make_inputs.DEFAULT_OUT / "kineto_x46",
    make_inputs.DEFAULT_OUT / "ascend_x400" / "rank0_ascend_pt",
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", type=Path, action="append", help="an input (default: %(default)s)")
    ap.add_argument("--workers", default="2", help="counts to compare with 1, comma-separated")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--advisor", default=str(REPO / ".venv" / "bin" / "advisor"))
    ap.add_argument("--work", type=Path, default=make_inputs.DEFAULT_OUT / "decode-workers")
    ap.add_argument("--results", type=Path, default=Path("/tmp/decode-workers.json"))
    args = ap.parse_args(argv)
    inputs = args.input or DEFAULT_INPUTS
    missing = [str(p) for p in inputs if not p.exists()]
    if missing:
        ap.error(f"missing inputs {missing}: build them with benchmarks/make_inputs.py")
    counts = [1] + [int(c) for c in args.workers.split(",") if c.strip() and int(c) != 1]
    args.work.mkdir(parents=True, exist_ok=True)
    runs: list[dict] = []
    for round_ in range(args.rounds):
        for path in inputs:
            for count in counts:
                out = args.work / f"out_{count}"
                shutil.rmtree(out, ignore_errors=True)
                cmd = [args.advisor, "run", str(path), "-o", str(out), "--format", "json,html"]
                env = {**os.environ, "ADVISOR_DECODE_WORKERS": str(count)}
                m = run.measure(cmd + ["--quiet"], cwd=args.work, timeout=3600, poll=0.1, env=env)
                for key in ("cmd", "stdout_tail", "stderr_tail"):
                    m.pop(key, None)
                m.update(input=str(path), workers=count, round=round_)
                m["ok"] = m["rc"] == 0 and any(out.glob("prof_rule*.json"))
                runs.append(m)
                print(
                    f"round {round_}  {path.name:<16} workers {count}  {m['wall_s']:7.2f} s wall"
                    f"  {m['cpu_s']:7.2f} s cpu  {m['peak_mb']:7.1f} MB  load "
                    f"{m['loadavg_1m_before']:.2f}  {'ok' if m['ok'] else 'FAILED'}",
                    flush=True,
                )
    summary = []
    for path in inputs:
        base = None
        for count in counts:
            mine = [
                r for r in runs if r["input"] == str(path) and r["workers"] == count and r["ok"]
            ]
            if not mine:
                continue
            row = {
                "input": str(path),
                "workers": count,
                "wall_s": statistics.median(r["wall_s"] for r in mine),
                "cpu_s": statistics.median(r["cpu_s"] for r in mine),
                "peak_mb": statistics.median(r["peak_mb"] for r in mine),
                "runs": len(mine),
            }
            base = base or row
            row["speedup_vs_1"] = round(base["wall_s"] / row["wall_s"], 3)
            row["peak_ratio_vs_1"] = round(row["peak_mb"] / base["peak_mb"], 3)
            summary.append(row)
            print(
                f"{path.name:<16} workers {count}: median {row['wall_s']:.2f} s wall, "
                f"{row['cpu_s']:.2f} s cpu, {row['peak_mb']:.0f} MB; "
                f"{row['speedup_vs_1']:.2f}x the speed of one process, "
                f"{row['peak_ratio_vs_1']:.2f}x its peak"
            )
    args.results.write_text(
        json.dumps(
            {
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "machine": run.machine(),
                "summary": summary,
                "runs": runs,
            },
            indent=1,
        )
    )
    print(f"results: {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
