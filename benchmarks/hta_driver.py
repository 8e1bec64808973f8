"""Holistic Trace Analysis driver timed by benchmarks/run.py (runs in the HTA virtualenv).

Loads every Kineto trace in TRACE_DIR with HTA's default (JSON) parser, then computes the
temporal breakdown and the communication/computation overlap, without plotting, and prints one
JSON line: phase times and the headline numbers, so a run can be checked for having done the
work. HTA has no command line of its own; this is the smallest equivalent of a user's notebook.

    /tmp/peer-hta/bin/python benchmarks/hta_driver.py TRACE_DIR
"""

from __future__ import annotations

import json
import logging
import sys
import time


def main(trace_dir: str) -> int:
    logging.disable(logging.INFO)  # HTA logs every parse step at INFO
    from hta.trace_analysis import TraceAnalysis

    t0 = time.perf_counter()
    analysis = TraceAnalysis(trace_dir=trace_dir)
    t1 = time.perf_counter()
    breakdown = analysis.get_temporal_breakdown(visualize=False)
    t2 = time.perf_counter()
    overlap = analysis.get_comm_comp_overlap(visualize=False)
    t3 = time.perf_counter()
    result = {
        "load_s": round(t1 - t0, 3),
        "temporal_breakdown_s": round(t2 - t1, 3),
        "comm_comp_overlap_s": round(t3 - t2, 3),
        "temporal_breakdown": json.loads(breakdown.to_json(orient="records")),
        "comm_comp_overlap": json.loads(overlap.to_json(orient="records")),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1]))
