"""CANN's SQLite exports: `msprof --type=db`'s `msprof_{timestamp}.db` and the databases of the
torch_npu and MindSpore profilers (`ascend_{pytorch,mindspore}_profiler_{rank}.db`,
`analysis.db`).

Both hold CANN's tables, and every name in them is an id into `STRING_IDS(id, value)`; an API's
level is an id into `ENUM_API_TYPE(id, name)`; times are integer ns since the epoch (Ascend/msprof
`docs/en/user_guide/profile_data_file_references_db.md`). What both readers take from them is
here: a database opened without ever writing beside it, the compute tasks with their PMU
counters and the CANN API calls (the communication ops: advisor.formats.cann_db_comm).
Tables and columns differ between CANN and profiler versions (`blockDim` became `blockNum`,
`opState` and `waitNs` came later), so each query asks for the columns the file has: a
missing table is no table, a missing column no column, never an error.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from advisor.errors import UnreadableInput
from advisor.formats.cann_summaries import pmu_ratios, unquoted_shapes
from advisor.formats.cann_tasks import device_category
from advisor.formats.decimal_clock import Clock
from advisor.formats.interning import expand
from advisor.formats.numbers import MISSING_TOKENS
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

NS_PER_US = 1000
API_LEVELS = {
    "acl": "AscendCL",
    "model": "Model",
    "node": "Node",
    "runtime": "Runtime",
    "hccl": "Hccl",
    "communication": "Communication",
}
"""ENUM_API_TYPE names as the text exports write an API's level (`AscendCL@aclnnMm` in
trace_view.json, `AscendCL` in api_statistic)."""
BLOCK_COLUMNS = ("blockNum", "blockDim", "block_dim")
"""COMPUTE_TASK_INFO's block count, newest name first (CANN renamed it in January 2026)."""
_PMU_TIME = {"aic_total_time": "aicore_time(us)"}
"""TASK_PMU_INFO times (ns) and the op_summary column (µs) they are."""
_PMU_RATIOS = (
    "aic_vec_ratio",
    "aiv_vec_ratio",
    "aic_mac_ratio",
    "aic_scalar_ratio",
    "aiv_scalar_ratio",
    "aic_mte2_ratio",
    "aiv_mte2_ratio",
    "aic_mte1_ratio",
    "aiv_mte3_ratio",
    "aic_mte3_ratio",
    "aic_fixpipe_ratio",
)


