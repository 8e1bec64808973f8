"""operator_memory.csv: every tensor block torch_npu (or MindSpore) saw an operator allocate,
with when it was released; written with profile_memory=True.

Columns (torch_npu's documentation, "operator_memory.csv"): Name, Size(KB), Allocation
Time(us), Release Time(us) (empty: not released while profiling), Duration(us), Allocation
Total Allocated(MB), Allocation Total Reserved(MB), ... Release Total Active(MB), Stream Ptr,
Device Type. `cann::` rows are the graph engine's own workspace (their sizes are KB too).
The profiler database's OP_MEMORY table holds the same rows in bytes and ns.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisor.formats.cann_csv import open_csv
from advisor.formats.cann_db import CannDb, ns_times
from advisor.formats.decimal_clock import Clock
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

KIB = 1024.0  # Size(KB): the allocator's binary KB
MIB = float(2**20)


def read_operator_memory(path: Path, rel: str, clock: Clock, warn: WarnFn) -> pd.DataFrame | None:
    """One `op_allocations` row per block; rows without a name, size or time are left out
    (their cells were already named in a warning)."""
    csv = open_csv(path, rel, warn, ("Name", "Size(KB)", "Allocation Time(us)"))
    if csv is None:
        return None
    size, start = csv.number("Size(KB)"), csv.number("Allocation Time(us)")
    if size is None or start is None:  # open_csv checked both are there
        return None
    start_valid = (start.notna() & ~csv.rounded_times("Allocation Time(us)")).to_numpy()
    frame = pd.DataFrame(
        {
            "name": csv.text("Name"),
            "bytes": size * KIB,
            "start_us": np.where(start_valid, clock.us(csv.cells("Allocation Time(us)")), np.nan),
        }
    )
    release = csv.number("Release Time(us)")
    if release is not None:
        valid = release.notna().to_numpy()
        frame["end_us"] = np.nan
        if valid.any():
            frame.loc[valid, "end_us"] = clock.us(csv.cells("Release Time(us)")[valid])
    allocated = csv.number("Allocation Total Allocated(MB)")
    if allocated is not None:
        frame["allocated_bytes"] = allocated * MIB
    device = csv.text("Device Type")
    if device is not None:
        frame["device"] = device
    keep = frame["name"].notna() & frame["bytes"].notna() & frame["start_us"].notna()
    return frame[keep.to_numpy(dtype=bool)].reset_index(drop=True)


def op_memory_table(db: CannDb, clock: Clock) -> pd.DataFrame | None:
    """OP_MEMORY of the profiler database (bytes, ns; name a STRING_IDS id), as
    operator_memory.csv gives it; a block never released has no release time (NULL or 0)."""
    columns = db.columns("OP_MEMORY")
    if not {"name", "size", "allocationTime"} <= columns:
        return None
    picked = [c for c in ("releaseTime", "allocationTotalAllocated", "deviceId") if c in columns]
    rows = db.frame(
        f"SELECT name, size, allocationTime{''.join(', ' + c for c in picked)} "
        f"FROM {db.table('OP_MEMORY')} ORDER BY allocationTime",
        what="OP_MEMORY",
    )
    if rows is None or rows.empty:
        return None
    frame = pd.DataFrame(
        {
            "name": db.strings(rows["name"]),
            "bytes": pd.to_numeric(rows["size"], errors="coerce").astype(float),
            "start_us": ns_times(clock, rows["allocationTime"]),
        }
    )
    if "releaseTime" in rows:
        release = pd.to_numeric(rows["releaseTime"], errors="coerce")
        frame["end_us"] = np.where(
            (release > 0).to_numpy(dtype=bool), ns_times(clock, rows["releaseTime"]), np.nan
        )
    if "allocationTotalAllocated" in rows:
        total = pd.to_numeric(rows["allocationTotalAllocated"], errors="coerce")
        frame["allocated_bytes"] = total.astype(float)
    if "deviceId" in rows:
        device = pd.to_numeric(rows["deviceId"], errors="coerce").astype("Int64")
        frame["device"] = ("NPU:" + device.astype("string")).astype("string")
    keep = frame["name"].notna() & frame["bytes"].notna() & np.isfinite(frame["start_us"])
    return frame[keep.to_numpy(dtype=bool)].reset_index(drop=True)
