"""The profiler database of a rank folder, read as the text files would be.

torch_npu and MindSpore with `export_type=db` (Text writes it too, in newer versions) put
`ascend_pytorch_profiler_{rank}.db` / `ascend_mindspore_profiler_{rank}.db` in
ASCEND_PROFILER_OUTPUT, and `analysis.db` (MindSpore: `communication_analyzer.db`) beside it.
Their tables give what the text files give:

- STEP_TIME(id, startNs, endNs): the ProfilerStep#N windows of trace_view.json; analysis.db's
  StepTraceTime (µs, step_trace_time.csv's columns): the breakdown of each step;
- TASK + COMPUTE_TASK_INFO + TASK_PMU_INFO, COMMUNICATION_OP: kernel_details.csv's rows; a
  task's connectionId, through CONNECTION_IDS to a PYTORCH_API op, is the torch_to_npu flow
  that gives launch_us / launch_thread;
- PYTORCH_API (framework ops, task queue, Python frames; its type from ENUM_API_TYPE) and
  CANN_API: trace_view.json's Python and CANN processes;
- MEMORY_RECORD: memory_record.csv; OP_MEMORY: operator_memory.csv; CommAnalyzerTime /
  CommAnalyzerBandwidth / CommAnalyzerMatrix: communication.json and
  communication_matrix.json, in the same units, so the JSON readers read them;
  COMMUNICATION_OP stands in for communication.json when analysis.db has no communication
  (as the trace's HCCL process does for the text files); COMMUNICATION_TASK_INFO, the HCCL
  tasks of each collective, gives what the trace's HCCL tasks give: the byte alignment of its
  SDMA copies (level 1 and above);
- RANK_DEVICE_MAP and META_DATA: the rank, device and environment.

Column facts: torch_npu's `TableColumnsManager` and the Ascend/msprof database reference (see
tests/fixtures/ascend_db/README.md). Every read goes through advisor.formats.cann_db and
cann_db_comm.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import UnreadableInput
from advisor.formats.aicore_freq import freq_until_tasks_end
from advisor.formats.cann_comm import comm_as_device_ops
from advisor.formats.cann_db import (
    CannDb,
    aicore_freq_samples,
    cann_api_calls,
    compute_tasks,
    integers,
    ns_times,
    thread_ids,
)
from advisor.formats.cann_db_comm import TASK_FIGURES, communication_ops
from advisor.formats.cann_tasks import collective, with_wait
from advisor.formats.comm_groups import ParallelGroup
from advisor.formats.decimal_clock import Clock
from advisor.formats.interning import expand
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module
from advisor.model import ProfileMeta

from .communication import (
    SDMA_PARTS,
    parse_communication,
    parse_communication_matrix,
    with_trace_tasks,
)
from .kinds import cann_kind, framework_kind
from .layout import PROFILER_DB
from .memory import one_component
from .meta import apply_metadata, non_negative_int, versions
from .operator_memory import op_memory_table
from .steps import fill_breakdown, steps_from_table
from .trace_view import STEP_NAME

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

ANALYSIS_DBS = ("analysis.db", "communication_analyzer.db")
_API_CATEGORIES = {"op": "cpu_op", "queue": "enqueue", "trace": "python_function", "mstx": "mstx"}
"""ENUM_API_TYPE names of PYTORCH_API rows and the trace category of the same events, which
decides their host_ops.kind."""
STEP_TRACE_DB_COLUMNS = {
    "computing": "computing_us",
    "communication": "communication_us",
    "communication_not_overlapped": "comm_not_overlapped_us",
    "free": "free_us",
    "bubble": "bubble_us",
    "preparing": "preparing_us",
}
"""StepTraceTime's columns (analysis.db; ClusterStepTraceTime's too) of step_trace_time.csv's
figures."""
_DIMS = re.compile(r"^[\d,;\s\[\]-]*$")
_TIME_INFO = {
    "start_timestamp": "Start Timestamp(us)",
    "elapse_time": "Elapse Time(ms)",
    "transit_time": "Transit Time(ms)",
    "wait_time": "Wait Time(ms)",
}
BANDWIDTH_DB_COLUMNS = {
    "transit_size": "Transit Size(MB)",
    "transit_time": "Transit Time(ms)",
    "bandwidth": "Bandwidth(GB/s)",
}
"""The bandwidth tables' columns (analysis.db's CommAnalyzerBandwidth, cluster_analysis.db's
ClusterCommunicationBandwidth) of communication.json's per-transport figures."""
MATRIX_DB_COLUMNS = {
    "transport_type": "Transport Type",
    "transit_size": "Transit Size(MB)",
    "transit_time": "Transit Time(ms)",
    "bandwidth": "Bandwidth(GB/s)",
    "op_name": "Op Name",
}
"""The matrix tables' columns (CommAnalyzerMatrix, ClusterCommunicationMatrix) of
communication_matrix.json's per-link figures."""


