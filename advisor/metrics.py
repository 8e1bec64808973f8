"""The figures every report shows beside the findings, derived once per profile as tables.

Steps, device time per core type and per compute class, host-side counts, the per-rank
chart and the per-step timeline (the timeline_lanes table) are computed here, after deriving
and before any output, so the JSON, HTML, terminal and notebook all show the same numbers;
renderers only convert them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, cast

from advisor import intervals, steady
from advisor.engine.evaluate import to_plain
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

STEP_COLUMNS = (
    "fp_bp_us",
    "grad_refresh_us",
    "data_aug_bound_us",
    "reduce_us",
    "computing_us",
    "communication_us",
    "comm_not_overlapped_us",
    "free_us",
    "bubble_us",
)
RANK_COLUMNS = (
    "rank",
    "steps",
    "duration_us",
    "computing_us",
    "communication_us",
    "comm_not_overlapped_us",
    "free_us",
)
TIMELINE_COLUMNS = ("lane", "step", "start_us", "end_us", "busy_us")
MEMORY_KIND_COLUMNS = ("kind", "at_peak_bytes", "peak_share", "max_bytes")
SHORT_KERNEL_US = 10.0
"""Compute kernels shorter than this are counted as small (launch overhead dominates them)."""


def _empty_frame() -> pd.DataFrame:
    return pd.DataFrame()


@dataclass(frozen=True)
class ProfileMetrics:
    """The report's figures for one profile; each table is empty when the profile lacks it."""

    steps: pd.DataFrame = field(default_factory=_empty_frame)
    """Per step: step, duration_us and the breakdown columns the profile has."""
    core_types: pd.DataFrame = field(default_factory=_empty_frame)
    """Device time per core type: core_type, total_us, ratio, count (largest first)."""
    compute_classes: pd.DataFrame = field(default_factory=_empty_frame)
    """Device time per compute class: compute_class, total_us, ratio, count."""
    host: dict[str, float] = field(default_factory=dict)
    """Host counts: sync_calls, compile_calls, launch_calls, dataloader_us_per_step,
    small_kernel_share, kernels (those the profile records)."""
    ranks: pd.DataFrame = field(default_factory=_empty_frame)
    """Per rank of a cluster profile: the means of RANK_COLUMNS."""
    timeline: pd.DataFrame = field(default_factory=_empty_frame)
    """The timeline_lanes table (lane, step, start_us, end_us, busy_us): the device's lane
    instant by instant over a few steps around the slowest."""
    memory_kinds: pd.DataFrame = field(default_factory=_empty_frame)
    """A memory timeline export's kinds of tensor at the peak (MEMORY_KIND_COLUMNS)."""

    def __reduce_ex__(self, protocol: Any) -> str | tuple[Any, ...]:
        """Pickled, metrics without figures (every reduced rank's: without_tables) come back
        as one shared instance: five empty DataFrames were 5 KB a rank in the run's parent
        process, a quarter of what it kept of a small rank once the evaluations shared
        their records."""
        if self.host or any(not frame.empty for frame in self._frames()):
            return super().__reduce_ex__(protocol)
        return (empty_metrics, ())

    def _frames(self) -> tuple[pd.DataFrame, ...]:
        return (
            self.steps,
            self.core_types,
            self.compute_classes,
            self.ranks,
            self.timeline,
            self.memory_kinds,
        )

    def to_json(self) -> dict[str, Any]:
        """The metrics as the prof_rule report holds them (lists of plain rows)."""
        figures = {
            "steps": _records(self.steps),
            "core_types": _records(self.core_types),
            "compute_classes": _records(self.compute_classes),
            "host": dict(self.host),
            "ranks": _records(self.ranks),
            "timeline": _records(self.timeline),
        }
        if not self.memory_kinds.empty:  # only where there is one: other reports stay as they were
            figures["memory_kinds"] = _records(self.memory_kinds)
        return figures


