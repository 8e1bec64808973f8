"""msprof-analyze's cluster output, `cluster_analysis_output/`, read as one profile per rank.

`msprof-analyze cluster -d PROFILING_PATH` summarises the rank folders of a run into:

- `cluster_step_trace_time.csv`: each rank's step_trace_time.csv rows, prefixed by `Step`,
  `Type` (`rank`, or `stage` for a pipeline stage: the maximum over its ranks) and `Index`
  (the rank, or the stage's ranks as a tuple `"(0, 1, 2, 3)"`); optional `DP Index`,
  `PP Index`, `TP Index` columns;
- `cluster_communication.json`: `{group: {step: {op@group: {rank: block}}}}`, each block one
  rank's communication.json entry (`Communication Time Info`, `Communication Bandwidth
  Info`), `Total Op Info` included;
- `cluster_communication_matrix.json`: `{group: {step: {op@group: {"src-dst": link}}}}`.

Each rank becomes the profile its folder would give from step_trace_time.csv and
communication*.json alone: `steps` (step time = Computing + Communication(Not Overlapped) +
Free, which is Stage + Bubble), `comm_ops` (ops and the links it sends on) and `metadata`
(rank, world size, pipeline stage), so the per-rank rules and the cross-rank cluster are
those of the rank folders. Where those folders lie beside the output, they are read instead
(they hold everything the output summarises), and the output is not claimed. The folder is
known by its CSV, whatever its name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import UnreadableInput
from advisor.formats.cann_csv import SummaryCsv, open_csv
from advisor.formats.decimal_clock import Clock
from advisor.formats.files import load_json
from advisor.formats.metadata import MetadataRows
from advisor.formats.warn import HeldWarnings
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta, conform

from .communication import parse_communication, parse_communication_matrix
from .layout import FOLDER_SUFFIXES
from .steps import STEP_TRACE_COLUMNS, steps_from_table

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

READER = "msprof_analyze_cluster"
STEP_TRACE = "cluster_step_trace_time.csv"
COMMUNICATION = "cluster_communication.json"
MATRIX = "cluster_communication_matrix.json"
FRAMEWORK = "CANN"
"""The output does not say which framework ran (PyTorch or MindSpore): CANN, as msprof's."""
_RANKS = re.compile(r"\d+")


def rank_folders_in(folder: Path) -> bool:
    """Whether `folder` holds rank folders (`*_ascend_pt`, `*_ascend_ms`, `PROF_*`): the data
    a cluster output beside them was made from."""
    try:
        return any(
            p.name.endswith(tuple(FOLDER_SUFFIXES)) or p.name.startswith("PROF_")
            for p in folder.iterdir()
            if p.is_dir()
        )
    except OSError:
        return False


def read_cluster_output(folder: Path) -> list[Profile]:
    """One profile per rank of cluster_step_trace_time.csv; the problems of the shared files
    are told on every rank. Raises UnreadableInput when the CSV gives no rank."""
    problems = HeldWarnings()
    csv = open_csv(folder / STEP_TRACE, STEP_TRACE, problems, ("Type", "Index", "Computing"))
    if csv is None:
        problem = problems.held[0][1] if problems.held else "unreadable"
        raise UnreadableInput(folder / STEP_TRACE, problem)
    steps = _rank_steps(csv)
    if not steps:
        raise UnreadableInput(folder / STEP_TRACE, "no `rank` row (Type column)")
    stages = _stages(csv)
    files = [STEP_TRACE]
    clock = Clock()
    comm = _per_rank(folder / COMMUNICATION, problems, files)
    links = _per_rank(folder / MATRIX, problems, files, by_source=True)
    profiles = []
    for rank in sorted(steps):
        meta = ProfileMeta(
            source_format="msprof-analyze-cluster",
            path=str(folder),
            framework=FRAMEWORK,
            device_kind="NPU",
            rank=rank,
            world_size=len(steps),
            files_read=list(files),
        )
        profile = Profile(meta)
        problems.replay(_warn_on(profile))
        profile.tables["steps"] = conform("steps", steps_from_table(steps[rank], None))
        parts = []
        if rank in comm:
            ops, totals = parse_communication(comm[rank], clock)
            parts.append(ops)
            if totals:
                meta.extra["comm_bandwidth"] = totals
        if rank in links:
            parts.append(parse_communication_matrix(links[rank]))
        parts = [p for p in parts if p is not None]
        if parts:
            profile.tables["comm_ops"] = conform("comm_ops", pd.concat(parts, ignore_index=True))
        metadata = _metadata(rank, len(steps), stages.get(rank))
        if metadata is not None:
            profile.tables["metadata"] = metadata
        profiles.append(profile)
    return profiles


