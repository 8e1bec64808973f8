"""msprof-analyze's cluster output, `cluster_analysis_output/`, read as one profile per rank.

`msprof-analyze cluster -d PROFILING_PATH` summarises the rank folders of a run into:

- `cluster_step_trace_time.csv`: each rank's step_trace_time.csv rows, prefixed by `Step`,
  `Type` (`rank`, or `stage` for a pipeline stage: the maximum over its ranks) and `Index`
  (the rank, or the stage's ranks as a tuple `"(0, 1, 2, 3)"`); optional `DP Index`,
  `PP Index`, `TP Index` columns;
- `cluster_communication.json`: `{group: {step: {op@group: {rank: block}}}}`, each block one
  rank's communication.json entry (`Communication Time Info`, `Communication Bandwidth
  Info`), `Total Op Info` included;
- `cluster_communication_matrix.json`: `{group: {step: {op@group: {"src-dst": link}}}}`;
- or, with `--export_type db` (msprof-analyze 26's default), `cluster_analysis.db` with the
  same figures in tables: `ClusterStepTraceTime` (lowercase columns: `computing`,
  `communication_not_overlapped`, `pp_index` ...), `ClusterCommunicationTime` and
  `ClusterCommunicationBandwidth` (one row per rank, op and transport, one per package size),
  `ClusterCommunicationMatrix` (one row per link; `src_rank`, `dst_rank`), named
  `ClusterCommAnalyzerTime`, `...Bandwidth`, `...Matrix` without data simplification; with
  `--export_type text` over ranks profiled into databases, the database holds the steps only
  and the three tables are CSVs in the recipes' folders (`CommunicationTimeSum/`,
  `CommMatrixSum/`). They are read back into the text files' shapes, so every export of a run
  gives the same profiles.

Each rank becomes the profile its folder would give from step_trace_time.csv and
communication*.json alone: `steps` (step time = Computing + Communication(Not Overlapped) +
Free, which is Stage + Bubble), `comm_ops` (ops and the links it sends on) and `metadata`
(rank, world size, pipeline stage), so the per-rank rules and the cross-rank cluster are
those of the rank folders. Where those folders lie beside the output, they are read instead
(they hold everything the output summarises), and the output is not claimed. The folder is
known by its CSV or its database, whatever its name; the CSV wins where both are there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import UnreadableInput
from advisor.formats.cann_csv import SummaryCsv, open_csv
from advisor.formats.cann_db import CannDb
from advisor.formats.decimal_clock import Clock
from advisor.formats.files import load_json
from advisor.formats.metadata import MetadataRows
from advisor.formats.warn import HeldWarnings
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta, conform

from .communication import parse_communication, parse_communication_matrix
from .db import BANDWIDTH_DB_COLUMNS, MATRIX_DB_COLUMNS, STEP_TRACE_DB_COLUMNS
from .layout import DATABASE, STEP_TRACE
from .steps import STEP_TRACE_COLUMNS, steps_from_table

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

READER = "msprof_analyze_cluster"
COMMUNICATION = "cluster_communication.json"
MATRIX = "cluster_communication_matrix.json"
FRAMEWORK = "CANN"
"""The output does not say which framework ran (PyTorch or MindSpore): CANN, as msprof's."""
_RANKS = re.compile(r"\d+")


def read_cluster_output(folder: Path) -> list[Profile]:
    """One profile per rank of cluster_step_trace_time.csv (else of cluster_analysis.db's
    ClusterStepTraceTime); the problems of the shared files are told on every rank. Raises
    UnreadableInput when the file gives no rank."""
    if not (folder / STEP_TRACE).is_file() and (folder / DATABASE).is_file():
        return _read_database(folder)
    problems = HeldWarnings()
    csv = open_csv(folder / STEP_TRACE, STEP_TRACE, problems, ("Type", "Index", "Computing"))
    if csv is None:
        problem = problems.held[0][1] if problems.held else "unreadable"
        raise UnreadableInput(folder / STEP_TRACE, problem)
    files = [STEP_TRACE]
    comm = _per_rank(folder / COMMUNICATION, problems, files)
    links = _per_rank(folder / MATRIX, problems, files, by_source=True)
    return _profiles(folder, STEP_TRACE, _csv_rows(csv), comm, links, files, problems)


def _read_database(folder: Path) -> list[Profile]:
    """The profiles of cluster_analysis.db, its tables read into the text files' shapes."""
    problems = HeldWarnings()
    path = folder / DATABASE
    with CannDb(path, DATABASE, problems) as db:
        if not db.has("ClusterStepTraceTime", "type", "index", "computing"):
            raise UnreadableInput(path, "no ClusterStepTraceTime table (msprof-analyze cluster)")
        table = db.frame(
            f'SELECT * FROM "{db.table("ClusterStepTraceTime")}"', what="ClusterStepTraceTime"
        )
        if table is None:  # db.frame told why
            raise UnreadableInput(path, problems.held[-1][1] if problems.held else "unreadable")
        files = [DATABASE]
        tables = {name: _table(db, folder, name, problems, files) for name in _RECIPE_FILES}
    comm = _database_communication(
        tables["ClusterCommunicationTime"], tables["ClusterCommunicationBandwidth"]
    )
    links = _database_matrix(tables["ClusterCommunicationMatrix"])
    return _profiles(folder, DATABASE, _database_rows(table), comm, links, files, problems)