@cache
def empty_metrics() -> ProfileMetrics:
    """The one ProfileMetrics without figures: what a reduced rank holds (without_tables)
    and what unpickling gives for any such (__reduce_ex__)."""
    return ProfileMetrics()


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts of JSON values: numpy scalars as Python ones, NaN and NA as None (read
    column by column: DataFrame.to_dict walks the rows, which costs more on a small frame)."""
    names = [str(column) for column in frame.columns]
    columns = [[to_plain(v) for v in frame.iloc[:, i].tolist()] for i in range(len(names))]
    if not columns:
        return [{} for _ in range(len(frame))]
    return [dict(zip(names, values)) for values in zip(*columns)]


def _columns(profile: Profile, table: str, wanted: tuple[str, ...]) -> pd.DataFrame:
    """The `wanted` columns of `table` that hold data, taken by position: pandas makes a
    list of labels an Index (arrow text on pandas 3) and matches it against the columns
    first, which on a small table costs 5x the taking (every rank's metrics take four)."""
    frame = profile.tables.get(table)
    if frame is None:
        return pd.DataFrame()
    at = [cast(int, frame.columns.get_loc(c)) for c in wanted if profile.has(table, c)]
    return frame.take(at, axis=1).reset_index(drop=True)


def _marked_steps(profile: Profile) -> pd.DataFrame:
    """The steps' figures, with `warmup` true on the warm-up steps where there are any
    (advisor.steady): a reader of the report can tell the steady mean from the start-up."""
    steps = _columns(profile, "steps", ("step", "duration_us", *STEP_COLUMNS))
    if steps.empty or "duration_us" not in steps:
        return steps
    mask = steady.warmup_mask(steps)
    return steps.assign(warmup=mask) if mask.any() else steps


def _shares(grouped: pd.DataFrame, key: str) -> pd.DataFrame:
    """{key, total_us, ratio, count}, largest first, from a frame with `sum` and `count`."""
    total = float(grouped["sum"].sum()) or 1.0
    grouped = grouped.sort_values("sum", ascending=False, kind="stable")
    keys = ["unknown" if pd.isna(k) else str(k) for k in grouped.index]
    return pd.DataFrame(
        {
            key: keys,
            "total_us": grouped["sum"].astype(float).to_numpy(),
            "ratio": grouped["sum"].astype(float).to_numpy() / total,
            "count": grouped["count"].astype(int).to_numpy(),
        }
    )


def _time_by(ops: pd.DataFrame, key: str) -> pd.DataFrame:
    return _shares(ops.groupby(key, dropna=False)["duration_us"].agg(["sum", "count"]), key)


def core_type_time(profile: Profile) -> pd.DataFrame:
    """Device time per core type, from device_ops (or op_stats when only statistics exist)."""
    ops = profile.tables.get("device_ops")
    if ops is not None and not ops.empty:
        return _time_by(ops, "core_type")
    stats = profile.tables.get("op_stats")
    if stats is None or stats.empty:
        return pd.DataFrame()
    return _shares(
        stats.groupby("core_type", dropna=False).agg(
            sum=("total_us", "sum"), count=("count", "sum")
        ),
        "core_type",
    )


def compute_class_time(profile: Profile) -> pd.DataFrame:
    """Device time per compute class (cube, vector, flash attention, ..., communication)."""
    if not profile.has("device_ops", "compute_class"):
        return pd.DataFrame()
    return _time_by(profile.tables["device_ops"], "compute_class")


def host_counts(profile: Profile) -> dict[str, float]:
    """Host-side counts: data loading per step, synchronisations, compilations, launches,
    and the share of compute kernels shorter than SHORT_KERNEL_US."""
    out: dict[str, float] = {}
    host = profile.tables.get("host_ops")
    steps = len(profile.tables["steps"]) if profile.has("steps") else 0
    if host is not None and "kind" in host:
        # the kinds as codes once: a comparison of the text column per kind costs more
        codes, kinds = pd.factorize(host["kind"])
        code_of = {kind: code for code, kind in enumerate(kinds.tolist())}
        counts = np.bincount(codes[codes >= 0], minlength=len(code_of))
        for kind, label in (
            ("sync", "sync_calls"),
            ("compile", "compile_calls"),
            ("launch", "launch_calls"),
        ):
            out[label] = int(counts[code_of[kind]]) if kind in code_of else 0
        outermost = ~(
            host["nested"].fillna(False).to_numpy(bool)
            if "nested" in host
            else intervals.nested_calls(host)
        )
        loader = host.loc[(codes == code_of.get("dataloader", -2)) & outermost, "duration_us"]
        if steps and not loader.empty:
            out["dataloader_us_per_step"] = float(loader.sum()) / steps
    ops = profile.tables.get("device_ops")
    if ops is not None and "category" in ops:
        compute = ops.loc[(ops["category"] == "compute").fillna(False), "duration_us"]
        if not compute.empty:
            out["small_kernel_share"] = float((compute < SHORT_KERNEL_US).mean())
            out["kernels"] = int(len(compute))
    return out


def profile_metrics(profile: Profile) -> ProfileMetrics:
    """Every report figure of a derived profile."""
    return ProfileMetrics(
        steps=_marked_steps(profile),
        core_types=core_type_time(profile),
        compute_classes=compute_class_time(profile),
        host=host_counts(profile),
        ranks=_columns(profile, "ranks", RANK_COLUMNS),
        timeline=_columns(profile, "timeline_lanes", TIMELINE_COLUMNS),
        memory_kinds=_columns(profile, "memory_kinds", MEMORY_KIND_COLUMNS),
    )
