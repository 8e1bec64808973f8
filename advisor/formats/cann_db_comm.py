"""The collectives of CANN's SQLite exports, with what their HCCL tasks tell of each.

COMMUNICATION_OP holds one row per collective; COMMUNICATION_TASK_INFO one per task of it
(Memcpy, Reduce_Inline, Notify_Wait ... on its planes), linked by `opId`, its time in TASK
through `globalTaskId`, its transport and link as ids into ENUM_HCCL_TRANSPORT_TYPE and
ENUM_HCCL_LINK_TYPE (Ascend/msprof `profile_data_file_references_db.md`). The tasks give what
the text exports' HCCL timelines give: each op's transport and the byte alignment of its SDMA
copies (advisor.formats.cann_comm.copy_tasks, the one criterion of both). At profiler level 0
the task rows carry default values instead of their transport, link and size: such a file
gives no task figures, not figures of zero.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.formats.cann_comm import (
    ALIGNMENT_COLUMNS,
    NOT_RECORDED,
    PEER_COLUMNS,
    TASK_COLUMNS,
    commonest,
    copy_tasks,
    peer_waits,
)
from advisor.formats.cann_db import NS_PER_US, CannDb, ns_times, string_columns
from advisor.formats.decimal_clock import Clock
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

TRANSPORTS = {0: "SDMA", 1: "RDMA", 2: "LOCAL", 3: "UB", 4: "ROCE"}
"""ENUM_HCCL_TRANSPORT_TYPE's documented ids, for a file that lacks the table."""
LINKS = {0: "ON_CHIP", 1: "HCCS", 2: "PCIE", 3: "ROCE", 4: "SIO", 5: "HCCS_SW", 6: "STANDARD_ROCE"}
"""ENUM_HCCL_LINK_TYPE's documented ids, for a file that lacks the table."""
TASK_FIGURES = ("transport", *TASK_COLUMNS)
"""The columns the tasks add to each op (advisor.formats.cann_comm gives the same): the peer
figures only where the tasks name ranks."""


def communication_ops(db: CannDb, clock: Clock | None) -> pd.DataFrame | None:
    """The collectives of COMMUNICATION_OP: name, op_type, group, start_us, duration_us, the
    connection_id of the call that launched it and its device (the op's own deviceId, else
    that of the tasks sharing its connectionId); with TASK_FIGURES when the file has the
    tasks' details (task_figures). None when the file has no collectives."""
    if not db.has("COMMUNICATION_OP", "opName", "startNs", "endNs"):
        return None
    columns = db.columns("COMMUNICATION_OP")
    table = db.table("COMMUNICATION_OP")
    device = "NULL"
    join = ""
    if "deviceId" in columns:
        device = "o.deviceId"
    elif "connectionId" in columns and db.has("TASK", "connectionId", "deviceId"):
        device = "d.deviceId"
        join = (
            f"LEFT JOIN (SELECT connectionId, MIN(deviceId) AS deviceId FROM {db.table('TASK')} "
            "GROUP BY connectionId) d ON d.connectionId = o.connectionId"
        )
    optional = {
        name: f"o.{name}" if name in columns else "NULL"
        for name in ("opType", "groupName", "connectionId", "opId")
    }
    rows = db.frame(
        f"SELECT o.opName AS name, {optional['opType']} AS op_type, "
        f"{optional['groupName']} AS grp, {optional['connectionId']} AS connection_id, "
        f"{optional['opId']} AS op_id, o.startNs AS start_ns, "
        f"o.endNs - o.startNs AS duration_ns, {device} AS device FROM {table} o {join} "
        "ORDER BY o.startNs",
        what="COMMUNICATION_OP",
    )
    if rows is None or rows.empty:
        return None
    string_columns(db, rows, ("name", "op_type", "grp"))
    ops = pd.DataFrame(
        {
            "name": rows["name"],
            "op_type": rows["op_type"],
            "group": rows["grp"],
            "core_type": "COMMUNICATION",
            "category": "communication",
            "start_us": ns_times(clock, rows["start_ns"]),
            "duration_us": pd.to_numeric(rows["duration_ns"], errors="coerce") / NS_PER_US,
            "device": pd.to_numeric(rows["device"], errors="coerce"),
            "connection_id": pd.to_numeric(rows["connection_id"], errors="coerce"),
        }
    )
    figures = task_figures(db) if "opId" in columns else None
    if figures is None:
        return ops
    per_op = figures.reindex(pd.to_numeric(rows["op_id"], errors="coerce").to_numpy())
    ops["transport"] = per_op["transport"].to_numpy()
    for column in ALIGNMENT_COLUMNS:  # an op none of whose tasks copied: 0 µs, not a gap
        ops[column] = np.nan_to_num(per_op[column].to_numpy("float64"))
    if "waited_rank" in per_op:  # an op that waited for no peer: none
        ops["waited_rank"] = pd.array(per_op["waited_rank"].to_numpy("float64"), dtype="Int64")
        ops["peer_wait_us"] = per_op["peer_wait_us"].to_numpy("float64")
    return ops