class CannDb:
    """One SQLite file opened read-only; its queries report failures through `warn`.

    The URI sets `immutable=1`: SQLite then takes no lock and opens no journal or -shm file,
    so the input folder is never written to and a file another process holds locked, or a
    read-only file in a read-only folder, still reads. A write-ahead log beside the file (a
    profiler still writing) is not read, and named in a warning.
    """

    def __init__(self, path: Path, rel: str, warn: WarnFn) -> None:
        self.path, self.rel, self.warn = path, rel, warn
        uri = f"{path.resolve().as_uri()}?mode=ro&immutable=1"
        try:
            self.con = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise UnreadableInput(path, f"cannot open the database: {exc}") from None
        try:
            names = [r[0] for r in self.con.execute("SELECT name FROM sqlite_master")]
            self.con.execute("PRAGMA query_only = ON")
        except sqlite3.Error as exc:
            self.con.close()
            raise UnreadableInput(path, f"not a readable SQLite database ({exc})") from None
        if not names:
            self.con.close()
            raise UnreadableInput(path, "an empty database (no tables)")
        self.tables = {name.upper(): name for name in names}
        self._columns: dict[str, frozenset[str]] = {}
        self._strings: pd.Series | None = None
        wal = path.with_name(path.name + "-wal")
        if wal.is_file() and wal.stat().st_size:
            warn(rel, f"{wal.name} beside it is not read (was the profiler still writing?)")

    def __enter__(self) -> CannDb:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.con.close()

    def table(self, name: str) -> str | None:
        """The table's name as the file spells it; None when the file has no such table."""
        return self.tables.get(name.upper())

    def columns(self, table: str) -> frozenset[str]:
        """The columns of a table (none when it is absent or unreadable)."""
        name = self.table(table)
        if name is None:
            return frozenset()
        if name not in self._columns:
            rows = self.rows(f'PRAGMA table_info("{name}")', what=f"the columns of {name}")
            self._columns[name] = frozenset(str(r[1]) for r in rows or [])
        return self._columns[name]

    def has(self, table: str, *columns: str) -> bool:
        present = self.columns(table)
        return bool(present) and all(c in present for c in columns)

    def rows(
        self, sql: str, params: Sequence[Any] = (), *, what: str
    ) -> list[tuple[Any, ...]] | None:
        """All rows of a query; None (and one warning naming `what`) when SQLite fails, as on
        a corrupt page."""
        try:
            return self.con.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            self.warn(self.rel, f"cannot read {what}: {exc}")
            return None

    def frame(self, sql: str, params: Sequence[Any] = (), *, what: str) -> pd.DataFrame | None:
        """A query's rows as a DataFrame named by its columns; None when SQLite fails."""
        try:
            cursor = self.con.execute(sql, params)
            names = [d[0] for d in cursor.description]
            columns = list(zip(*cursor.fetchall())) or [()] * len(names)
        except sqlite3.Error as exc:
            self.warn(self.rel, f"cannot read {what}: {exc}")
            return None
        # column by column: numpy infers each column's type once, not per row
        return pd.DataFrame({name: np.array(c) for name, c in zip(names, columns)})

    def strings(self, ids: pd.Series) -> pd.Series:
        """The STRING_IDS values of ids (missing for an id the table lacks), looked up in one
        vectorised pass: STRING_IDS is read once, not joined once per name column."""
        if self._strings is None:
            rows = (
                self.rows("SELECT id, value FROM STRING_IDS", what="STRING_IDS") or []
                if self.has("STRING_IDS", "id", "value")
                else []
            )
            ids_ = integers(pd.Series([i for i, _ in rows], dtype=object))
            kept = ids_.notna().to_numpy(dtype=bool)
            self._strings = pd.Series(
                pd.array([None if v is None else str(v) for _, v in rows], dtype="string")[kept],
                index=pd.Index(ids_[kept].astype("int64")),
            )
        codes = pd.to_numeric(ids, errors="coerce").to_numpy("float64", na_value=np.nan)
        found = self._strings.index.get_indexer(pd.Index(codes))
        values = self._strings.array.take(found, allow_fill=True)
        return pd.Series(values, index=ids.index, dtype="string")

    def enum(self, table: str) -> dict[int, str]:
        """An ENUM_* table as {id: name} ({} when absent)."""
        if not self.has(table, "id", "name"):
            return {}
        rows = self.rows(f"SELECT id, name FROM {self.table(table)}", what=table) or []
        return {int(i): str(n) for i, n in rows if isinstance(i, int)}

    def string_id(self, value: str) -> int | None:
        """The STRING_IDS id of a value (None when absent)."""
        if not self.has("STRING_IDS", "id", "value"):
            return None
        rows = self.rows("SELECT id FROM STRING_IDS WHERE value = ?", (value,), what="STRING_IDS")
        return int(rows[0][0]) if rows else None


def integers(values: pd.Series) -> pd.Series:
    """Integer cells as Int64: text and floats as the nearest integer, anything else (or out of
    int64's range) missing. A column's type is what its writer put in each cell, not what the
    schema says (PYTORCH_API keeps its ns as text)."""
    if values.dtype.kind in "iu":
        return values.astype("Int64")
    try:  # integers with NULLs: exact, with no detour through float64
        return pd.Series(pd.array(values.to_numpy(object), dtype="Int64"), index=values.index)
    except (TypeError, ValueError, OverflowError):
        return pd.Series(
            pd.array([_integer(v) for v in values.tolist()], dtype="Int64"), index=values.index
        )


def _integer(value: Any) -> int | None:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            return None
    elif isinstance(value, float):
        value = round(value) if np.isfinite(value) else None
    return value if isinstance(value, int) and -(2**63) <= value < 2**63 else None


