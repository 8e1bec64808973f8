"""`msprof --type=db`'s `PROF_XXX/msprof_{timestamp}.db`, read as the summary CSVs would be.

The database holds what op_summary and api_statistic list: the compute tasks (TASK,
COMPUTE_TASK_INFO, TASK_PMU_INFO) and collectives (COMMUNICATION_OP) of every device, the
latter also as comm_ops, as the HCCL timeline gives them (with their tasks' transport and
byte alignment where COMMUNICATION_TASK_INFO has them), the AI
Core frequency samples of the timelines' counter (AICORE_FREQ), and the CANN API calls of the
host (CANN_API, summed per API as api_statistic sums them). It holds no
iterations, operator statistics or data queues: step_trace, op_statistic, aicpu_mi and dp are
read from mindstudio_profiler_output/ when the export wrote them too; without them a
database-only export has no steps, and op_stats is derived from the tasks as op_statistic is.
Reading goes through advisor.formats.cann_db and cann_db_comm.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import UnreadableInput
from advisor.formats.aicore_freq import freq_until_tasks_end
from advisor.formats.cann_db import (
    CannDb,
    aicore_freq_samples,
    cann_api_totals,
    compute_tasks,
)
from advisor.formats.cann_db_comm import communication_ops
from advisor.formats.cann_tasks import collective
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


@dataclass
class Database:
    """What one msprof database gives, by device id."""

    device_ops: dict[str, pd.DataFrame] = field(default_factory=dict)
    comm_ops: dict[str, pd.DataFrame] = field(default_factory=dict)
    aicore_freq: dict[str, pd.DataFrame] = field(default_factory=dict)
    host_api: pd.DataFrame | None = None  # the host's CANN API totals (every device's)


def read_database(path: Path, rel: str, warn: WarnFn) -> Database:
    """The tasks, AI Core frequency and host API totals of one database; nothing when it
    cannot be opened (one warning)."""
    out = Database()
    try:
        with CannDb(path, rel, warn) as db:
            comm = communication_ops(db, None)
            found = (compute_tasks(db, None), comm)
            out.host_api = cann_api_totals(db)
            parts = [p for p in found if p is not None]
            if parts:
                out.device_ops = _by_device(pd.concat(parts, ignore_index=True), rel, warn)
            if comm is not None:
                out.comm_ops = _comm_by_device(comm)
            for device, ops in out.device_ops.items():
                freq = freq_until_tasks_end(aicore_freq_samples(db, None, int(device)), ops)
                if freq is not None:
                    out.aicore_freq[device] = freq
    except UnreadableInput as exc:
        warn(rel, exc.problem, unread=True)
        return Database()
    return out


def _comm_by_device(comm: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The collectives as comm_ops rows by device id, as the HCCL timeline gives them (ops
    without a device are left out: _by_device has warned of them)."""
    rows = comm.drop(columns=["op_type", "core_type", "category", "connection_id"]).assign(
        op=comm["name"].map(collective, na_action="ignore")
    )
    return _split_by_device(rows[rows["device"].notna()])


def _by_device(ops: pd.DataFrame, rel: str, warn: WarnFn) -> dict[str, pd.DataFrame]:
    """The tasks by device id ("0", "1" ...), each device a profile; tasks without a device
    cannot be placed in one and are left out with one warning."""
    ops = ops.drop(columns=["connection_id", "group"], errors="ignore")
    missing = ops["device"].isna()
    if missing.any():
        warn(rel, f"{int(missing.sum())} tasks without a device ignored")
    return _split_by_device(ops[~missing])


def _split_by_device(rows: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Rows that all have a device, by device id ("0", "1" ...), without the column."""
    return {
        f"{device:.0f}": group.drop(columns="device").reset_index(drop=True)
        for device, group in rows.groupby("device", sort=True)
    }