def profiler_databases(output: Path, rank: int | None) -> tuple[Path | None, Path | None]:
    """(the rank's profiler database, its analysis database) in ASCEND_PROFILER_OUTPUT; the
    profiler database of another rank only when the folder holds no other."""
    ranks = {
        p: m.group(1)
        for p in sorted(output.glob("ascend_*_profiler*.db"))
        if (m := PROFILER_DB.match(p.name)) and p.is_file()
    }
    own = [p for p, r in ranks.items() if r == str(rank)]
    main = next(iter(own or ranks), None)
    analysis = next((p for p in (output / n for n in ANALYSIS_DBS) if p.is_file()), None)
    return main, analysis


@dataclass
class DbTables:
    """What the databases gave (times on the profile clock), before steps are assigned."""

    steps: pd.DataFrame | None = None
    device_ops: pd.DataFrame | None = None
    host_ops: list[pd.DataFrame] = field(default_factory=list)
    comm_ops: pd.DataFrame | None = None
    memory: pd.DataFrame | None = None
    op_allocations: pd.DataFrame | None = None
    aicore_freq: pd.DataFrame | None = None
    parallel_groups: dict[str, ParallelGroup] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def read_databases(
    main: Path,
    analysis: Path | None,
    clock: Clock,
    meta: ProfileMeta,
    rel: Callable[[Path], str],
    warn: WarnFn,
) -> DbTables:
    """The tables of a rank's databases; a database that cannot be opened is one warning, and
    without the profiler database nothing is read (the text files are, then)."""
    out = DbTables()
    try:
        with CannDb(main, rel(main), warn) as db:
            _read_main(db, clock, meta, out)
    except UnreadableInput as exc:
        warn(rel(main), exc.problem, unread=True)
        return out
    out.files.append(main)
    step_table = comm = links = None
    if analysis is not None:
        try:
            with CannDb(analysis, rel(analysis), warn) as db:
                step_table = _step_trace(db)
                comm, links, totals = _communication(db, clock)
                if totals:
                    meta.extra["comm_bandwidth"] = totals
                if step_table is not None or comm is not None or links is not None or totals:
                    out.files.append(analysis)
        except UnreadableInput as exc:
            warn(rel(analysis), exc.problem, unread=True)
    if step_table is not None and not step_table.empty:
        out.steps = (
            fill_breakdown(out.steps, step_table)
            if out.steps is not None
            else steps_from_table(step_table, None)
        )
    if comm is not None and out.comm_ops is not None:
        # what only the HCCL tasks give (byte alignment, peers), by op name as for the text files
        comm = with_trace_tasks(comm, out.comm_ops)
    parts = [p for p in (comm, links) if p is not None]
    if comm is None and out.comm_ops is not None:
        parts.insert(0, out.comm_ops)
    out.comm_ops = pd.concat(parts, ignore_index=True) if parts else None
    return out


