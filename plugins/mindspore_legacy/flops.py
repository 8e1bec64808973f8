"""FLOPs per operator (`flops_{N}.txt`) and the model's FLOPS utilisation
(`flops_summary_{N}.json`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from advisor.formats.numbers import finite_float as _float
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from .context import Rank

MFLO = 1e6  # flops_{N}.txt counts in millions (MindSpore docs: "FLOPs ... M (10^6)")


def read_flops(rank: Rank) -> None:
    """FLOPs per operator onto device_ops by name; the model summary into meta."""
    path = rank.files.get("flops_summary")
    if path is not None:
        rank.profile.meta.files_read.append(path.name)
        summary = rank.json(path)
        if isinstance(summary, dict) and summary:
            rank.profile.meta.extra["flops_summary"] = {
                k: _float(v) for k, v in summary.items() if isinstance(k, str)
            }
            _utilization(rank, summary)
        elif summary is not None:
            rank.warn(path, "not a JSON object of FLOPs figures")
    path = rank.files.get("flops")
    ops = rank.profile.tables.get("device_ops")
    if path is None or ops is None:
        return  # without device operators the per-operator FLOPs have nowhere to go
    rank.profile.meta.files_read.append(path.name)
    read = rank.csv(path, ("full_kernel_name",))
    if read is None:
        return
    _, df = read
    counts = [c for c in df.columns if c == "FLOPs" or c.startswith("MFLOPs")]
    if not counts:
        rank.warn(path, "missing column 'FLOPs'", column="FLOPs")
        return
    mflops = pd.concat([rank.numbers(path, df, c) for c in counts], axis=1)
    flops = (
        pd.Series(mflops.sum(axis=1, min_count=1).to_numpy() * MFLO, index=df["full_kernel_name"])
        .groupby(level=0)
        .first()
    )
    rank.profile.tables["device_ops"] = ops.assign(flops=ops["name"].map(flops))


def _utilization(rank: Rank, summary: dict[str, Any]) -> None:
    """The device's FLOPS utilisation (%, achieved FLOPS over the AI Core peak; the FLOPS
    are GFLOPS per MindSpore's docs) as rows of the utilization table, for rules."""
    rows = [
        (measure, value, unit)
        for measure, key, unit, scale in (
            ("flops_utilization", "FLOPS_Utilization", "%", 1.0),
            ("flops_per_s", "FLOPS", "FLOPS", 1e9),
        )
        if math.isfinite(value := _float(summary.get(key)) * scale)
    ]
    if rows:
        rank.profile.tables["utilization"] = pd.DataFrame(
            rows, columns=["measure", "value", "unit"]
        )
