"""Run every Holistic Trace Analysis analysis on one trace folder and print a JSON summary.

Runs in HTA's virtualenv (HTA has no command line); benchmarks/peer_parity.py calls it once
per input folder. Each analysis is run with its defaults and visualize=False; its result is
cut down to the few numbers a reader compares with advisor's findings, or to the error HTA
raised, so a failure of one analysis never hides the others.

    /tmp/peer-hta/bin/python benchmarks/hta_parity_driver.py TRACE_DIR OUT_DIR
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any


def _r(value: Any, digits: int = 1) -> Any:
    """Round numbers for the summary; leave anything else as it is."""
    try:
        return round(float(value), digits)
    except (TypeError, ValueError):
        return value


def _temporal(ta: Any, out_dir: str) -> Any:
    df = ta.get_temporal_breakdown(visualize=False)
    return [
        {
            "rank": int(row["rank"]),
            "idle_pct": _r(row["idle_time_pctg"]),
            "compute_pct": _r(row["compute_time_pctg"]),
            "non_compute_pct": _r(row["non_compute_time_pctg"]),
            "idle_us": _r(row["idle_time(us)"]),
        }
        for _, row in df.iterrows()
    ]


def _idle(ta: Any, out_dir: str) -> Any:
    ranks = sorted(ta.t.traces)
    df, _ = ta.get_idle_time_breakdown(ranks=ranks, visualize=False)
    table = df.pivot_table(
        index=["rank", "stream"], columns="idle_category", values="idle_time", aggfunc="sum"
    )
    return {
        f"rank{rank}:stream{stream}": {
            cat: _r(row[cat]) for cat in table.columns if row[cat] == row[cat]
        }
        for (rank, stream), row in table.iterrows()
    }


def _kernel_breakdown(ta: Any, out_dir: str) -> Any:
    by_type, by_kernel = ta.get_gpu_kernel_breakdown(visualize=False)
    named = by_kernel[by_kernel["name"] != "others"]
    top = named.sort_values("sum (us)", ascending=False).head(3)
    return {
        "by_type_pct": {row["kernel_type"]: _r(row["percentage"]) for _, row in by_type.iterrows()},
        "top_kernels_us": [
            [str(row["name"])[:60], _r(row["sum (us)"])] for _, row in top.iterrows()
        ],
    }


def _annotation(ta: Any, out_dir: str) -> Any:
    df = ta.get_gpu_user_annotation_breakdown(visualize=False)
    if df is None:
        return None
    return {"rows": len(df)}


def _overlap(ta: Any, out_dir: str) -> Any:
    df = ta.get_comm_comp_overlap(visualize=False)
    return {int(row["rank"]): _r(row["comp_comm_overlap_pctg"]) for _, row in df.iterrows()}


SEQUENCE_ROOTS = ("ProfilerStep", "aten::linear", "aten::conv2d", "aten::matmul", "aten::addmm")


def _sequences(ta: Any, out_dir: str) -> Any:
    # HTA needs the name of the CPU operator the sequences start from; try the usual roots.
    rank = sorted(ta.t.traces)[0]
    found = {}
    for root in SEQUENCE_ROOTS:
        df = ta.get_frequent_cuda_kernel_sequences(
            operator_name=root, output_dir=out_dir, rank=rank, visualize=False
        )
        if df is not None and not df.empty:
            top = df.iloc[0]
            found[root] = {
                "patterns": len(df),
                "top_count": int(top["count"]),
                "top_kernels": len(str(top["pattern"]).split("|")) - 1,
                "top_gpu_us": _r(top["GPU kernel duration (us)"]),
            }
    return found


def _aten_delay(ta: Any, out_dir: str) -> Any:
    ranks = sorted(ta.t.traces)
    result = ta.get_aten_op_kernels_and_delay(ranks=ranks)
    return {rank: {"paths": len(df)} for rank, df in result.items()}


def _launch_stats(ta: Any, out_dir: str) -> Any:
    ranks = sorted(ta.t.traces)
    result = ta.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    summary = {}
    for rank, df in result.items():
        summary[rank] = {
            "launches": len(df),
            "gpu_shorter_than_cpu": int((df["gpu_duration"] < df["cpu_duration"]).sum()),
            "runtime_over_50us": int((df["cpu_duration"] > 50).sum()),
            "launch_delay_over_100us": int((df["launch_delay"] > 100).sum()),
            "launch_delay_max_us": _r(df["launch_delay"].max()),
        }
    return summary


def _queue(ta: Any, out_dir: str) -> Any:
    ranks = sorted(ta.t.traces)
    df = ta.get_queue_length_summary(ranks=ranks)
    if df is None:
        return None
    series = ta.get_queue_length_time_series(ranks=ranks)
    blocked = ta.get_time_spent_blocked_on_full_queue(series)
    return {
        "streams": len(df),
        "max_queue_length": _r(df[("queue_length", "max")].max()),
        "streams_blocked_on_full_queue": 0
        if blocked is None
        else int((blocked["duration_at_max_queue_length"] > 0).sum()),
    }


def _membw(ta: Any, out_dir: str) -> Any:
    ranks = sorted(ta.t.traces)
    df = ta.get_memory_bw_summary(ranks=ranks)
    if df is None:
        return None
    return {
        f"rank{idx[0]}:{idx[1]}": _r(row[("memory_bw_gbps", "mean")], 2)
        for idx, row in df.iterrows()
    }


def _cupti(ta: Any, out_dir: str) -> Any:
    ranks = sorted(ta.t.traces)
    frames = ta.get_cupti_counter_data_with_operators(ranks=ranks)
    return {"kernels_with_counters": sum(len(df) for df in frames)}


def _critical_path(ta: Any, out_dir: str) -> Any:
    rank = sorted(ta.t.traces)[0]
    graph, ok = ta.critical_path_analysis(rank=rank, annotation="ProfilerStep", instance_id=0)
    if not ok:
        return {"success": False}
    breakdown = graph.get_critical_path_breakdown()
    if breakdown is None or breakdown.empty:
        return {"success": True, "edges": 0}
    share = breakdown.groupby("bound_by").duration.sum() / breakdown.duration.sum() * 100
    return {
        "success": True,
        "edges": len(breakdown),
        "bound_by_pct": {k: _r(v) for k, v in share.items()},
    }


def _stragglers(ta: Any, out_dir: str) -> Any:
    return {"stragglers": [int(r) for r in ta.get_potential_stragglers()]}


ANALYSES: dict[str, Callable[[Any, str], Any]] = {
    "temporal_breakdown": _temporal,
    "idle_time_breakdown": _idle,
    "gpu_kernel_breakdown": _kernel_breakdown,
    "gpu_user_annotation_breakdown": _annotation,
    "comm_comp_overlap": _overlap,
    "frequent_cuda_kernel_sequences": _sequences,
    "aten_op_kernels_and_delay": _aten_delay,
    "cuda_kernel_launch_stats": _launch_stats,
    "queue_length_summary": _queue,
    "memory_bw_summary": _membw,
    "cupti_counters": _cupti,
    "critical_path": _critical_path,
    "potential_stragglers": _stragglers,
}


def main(trace_dir: str, out_dir: str) -> int:
    logging.disable(logging.WARNING)  # HTA logs every parse step; errors are caught below
    from hta.trace_analysis import TraceAnalysis

    t0 = time.perf_counter()
    try:
        ta = TraceAnalysis(trace_dir=trace_dir)
    except Exception as exc:  # HTA refuses the folder: every analysis is then unavailable
        print(json.dumps({"load_error": f"{type(exc).__name__}: {exc}"[:300]}))
        return 0
    result: dict[str, Any] = {
        "load_s": round(time.perf_counter() - t0, 2),
        "ranks": sorted(ta.t.traces),
    }
    for name, run in ANALYSES.items():
        start = time.perf_counter()
        try:
            outcome: dict[str, Any] = {"result": run(ta, out_dir)}
        except Exception as exc:  # record HTA's own failure as the outcome of this analysis
            outcome = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        outcome["seconds"] = round(time.perf_counter() - start, 2)
        result[name] = outcome
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))
