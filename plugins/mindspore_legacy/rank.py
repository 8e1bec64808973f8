"""One rank read source by source, its device-clock times rebased together, and its tables
held to the contract."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.formats.minddata import read_pipeline_raw
from advisor.lazy import lazy_module
from advisor.model import Profile, conform

from .cluster_meta import read_cluster_meta
from .context import Rank
from .cpu import read_cpu_usage
from .device_ops import read_device_ops
from .dynamic_shape import read_dynamic_shapes, with_run_shapes
from .flops import read_flops
from .gpu import read_gpu
from .hccl import read_hccl
from .memory import read_memory
from .queues import read_queues
from .steps import mark_graph_mode, read_steps

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

CLOCK_TOLERANCE_US = 60e6  # GetNext samples further than this from the steps: another clock


def read_rank(rank: Rank) -> Profile | None:
    """The rank's profile, or None when none of its files gave a table (its warnings then stay
    on `rank.profile`)."""
    readers: tuple[
        tuple[str, Callable[[Rank, Path], pd.DataFrame | None], str, tuple[str, ...]], ...
    ] = (
        ("step_trace", read_steps, "steps", ("start_us", "end_us")),
        ("pipeline", _pipeline, "pipeline_ops", ()),
        ("hccl", read_hccl, "comm_ops", ()),
    )
    for kind, read, table, clock in readers:
        _add(rank, kind, read, table, clock)
    mark_graph_mode(rank)
    read_queues(rank)
    read_device_ops(rank)
    dynamic = read_dynamic_shapes(rank)
    read_gpu(rank, dynamic if dynamic is not None and dynamic.gpu else None)
    if dynamic is not None and not dynamic.gpu:
        with_run_shapes(rank, dynamic)
    read_flops(rank)
    read_cpu_usage(rank)
    read_memory(rank)
    if not rank.profile.tables:
        return None
    read_cluster_meta(rank)
    _rebase(rank)
    rank.profile.tables = {name: conform(name, df) for name, df in rank.profile.tables.items()}
    return rank.profile


def _add(
    rank: Rank,
    kind: str,
    read: Callable[[Rank, Path], pd.DataFrame | None],
    table: str,
    clock: tuple[str, ...],
) -> None:
    path = rank.files.get(kind)
    if path is None:
        return
    frame = read(rank, path)
    rank.profile.meta.files_read.append(path.name)
    if frame is not None and not frame.empty:
        rank.profile.tables[table] = frame
        if clock:
            rank.clocked[table] = clock


def _pipeline(rank: Rank, path: Path) -> pd.DataFrame | None:
    return read_pipeline_raw(path, path.name, rank.warn)


def _rebase(rank: Rank) -> None:
    """Rebase device-clock times to the earliest; queue samples on another clock lose
    their times (the steps decide which clock is the profile's)."""
    tables = rank.profile.tables
    if "queues" in rank.clocked and "steps" in rank.clocked:
        times = tables["queues"]["time_us"]
        steps = tables["steps"]
        far = (times < steps["start_us"].min() - CLOCK_TOLERANCE_US) | (
            times > steps["end_us"].max() + CLOCK_TOLERANCE_US
        )
        if far.any():
            rank.warn(
                rank.files["getnext"],
                "GetNext times are not on the step trace's clock; sample times dropped",
            )
            tables["queues"] = tables["queues"].assign(time_us=np.nan)
            del rank.clocked["queues"]
    starts = [tables[t][list(cols)].min().min() for t, cols in rank.clocked.items()]
    starts = [s for s in starts if pd.notna(s)]
    if not starts:
        return
    origin = float(min(starts))
    rank.profile.meta.extra["time_origin_us"] = origin
    for table, columns in rank.clocked.items():
        tables[table] = tables[table].assign(**{c: tables[table][c] - origin for c in columns})
