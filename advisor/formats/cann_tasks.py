"""CANN task and operator names: what category a task is, which collective an op runs.

msprof's op_summary, torch_npu's kernel_details and trace_view, and MindSpore's files name
tasks and operators the same way; overlap and time-breakdown metrics group tasks by these
categories, and communication rules by these collective names.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


def task_category(core_type: str) -> str:
    """Category of a task type: what overlap and time-breakdown metrics group by."""
    upper = str(core_type).upper()
    if upper == "COMMUNICATION" or upper.startswith(("HCCL", "NOTIFY", "REDUCE_ASYNC")):
        return "communication"
    if upper.startswith("MEMCPY"):
        return "memcpy"
    if upper.startswith("MEMSET"):
        return "memset"
    if upper.startswith(("EVENT_", "STREAM_", "MODEL_")):
        return "other"
    return "compute"


def task_categories(core_types: pd.Series) -> pd.Series:
    """task_category of each row, computed once per distinct type (exports have millions of
    rows and a handful of types)."""
    return core_types.map({t: task_category(t) for t in core_types.unique()})


def device_category(task_type: str) -> str:
    """Category of an Ascend task type as torch_npu writes them (newer task types too).

    DMA copies are memcpy; HCCL/COMMUNICATION communication; EVENT_*/STREAM_*/... other.
    `Other` stays compute: older CANN labels AI Core kernels `Other`, and torch_npu's Overlap
    Analysis counts those tasks as Computing.
    """
    upper = str(task_type).upper()
    if upper.startswith(("SDMA", "PCIE_DMA", "MEMCPY")):
        return "memcpy"
    if upper.startswith(("WRITE_VALUE", "PLACE_HOLDER", "CAPTURE_")):
        return "other"
    return task_category(upper)


_COLLECTIVES = (
    "reducescatter",
    "allreduce",
    "allgather",
    "alltoallv",
    "alltoall",
    "broadcast",
    "batchsendrecv",
    "send",
    "receive",
    "recv",
    "reduce",
    "scatter",
    "gather",
)


def collective(name: str) -> str | None:
    """`Default/AllReduce-op534_0`, `hcom_allReduce__123_0_1` -> `allreduce`."""
    flat = re.sub(r"[^a-z]", "", str(name).rsplit("/", 1)[-1].lower())
    return next((c for c in _COLLECTIVES if c in flat), None)


_OP_SUFFIX = re.compile(r"-op\d+(?:_\d+)*$")


def op_type(name: str) -> str:
    """`Default/.../Cast-op239` -> `Cast`: the last scope segment without the op counter."""
    return _OP_SUFFIX.sub("", str(name).rsplit("/", 1)[-1])


def with_wait(ops: pd.DataFrame) -> pd.DataFrame:
    """msprof's Task Wait Time where the source lacks it: the idle gap before each task.

    wait = max(0, start - (previous start + previous duration)) over the device's tasks in
    start order, the definition op_summary uses; the first task waits 0.
    """
    if "wait_us" in ops and ops["wait_us"].notna().any():
        return ops
    order = ops["start_us"].sort_values(kind="stable").index
    start = ops.loc[order, "start_us"].to_numpy(dtype=float)
    end = start + ops.loc[order, "duration_us"].to_numpy(dtype=float)
    wait = np.zeros(len(order))
    wait[1:] = np.maximum(0.0, start[1:] - end[:-1])
    return ops.assign(wait_us=pd.Series(wait, index=order))
