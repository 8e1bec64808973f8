"""`minddata_cpu_utilization_{N}.json`: CPU utilisation of the host, the process and each
pipeline operator."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.formats.numbers import finite_float as _float
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

_SYSTEM_METRICS = {
    "user_utilization": "user_pct",
    "sys_utilization": "sys_pct",
    "io_utilization": "io_pct",
    "idle_utilization": "idle_pct",
    "runable_processes": "runnable",
    "context_switch_count": "context_switches",
}


def read_cpu_usage(rank: Rank) -> None:
    """cpu_usage rows of the host, the process and each pipeline operator; each operator's
    mean utilisation onto pipeline_ops."""
    path = rank.files.get("cpu")
    if path is None:
        return
    rank.profile.meta.files_read.append(path.name)
    data = rank.json(path)
    if data is None:
        return
    if not isinstance(data, dict):
        rank.warn(path, "not a JSON object (expected device_info, process_info, op_info)")
        return
    cpus = _int(data.get("cpu_processor_num"))
    parts = [
        _cpu_rows(rank, path, "device_info", data.get("device_info"), "system"),
        _cpu_rows(rank, path, "process_info", data.get("process_info"), "process"),
    ]
    ops = data.get("op_info", [])
    if not isinstance(ops, list):
        rank.warn(path, "'op_info' is not a list; operator utilisation skipped")
        ops = []
    bad = 0
    for op in ops:
        op_id = _int(op.get("op_id")) if isinstance(op, dict) else None
        if op_id is None or not isinstance(op.get("metrics"), dict):
            bad += 1
        elif op_id >= 0:  # op_id -1 is not a pipeline operator
            rows = _cpu_rows(rank, path, f"op_info[{op_id}]", op["metrics"], "pipeline_op")
            parts.append(None if rows is None else rows.assign(op_id=op_id))
    if bad:
        rank.warn(path, f"{bad} op_info entries without op_id or metrics skipped")
    parts = [p for p in parts if p is not None]
    if not parts:
        rank.warn(path, "no utilisation samples")
        return
    frame = pd.concat(parts, ignore_index=True).assign(cpus=cpus)
    rank.profile.tables["cpu_usage"] = _with_pipeline_info(rank, frame)


def _cpu_rows(rank: Rank, path: Path, where: str, metrics: Any, scope: str) -> pd.DataFrame | None:
    """One row per sample of a metrics object; lists of other lengths padded with NaN."""
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        rank.warn(path, f"'{where}' is not an object; skipped")
        return None
    columns: dict[str, list[float]] = {}
    for key, column in _SYSTEM_METRICS.items():
        values = metrics.get(key)
        if values is None:
            continue
        numbers = [_float(v) for v in values] if isinstance(values, list) else None
        if numbers is None or any(np.isnan(v) for v in numbers):
            rank.warn(path, f"'{where}.{key}' is not a list of numbers; left empty")
            continue
        columns[column] = numbers
    if "user_pct" not in columns:
        rank.warn(path, f"'{where}' has no user_utilization samples; skipped")
        return None
    length = max(len(v) for v in columns.values())
    frame = pd.DataFrame({c: v + [np.nan] * (length - len(v)) for c, v in columns.items()})
    return frame.assign(scope=scope, sample=range(length))


def _with_pipeline_info(rank: Rank, cpu: pd.DataFrame) -> pd.DataFrame:
    """Operator type and workers on the CPU rows; mean CPU per operator on pipeline_ops."""
    ops = rank.profile.tables.get("pipeline_ops")
    if ops is None or "op_id" not in cpu:
        return cpu
    info = ops[["op_id", "op_type", "workers"]]
    cpu = cpu.merge(info, on="op_id", how="left")
    busy = cpu["user_pct"] + cpu["sys_pct"] if "sys_pct" in cpu else cpu["user_pct"]
    mean = busy.groupby(cpu["op_id"]).mean()
    rank.profile.tables["pipeline_ops"] = ops.assign(cpu_pct=ops["op_id"].map(mean))
    return cpu
