"""Device operators: AI Core tasks (`output_timeline_data_{N}.txt`), AI CPU kernels
(`aicpu_intermediate_{N}.csv`), else per-operator totals, with op types and shapes from
`framework_raw_{N}.csv`; op_stats from `aicore_intermediate_{N}_type.csv` without them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from advisor.formats.cann_tasks import op_type
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


def read_device_ops(rank: Rank) -> None:
    """device_ops (and their clock), or op_stats when the rank has no operator times."""
    parts = []
    for kind, read in (("timeline", _aicore_tasks), ("aicpu", _aicpu_kernels)):
        path = rank.files.get(kind)
        if path is not None:
            rank.profile.meta.files_read.append(path.name)
            frame = read(rank, path)
            if frame is not None:
                parts.append(frame)
    timed = bool(parts)
    if not timed and "aicore_detail" in rank.files:
        path = rank.files["aicore_detail"]
        rank.profile.meta.files_read.append(path.name)
        frame = _aicore_totals(rank, path)
        if frame is not None:
            parts.append(frame)
    if not parts:
        _op_stats_from_types(rank)
        return
    ops = pd.concat(parts, ignore_index=True)
    ops = _with_framework_info(rank, ops)
    # An operator that framework_raw does not list is typed by its name, which MindSpore
    # writes as `<scope>/<Type>-op<N>`; else op_stats would count each op as its own type.
    by_name = ops["name"].map(op_type)
    ops["op_type"] = ops["op_type"].fillna(by_name) if "op_type" in ops else by_name
    ops["category"] = "compute"
    rank.profile.tables["device_ops"] = ops
    if timed:
        rank.clocked["device_ops"] = ("start_us",)


def _aicore_tasks(rank: Rank, path: Path) -> pd.DataFrame | None:
    read = rank.csv(path, ("op_name", "start_time(ms)", "duration(ms)"))
    if read is None:
        return None
    _, df = read
    frame = pd.DataFrame(
        {
            "name": df["op_name"],
            "core_type": "AI_CORE",
            "start_us": rank.numbers(path, df, "start_time(ms)") * MS,
            "duration_us": rank.numbers(path, df, "duration(ms)") * MS,
        }
    )
    if "stream_id" in df.columns:
        frame["stream"] = rank.numbers(path, df, "stream_id")
    return frame


def _aicpu_kernels(rank: Rank, path: Path) -> pd.DataFrame | None:
    read = rank.csv(path, ("kernel_type", "run_start", "run_end"))
    if read is None:
        return None
    _, df = read
    start = rank.numbers(path, df, "run_start")
    return pd.DataFrame(
        {
            "name": df["kernel_type"],
            "op_type": df["kernel_type"],
            "core_type": "AI_CPU",
            "start_us": start,
            "duration_us": rank.numbers(path, df, "run_end") - start,
        }
    )


def _aicore_totals(rank: Rank, path: Path) -> pd.DataFrame | None:
    read = rank.csv(path, ("execution_time",))
    if read is None:
        return None
    _, df = read
    name = next(
        (c for c in ("full_op_name", "full_kernel_time", "full_kernel_name") if c in df.columns),
        None,
    )
    if name is None:
        rank.warn(path, "missing column 'full_op_name'", column="full_op_name")
        return None
    return pd.DataFrame(
        {
            "name": df[name],
            "core_type": "AI_CORE",
            "duration_us": rank.numbers(path, df, "execution_time") * MS,
        }
    )


def _with_framework_info(rank: Rank, ops: pd.DataFrame) -> pd.DataFrame:
    """Op type, shapes, dtypes and block dim by full operator name (framework_raw)."""
    path = rank.files.get("framework")
    if path is None:
        return ops
    read = rank.csv(path, ())
    if read is None:
        return ops
    rank.profile.meta.files_read.append(path.name)
    _, df = read
    name = next((c for c in ("full_op_name", "full_kernel_name") if c in df.columns), None)
    op_type = next((c for c in ("op_type", "kernel_type") if c in df.columns), None)
    if name is None or op_type is None:
        rank.warn(path, "missing column 'full_op_name' or 'op_type'")
        return ops
    info = pd.DataFrame({"name": df[name], "fw_op_type": df[op_type]})
    if "block_dim" in df.columns:
        info["block_dim"] = rank.numbers(path, df, "block_dim")
    if "op_info" in df.columns:
        parsed = [_op_info(rank, path, text, line) for line, text in enumerate(df["op_info"], 2)]
        for column in ("input_shapes", "input_dtypes", "output_shapes"):
            info[column] = [p.get(column) for p in parsed]
    info = info.drop_duplicates("name")
    merged = ops.merge(info, on="name", how="left")
    fw_type = merged.pop("fw_op_type")
    merged["op_type"] = merged["op_type"].fillna(fw_type) if "op_type" in merged else fw_type
    return merged


def _op_info(rank: Rank, path: Path, text: str, line: int) -> dict[str, str]:
    """Shapes and dtypes from the op_info JSON: `;` between tensors, as msprof writes."""
    if not text:
        return {}
    try:
        tensors = orjson.loads(text)
    except orjson.JSONDecodeError:
        rank.warn(path, "op_info is not JSON; shapes left empty", line=line, column="op_info")
        return {}
    if not isinstance(tensors, dict):
        return {}
    out: dict[str, list[str]] = {"input_shapes": [], "input_dtypes": [], "output_shapes": []}
    for key in sorted(tensors, key=_tensor_order):
        tensor = tensors[key]
        if not isinstance(tensor, dict):
            continue
        if key.startswith("input"):
            out["input_shapes"].append(str(tensor.get("shape", "")))
            out["input_dtypes"].append(str(tensor.get("data_type", "")))
        elif key.startswith("output"):
            out["output_shapes"].append(str(tensor.get("shape", "")))
    return {k: ";".join(v) for k, v in out.items() if v}


def _op_stats_from_types(rank: Rank) -> None:
    path = rank.files.get("aicore_type")
    if path is None:
        return
    rank.profile.meta.files_read.append(path.name)
    read = rank.csv(path, ("execution_frequency",))
    if read is None:
        return
    _, df = read
    op_type = next((c for c in ("op_type", "kernel_type") if c in df.columns), None)
    time = next((c for c in ("execution_time", "total_time", "task_time") if c in df.columns), None)
    if op_type is None or time is None:
        missing = "op_type" if op_type is None else "execution_time"
        rank.warn(path, f"missing column {missing!r}", column=missing)
        return
    total = rank.numbers(path, df, time) * MS
    count = rank.numbers(path, df, "execution_frequency")
    frame = pd.DataFrame(
        {
            "op_type": df[op_type],
            "core_type": "AI_CORE",
            "count": count,
            "total_us": total,
            "avg_us": total / count.where(count > 0),
            "ratio": total / total.sum() if total.sum() > 0 else np.nan,
        }
    )
    rank.profile.tables["op_stats"] = frame.dropna(subset=["count", "total_us"])


def _tensor_order(key: str) -> tuple[str, int]:
    kind, _, index = key.partition("_")
    return kind, int(index) if index.isdigit() else 0
