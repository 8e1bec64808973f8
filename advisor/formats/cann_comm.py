"""Communication ops of HCCL timelines (msprof's hccl/msprof JSON, torch_npu's trace_view).

Op-level events sit on a communication-op thread (`Communication Kernel`, or `Group <name>
Communication`); the per-plane tasks (Notify, Memcpy, Reduce_Inline on `Plane k` threads) are
not ops: they give each op's transport and the device streams collectives run on.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from advisor.compat import zip_strict
from advisor.formats.cann_tasks import collective, op_type
from advisor.formats.interning import expand
from advisor.formats.numbers import int_or_none, trace_number
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from advisor.formats.trace_columns import PlaneTasks, Rows
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

_GROUP_THREAD = re.compile(r"Group (\S+) Communication")


def comm_from_columns(
    ops: pd.DataFrame, tasks: pd.DataFrame
) -> tuple[pd.DataFrame | None, set[int]]:
    """comm_ops, and the device streams the collectives ran on, from columns of the events
    (trace numbers as written or already floats).

    `ops`, the op-level events: name, start_us, duration_us, thread (its thread's name, which
    gives the group). `tasks`, the per-plane tasks (those with a transport type): start_us,
    transport, stream, bytes. An op's transport is the commonest among the tasks that moved
    data inside it.
    """
    streams = {s for value in tasks["stream"].tolist() if (s := int_or_none(value)) is not None}
    if ops.empty:
        return None, streams
    moving = sorted(
        (trace_number(ts), str(transport))
        for ts, transport, size in zip_strict(
            tasks["start_us"].tolist(), tasks["transport"].tolist(), tasks["bytes"].tolist()
        )
        if trace_number(size) > 0
    )
    starts = np.array([ts for ts, _ in moving], dtype="float64")
    transports = [t for _, t in moving]
    names = [str(name) for name in ops["name"].tolist()]
    start = np.array([trace_number(v) for v in ops["start_us"].tolist()], dtype="float64")
    duration = np.array([trace_number(v) for v in ops["duration_us"].tolist()], dtype="float64")
    lo = np.searchsorted(starts, start, side="left")
    hi = np.searchsorted(starts, start + duration, side="left")
    groups = [
        m.group(1) if (m := _GROUP_THREAD.search(str(thread))) else None
        for thread in ops["thread"].tolist()
    ]
    details = (
        _task_figures(tasks, start, duration)
        if set(_TASK_DETAILS) <= set(tasks.columns) and recorded(tasks["transport"]).any()
        else {}  # level 0 records no task of a collective: its figures are unknown, not 0
    )
    return pd.DataFrame(
        {
            "name": names,
            "op": [collective(name) for name in names],
            "group": groups,
            "start_us": start,
            "duration_us": duration,
            "transport": [
                commonest(transports[a:b]) for a, b in zip_strict(lo.tolist(), hi.tolist())
            ],
            **details,
        }
    ), streams


ALIGNMENT_COLUMNS = ("copy_task_us", "unaligned_us", "unaligned_tasks")
PEER_COLUMNS = ("waited_rank", "peer_wait_us")
TASK_COLUMNS = ALIGNMENT_COLUMNS + PEER_COLUMNS
"""The comm_ops columns only an op's HCCL tasks give (profiler level 1 or 2): its byte
alignment and the peer it waited for longest."""
ALIGN_BYTES = 512
"""msprof-analyze's byte-alignment check: SDMA copies of more than 512 bytes whose size is not a
multiple of 512 bytes move data less efficiently."""
_COPY_TASKS = ("Memcpy", "Reduce_Inline")
NOT_RECORDED = frozenset({"N/A", "INVALID_TYPE", "RESERVED"})
"""HCCL enum names that say the profiler did not record the value (level 0 writes them)."""
_TASK_DETAILS = ("duration_us", "task_type", "link_type")


def comm_from_rows(rows: Rows, plane_tasks: PlaneTasks) -> tuple[pd.DataFrame | None, set[int]]:
    """comm_ops, and the device streams the collectives ran on, from a CANN trace's columns:
    the rows of its HCCL process (`plane_tasks`: the trace's per-plane tasks)."""
    task_rows = np.asarray(plane_tasks.rows, dtype=np.int64)
    is_task = np.isin(rows.index, task_rows)
    codes, threads = rows.thread_names()
    on_op_thread = np.array(["Communication" in t for t in threads], dtype=bool)[codes]
    op = np.flatnonzero(on_op_thread & ~is_task)
    task = np.flatnonzero(is_task)
    at = np.searchsorted(task_rows, rows.index[task])  # each task's place in the columns

    def field(name: str) -> list[Any]:
        values = plane_tasks.columns[name]
        return [values[i] for i in at.tolist()]

    ops = pd.DataFrame(
        {
            "name": rows.text("name").to_numpy(zero_copy_only=False)[op],
            "start_us": rows.ts[op],
            "duration_us": rows.dur[op],
            "thread": expand(codes, threads)[op],
        }
    )
    tasks = pd.DataFrame(
        {
            "start_us": rows.ts[task],
            "transport": field("transport"),
            "stream": pd.Series(field("stream"), dtype="object"),
            "bytes": pd.Series(field("bytes"), dtype="object"),
            "duration_us": rows.dur[task],
            "task_type": field("task_type"),
            "link_type": field("link_type"),
            "src_rank": pd.Series(field("src_rank"), dtype="object"),
            "dst_rank": pd.Series(field("dst_rank"), dtype="object"),
        }
    )
    return comm_from_columns(ops, tasks)


def _task_figures(
    tasks: pd.DataFrame, start: np.ndarray, duration: np.ndarray
) -> dict[str, np.ndarray]:
    """Per op, from the tasks that began inside it: its SDMA copy tasks (Memcpy,
    Reduce_Inline) of more than 512 bytes between chips (not ON_CHIP), their time
    (`copy_task_us`) and the time and count of those whose size is not a multiple of 512
    bytes (`unaligned_us`, `unaligned_tasks`); and the peer its longest wait on another rank
    waited for (`waited_rank`, `peer_wait_us`: peer_waits), where the tasks name ranks."""
    begin = np.array([trace_number(v) for v in tasks["start_us"].tolist()], dtype="float64")
    length = np.array([trace_number(v) for v in tasks["duration_us"].tolist()], dtype="float64")
    size = np.array([trace_number(v) for v in tasks["bytes"].tolist()], dtype="float64")
    copy, unaligned = copy_tasks(tasks["transport"], tasks["task_type"], tasks["link_type"], size)
    copy &= np.isfinite(begin)
    unaligned &= copy
    order = np.argsort(np.where(np.isfinite(begin), begin, np.inf), kind="stable")
    begin, length = begin[order], np.nan_to_num(length[order])
    copy, unaligned = copy[order], unaligned[order]
    lo = np.searchsorted(begin, start, side="left")
    hi = np.searchsorted(begin, start + duration, side="left")

    def per_op(values: np.ndarray) -> np.ndarray:
        total = np.concatenate(([0.0], np.cumsum(values)))
        return total[hi] - total[lo]

    figures = {
        "copy_task_us": per_op(np.where(copy, length, 0.0)),
        "unaligned_us": per_op(np.where(unaligned, length, 0.0)),
        "unaligned_tasks": per_op(unaligned.astype("float64")),
    }
    if "dst_rank" not in tasks:
        return figures
    ranks = [
        np.array([trace_number(v) for v in tasks[column].tolist()], dtype="float64")[order]
        for column in ("src_rank", "dst_rank")
    ]
    waits = peer_waits(tasks["task_type"].iloc[order], *ranks) & np.isfinite(begin)
    if waits.any():  # at level 1 and 2; level 0 records no task, a CANN 7 export no rank
        figures.update(longest_wait(np.where(waits, length, -1.0), ranks[1], lo, hi))
    return figures


WAIT_TASK = "Notify_Wait"
"""HCCL's synchronisation task that waits until a notify register is set: by a peer rank (its
`dst rank`; `src rank` is the task's own) or by another stream of this rank."""
NO_RANK = 4294967295
"""2**32 - 1: the `dst rank` of a task with no peer (a wait between this rank's own streams)."""


def peer_waits(task_type: pd.Series, src_rank: np.ndarray, dst_rank: np.ndarray) -> np.ndarray:
    """Mask of the tasks that wait for another rank: Notify_Wait tasks whose peer (dst rank) is
    recorded and is not their own rank (src rank). The one criterion of the trace's tasks and
    the database's."""
    return (
        (task_type.astype(str) == WAIT_TASK).to_numpy()
        & np.isfinite(dst_rank)
        & (dst_rank != NO_RANK)
        & (dst_rank != src_rank)
    )


def longest_wait(
    wait_us: np.ndarray, dst_rank: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> dict[str, np.ndarray]:
    """Per op (its tasks `lo:hi`), the peer of its longest wait on another rank and that wait's
    time (`wait_us` negative where a task is no such wait; the earliest of equal waits): none
    for an op without one."""
    rank = np.full(len(lo), np.nan)
    waited = np.full(len(lo), np.nan)
    for op, (a, b) in enumerate(zip_strict(lo.tolist(), hi.tolist())):
        if b > a:
            k = a + int(np.argmax(wait_us[a:b]))
            if wait_us[k] >= 0:
                rank[op], waited[op] = dst_rank[k], wait_us[k]
    return {"waited_rank": pd.array(rank, dtype="Int64"), "peer_wait_us": waited}


def recorded(values: pd.Series) -> pd.Series:
    """Whether each HCCL enum value (a transport, a link) was recorded: present and not one
    of the NOT_RECORDED names."""
    return values.notna() & ~values.astype(str).str.upper().isin(NOT_RECORDED)


def copy_tasks(
    transport: pd.Series, task_type: pd.Series, link_type: pd.Series, size: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(copy, unaligned) masks of HCCL tasks: SDMA copies (Memcpy, Reduce_Inline) of more
    than 512 bytes between chips (not ON_CHIP), and those of them whose size is not a
    multiple of 512 bytes. The one criterion of the trace's tasks and the database's."""
    copy = (
        (transport.astype(str).str.upper() == "SDMA").to_numpy()
        & task_type.isin(_COPY_TASKS).to_numpy()
        & (link_type.astype(str).str.upper() != "ON_CHIP").to_numpy()
        & (size > ALIGN_BYTES)
    )
    return copy, copy & (np.fmod(size, ALIGN_BYTES) != 0)


def commonest(values: list[str]) -> str | None:
    """The most frequent value, the smallest of ties (as pandas' mode); None if none."""
    if not values:
        return None
    counts = Counter(values)
    top = max(counts.values())
    return min(v for v, n in counts.items() if n == top)


def comm_as_device_ops(comm: pd.DataFrame) -> pd.DataFrame:
    """Communication ops as device_ops rows: they stand for the collectives' tasks, as in
    op_summary and kernel_details."""
    return pd.DataFrame(
        {
            "name": comm["name"],
            "op_type": comm["name"].map(op_type),
            "core_type": "COMMUNICATION",
            "category": "communication",
            "start_us": comm["start_us"],
            "duration_us": comm["duration_us"],
        }
    )