_RECIPE_FILES = {
    "ClusterCommunicationTime": "CommunicationTimeSum/cluster_communication_time.csv",
    "ClusterCommunicationBandwidth": "CommunicationTimeSum/cluster_communication_bandwidth.csv",
    "ClusterCommunicationMatrix": "CommMatrixSum/cluster_communication_matrix.csv",
}
"""Where msprof-analyze 26 writes a table that is not in cluster_analysis.db: with
`--export_type text` over ranks profiled into databases, the database holds the steps only and
each recipe writes its table, same columns, to a CSV in its own folder."""
_EARLIER_NAMES = {
    "ClusterCommunicationTime": "ClusterCommAnalyzerTime",
    "ClusterCommunicationBandwidth": "ClusterCommAnalyzerBandwidth",
    "ClusterCommunicationMatrix": "ClusterCommAnalyzerMatrix",
}
"""The same tables as msprof-analyze writes them without its data simplification (its
earlier versions' names, a `rank_set` column more)."""
_TEXT_COLUMNS = ("step", "hccl_op_name", "group_name", "band_type", "transport_type", "op_name")
"""Those CSVs' columns of names (group names are 64-bit hashes: never read as numbers)."""


def _table(
    db: CannDb, folder: Path, name: str, warn: HeldWarnings, files: list[str]
) -> pd.DataFrame | None:
    """A communication table of the database (by either name), else of its recipe's CSV;
    None without it."""
    for spelled in (db.table(name), db.table(_EARLIER_NAMES[name])):
        if spelled is not None:
            return db.frame(f'SELECT * FROM "{spelled}"', what=spelled)
    rel = _RECIPE_FILES[name]
    if not (folder / rel).is_file():
        return None
    csv = open_csv(folder / rel, rel, warn, ("step", "hccl_op_name", "group_name"))
    if csv is None:
        return None
    files.append(rel)
    return pd.DataFrame(
        {
            column: csv.text(column) if column in _TEXT_COLUMNS else csv.number(column)
            for column in csv.df.columns
        }
    )


def _profiles(
    folder: Path,
    source: str,
    rows: pd.DataFrame,
    comm: dict[int, dict[str, Any]],
    links: dict[int, dict[str, Any]],
    files: list[str],
    problems: HeldWarnings,
) -> list[Profile]:
    """One profile per rank of `rows` (as _csv_rows gives them), with its collectives and
    links."""
    steps = _rank_steps(rows)
    if not steps:
        raise UnreadableInput(folder / source, "no `rank` row (Type column)")
    stages = _stages(rows)
    clock = Clock()
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
        metadata = _metadata(rank, len(steps), stages.get(rank), source)
        if metadata is not None:
            profile.tables["metadata"] = metadata
        profiles.append(profile)
    return profiles


def _warn_on(profile: Profile) -> Any:
    """A WarnFn telling `profile`, as this reader."""

    def warn(file: str | Path, problem: str, **where: Any) -> None:
        profile.warn(file, problem, reader=READER, **where)

    return warn


def _csv_rows(csv: SummaryCsv) -> pd.DataFrame:
    """cluster_step_trace_time.csv as step rows: `step`, `type` (lowercase), `index` (text),
    `pp_index` where written, and the breakdown columns it has (step_trace_time.csv's)."""
    return pd.DataFrame(
        {
            "step": csv.number("Step") if csv.has("Step") else 1.0,
            "type": csv.text("Type").fillna("").str.lower(),
            "index": csv.text("Index").fillna(""),
        }
        | ({"pp_index": csv.number("PP Index")} if csv.has("PP Index") else {})
        | {
            column: csv.number(written)
            for written, column in STEP_TRACE_COLUMNS.items()
            if csv.has(written)
        }
    )


def _database_rows(table: pd.DataFrame) -> pd.DataFrame:
    """ClusterStepTraceTime as step rows (as _csv_rows)."""

    def number(column: str) -> pd.Series:
        return pd.to_numeric(table[column], errors="coerce").astype("float64")

    rows = {
        "step": number("step") if "step" in table else 1.0,
        "type": table["type"].astype("string").fillna("").str.lower(),
        "index": table["index"].astype("string").fillna(""),
    }
    if "pp_index" in table:
        rows["pp_index"] = number("pp_index")
    rows |= {
        ours: number(theirs) for theirs, ours in STEP_TRACE_DB_COLUMNS.items() if theirs in table
    }
    return pd.DataFrame(rows)