def _read_main(db: CannDb, clock: Clock, meta: ProfileMeta, out: DbTables) -> None:
    out.parallel_groups = _read_meta(db, meta)
    types = db.enum("ENUM_API_TYPE")
    out.steps = _steps(db, clock)
    framework, launches = _framework_ops(db, clock, types)
    if framework is not None:
        out.host_ops.append(framework)
    calls = cann_api_calls(db, clock)
    if calls is not None:
        kinds = {api: cann_kind(api) for api in calls["name"].dropna().unique()}
        out.host_ops.append(
            calls.drop(columns="connection_id", errors="ignore").assign(
                kind=calls["name"].map(kinds).fillna("cann_api")
            )
        )
    tasks = compute_tasks(db, clock)
    comm = communication_ops(db, clock)
    if comm is not None:
        out.comm_ops = pd.DataFrame(
            {
                "name": comm["name"],
                "kind": "op",
                "op": comm["name"].map(collective, na_action="ignore"),
                "group": comm["group"],
                "start_us": comm["start_us"],
                "duration_us": comm["duration_us"],
                **{c: comm[c] for c in TASK_FIGURES if c in comm},
            }
        )
    parts = [p for p in (tasks, _comm_rows(comm)) if p is not None]
    if parts:
        ops = pd.concat(parts, ignore_index=True)
        if meta.device_id is None and "device" in ops and ops["device"].notna().any():
            meta.device_id = str(int(ops["device"].dropna().iloc[0]))
        out.device_ops = with_wait(_with_launches(ops, launches)).drop(columns="device")
    out.memory = _memory(db, clock)
    out.op_allocations = op_memory_table(db, clock)
    out.aicore_freq = freq_until_tasks_end(aicore_freq_samples(db, clock), out.device_ops)


def _comm_rows(comm: pd.DataFrame | None) -> pd.DataFrame | None:
    """Collectives as device_ops rows, as kernel_details lists them."""
    if comm is None:
        return None
    rows = comm_as_device_ops(comm)
    return rows.assign(
        op_type=comm["op_type"].fillna(rows["op_type"]),
        device=comm["device"],
        connection_id=comm["connection_id"],
    )


def _read_meta(db: CannDb, meta: ProfileMeta) -> dict[str, ParallelGroup]:
    """Rank and device (RANK_DEVICE_MAP), versions and environment (META_DATA); returns the
    communication groups META_DATA describes."""
    if db.has("RANK_DEVICE_MAP", "rankId", "deviceId"):
        rows = db.rows("SELECT rankId, deviceId FROM RANK_DEVICE_MAP", what="RANK_DEVICE_MAP")
        if rows:
            rank, device = non_negative_int(rows[0][0]), non_negative_int(rows[0][1])
            meta.rank = rank if meta.rank is None else meta.rank
            meta.device_id = str(device) if device is not None else meta.device_id
    if db.has("META_DATA", "name", "value"):
        data: dict[str, Any] = {
            str(n): v
            for n, v in db.rows("SELECT name, value FROM META_DATA", what="META_DATA") or []
        }
        parsed = _json_values(data, ("ENV_VARIABLES", "distributed_args", "parallel_group_info"))
        env = parsed.pop("ENV_VARIABLES", None)
        data.pop("ENV_VARIABLES", None)
        if env is not None and "env" not in meta.extra:
            meta.extra["env"] = {str(k): "" if v is None else str(v) for k, v in env.items()}
        if "SCHEMA_VERSION" in data:
            meta.versions.setdefault("db_schema", str(data["SCHEMA_VERSION"]))
        others = {k: v for k, v in data.items() if not k.startswith("SCHEMA_VERSION")}
        for name, version in versions(others).items():
            meta.versions.setdefault(name, version)
        # world size, rank and groups, as profiler_metadata.json gives them
        return apply_metadata(meta, parsed)
    return {}


