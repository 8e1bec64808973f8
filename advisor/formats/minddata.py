"""MindSpore's data-pipeline operators, `minddata_pipeline_raw_{rank}.csv`.

Both MindSpore layouts write it: the old `profiler/` folder and the new layout's
ASCEND_PROFILER_OUTPUT, so both readers read it here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.formats.cann_csv import open_csv
from advisor.formats.numbers import finite_float, int_from_text
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


def read_pipeline_raw(path: Path, rel: str, warn: WarnFn) -> pd.DataFrame | None:
    """pipeline_ops from `minddata_pipeline_raw_{rank}.csv` (old layout, and the new layout's
    ASCEND_PROFILER_OUTPUT): each operator with its output-queue usage, how often that queue
    was empty, and the mean usage of its input queues (its children's outputs)."""
    csv = open_csv(path, rel, warn, ("op_id", "op_type", "output_queue_size", "parent_id"))
    if csv is None:
        return None
    df = csv.df
    ops = []
    for index, row in df.iterrows():
        op_id = int_from_text(row["op_id"])
        sizes = _int_list(row["output_queue_size"])
        children = _int_list(row.get("children_id", ""))
        if op_id is None or sizes is None or children is None:
            warn(
                rel,
                f"row {row['op_id']!r} {row['op_type']!r} has unreadable "
                "ids or queue sizes; skipped",
                line=int(index) + 2,
            )
            continue
        capacity = finite_float(row.get("output_queue_length", ""))
        usage = float(np.mean(sizes)) / capacity if sizes and capacity else np.nan
        ops.append(
            {
                "op_id": op_id,
                "op_type": row["op_type"],
                "workers": int_from_text(row.get("num_workers", "")),
                "queue_usage": usage,
                "parent": int_from_text(row["parent_id"]),
                "children": len(children),
                "child_ids": children,
                "queue_capacity": capacity,
                "queue_empty_ratio": (float(np.mean([s == 0 for s in sizes])) if sizes else np.nan),
                "queue_samples": len(sizes),
            }
        )
    if not ops:
        return None
    usage_of = {op["op_id"]: op["queue_usage"] for op in ops}
    for op in ops:
        inputs = [usage_of.get(c, np.nan) for c in op.pop("child_ids")]
        inputs = [u for u in inputs if not np.isnan(u)]
        op["input_queue_usage"] = float(np.mean(inputs)) if inputs else np.nan
    return pd.DataFrame(ops)


def _int_list(text: Any) -> list[int] | None:
    """`"[10, 20]"` -> [10, 20]; an empty cell -> []; None when unreadable."""
    text = str(text or "").strip()
    if not text:
        return []
    match = re.fullmatch(r"\[(.*)\]", text)
    if match is None:
        return None
    values = [int_from_text(v) for v in match[1].split(",") if v.strip()]
    return None if any(v is None for v in values) else values  # type: ignore[return-value]
