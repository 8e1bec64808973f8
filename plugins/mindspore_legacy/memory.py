"""`memory_usage_summary_{N}.json`: the run's peak device memory against capacity."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from advisor.formats.numbers import finite_float as _float
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from .context import Rank

GIB = 1024.0**3


def read_memory(rank: Rank) -> None:
    """Peak device memory against capacity from `memory_usage_summary_{rank}.json`, as
    one `memory` row: MindSpore writes `capacity` and `peak_mem` in GiB (its parser divides
    the byte counts by 1024**3). The sample has no time: the summary covers the run."""
    path = rank.files.get("memory_summary")
    if path is None:
        return
    rank.profile.meta.files_read.append(path.name)
    summary = rank.json(path)
    if summary is None:
        return
    if not isinstance(summary, dict):
        rank.warn(path, "not a JSON object with capacity and peak_mem")
        return
    peak, capacity = _float(summary.get("peak_mem")), _float(summary.get("capacity"))
    if not (math.isfinite(peak) and peak >= 0):
        rank.warn(path, f"peak_mem is not a number of GiB: {summary.get('peak_mem')!r}")
        return
    rank.profile.tables["memory"] = pd.DataFrame(
        {
            "time_us": [np.nan],
            "allocated_bytes": [peak * GIB],
            "reserved_bytes": [peak * GIB],
            "capacity_bytes": [
                capacity * GIB if math.isfinite(capacity) and capacity > 0 else np.nan
            ],
            "device": [f"NPU:{rank.rank}"],
        }
    )
