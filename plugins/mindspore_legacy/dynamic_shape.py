"""`dynamic_shape_info_{N}.json`: MindSpore's per-step operator view of a dynamic-shape run
(what MindInsight's "operator time per step" and "shape per step" charts show), in one of its
two layouts.

GPU runs: MindSpore writes it from the GPU timeline: `operator` maps each step to the
operators run in it (`op_name` such as `Add-op6`, `op_type`, `op_side`, `dur` in µs,
`shape_info`: one `[32, 1]` text per input), `kernel` each step to its CUDA kernels
(`op_name` the kernel, `op_full_name` its operator, `dur`, `block_dim`, `grid_dim`).
`operator_type` and `kernel_type` are per-step sums of the same rows and are not read. Input
shapes are written as msprof writes them: `32,1;32,1` (`;` between tensors).

Ascend runs (MindSpore 2.x, `DynamicFrameWorkParser`): each operator type maps to a list of
`{op_name: {op_exe_time, op_shape, op_exe_occurrences}}`, the n-th time (op_summary's Task
Duration, µs) and shape text (framework_raw's columns after the eighth) being the
operator's n-th run; MindSpore keeps only operators run once per step, so the n-th run is
step n. `op_type` holds per-type means and is not read. Here each such operator's device
tasks, in start order, take the shape of their run (`with_run_shapes`): framework_raw alone
gives one shape per operator name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.formats.cann_tasks import op_type
from advisor.formats.numbers import finite_float
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

if TYPE_CHECKING:
    from .context import Rank

_DIMS = re.compile(r"[\[\]\s]")


@dataclass
class StepShapes:
    """The operators and kernels of each step, and the input shapes by (step, operator)."""

    operators: pd.DataFrame
    kernels: pd.DataFrame
    gpu: bool = True

    def shapes(self) -> dict[tuple[int, str], str]:
        """(step, short operator name) -> input shapes; the first run of the step wins."""
        if self.operators.empty:
            return {}
        first = self.operators.dropna(subset=["input_shapes"]).drop_duplicates(["step", "name"])
        return {
            (int(step), str(name)): str(shapes)
            for step, name, shapes in zip(first["step"], first["name"], first["input_shapes"])
        }


def read_dynamic_shapes(rank: Rank) -> StepShapes | None:
    """The file's operators (and, for GPU runs, kernels) per step; None (warned) when it is
    unreadable or in neither layout."""
    path = rank.files.get("dynamic_shape")
    if path is None:
        return None
    rank.profile.meta.files_read.append(path.name)
    data = rank.json(path)
    if data is None:
        return None
    if isinstance(data, dict) and isinstance(data.get("operator"), dict):
        operators = _rows(rank, path, data.get("operator"), _operator)
        kernels = _rows(rank, path, data.get("kernel"), _kernel)
        gpu = True
    elif (
        isinstance(data, dict) and data and all(isinstance(v, (list, dict)) for v in data.values())
    ):
        operators, kernels, gpu = _ascend_rows(rank, path, data), pd.DataFrame(), False
    else:
        rank.warn(
            path,
            "neither the GPU layout (operator and kernel per step) nor the Ascend one "
            "(op_exe_time and op_shape per operator); not read",
        )
        return None
    if operators.empty and kernels.empty:
        rank.warn(path, "no operator or kernel rows")
        return None
    return StepShapes(operators, kernels, gpu)


def with_run_shapes(rank: Rank, dynamic: StepShapes) -> None:
    """Ascend layout: each operator's device tasks, in start order, take the shapes of its
    runs, where the task count matches the runs recorded (as MindSpore pairs them)."""
    ops = rank.profile.tables.get("device_ops")
    if ops is None or "start_us" not in ops or dynamic.operators.empty:
        rank.warn(
            rank.files["dynamic_shape"],
            "per-run shapes not used: no operator timeline (output_timeline_data) to pair "
            "them with",
        )
        return
    runs = dynamic.operators.sort_values("step", kind="stable").groupby("name", sort=False)
    shapes = {str(name): list(group["input_shapes"]) for name, group in runs}
    short = ops["name"].astype(str).str.rsplit("/", n=1).str[-1]
    order = ops.assign(_short=short).sort_values("start_us", kind="stable")
    found = pd.Series(pd.NA, index=ops.index, dtype="string")
    for name, tasks in order.groupby("_short", sort=False):
        per_run = shapes.get(str(name))
        if per_run is not None and len(per_run) == len(tasks):
            found.loc[tasks.index] = per_run
    if found.notna().any():
        old = ops["input_shapes"] if "input_shapes" in ops else pd.Series(pd.NA, index=ops.index)
        rank.profile.tables["device_ops"] = ops.assign(input_shapes=found.fillna(old))


def _ascend_rows(rank: Rank, path: Path, data: dict[str, Any]) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    bad = 0
    for kind, entries in data.items():
        if kind == "op_type" or not isinstance(entries, list):
            continue  # per-type means
        for entry in entries:
            for name, detail in entry.items() if isinstance(entry, dict) else ():
                times = detail.get("op_exe_time") if isinstance(detail, dict) else None
                shapes = detail.get("op_shape") if isinstance(detail, dict) else None
                if not (isinstance(times, list) and isinstance(shapes, list)) or len(times) != len(
                    shapes
                ):
                    bad += 1
                    continue
                rows += [
                    {
                        "step": i + 1,
                        "name": str(name),
                        "op_type": str(kind),
                        "duration_us": finite_float(t),
                        "input_shapes": str(shape).strip(),
                    }
                    for i, (t, shape) in enumerate(zip(times, shapes))
                ]
    if bad:
        rank.warn(path, f"{bad} operators without matching op_exe_time and op_shape lists skipped")
    return pd.DataFrame(rows)


def _rows(rank: Rank, path: Path, steps: Any, row: Any) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    bad = 0
    for key, items in (steps or {}).items() if isinstance(steps, dict) else ():
        step = finite_float(key)
        if not (step == step and step == int(step)) or not isinstance(items, list):
            bad += 1
            continue
        for item in items:
            parsed = row(int(step), item) if isinstance(item, dict) else None
            if parsed is None:
                bad += 1
            else:
                rows.append(parsed)
    if bad:
        rank.warn(path, f"{bad} step entries without a step number, name or dur skipped")
    return pd.DataFrame(rows)


def _operator(step: int, item: dict[str, Any]) -> dict[str, Any] | None:
    name, duration = item.get("op_name"), finite_float(item.get("dur"))
    if not isinstance(name, str) or duration != duration:
        return None
    shapes = item.get("shape_info")
    shape_text = (
        ";".join(_DIMS.sub("", str(s)) for s in shapes)
        if isinstance(shapes, list) and shapes
        else None
    )
    return {
        "step": step,
        "name": name,
        "op_type": str(item.get("op_type") or op_type(name)),
        "kind": "cpu_kernel" if str(item.get("op_side", "")).lower() == "cpu" else "aten",
        "duration_us": duration,
        "input_shapes": shape_text,
    }


def _kernel(step: int, item: dict[str, Any]) -> dict[str, Any] | None:
    name, duration = item.get("op_name"), finite_float(item.get("dur"))
    if not isinstance(name, str) or duration != duration:
        return None
    full = str(item.get("op_full_name") or "")
    return {
        "step": step,
        "name": name,
        "op_name": full.rsplit("/", 1)[-1],
        "op_type": op_type(full) if full else None,
        "core_type": "GPU",
        "duration_us": duration,
        "category": "communication" if name.lower().startswith("nccl") else "compute",
        "block_threads": dims_product(item.get("block_dim")),
        "grid_blocks": dims_product(item.get("grid_dim")),
    }


def dims_product(dims: Any) -> float:
    """`256,1,1` -> 256: threads per block or blocks per grid."""
    parts = str(dims or "").strip('"').split(",")
    if not all(p.strip().isdigit() for p in parts):
        return np.nan
    return float(np.prod([int(p) for p in parts]))