def ns_times(clock: Clock | None, ns: pd.Series) -> np.ndarray:
    """Epoch ns (integers, or integer text as PYTORCH_API writes them) as µs on the profile
    clock, every ns kept: the whole µs is exact in float64, the rest is added after the
    origin is subtracted. Without a clock, epoch µs as float64 (to 0.25 µs), as msprof's
    reader takes its CSV times before it rebases them."""
    values = integers(ns)
    whole = (values // NS_PER_US).to_numpy("float64", na_value=np.nan)
    frac = (values % NS_PER_US).to_numpy("float64", na_value=np.nan) / NS_PER_US
    return whole + frac if clock is None else clock.from_parts(whole, frac)


def aicore_freq_samples(
    db: CannDb, clock: Clock | None, device: int | None = None
) -> tuple[np.ndarray, np.ndarray] | None:
    """AICORE_FREQ (timestampNs, freq in MHz): the AI Core Freq counter of the timelines, as
    (µs on the profile clock, MHz); None without the table or rows. `device`: that device's
    samples only, when the table says whose they are (msprof's database holds every
    device's)."""
    if not db.has("AICORE_FREQ", "timestampNs", "freq"):
        return None
    where, params = "", ()
    if device is not None and db.has("AICORE_FREQ", "deviceId"):
        where, params = " WHERE deviceId = ?", (device,)
    rows = db.frame(
        f"SELECT timestampNs, freq FROM {db.table('AICORE_FREQ')}{where} ORDER BY timestampNs",
        params,
        what="AICORE_FREQ",
    )
    if rows is None or rows.empty:
        return None
    mhz = pd.to_numeric(rows["freq"], errors="coerce").to_numpy("float64", na_value=np.nan)
    return ns_times(clock, rows["timestampNs"]), mhz


def thread_ids(global_tid: pd.Series) -> np.ndarray:
    """The thread of a globalTid (high 32 bits: pid, low 32 bits: tid), as floats (NaN when
    missing)."""
    return (integers(global_tid) % (1 << 32)).to_numpy("float64", na_value=np.nan)


def string_columns(db: CannDb, frame: pd.DataFrame, names: Iterable[str]) -> None:
    """Name ids as their strings; `N/A` and the other missing-value tokens the text exports
    write (Level0 profiles have every op type `N/A`) as missing, as the CSV readers read them."""
    for name in names:
        if name in frame:
            values = db.strings(frame[name])
            frame[name] = values.mask(values.str.lower().isin(MISSING_TOKENS))


def compute_tasks(db: CannDb, clock: Clock | None) -> pd.DataFrame | None:
    """device_ops of the compute tasks (TASK joined to COMPUTE_TASK_INFO), with their PMU
    ratios (TASK_PMU_INFO), named as in op_summary / kernel_details; `connection_id` links
    each to the host call that launched it. None when the file has no compute tasks."""
    if not (
        db.has("TASK", "globalTaskId", "startNs", "endNs")
        and db.has("COMPUTE_TASK_INFO", "globalTaskId", "name")
    ):
        return None
    info, task = db.columns("COMPUTE_TASK_INFO"), db.columns("TASK")
    block = next((c for c in BLOCK_COLUMNS if c in info), None)
    picked = {
        "c.name": "name",
        "c.opType": "op_type",
        "c.taskType": "core_type",
        "c.inputShapes": "input_shapes",
        "c.inputDataTypes": "input_dtypes",
        "c.outputShapes": "output_shapes",
        "c.opState": "op_state",
        f"c.{block}": "block_dim",
        "c.waitNs": "wait_ns",
        "t.streamId": "stream",
        "t.taskId": "task_id",
        "t.deviceId": "device",
        "t.connectionId": "connection_id",
    }
    chosen = [
        f"{src} AS {dst}"
        for src, dst in picked.items()
        if src.split(".")[1] in (info if src.startswith("c.") else task)
    ]
    sql = (
        "SELECT c.globalTaskId AS global_task_id, t.startNs AS start_ns, "
        f"t.endNs - t.startNs AS duration_ns, {', '.join(chosen)} "
        f"FROM {db.table('COMPUTE_TASK_INFO')} c JOIN {db.table('TASK')} t "
        "ON t.globalTaskId = c.globalTaskId"
    )
    rows = db.frame(sql, what="the compute tasks (TASK, COMPUTE_TASK_INFO)")
    if rows is None or rows.empty:
        return None
    string_columns(
        db,
        rows,
        (
            "name",
            "op_type",
            "core_type",
            "input_shapes",
            "input_dtypes",
            "output_shapes",
            "op_state",
        ),
    )
    core_type = rows["core_type"].fillna("UNKNOWN") if "core_type" in rows else None
    if core_type is None:
        core_type = pd.Series("UNKNOWN", index=rows.index, dtype="string")
    codes, kinds = pd.factorize(core_type, use_na_sentinel=False)
    ops = pd.DataFrame(
        {
            "name": rows["name"],
            "core_type": core_type,
            "category": expand(codes, [device_category(k) for k in kinds]),
            "start_us": ns_times(clock, rows["start_ns"]),
            "duration_us": pd.to_numeric(rows["duration_ns"], errors="coerce") / NS_PER_US,
        }
    )
    for column in ("op_type", "op_state", "input_dtypes"):
        if column in rows:
            ops[column] = rows[column]
    for column in ("input_shapes", "output_shapes"):
        if column in rows:
            ops[column] = unquoted_shapes(rows[column])
    for column in ("stream", "task_id", "block_dim", "device", "connection_id"):
        if column in rows:
            ops[column] = pd.to_numeric(rows[column], errors="coerce")
    if "wait_ns" in rows:
        ops["wait_us"] = pd.to_numeric(rows["wait_ns"], errors="coerce") / NS_PER_US
    pmu = _pmu(db, rows["global_task_id"])
    if pmu is not None:
        aligned = pmu.reindex(rows["global_task_id"].to_numpy())
        aligned.index = rows.index

        def number(column: str) -> pd.Series | None:
            return aligned.get(column)

        if "aicore_time(us)" in aligned:
            ops["aicore_time_us"] = aligned["aicore_time(us)"]
        ratios = pmu_ratios(number, core_type, vector_first=True)
        ops = ops.assign(**{k: v for k, v in ratios.items() if v is not None})
    return ops


def _pmu(db: CannDb, task_ids: pd.Series) -> pd.DataFrame | None:
    """The PMU counters the tables use, one row per globalTaskId (None without any)."""
    if not db.has("TASK_PMU_INFO", "globalTaskId", "name", "value"):
        return None
    wanted = {name: db.string_id(name) for name in (*_PMU_TIME, *_PMU_RATIOS)}
    ids = {i: name for name, i in wanted.items() if i is not None}
    if not ids:
        return None
    # one row per task, pivoted by SQLite: far fewer rows to hand to Python than one per counter
    pivot = ", ".join(f'MAX(CASE WHEN name = ? THEN value END) AS "{n}"' for n in ids.values())
    rows = db.frame(
        f"SELECT globalTaskId, {pivot} FROM {db.table('TASK_PMU_INFO')} "
        f"WHERE name IN ({', '.join('?' * len(ids))}) GROUP BY globalTaskId",
        [*ids, *ids],
        what="TASK_PMU_INFO",
    )
    if rows is None or rows.empty:
        return None
    table: pd.DataFrame = rows.set_index("globalTaskId").apply(pd.to_numeric, errors="coerce")
    for source, column in _PMU_TIME.items():
        if source in table:
            table[column] = table.pop(source) / NS_PER_US
    return table


def _api_levels(db: CannDb) -> dict[int, str]:
    return {i: API_LEVELS.get(name, name) for i, name in db.enum("ENUM_API_TYPE").items()}


def cann_api_calls(db: CannDb, clock: Clock | None) -> pd.DataFrame | None:
    """One row per CANN API call (CANN_API): name, level as the text exports write it,
    start_us, duration_us, thread, connection_id. None when the file has none."""
    if not db.has("CANN_API", "startNs", "endNs", "name"):
        return None
    columns = db.columns("CANN_API")
    extra = [f"{c} AS {a}" for c, a in (("type", "level"), ("globalTid", "tid")) if c in columns]
    if "connectionId" in columns:
        extra.append("connectionId AS connection_id")
    rows = db.frame(
        f"SELECT name, startNs AS start_ns, endNs - startNs AS duration_ns, {', '.join(extra)} "
        f"FROM {db.table('CANN_API')}",
        what="CANN_API",
    )
    if rows is None or rows.empty:
        return None
    calls = pd.DataFrame(
        {
            "name": db.strings(rows["name"]),
            "start_us": ns_times(clock, rows["start_ns"]),
            "duration_us": pd.to_numeric(rows["duration_ns"], errors="coerce") / NS_PER_US,
        }
    )
    if "level" in rows:
        calls["level"] = rows["level"].map(_api_levels(db)).astype("string")
    if "tid" in rows:
        calls["thread"] = thread_ids(rows["tid"])
    if "connection_id" in rows:
        calls["connection_id"] = pd.to_numeric(rows["connection_id"], errors="coerce")
    return calls


def cann_api_totals(db: CannDb) -> pd.DataFrame | None:
    """host_ops of CANN_API summed per API, as api_statistic lists them: name, level,
    duration_us (all calls), count. None when the file has none."""
    if not db.has("CANN_API", "startNs", "endNs", "name"):
        return None
    level = "type" if "type" in db.columns("CANN_API") else "NULL"
    rows = db.frame(
        f"SELECT name, {level} AS level, SUM(endNs - startNs) AS duration_ns, COUNT(*) AS count "
        f"FROM {db.table('CANN_API')} GROUP BY name, {level} ORDER BY MIN(startNs)",
        what="CANN_API",
    )
    if rows is None or rows.empty:
        return None
    return pd.DataFrame(
        {
            "name": db.strings(rows["name"]),
            "level": rows["level"].map(_api_levels(db)).astype("string"),
            "duration_us": pd.to_numeric(rows["duration_ns"], errors="coerce") / NS_PER_US,
            "count": rows["count"],
            "kind": "cann_api",
        }
    )
