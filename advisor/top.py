"""Operator ranking for `advisor top`: the slowest operators of any readable profile.

What MegEngine's profile_analyze offers, for every format advisor reads: top-k operators by
device time, aggregation by operator type, ordering by any output column, time, name, type and
input-dtype filters, achieved FLOPS and bandwidth where the profile knows an operator's FLO and
bytes, the time measured to the kernel's start instead of the operator's end (`end_key`), the
host-side ranking beside the device one, and the summary of total device, host and copy time.
Kept apart from the CLI so notebooks can call `rank_operators` on a Profile directly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.errors import AdvisorError
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

AGGREGATES = ("sum", "mean", "max", "min")
END_KEYS = ("end", "kern")
_OP_COLUMNS = (
    "name",
    "op_type",
    "core_type",
    "category",
    "start_us",
    "kernel_wait_us",
    "input_shapes",
    "input_dtypes",
    "output_shapes",
)
_HOST_OPERATOR_KIND = {"megengine_static": "launch", "megengine_timeline": "launch"}
"""host_ops kind of the rows that are operators run on the host, by source format: MegEngine
records each operator's host execution (static graph: profiler.host; timeline: the worker
thread), other frameworks their framework operators (aten)."""


class TopError(AdvisorError):
    """A ranking cannot be made: unknown column, bad pattern, or data the profile lacks."""


class MissingData(TopError):
    """An option needs data this profile does not record (one profile's problem, not a bad
    option): operator times, kernel start times, input data types, host operator times, which
    operators are copies."""


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
    input_dtype: str | None = None
    end_key: str = "end"


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
    raise MissingData(
        f"{profile.meta.path}: no operator times in this profile "
        "(it has neither device_ops nor op_stats)"
    )


def host_rows(profile: Profile) -> pd.DataFrame:
    """One row per operator run on the host (see _HOST_OPERATOR_KIND), with the op_type and
    input_dtypes of the device operator of the same name where the name is one operator's
    (MegEngine static graph), else the name as op_type (aten::addmm)."""
    host = profile.tables.get("host_ops")
    kind = _HOST_OPERATOR_KIND.get(profile.meta.source_format, "aten")
    if host is None or not (host["kind"] == kind).fillna(False).any():
        raise MissingData(
            f"{profile.meta.path}: --show-host needs the host time of each operator "
            f"(host_ops of kind {kind}), which this {profile.meta.source_format} profile lacks"
        )
    ops = host[(host["kind"] == kind).fillna(False) & host["duration_us"].notna()]
    rows = pd.DataFrame({c: ops[c] for c in _OP_COLUMNS if c in ops})
    rows["op_type"] = ops["name"].astype("string")
    rows["count"] = 1
    rows["time_us"] = ops["duration_us"].astype("float64")
    rows["nested"] = _nested(ops)
    device = profile.tables.get("device_ops")
    if device is not None and "op_type" in device:
        by_name = device.drop_duplicates("name").set_index("name")
        counts = device["name"].value_counts()
        known = rows["name"].isin(counts.index[counts == 1])
        rows.loc[known, "op_type"] = rows.loc[known, "name"].map(by_name["op_type"])
        if "input_dtypes" in device:
            rows["input_dtypes"] = rows["name"].where(known).map(by_name["input_dtypes"])
    return rows.reset_index(drop=True)


def _nested(ops: pd.DataFrame) -> pd.Series:
    """Host calls inside an earlier call of the same thread (aten::addmm within aten::linear):
    the total host time counts only the outer ones, so no instant counts twice. A call is
    inside when, sorted by start (longest first), it ends no later than a call before it."""
    frame = pd.DataFrame(
        {
            "thread": ops["thread"].fillna(-1) if "thread" in ops else -1,
            "start": ops["start_us"].astype("float64") if "start_us" in ops else np.nan,
            "duration": ops["duration_us"].astype("float64"),
        },
        index=ops.index,
    )
    frame["end"] = frame["start"] + frame["duration"]
    frame = frame.sort_values(["thread", "start", "duration"], ascending=[True, True, False])
    before = frame.groupby("thread")["end"].transform(lambda e: e.cummax().shift())
    nested = (frame["end"] <= before).fillna(False)
    if "nested" in ops:
        nested |= ops["nested"].reindex(frame.index).fillna(False).astype(bool)
    return nested.reindex(ops.index).astype(bool)


def _timed(rows: pd.DataFrame, end_key: str, profile: Profile, side: str) -> pd.DataFrame:
    """time_us as `end_key` measures it: the whole operator (end) or the part of it before its
    kernel started (kern, what MegEngine calls the wait time); rows without it are dropped."""
    if end_key == "end":
        return rows
    if "kernel_wait_us" not in rows or rows["kernel_wait_us"].isna().all():
        raise MissingData(
            f"{profile.meta.path}: --top-end-key kern needs when each {side} operator's kernel "
            f"started (MegEngine static-graph 'kern' times), which this "
            f"{profile.meta.source_format} profile lacks"
        )
    rows = rows.assign(time_us=rows["kernel_wait_us"].astype("float64"))
    return rows[rows["time_us"].notna()]


def _pattern(text: str, what: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as exc:
        raise TopError(f"{what} {text!r} is not a valid regular expression: {exc}") from None


def _has_dtype(rows: pd.DataFrame, dtype: str, profile: Profile, side: str) -> pd.Series:
    """Rows with at least one input of `dtype` (profile_analyze compares each input var's
    layout dtype; here any `;`-separated entry of input_dtypes, ignoring case, so FLOAT16 of an
    Ascend op_summary matches float16)."""
    known = rows["input_dtypes"].astype("string").str.strip() if "input_dtypes" in rows else None
    if known is None or not (known.fillna("") != "").any():
        raise MissingData(
            f"{profile.meta.path}: --input-dtype needs the input data types of each {side} "
            f"operator, which this {profile.meta.source_format} profile lacks"
        )
    wanted = dtype.strip().lower()
    return (
        known.fillna("")
        .map(lambda v: wanted in (d.strip().lower() for d in v.split(";")))
        .astype(bool)
    )


def _select(rows: pd.DataFrame, opts: TopOptions, profile: Profile, side: str) -> pd.DataFrame:
    """The operators profile_analyze's filters keep: --type, --name and --input-dtype (the
    time bounds apply later, to the time ranked)."""
    keep = pd.Series(True, index=rows.index)
    if opts.types:
        patterns = [_pattern(t, "--type") for t in opts.types]
        types = rows["op_type"].astype("string").fillna("")
        keep &= types.map(lambda v: any(p.search(v) for p in patterns)).astype(bool)
    if opts.name:
        pattern = _pattern(opts.name, "--name")
        names = rows["name"].astype("string").fillna("")
        keep &= names.map(lambda v: bool(pattern.search(v))).astype(bool)
    if opts.input_dtype:
        keep &= _has_dtype(rows, opts.input_dtype, profile, side)
    return rows[keep]


def _within(rows: pd.DataFrame, opts: TopOptions) -> pd.DataFrame:
    keep = pd.Series(True, index=rows.index)
    if opts.min_time_us is not None:
        keep &= rows["time_us"] >= opts.min_time_us
    if opts.max_time_us is not None:
        keep &= rows["time_us"] <= opts.max_time_us
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


def _check(opts: TopOptions) -> None:
    if opts.aggregate is not None and opts.aggregate not in AGGREGATES:
        raise TopError(f"--aggregate must be one of {', '.join(AGGREGATES)}")
    if opts.end_key not in END_KEYS:
        raise TopError(f"--top-end-key must be one of {', '.join(END_KEYS)}")
    if opts.top < 0:
        raise TopError("--top must be 0 (all) or more")


def rank_operators(profile: Profile, opts: TopOptions) -> pd.DataFrame:
    """The ranked device operators: filters, then aggregation, ordering, cumulative time and
    top-k.

    `share` is each row's time over the total device time (every operator's whole time, before
    filters: the `total device time` of the summary); `cumulative_us` adds up the time of the
    rows above and including this one, as listed.
    """
    _check(opts)
    rows, _ = operator_rows(profile)
    total = float(rows["time_us"].sum())
    rows = _timed(_select(rows, opts, profile, "device"), opts.end_key, profile, "device")
    return _rank(rows, opts, total)


def rank_host_operators(profile: Profile, opts: TopOptions) -> pd.DataFrame:
    """The same ranking of the operators' host times (profile_analyze --show-host); `share`
    is over the total host time."""
    _check(opts)
    rows = host_rows(profile)
    total = float(rows.loc[~rows["nested"], "time_us"].sum())
    rows = _timed(_select(rows, opts, profile, "host"), opts.end_key, profile, "host")
    return _rank(rows.drop(columns="nested"), opts, total)


def _rank(rows: pd.DataFrame, opts: TopOptions, total_us: float) -> pd.DataFrame:
    rows = _within(rows, opts)
    if opts.aggregate:
        frame = _rates(_aggregate(rows, opts.aggregate), "total_us")
    else:
        frame = _rates(rows.copy(), "time_us")
    frame["share"] = frame["time_us"] / total_us if total_us > 0 else np.nan
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


def summary(profile: Profile, opts: TopOptions, copy_time: bool = False) -> dict[str, float | None]:
    """profile_analyze's summary: total device time (every operator's end - start, summed)
    and total host time (the host operators', nested calls once), None where the profile has
    none. With `copy_time`, the copy operators (category memcpy) among those the --type,
    --name and --input-dtype filters keep: their total and mean time, and the total and mean of
    their wait before the kernel (None where the profile has no kernel start times)."""
    rows, _ = operator_rows(profile)
    out: dict[str, float | None] = {"total_device_us": float(rows["time_us"].sum())}
    try:
        host = host_rows(profile)
        out["total_host_us"] = float(host.loc[~host["nested"], "time_us"].sum())
    except MissingData:
        out["total_host_us"] = None
    if not copy_time:
        return out
    if "category" not in rows or rows["category"].isna().all():
        raise MissingData(
            f"{profile.meta.path}: --copy-time needs to know which operators are copies "
            f"(device_ops.category), which this {profile.meta.source_format} profile lacks"
        )
    copies = _select(rows, opts, profile, "device")
    copies = copies[(copies["category"] == "memcpy").fillna(False)]
    out["copy_count"] = len(copies)
    out["copy_us"] = float(copies["time_us"].sum())
    out["copy_mean_us"] = float(copies["time_us"].mean()) if len(copies) else None
    out["copy_wait_us"] = out["copy_wait_mean_us"] = None
    if "kernel_wait_us" in rows and rows["kernel_wait_us"].notna().any():
        waits = copies["kernel_wait_us"].dropna()
        out["copy_wait_us"] = float(waits.sum())
        out["copy_wait_mean_us"] = float(waits.mean()) if len(waits) else None
    return out


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
        "input_dtypes",
        "output_shapes",
    )
    return [
        c
        for c in order
        if c in frame.columns and (frame[c].notna().any() or c in ("name", "op_type", "time_us"))
    ]