def task_figures(db: CannDb) -> pd.DataFrame | None:
    """Per opId, from its COMMUNICATION_TASK_INFO rows and their TASK times: `transport`, the
    commonest among the tasks that moved data, and the SDMA copies' `copy_task_us`,
    `unaligned_us` and `unaligned_tasks`; with the tasks' ranks, PEER_COLUMNS (an op that
    waited for no peer has none). None without the tables, or when no task has a recorded
    transport (level 0), or without TASK to time them."""
    needed = ("opId", "globalTaskId", "taskType", "transportType", "linkType", "size")
    if not (
        db.has("COMMUNICATION_TASK_INFO", *needed)
        and db.has("TASK", "globalTaskId", "startNs", "endNs")
    ):
        return None
    ranks = db.has("COMMUNICATION_TASK_INFO", "srcRank", "dstRank")
    rows = db.frame(
        "SELECT c.opId AS op_id, c.taskType AS task_type, c.transportType AS transport, "
        "c.linkType AS link_type, c.size AS bytes, t.endNs - t.startNs AS duration_ns"
        + (", c.srcRank AS src_rank, c.dstRank AS dst_rank, t.startNs AS start_ns" if ranks else "")
        + f" FROM {db.table('COMMUNICATION_TASK_INFO')} c "
        f"LEFT JOIN {db.table('TASK')} t ON t.globalTaskId = c.globalTaskId",
        what="COMMUNICATION_TASK_INFO",
    )
    if rows is None or rows.empty:
        return None
    transport = _enum_names(rows["transport"], db.enum("ENUM_HCCL_TRANSPORT_TYPE") or TRANSPORTS)
    if not transport.notna().any():
        return None
    link = _enum_names(rows["link_type"], db.enum("ENUM_HCCL_LINK_TYPE") or LINKS)
    string_columns(db, rows, ("task_type",))
    size = pd.to_numeric(rows["bytes"], errors="coerce").to_numpy("float64", na_value=np.nan)
    duration = pd.to_numeric(rows["duration_ns"], errors="coerce").to_numpy(
        "float64", na_value=np.nan
    )
    copy, unaligned = copy_tasks(transport, rows["task_type"], link, size)
    length = np.nan_to_num(duration) / NS_PER_US
    tasks = pd.DataFrame(
        {
            "op_id": pd.to_numeric(rows["op_id"], errors="coerce"),
            "copy_task_us": np.where(copy, length, 0.0),
            "unaligned_us": np.where(unaligned, length, 0.0),
            "unaligned_tasks": unaligned.astype("float64"),
            "transport": transport.where(size > 0),
        }
    ).dropna(subset=["op_id"])
    figures = tasks.drop(columns="transport").groupby("op_id").sum()
    figures["transport"] = tasks.groupby("op_id")["transport"].agg(
        lambda values: commonest([str(v) for v in values.dropna()])
    )
    if ranks:
        figures = figures.join(_longest_waits(rows, length))
    return figures


def _longest_waits(rows: pd.DataFrame, length: np.ndarray) -> pd.DataFrame:
    """Per opId, PEER_COLUMNS: the dst rank and time of its longest wait on another rank (the
    earliest of equal waits)."""
    src, dst = (
        pd.to_numeric(rows[c], errors="coerce").to_numpy("float64", na_value=np.nan)
        for c in ("src_rank", "dst_rank")
    )
    waits = pd.DataFrame(
        {
            "op_id": pd.to_numeric(rows["op_id"], errors="coerce"),
            "waited_rank": dst,
            "peer_wait_us": length,
            "start_ns": pd.to_numeric(rows["start_ns"], errors="coerce"),
        }
    )[peer_waits(rows["task_type"], src, dst)].dropna(subset=["op_id"])
    waits = waits.sort_values("start_ns", kind="stable")
    longest = waits.groupby("op_id")["peer_wait_us"].idxmax()
    return waits.loc[longest.to_numpy()].set_index("op_id")[list(PEER_COLUMNS)]


def _enum_names(ids: pd.Series, names: dict[int, str]) -> pd.Series:
    """Enum ids as their names; an id the table lacks, or a name that says nothing was
    recorded, missing."""
    known = {i: n for i, n in names.items() if n.upper() not in NOT_RECORDED}
    return pd.to_numeric(ids, errors="coerce").map(known)