def _json_values(data: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The META_DATA values of `names` that hold a JSON object, parsed (torch_npu stores
    profiler_metadata.json's entries as JSON text there)."""
    parsed = {}
    for name in names:
        try:
            value = json.loads(data[name]) if isinstance(data.get(name), str) else None
        except ValueError:
            value = None
        if isinstance(value, dict):
            parsed[name] = value
    return parsed


def _steps(db: CannDb, clock: Clock) -> pd.DataFrame | None:
    if not db.has("STEP_TIME", "id", "startNs", "endNs"):
        return None
    rows = db.frame("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY startNs", what="STEP_TIME")
    if rows is None or rows.empty:
        return None
    start, end = ns_times(clock, rows["startNs"]), ns_times(clock, rows["endNs"])
    steps = pd.DataFrame(
        {
            "step": pd.to_numeric(rows["id"], errors="coerce"),
            "start_us": start,
            "end_us": end,
            "duration_us": end - start,
        }
    )
    return steps.dropna(subset=["step"]).drop_duplicates("step").reset_index(drop=True)


def _step_number(value: Any) -> float:
    """`50` or `step50` (StepTraceTime and CommAnalyzer* write either) -> 50."""
    match = re.search(r"\d+", str(value)) if value is not None else None
    return float(match.group()) if match else np.nan


def _step_trace(db: CannDb) -> pd.DataFrame | None:
    """analysis.db's StepTraceTime as read_step_trace_time reads step_trace_time.csv."""
    present = [c for c in STEP_TRACE_DB_COLUMNS if c in db.columns("StepTraceTime")]
    if not present or not db.has("StepTraceTime", "step"):
        return None
    rows = db.frame(
        f"SELECT step, {', '.join(present)} FROM {db.table('StepTraceTime')}",
        what="StepTraceTime",
    )
    if rows is None or rows.empty:
        return None
    table = pd.DataFrame({"step": rows["step"].map(_step_number).astype(float)})
    for column in present:
        table[STEP_TRACE_DB_COLUMNS[column]] = pd.to_numeric(rows[column], errors="coerce")
    return table


def _framework_ops(
    db: CannDb, clock: Clock, types: dict[int, str]
) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """(host_ops of PYTORCH_API without its ProfilerStep#N rows, which are the steps; the
    launching op of each connection id: launch_us, launch_thread)."""
    if not db.has("PYTORCH_API", "startNs", "endNs", "name"):
        return None, None
    columns = db.columns("PYTORCH_API")
    wanted = ("type", "globalTid", "inputShapes", "inputDtypes", "callchainId")
    extra = [c for c in wanted if c in columns]
    rows = db.frame(
        "SELECT CAST(startNs AS INTEGER) AS start_ns, "
        "CAST(endNs AS INTEGER) - CAST(startNs AS INTEGER) AS duration_ns, name"
        + "".join(f", {c}" for c in extra)
        + f" FROM {db.table('PYTORCH_API')}",
        what="PYTORCH_API",
    )
    if rows is None or rows.empty:
        return None, _launches(db, clock, types)
    names = db.strings(rows["name"])
    category = (
        rows["type"].map(types).map(_API_CATEGORIES).fillna("")
        if "type" in rows
        else pd.Series("cpu_op", index=rows.index)
    )
    codes, pairs = pd.factorize(pd.MultiIndex.from_arrays([names.fillna(""), category]))
    host = pd.DataFrame(
        {
            "name": names,
            "kind": expand(codes, [framework_kind(n, c) for n, c in pairs]),
            "start_us": ns_times(clock, rows["start_ns"]),
            "duration_us": pd.to_numeric(rows["duration_ns"], errors="coerce") / 1000,
        }
    )
    if "globalTid" in rows:
        host["thread"] = thread_ids(rows["globalTid"])
    dims = _dims_column(db, rows)
    if dims is not None:
        host["input_shapes"] = dims.mask(dims == "").where(host["kind"] == "aten")
    if "callchainId" in rows:
        stacks = _call_stacks(db)
        if stacks:
            chain = integers(rows["callchainId"])
            host["call_stack"] = pd.array(chain.map(stacks, na_action="ignore"), dtype="string")
    is_step = names.fillna("").str.match(STEP_NAME.pattern).to_numpy(dtype=bool)
    return host[~is_step].reset_index(drop=True), _launches(db, clock, types)


def _call_stacks(db: CannDb) -> dict[int, str]:
    """The Python stack of each callchainId (with_stack=True): PYTORCH_CALLCHAINS has one row
    per frame (id, stack: its STRING_IDS id, stackDepth: its place in the stack, 0 the
    innermost, as torch_npu splits the `Call stack` text of trace_view.json), joined here one
    frame per line."""
    if not db.has("PYTORCH_CALLCHAINS", "id", "stack", "stackDepth"):
        return {}
    rows = db.frame(
        f"SELECT id, stack, stackDepth FROM {db.table('PYTORCH_CALLCHAINS')}",
        what="PYTORCH_CALLCHAINS",
    )
    if rows is None or rows.empty:
        return {}
    frames = pd.DataFrame(
        {
            "id": integers(rows["id"]),
            "depth": integers(rows["stackDepth"]),
            "frame": db.strings(rows["stack"]),
        }
    ).dropna()
    frames = frames.sort_values(["id", "depth"], kind="stable")
    joined = frames.groupby("id", sort=False)["frame"].agg("\n".join)
    return {int(k): str(v) for k, v in joined.items()}


def _dims_column(db: CannDb, rows: pd.DataFrame) -> pd.Series | None:
    """The `Input Dims` of each op. torch_npu versions wrote them to inputShapes or, with the
    types, swapped into inputDtypes: the column whose values look like dimensions is it."""
    best, best_share = None, -1.0
    for column in ("inputShapes", "inputDtypes"):
        if column not in rows or rows[column].isna().all():
            continue
        values = db.strings(rows[column])
        written = values.dropna()
        share = written.str.match(_DIMS.pattern).mean() if len(written) else 0.0
        if share > best_share:
            best, best_share = values, share
    return best


def _launches(db: CannDb, clock: Clock, types: dict[int, str]) -> pd.DataFrame | None:
    """The framework op (PYTORCH_API of type op) each CANN connection id belongs to: its start
    and thread are the launch of the device tasks with that connectionId."""
    op = next((i for i, name in types.items() if name == "op"), None)
    if op is None or not (
        db.has("CONNECTION_IDS", "id", "connectionId")
        and db.has("PYTORCH_API", "startNs", "connectionId", "type", "globalTid")
    ):
        return None
    rows = db.frame(
        "SELECT c.connectionId AS connection_id, MIN(CAST(p.startNs AS INTEGER)) AS start_ns, "
        f"p.globalTid AS tid FROM {db.table('CONNECTION_IDS')} c "
        f"JOIN {db.table('PYTORCH_API')} p ON p.connectionId = c.id WHERE p.type = ? "
        "GROUP BY c.connectionId",
        (op,),
        what="the launches (CONNECTION_IDS, PYTORCH_API)",
    )
    if rows is None or rows.empty:
        return None
    return pd.DataFrame(
        {
            "connection_id": pd.to_numeric(rows["connection_id"], errors="coerce"),
            "launch_us": ns_times(clock, rows["start_ns"]),
            "launch_thread": thread_ids(rows["tid"]),
        }
    )


def _with_launches(ops: pd.DataFrame, launches: pd.DataFrame | None) -> pd.DataFrame:
    """Device tasks with the launch of their connection id; the id itself dropped."""
    if launches is None or "connection_id" not in ops:
        return ops.drop(columns="connection_id", errors="ignore")
    found = ops[["connection_id"]].merge(
        launches.drop_duplicates("connection_id"), how="left", on="connection_id"
    )
    return ops.drop(columns="connection_id").assign(
        launch_us=found["launch_us"].to_numpy(float),
        launch_thread=found["launch_thread"].to_numpy(float),
    )


def _memory(db: CannDb, clock: Clock) -> pd.DataFrame | None:
    """MEMORY_RECORD (bytes, ns) as memory_record.csv gives it."""
    columns = db.columns("MEMORY_RECORD")
    if "timestamp" not in columns or not {"totalAllocated", "totalReserved"} & columns:
        return None
    picked = [
        c for c in ("component", "totalAllocated", "totalReserved", "deviceId") if c in columns
    ]
    rows = db.frame(
        f"SELECT timestamp, {', '.join(picked)} FROM {db.table('MEMORY_RECORD')} "
        "ORDER BY timestamp",
        what="MEMORY_RECORD",
    )
    if rows is None or rows.empty:
        return None
    frame = pd.DataFrame({"time_us": ns_times(clock, rows["timestamp"])})
    for source, column in (
        ("totalAllocated", "allocated_bytes"),
        ("totalReserved", "reserved_bytes"),
    ):
        if source in rows:
            frame[column] = pd.to_numeric(rows[source], errors="coerce").astype(float)
    if "deviceId" in rows:
        device = pd.to_numeric(rows["deviceId"], errors="coerce").astype("Int64")
        frame["device"] = ("NPU:" + device.astype("string")).astype("string")
    component = db.strings(rows["component"]) if "component" in rows else None
    return one_component(frame, component)


def _communication(
    db: CannDb, clock: Clock
) -> tuple[pd.DataFrame | None, pd.DataFrame | None, dict[str, dict[str, float]]]:
    """(comm_ops, link rows, bandwidth totals) of CommAnalyzerTime, CommAnalyzerBandwidth and
    CommAnalyzerMatrix, rebuilt as communication.json / communication_matrix.json nest them
    (`{step: {type: {op@group: ...}}}`, same units) and read by the same parsers."""
    comm: pd.DataFrame | None = None
    totals: dict[str, dict[str, float]] = {}
    time = _rows(db, "CommAnalyzerTime", ("hccl_op_name", *_TIME_INFO))
    if time is not None:
        data: dict[str, Any] = {}
        for row in time:
            block = _block(data, row)
            block["Communication Time Info"] = {v: row.get(k) for k, v in _TIME_INFO.items()}
        bandwidth = _rows(db, "CommAnalyzerBandwidth", ("hccl_op_name", "transport_type"))
        for row in bandwidth or []:
            per_transport = _block(data, row).setdefault("Communication Bandwidth Info", {})
            per_transport.setdefault(
                str(row["transport_type"]), {v: row.get(k) for k, v in BANDWIDTH_DB_COLUMNS.items()}
            )
        _add_unused_transports(data)
        _add_totals(data)
        comm, totals = parse_communication(data, clock)
    links = None
    matrix = _rows(db, "CommAnalyzerMatrix", ("hccl_op_name", "src_rank", "dst_rank"))
    if matrix is not None:
        data = {}
        for row in matrix:
            link = f"{row['src_rank']}-{row['dst_rank']}"
            _block(data, row)[link] = {v: row.get(k) for k, v in MATRIX_DB_COLUMNS.items()}
        links = parse_communication_matrix(data)
    return comm, links, totals


def _add_unused_transports(data: dict[str, Any]) -> None:
    """RDMA (and SDMA, where neither it nor its parts are there) at zero for each op with
    bandwidth rows: communication.json lists every transport, zeros included, while the
    database leaves out what moved nothing (MindStudio Insight's published level1 databases
    have only HCCS and SDMA rows), which made the RDMA rules ask for the text export."""
    zero = {"Transit Size(MB)": 0.0, "Transit Time(ms)": 0.0, "Bandwidth(GB/s)": 0.0}
    for per_step in data.values():
        for ops in per_step.values():
            for block in ops.values():
                transports = block.get("Communication Bandwidth Info")
                if not transports:
                    continue
                upper = {str(t).upper() for t in transports}
                if "RDMA" not in upper:
                    transports["RDMA"] = dict(zero)
                if "SDMA" not in upper and not upper & set(SDMA_PARTS):
                    transports["SDMA"] = dict(zero)


def _add_totals(data: dict[str, Any]) -> None:
    """communication.json's `Total Op Info` of each step and type where the database has none:
    each transport's transit size and time summed over the ops, as torch_npu sums them."""
    for per_step in data.values():
        for ops in per_step.values():
            if any(key.startswith("Total Op Info") for key in ops):
                continue
            total: dict[str, dict[str, float]] = {}
            for block in list(ops.values()):
                for transport, info in block.get("Communication Bandwidth Info", {}).items():
                    sums = total.setdefault(
                        transport, {"Transit Size(MB)": 0.0, "Transit Time(ms)": 0.0}
                    )
                    for key in sums:
                        value = pd.to_numeric(info.get(key), errors="coerce")
                        sums[key] += 0.0 if pd.isna(value) else float(value)
            if total:
                ops["Total Op Info"] = {"Communication Bandwidth Info": total}


def _rows(db: CannDb, table: str, required: tuple[str, ...]) -> list[dict[str, Any]] | None:
    if not db.has(table, *required):
        return None
    frame = db.frame(f"SELECT * FROM {db.table(table)}", what=table)
    if frame is None or frame.empty:
        return None
    return [
        {str(k): v for k, v in row.items()}
        for row in frame.astype(object).where(frame.notna(), None).to_dict("records")
    ]


def _block(data: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The `op@group` entry of a row in `{step: {type: {...}}}`."""
    key = str(row["hccl_op_name"])
    if row.get("group_name") not in (None, ""):
        key = f"{key}@{row['group_name']}"
    per_step = data.setdefault(str(row.get("step") or ""), {})
    block: dict[str, Any] = per_step.setdefault(str(row.get("type") or ""), {}).setdefault(key, {})
    return block