def _rank_steps(rows: pd.DataFrame) -> dict[int, pd.DataFrame]:
    """Each rank's rows, with the breakdown columns the file has (step_trace_time.csv's)."""
    rank = pd.to_numeric(rows["index"], errors="coerce")
    kept = (rows["type"] == "rank").to_numpy(dtype=bool) & rank.notna().to_numpy()
    figures = [c for c in rows if c not in ("type", "index", "pp_index")]
    ranked = rows[figures].assign(rank=rank)[kept]
    return {
        int(r): group.drop(columns="rank").sort_values("step").reset_index(drop=True)
        for r, group in ranked.groupby("rank", sort=True)
    }


def _stages(rows: pd.DataFrame) -> dict[int, int]:
    """Each rank's pipeline stage: `PP Index` where written, else the `stage` rows' rank
    tuples, numbered in the order of their first rank; none with fewer than two stages."""
    kind, index = rows["type"], rows["index"]
    if "pp_index" in rows:
        pp = rows["pp_index"]
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


def _database_communication(
    times: pd.DataFrame | None, bandwidth: pd.DataFrame | None
) -> dict[int, dict[str, Any]]:
    """ClusterCommunicationTime and ClusterCommunicationBandwidth as each rank's
    communication.json (`{step: {group: {op@group: block}}}`); {} without the times."""
    if times is None or not {"rank_id", *_TIME_INFO} <= set(times):
        return {}
    if bandwidth is not None and not {"band_type", *BANDWIDTH_DB_COLUMNS} <= set(bandwidth):
        bandwidth = None
    out: dict[int, dict[str, Any]] = {}
    for row in times.to_dict("records"):
        _op_block(out, row)["Communication Time Info"] = {
            written: row.get(column) for column, written in _TIME_INFO.items()
        }
    for row in (bandwidth if bandwidth is not None else pd.DataFrame()).to_dict("records"):
        transports = _op_block(out, row).setdefault("Communication Bandwidth Info", {})
        # a row per package size, each with the transport's totals: the first one gives them
        transports.setdefault(
            str(row.get("band_type")),
            {written: row.get(column) for column, written in BANDWIDTH_DB_COLUMNS.items()},
        )
    for block in _blocks_of(out):  # the text export lists every transport, zeros where idle
        transports = block.setdefault("Communication Bandwidth Info", {})
        for idle in _TRANSPORTS:
            transports.setdefault(idle, dict.fromkeys(BANDWIDTH_DB_COLUMNS.values(), 0))
    return out


def _blocks_of(out: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every op block of every rank, step and group."""
    return [
        block
        for steps in out.values()
        for groups in steps.values()
        for ops in groups.values()
        for block in ops.values()
    ]


_TIME_INFO = {
    "start_timestamp": "Start Timestamp(us)",
    "elapsed_time": "Elapse Time(ms)",
    "transit_time": "Transit Time(ms)",
    "wait_time": "Wait Time(ms)",
}
"""ClusterCommunicationTime's columns of communication.json's Communication Time Info (the
rank's analysis.db spells the second `elapse_time`)."""
_TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
"""The transports cluster_communication.json lists for every op; the database keeps the rows
of those that moved data."""


def _op_block(out: dict[int, dict[str, Any]], row: dict[str, Any]) -> dict[str, Any]:
    """The rank's block of the row's op in `out`, made where new (a rank that is no number
    gets a block kept nowhere)."""
    rank, step, group = _integer(row.get("rank_id")), str(row.get("step")), row.get("group_name")
    if rank is None:
        return {}
    ops = out.setdefault(rank, {}).setdefault(step, {}).setdefault(str(group), {})
    return ops.setdefault(f"{row.get('hccl_op_name')}@{group}", {})


def _database_matrix(table: pd.DataFrame | None) -> dict[int, dict[str, Any]]:
    """ClusterCommunicationMatrix as each source rank's communication_matrix.json (`{step:
    {group: {op@group: {"src-dst": link}}}}`); {} without the table."""
    if table is None or not {"src_rank", "dst_rank", *MATRIX_DB_COLUMNS} <= set(table):
        return {}
    out: dict[int, dict[str, Any]] = {}
    for row in table.to_dict("records"):
        src, dst = _integer(row.get("src_rank")), _integer(row.get("dst_rank"))
        if src is None or dst is None:
            continue
        group = row.get("group_name")
        ops = out.setdefault(src, {}).setdefault(str(row.get("step")), {})
        op = ops.setdefault(str(group), {}).setdefault(f"{row.get('hccl_op_name')}@{group}", {})
        op[f"{src}-{dst}"] = {
            written: row.get(column) for column, written in MATRIX_DB_COLUMNS.items()
        }
    return out


def _integer(value: Any) -> int | None:
    """A rank written as a number (0, 2.0, "3"); None otherwise."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() else None


def _metadata(rank: int, world_size: int, stage: int | None, source: str) -> pd.DataFrame | None:
    """The rank's `metadata`: its rank, the run's size, its pipeline stage where known."""
    rows = MetadataRows()
    rows.add("distributed.rank", rank, source)
    rows.add("distributed.world_size", world_size, source)
    if stage is not None:
        rows.add("distributed.pp_stage", stage, source)
    return rows.frame()
