"""The data queues: the host queue (`device_queue_profiling_{N}.txt`, else
`dataset_iterator_profiling_{N}.txt`) and GetNext's device queue (`minddata_aicpu_{N}.txt`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisor.formats.numbers import int_from_text as _int
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from .context import Rank


def read_queues(rank: Rank) -> None:
    """queues rows `host` and `device`; only GetNext samples are timed (device clock)."""
    parts = []
    host_path = rank.files.get("device_queue") or rank.files.get("dataset_iterator")
    if host_path is not None:
        rank.profile.meta.files_read.append(host_path.name)
        host = _host_queue(rank, host_path)
        if host is not None:
            parts.append(host)
    getnext_path = rank.files.get("getnext")
    if getnext_path is not None:
        rank.profile.meta.files_read.append(getnext_path.name)
        device = _device_queue(rank, getnext_path)
        if device is not None:
            parts.append(device)
    if parts:
        frame = pd.concat(parts, ignore_index=True)
        frame["empty"] = frame["size"] == 0
        rank.profile.tables["queues"] = frame
        if frame["time_us"].notna().any():
            rank.clocked["queues"] = ("time_us",)


def _host_queue(rank: Rank, path: Path) -> pd.DataFrame | None:
    lines = rank.lines(path)
    if lines is None:
        return None
    rows, bad = [], []
    for number, cells in lines:
        values = _ints(cells[:4])
        if len(cells) not in (4, 5) or values is None or values[0] not in (0, 1):
            bad.append((number, " ".join(cells)))
        elif values[0] == 1:  # connector size; type 0 lines are stage times
            rows.append(
                {
                    "queue": "host",
                    "step": values[2],
                    "size": float(values[3]),
                    "capacity": float(values[1]),
                    "time_us": np.nan,
                }
            )
    rank.report_bad(path, bad, "type extra-info batch value [timestamp]")
    if not rows:
        if not bad:
            rank.warn(path, "no host-queue size lines (type 1)")
        return None
    return pd.DataFrame(rows)


def _device_queue(rank: Rank, path: Path) -> pd.DataFrame | None:
    lines = rank.lines(path)
    if lines is None:
        return None
    rows, bad = [], []
    for number, cells in lines:
        values = _ints(cells[1:4]) if len(cells) == 4 else None
        if values is None or not cells[0].startswith("GetNext"):
            bad.append((number, " ".join(cells)))
            continue
        start, end, size = values
        rows.append(
            {
                "queue": "device",
                "step": len(rows) + 1,
                "size": float(size),
                "time_us": float(start),
                "wait_us": float(end - start),
            }
        )
    rank.report_bad(path, bad, "GetNext_dequeue_wait start end size")
    return pd.DataFrame(rows) if rows else None


def _ints(cells: list[str]) -> list[int] | None:
    values = [_int(c) for c in cells]
    return None if any(v is None for v in values) else values  # type: ignore[return-value]
