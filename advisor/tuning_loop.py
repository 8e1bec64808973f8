"""The advisor → AOE → advisor loop: which advised operators AOE tuned, and with what result.

`advisor run` writes the operators its findings point at to operator_tuning_file.cfg; the user
tunes them with AOE, which leaves `aoe_result_*.json` files in its working directory. When those
results are given on the command line, or sit in a profile's folder or the folder above it,
each profile's report says which advised operators were tuned (before/after/status) and which
were not, so the loop can be closed without matching names by hand.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

AOE_RESULT_GLOB = "aoe_result_*.json"
ROW_COLUMNS = (
    "name",
    "op_type",
    "mode",
    "before_us",
    "after_us",
    "improvement_pct",
    "update_mode",
    "status",
    "task",
)
STATUS_ORDER = ("failed", "regressed", "incomplete", "improved")  # worst first


def neighbour_results(inputs: Sequence[Path], read: Iterable[Path]) -> list[Path]:
    """AOE result files in each input folder and the folder above it that were not read yet.

    AOE writes its results into its working directory, usually the one the profile was
    collected in, so a user who runs `advisor run PROF_X` expects them to be picked up.
    """
    seen = {p.resolve() for p in read}
    found: list[Path] = []
    for path in inputs:
        path = path.resolve()
        folders = [path, path.parent] if path.is_dir() else [path.parent]
        for folder in folders:
            for candidate in sorted(folder.glob(AOE_RESULT_GLOB)):
                resolved = candidate.resolve()
                if candidate.is_file() and resolved not in seen:
                    seen.add(resolved)
                    found.append(candidate)
    return found


def files_read(meta_path: str, files: Sequence[str]) -> list[Path]:
    """Absolute paths of the files a profile was read from (its path when it is a file)."""
    base = Path(meta_path)
    return [base / f for f in files] if base.is_dir() else [base]


def tuning_loop(
    advised: Sequence[str], tuning: pd.DataFrame, sources: Sequence[str]
) -> dict[str, Any]:
    """What happened to each advised operator in the AOE results (`tuning` op rows)."""
    ops = tuning[tuning["kind"] == "op"] if "kind" in tuning else tuning.iloc[0:0]
    wanted = set(advised)
    rows = [_row(r) for r in ops.to_dict("records") if r["name"] in wanted]
    tuned = list(dict.fromkeys(r["name"] for r in rows))
    not_tuned = [name for name in advised if name not in set(tuned)]
    outcome = {name: _worst(r["status"] for r in rows if r["name"] == name) for name in tuned}
    return {
        "sources": list(sources),
        "advised": list(advised),
        "tuned": rows,
        "not_tuned": not_tuned,
        "summary": {
            "advised": len(advised),
            "tuned": len(tuned),
            "not_tuned": len(not_tuned),
            **{s: sum(v == s for v in outcome.values()) for s in STATUS_ORDER},
        },
    }


def _row(record: dict[str, Any]) -> dict[str, Any]:
    """A tuning row as plain JSON values (NaN and pandas NA become null)."""
    out = {}
    for column in ROW_COLUMNS:
        value = record.get(column)
        if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
            value = None
        elif isinstance(value, float):
            value = float(value)
        else:
            value = str(value)
        out[column] = value
    return out


def _worst(statuses: Iterable[str | None]) -> str:
    """An operator tuned in several modes or tasks counts by its worst result."""
    present = set(statuses)
    return next((s for s in STATUS_ORDER if s in present), "incomplete")
