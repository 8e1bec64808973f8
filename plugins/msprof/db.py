"""`msprof --type=db`'s `PROF_XXX/msprof_{timestamp}.db`, read as the summary CSVs would be.

The database holds what op_summary and api_statistic list: the compute tasks (TASK,
COMPUTE_TASK_INFO, TASK_PMU_INFO) and collectives (COMMUNICATION_OP) of every device, and the
CANN API calls of the host (CANN_API, summed per API as api_statistic sums them). It holds no
iterations, operator statistics or data queues: step_trace, op_statistic, aicpu_mi and dp are
read from mindstudio_profiler_output/ when the export wrote them too; without them a
database-only export has no steps, and op_stats is derived from the tasks as op_statistic is.
Reading goes through advisor.formats.cann_db.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import UnreadableInput
from advisor.formats.cann_db import CannDb, cann_api_totals, communication_ops, compute_tasks
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


def read_database(
    path: Path, rel: str, warn: WarnFn
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame | None]:
    """({device id: its device_ops}, the host's API totals) of one database; ({}, None) when it
    cannot be opened (one warning)."""
    try:
        with CannDb(path, rel, warn) as db:
            found = (compute_tasks(db, None), communication_ops(db, None))
            host = cann_api_totals(db)
    except UnreadableInput as exc:
        warn(rel, exc.problem, unread=True)
        return {}, None
    parts = [p for p in found if p is not None]
    if not parts:
        return {}, host
    ops = pd.concat(parts, ignore_index=True).drop(
        columns=["connection_id", "group"], errors="ignore"
    )
    missing = ops["device"].isna()
    if missing.any():
        warn(rel, f"{int(missing.sum())} tasks without a device ignored")
    devices = {
        f"{device:.0f}": rows.drop(columns="device").reset_index(drop=True)
        for device, rows in ops[~missing].groupby("device", sort=True)
    }
    return devices, host
