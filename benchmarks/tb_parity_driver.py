"""Run the PyTorch profiler TensorBoard plugin's analysis on Kineto traces, print JSON.

Runs in the plugin's virtualenv (torch-tb-profiler 0.4.3, the last release; the plugin is
deprecated). It parses each trace the way the plugin's overview page does, without starting
TensorBoard, and prints the recommendations the overview would show together with the GPU
figures they rest on (utilization, estimated SM efficiency, achieved occupancy, Tensor Core
use, the share of each step spent in data loading and communication).

    /tmp/peer-tb/bin/python benchmarks/tb_parity_driver.py CACHE_DIR TRACE...
"""

from __future__ import annotations

import json
import logging
import re
import sys
from typing import Any


def _pct(value: Any) -> Any:
    return None if value is None else round(float(value) * 100, 1)


def summarise(path: str, cache_dir: str) -> dict[str, Any]:
    """Parse one trace and keep the overview's recommendations and GPU figures."""
    from torch_tb_profiler.profiler.data import RunProfileData
    from torch_tb_profiler.profiler.event_parser import ProfileRole

    data = RunProfileData.parse("worker", "span", path, cache_dir)
    gpu = data.gpu_metrics_parser
    costs = data.avg_costs.costs
    total = costs[ProfileRole.Total] or 1.0
    return {
        "recommendations": [re.sub(r"<[^>]+>", "", text) for text in data.recommendations],
        "dataloader_pct": _pct(costs[ProfileRole.DataLoader] / total),
        "communication_pct": _pct(costs[ProfileRole.Communication] / total),
        "gpus": {
            gpu_id: {
                "utilization_pct": _pct(gpu.gpu_utilization[gpu_id]),
                "est_sm_efficiency_pct": _pct(
                    gpu.avg_approximated_sm_efficiency_per_device[gpu_id]
                ),
                "achieved_occupancy_pct": None
                if gpu.avg_occupancy_per_device[gpu_id] is None
                else round(float(gpu.avg_occupancy_per_device[gpu_id]), 1),
            }
            for gpu_id in sorted(gpu.gpu_ids)
        },
        "tensor_core_kernel_pct": _pct(data.tc_used_ratio),
        "tc_eligible_op_kernel_pct": _pct(data.tc_eligible_ops_kernel_ratio),
    }


def main(cache_dir: str, paths: list[str]) -> int:
    logging.disable(logging.WARNING)
    result: dict[str, Any] = {}
    for path in paths:
        try:
            result[path] = summarise(path, cache_dir)
        except Exception as exc:  # the plugin's own failure is the outcome for this trace
            result[path] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2:]))
