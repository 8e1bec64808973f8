"""`ascend_cluster_analyse_{mode}_{stages}_{ranks}_{rank}.csv`: the parallel layout its name
holds (MindSpore's parallel mode, pipeline stage count and rank count, and so the rank's
pipeline stage: `ranks / stages` consecutive ranks per stage) as `metadata`, and its per-step
figures (ms) where the step trace lacks them: `computation_time` -> steps.computing_us,
`receive_alone_time` (waiting for the previous stage) -> steps.bubble_us.

Its rows are the steps of the step trace in order (step 1's receive time plus its stage time
is step 1's total), then one summary row, as the step trace ends with its `-` row."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from advisor.formats.metadata import MetadataRows
from advisor.lazy import lazy_module

from .context import MS, Rank

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

_NAME = re.compile(r"ascend_cluster_analyse_([a-z-]+)_(\d+)_(\d+)_(\d+)\.csv")


def read_cluster_meta(rank: Rank) -> None:
    """The `metadata` rows the cluster file's name holds (its contents are per-step figures
    the step trace already gives)."""
    path = rank.files.get("cluster")
    match = _NAME.fullmatch(path.name) if path is not None else None
    if path is None or match is None:
        return
    mode, stages, ranks = match[1], int(match[2]), int(match[3])
    rows = MetadataRows()
    rows.add("distributed.parallel_mode", mode, path.name)
    rows.add("distributed.world_size", ranks, path.name)
    rows.add("distributed.pp_stages", stages, path.name)
    if stages > 0 and ranks % stages == 0 and 0 <= rank.rank < ranks:
        rows.add("distributed.pp_stage", rank.rank // (ranks // stages), path.name)
    frame = rows.frame()
    if frame is not None:
        tables = rank.profile.tables
        tables["metadata"] = pd.concat([tables.get("metadata"), frame], ignore_index=True)
        rank.profile.meta.files_read.append(path.name)
    _step_figures(rank, path)


def _step_figures(rank: Rank, path: Path) -> None:
    steps = rank.profile.tables.get("steps")
    with path.open(encoding="utf-8", errors="replace") as file:
        header = [name.strip() for name in file.readline().split(",")]
    if steps is None or "computation_time" not in header:  # data- or model-parallel files
        return
    read = rank.csv(path, ("computation_time",))
    if read is None:
        return
    _, df = read
    if len(df) != len(steps) + 1:
        rank.warn(path, f"{len(df)} rows for {len(steps)} steps: per-step figures not used")
        return
    figures = {"computing_us": "computation_time", "bubble_us": "receive_alone_time"}
    for column, source in figures.items():
        if source in df and (column not in steps or steps[column].isna().all()):
            values = rank.numbers(path, df, source).iloc[: len(steps)].to_numpy() * MS
            steps = steps.assign(**{column: values})
    rank.profile.tables["steps"] = steps
