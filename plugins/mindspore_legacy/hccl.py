"""`hccl_raw_{N}.csv` (profile_communication=True): collectives per step and their links."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from advisor.formats.cann_tasks import collective as collective_name
from advisor.formats.numbers import finite_float as _float
from advisor.formats.numbers import int_from_text as _int
from advisor.lazy import lazy_module

from .context import MS

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from .context import Rank


def read_hccl(rank: Rank, path: Path) -> pd.DataFrame | None:
    """comm_ops from hccl_raw_{rank}.csv (profile_communication=True): per step and
    collective its transit and wait time, and per link and transport the time and bytes
    moved. MindSpore writes times in ms and sizes in KB (1 KB = 1000 bytes); the last row
    ("-") is the average and is not read."""
    read = rank.csv(path, ("step_num", "communication_operator_cost"))
    if read is None:
        return None
    _, df = read
    rows: list[dict[str, Any]] = []
    for index, (step_text, ops_text) in enumerate(
        zip(df["step_num"], df["communication_operator_cost"])
    ):
        step = _int(step_text)
        if step is None:
            continue
        try:
            ops = orjson.loads(ops_text)
        except orjson.JSONDecodeError:
            rank.warn(
                path,
                "communication_operator_cost is not JSON; row skipped",
                line=index + 2,
                column="communication_operator_cost",
            )
            continue
        for name, cost in ops.items() if isinstance(ops, dict) else ():
            rows.extend(_hccl_rows(str(name), step, cost))
    if not rows:
        rank.warn(path, "no communication operator found")
        return None
    return pd.DataFrame(rows)


def _hccl_rows(name: str, step: int, cost: Any) -> list[dict[str, Any]]:
    """One collective of one step (`[step, transit ms, wait ms, {src-dst: {transport: [ms,
    KB, KB/s]}}]`) as an op row and its link rows; a rank's copies to itself move nothing
    between ranks and add no bytes to the op."""
    if not isinstance(cost, list) or len(cost) < 4 or not isinstance(cost[3], dict):
        return []
    transit, wait = _float(cost[1]) * MS, _float(cost[2]) * MS
    op = collective_name(name)
    links, moved = [], 0.0
    for pair, transports in cost[3].items():
        src, _, dst = str(pair).partition("-")
        if not (src.isdigit() and dst.isdigit()) or not isinstance(transports, dict):
            continue
        for transport, figures in transports.items():
            if not isinstance(figures, list) or len(figures) < 2:
                continue
            link_us, size = _float(figures[0]) * MS, _float(figures[1]) * 1e3
            if src != dst and np.isfinite(size):
                moved += size
            links.append(
                {
                    "name": f"{src}->{dst}",
                    "kind": "link",
                    "op": op,
                    "step": step,
                    "duration_us": link_us,
                    "transit_us": link_us,
                    "bytes": size,
                    "transport": str(transport),
                }
            )
    return [
        {
            "name": name,
            "kind": "op",
            "op": op,
            "step": step,
            "duration_us": transit + np.nan_to_num(wait),
            "transit_us": transit,
            "wait_us": wait,
            "bytes": moved if moved else np.nan,
        },
        *links,
    ]