def _warn_on(profile: Profile) -> Any:
    """A WarnFn telling `profile`, as this reader."""

    def warn(file: str | Path, problem: str, **where: Any) -> None:
        profile.warn(file, problem, reader=READER, **where)

    return warn


def _rank_steps(csv: SummaryCsv) -> dict[int, pd.DataFrame]:
    """Each rank's rows, with the breakdown columns the file has (step_trace_time.csv's)."""
    kind = csv.text("Type")
    index = pd.to_numeric(csv.text("Index"), errors="coerce")
    rows = pd.DataFrame(
        {"step": csv.number("Step") if csv.has("Step") else 1.0, "rank": index}
        | {
            column: csv.number(written)
            for written, column in STEP_TRACE_COLUMNS.items()
            if csv.has(written)
        }
    )
    rows = rows[(kind.fillna("").str.lower() == "rank").to_numpy() & index.notna().to_numpy()]
    return {
        int(rank): group.drop(columns="rank").sort_values("step").reset_index(drop=True)
        for rank, group in rows.groupby("rank", sort=True)
    }


def _stages(csv: SummaryCsv) -> dict[int, int]:
    """Each rank's pipeline stage: `PP Index` where written, else the `stage` rows' rank
    tuples, numbered in the order of their first rank; none with fewer than two stages."""
    kind = csv.text("Type").fillna("").str.lower()
    index = csv.text("Index").fillna("")
    if csv.has("PP Index"):
        pp = csv.number("PP Index")
        ranks = pd.to_numeric(index, errors="coerce")
        found = {
            int(r): int(s)
            for r, s, k in zip(ranks.tolist(), pp.tolist(), kind.tolist())
            if k == "rank" and pd.notna(r) and pd.notna(s)
        }
        return found if len(set(found.values())) > 1 else {}
    groups = {
        tuple(sorted({int(r) for r in _RANKS.findall(text)}))
        for text, k in zip(index.tolist(), kind.tolist())
        if k == "stage"
    }
    groups = {g for g in groups if g}
    if len(groups) < 2:
        return {}
    return {rank: stage for stage, group in enumerate(sorted(groups)) for rank in group}


def _per_rank(
    path: Path, warn: HeldWarnings, files: list[str], *, by_source: bool = False
) -> dict[int, dict[str, Any]]:
    """A cluster communication file as each rank's own file would nest it (`{step:
    {group: {op@group: value}}}`): the rank keys of cluster_communication.json, or
    (`by_source`) the source rank of each `src-dst` link of the matrix. {} without the file."""
    if not path.is_file():
        return {}
    try:
        data = load_json(path)
    except UnreadableInput as exc:
        warn(path.name, exc.problem, unread=True)
        return {}
    out: dict[int, dict[str, Any]] = {}
    if not isinstance(data, dict):
        warn(path.name, "not a JSON object of communication groups", unread=True)
        return out
    for group, per_step in data.items():
        for step, ops in (per_step if isinstance(per_step, dict) else {}).items():
            for op, entries in (ops if isinstance(ops, dict) else {}).items():
                for key, value in (entries if isinstance(entries, dict) else {}).items():
                    owner = str(key).partition("-")[0] if by_source else str(key)
                    if not owner.isdigit():
                        continue
                    ops_of_rank = out.setdefault(int(owner), {}).setdefault(step, {})
                    in_group = ops_of_rank.setdefault(str(group), {})
                    if by_source:
                        in_group.setdefault(op, {})[key] = value
                    else:
                        in_group[op] = value
    if out:
        files.append(path.name)
    return out


def _metadata(rank: int, world_size: int, stage: int | None) -> pd.DataFrame | None:
    """The rank's `metadata`: its rank, the run's size, its pipeline stage where known."""
    rows = MetadataRows()
    rows.add("distributed.rank", rank, STEP_TRACE)
    rows.add("distributed.world_size", world_size, STEP_TRACE)
    if stage is not None:
        rows.add("distributed.pp_stage", stage, STEP_TRACE)
    return rows.frame()
