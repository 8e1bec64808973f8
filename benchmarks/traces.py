"""What the trace snippets (`--format traces`, on by default) add to a run: `advisor run` with
and without them on the same input, in alternating rounds, medians and their ratio.

Snippets of Kineto and torch_npu profiles re-read the original trace once per profile (all
windows in one streamed pass); this measures that cost on the tiled inputs of make_inputs.py.

    python benchmarks/traces.py /tmp/advisor-bench/kineto_x10 /tmp/advisor-bench/ascend_x50
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WITHOUT = "json,html,text"
WITH = "json,html,traces,text"


def once(path: Path, formats: str, out: Path) -> float:
    """Wall-clock seconds of one `advisor run` into a fresh folder."""
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor",
            "run",
            str(path),
            "-o",
            str(out),
            "-q",
            "--format",
            formats,
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("inputs", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"{'input':<40} {'without s':>10} {'with s':>10} {'ratio':>7} {'snippets MB':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        for path in args.inputs:
            times: dict[str, list[float]] = {WITHOUT: [], WITH: []}
            for _ in range(args.rounds):
                for formats in (WITHOUT, WITH):  # side by side, alternating
                    times[formats].append(once(path, formats, out))
            size = sum(p.stat().st_size for p in (out / "traces").glob("*.json")) / 2**20
            without, with_ = statistics.median(times[WITHOUT]), statistics.median(times[WITH])
            print(
                f"{path.name:<40} {without:>10.2f} {with_:>10.2f} {with_ / without:>7.2f}"
                f" {size:>12.1f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
