"""Operator ranking for `advisor top`: the slowest operators of any readable profile.

What MegEngine's profile_analyze offers, for every format advisor reads: top-k operators by
device time, aggregation by operator type, ordering by any output column, time and name/type
filters, and achieved FLOPS and bandwidth where the profile knows an operator's FLO and bytes.
Kept apart from the CLI so notebooks can call `rank_operators` on a Profile directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.compat import zip_strict
from advisor.errors import AdvisorError
from advisor.model import Profile
from advisor.render.format import column_format

AGGREGATES = ("sum", "mean", "max", "min")
_OP_COLUMNS = ("name", "op_type", "core_type", "start_us", "input_shapes", "output_shapes")


class TopError(AdvisorError):
    """A ranking cannot be made: unknown column, bad pattern, no operator times."""


@dataclass(frozen=True)
class TopOptions:
    """How to rank. Times are µs; `types` and `name` are regular expressions searched anywhere
    in the value (`re.search`), so a plain word is a substring match."""

    top: int = 10
    aggregate: str | None = None
    order_by: str = "time_us"
    ascending: bool = False
    min_time_us: float | None = None
    max_time_us: float | None = None
    types: tuple[str, ...] = ()
    name: str | None = None


def operator_rows(profile: Profile) -> tuple[pd.DataFrame, str]:
    """One row per operator execution (device_ops), else per operator type (op_stats).

    Returns the rows (time_us, count, flops, bytes and descriptive columns) and the table used.
    """
    ops = profile.tables.get("device_ops")
    if ops is not None and "duration_us" in ops and ops["duration_us"].notna().any():
        rows = pd.DataFrame({c: ops[c] for c in _OP_COLUMNS if c in ops})
        rows["op_type"] = ops["op_type"] if "op_type" in ops else ops["name"]
        rows["count"] = 1
        rows["time_us"] = ops["duration_us"].astype("float64")
        for col in ("flops", "bytes"):
            if col in ops and ops[col].notna().any():
                rows[col] = ops[col].astype("float64")
        return rows[rows["time_us"].notna()].reset_index(drop=True), "device_ops"
    stats = profile.tables.get("op_stats")
    if stats is not None and stats["total_us"].notna().any():
        rows = pd.DataFrame(
            {
                "name": stats["op_type"],
                "op_type": stats["op_type"],
                "core_type": stats["core_type"],
                "count": stats["count"].astype("int64"),
                "time_us": stats["total_us"].astype("float64"),
            }
        )
        return rows[rows["time_us"].notna()].reset_index(drop=True), "op_stats"
    raise TopError(
        f"{profile.meta.path}: no operator times in this profile "
        "(it has neither device_ops nor op_stats)"
    )


def _pattern(text: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise TopError(f"{what} {text!r} is not a valid regular expression: {exc}") from None


def _filter(rows: pd.DataFrame, opts: TopOptions) -> pd.DataFrame:
    keep = pd.Series(True, index=rows.index)
    if opts.min_time_us is not None:
        keep &= rows["time_us"] >= opts.min_time_us
    if opts.max_time_us is not None:
        keep &= rows["time_us"] <= opts.max_time_us
    if opts.types:
        patterns = [_pattern(t, "--type") for t in opts.types]
        types = rows["op_type"].astype("string").fillna("")
        keep &= types.map(lambda v: any(p.search(v) for p in patterns)).astype(bool)
    if opts.name:
        pattern = _pattern(opts.name, "--name")
        names = rows["name"].astype("string").fillna("")
        keep &= names.map(lambda v: bool(pattern.search(v))).astype(bool)
    return rows[keep]


def _aggregate(rows: pd.DataFrame, how: str) -> pd.DataFrame:
    """One row per op_type: time by `how`; FLO and bytes summed (for rates over total time)."""
    groups = rows.groupby("op_type", sort=False, dropna=False)
    out = pd.DataFrame(
        {
            "time_us": groups["time_us"].agg(how),
            "count": groups["count"].sum(),
            "total_us": groups["time_us"].sum(),
        }
    )
    if "core_type" in rows:
        out.insert(
            0,
            "core_type",
            groups["core_type"].agg(lambda s: ",".join(sorted(set(s.dropna().astype(str))))),
        )
    for col in ("flops", "bytes"):
        if col in rows:
            out[col] = groups[col].sum(min_count=1)
    return out.reset_index()


def _rates(frame: pd.DataFrame, time_col: str) -> pd.DataFrame:
    """GFLOPS and GB/s: FLO (bytes) per µs / 1e3 = per second / 1e9."""
    time = frame[time_col].where(frame[time_col] > 0)
    if "flops" in frame:
        frame["gflops"] = frame["flops"] / time / 1e3
    if "bytes" in frame:
        frame["gbps"] = frame["bytes"] / time / 1e3
    return frame


def rank_operators(profile: Profile, opts: TopOptions) -> pd.DataFrame:
    """The ranked table: filters, then aggregation, ordering, cumulative time and top-k.

    `share` is each row's time over all operator time of the profile (before filters);
    `cumulative_us` adds up the time of the rows above and including this one, as listed.
    """
    if opts.aggregate is not None and opts.aggregate not in AGGREGATES:
        raise TopError(f"--aggregate must be one of {', '.join(AGGREGATES)}")
    if opts.top < 0:
        raise TopError("--top must be 0 (all) or more")
    rows, _ = operator_rows(profile)
    all_us = float(rows["time_us"].sum())
    rows = _filter(rows, opts)
    if opts.aggregate:
        frame = _rates(_aggregate(rows, opts.aggregate), "total_us")
    else:
        frame = _rates(rows.copy(), "time_us")
    frame["share"] = frame["time_us"] / all_us if all_us > 0 else np.nan
    if opts.order_by not in frame.columns:
        raise TopError(
            f"--order-by: no column {opts.order_by!r} (columns: {', '.join(output_columns(frame))})"
        )
    frame = frame.sort_values(
        opts.order_by, ascending=opts.ascending, kind="stable", na_position="last"
    )
    if opts.top:
        frame = frame.head(opts.top)
    frame["cumulative_us"] = frame["time_us"].cumsum()
    return frame[output_columns(frame)].reset_index(drop=True)


def output_columns(frame: pd.DataFrame) -> list[str]:
    """The columns shown, in a fixed order; those the profile lacks are left out."""
    order = (
        "name",
        "op_type",
        "core_type",
        "count",
        "time_us",
        "total_us",
        "share",
        "cumulative_us",
        "flops",
        "gflops",
        "bytes",
        "gbps",
        "start_us",
        "input_shapes",
        "output_shapes",
    )
    return [
        c
        for c in order
        if c in frame.columns and (frame[c].notna().any() or c in ("name", "op_type", "time_us"))
    ]


HEADERS = {
    "time_us": "time",
    "total_us": "total",
    "cumulative_us": "cumulative",
    "start_us": "start",
    "flops": "FLO",
    "gflops": "GFLOPS",
    "bytes": "memory",
    "gbps": "GB/s",
}
"""Text-table headings of the columns whose names are not words; the unit follows them."""


def format_table(frame: pd.DataFrame, max_width: int = 48) -> str:
    """A plain-text table: numbers right-aligned as the reports show them (advisor.render.
    format), each column's unit in its header, text cut to fit."""
    cells: list[list[str]] = []
    numeric: list[bool] = []
    for col in frame.columns:
        values = frame[col].astype(object).where(frame[col].notna(), None).tolist()
        column = column_format(col, values)
        numeric.append(pd.api.types.is_numeric_dtype(frame[col]))
        header = HEADERS.get(col, col) + (f" ({column.unit})" if column.unit else "")
        cells.append([header] + [_clip(column.show(v), max_width) for v in values])
    widths = [max(len(c) for c in column) for column in cells]
    lines = []
    for i in range(len(frame) + 1):
        parts = [
            (column[i].rjust(w) if num else column[i].ljust(w))
            for column, w, num in zip_strict(cells, widths, numeric)
        ]
        lines.append("  ".join(parts).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _clip(text: str, max_width: int) -> str:
    return text if len(text) <= max_width else text[: max_width - 1] + "…"
