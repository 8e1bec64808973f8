"""The user code lines behind a finding: its operators' time charged to the lines that ran them.

Where a profile recorded Python stacks, `op_stacks` names the innermost frame of the user's
code around each host operator. A finding's operators are the rows its evidence selected (all
of them, not only those shown), followed to host operators:

- `host_ops` rows: the operator itself, or for a call op_stacks leaves out (a runtime call),
  the innermost operator with a frame around it on its thread; a row inside another selected
  row of its thread is left out, so no time counts twice;
- `device_ops` rows: the operator that launched the kernel (the innermost one around its
  `launch_us` on its `launch_thread`);
- `op_stats` rows (one per operator type): the device_ops of those types;
- `dynamic_shape_ops` rows: the runs of those operators in the table they came from.

Each line gets the time of the operators it ran; its share is that time over the time of all
the finding's operators, those without a recorded frame included, so shares add up to at most
1. Evidence of other tables (steps, settings, communication totals) names no operator and gets
no source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from advisor import intervals
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from advisor.engine.evaluate import Finding
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

MAX_SOURCES = 5
"""Source lines kept per finding, most time first."""
_TYPE_KEYS = ("op_type", "core_type")
"""Columns by which op_stats rows point at device_ops rows."""


@dataclass(frozen=True)
class SourceLocation:
    """A line of the user's code that ran a finding's operators (from recorded Python
    stacks), with the operator time it stands for."""

    file: str
    """As the profiler wrote it (Kineto: relative to the sys.path entry holding it)."""
    line: int | None
    """The call being run (a recorded call stack), or where Kineto's python_function event
    places the function: its first line, or for a function already running when profiling
    began, the line it was on then; None when the stack names no line."""
    function: str
    time_us: float
    """Time of the finding's operators run from this line."""
    share: float | None
    """time_us over the time of all the finding's operators (those without a recorded stack
    included); None when that time is zero."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "time_us": self.time_us,
            "share": self.share,
        }


def attach(findings: Sequence[Finding], profile: Profile) -> None:
    """Set each finding's `sources`; nothing changes without op_stacks."""
    stacks = profile.tables.get("op_stacks")
    if stacks is None or stacks.empty:
        return
    index = StackIndex(profile, stacks)
    for finding in findings:
        if finding.evidence is not None and finding.evidence_rows is not None:
            finding.sources = index.locate(finding.evidence["table"], finding.evidence_rows)


class StackIndex:
    """op_stacks prepared for lookups: by host_ops row, and by time on a thread."""

    def __init__(self, profile: Profile, stacks: pd.DataFrame) -> None:
        self.tables = profile.tables
        self.stacks = stacks
        host_rows = stacks["host_row"].to_numpy("int64")
        self.by_host_row = dict(zip(host_rows.tolist(), range(len(stacks))))
        if "start_us" in stacks:
            start = stacks["start_us"].to_numpy("float64", na_value=np.nan)
        else:
            start = np.full(len(stacks), np.nan)
        end = start + _durations(stacks)
        thread = _threads(stacks)
        timed = np.flatnonzero(~np.isnan(start))
        order = timed[np.lexsort((start[timed] - end[timed], start[timed], thread[timed]))]
        self.rows = order
        self.thread, self.start, self.end = thread[order], start[order], end[order]
        self.parent = intervals.nest(self.thread, self.start, self.end)

    def locate(self, table: str, labels: pd.Index) -> list[SourceLocation]:
        """The source lines of the operators behind evidence rows `labels` of `table`."""
        charged = self._charged(table, labels)
        if charged is None:
            return []
        positions, times = charged
        total = float(times.sum())
        known = positions >= 0
        if not known.any():
            return []
        frames = self.stacks.iloc[positions[known]]
        lines = pd.DataFrame(
            {
                "file": frames["file"].astype(str).to_numpy(),
                "line": frames["line"].fillna(-1).astype("int64").to_numpy()
                if "line" in frames
                else -1,
                "function": frames["function"].fillna("").astype(str).to_numpy()
                if "function" in frames
                else "",
                "time_us": times[known],
            }
        )
        per_line = lines.groupby(["file", "line", "function"], sort=False)["time_us"].sum()
        summed = (
            per_line.reset_index()
            .sort_values(["time_us", "file", "line"], ascending=[False, True, True], kind="stable")
            .head(MAX_SOURCES)
        )
        columns = (summed[c].tolist() for c in ("file", "line", "function", "time_us"))
        return [
            SourceLocation(
                file=str(file),
                line=None if line < 0 else int(line),
                function=str(function),
                time_us=float(time_us),
                share=min(float(time_us) / total, 1.0) if total > 0 else None,
            )
            for file, line, function, time_us in zip(*columns)
        ]

    def _charged(self, table: str, labels: pd.Index) -> tuple[np.ndarray, np.ndarray] | None:
        """(op_stacks position, -1 for none; time) per operator behind the evidence rows."""
        frame = self.tables.get(table)
        if frame is None or not len(labels):
            return None
        rows = frame.loc[labels]
        if table == "op_stats":
            return self._device(self._of_types(rows))
        if table == "dynamic_shape_ops" and "source" in rows:
            return self._by_name(rows)
        if table == "host_ops":
            return self._host(rows)
        if table == "device_ops":
            return self._device(rows)
        return None

    def _of_types(self, stats: pd.DataFrame) -> pd.DataFrame:
        ops = self.tables.get("device_ops")
        keys = [k for k in _TYPE_KEYS if ops is not None and k in stats and k in ops]
        if ops is None or "op_type" not in keys:
            return pd.DataFrame()
        wanted = stats[keys].drop_duplicates()
        return ops.reset_index().merge(wanted, on=keys).set_index("index")

    def _by_name(self, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
        found: list[tuple[np.ndarray, np.ndarray]] = []
        for source, names in rows.groupby("source")["name"]:
            ops = self.tables.get(str(source))
            if ops is None or source not in ("host_ops", "device_ops"):
                continue
            runs = ops[ops["name"].isin(names.astype(str))]
            located = self._host(runs) if source == "host_ops" else self._device(runs)
            if located is not None:
                found.append(located)
        if not found:
            return None
        return np.concatenate([p for p, _ in found]), np.concatenate([t for _, t in found])

    def _host(self, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
        if rows.empty:
            return None
        start = (
            rows["start_us"].to_numpy("float64", na_value=np.nan) if "start_us" in rows else None
        )
        times = _durations(rows)
        if start is not None:
            outer = ~intervals.nested(start, start + times, _threads(rows))
            rows, start, times = rows[outer], start[outer], times[outer]
        positions = np.array([self.by_host_row.get(int(r), -1) for r in rows.index], dtype=np.int64)
        unknown = positions < 0
        if start is not None and unknown.any():
            at = start[unknown] + times[unknown] / 2
            positions[unknown] = self._around(_threads(rows)[unknown], at)
        return positions, times

    def _device(self, kernels: pd.DataFrame) -> tuple[np.ndarray, np.ndarray] | None:
        if kernels.empty:
            return None
        times = _durations(kernels)
        positions = np.full(len(kernels), -1, dtype=np.int64)
        if {"launch_us", "launch_thread"} <= set(kernels.columns):
            at = kernels["launch_us"].to_numpy("float64", na_value=np.nan)
            thread = kernels["launch_thread"].to_numpy("float64", na_value=np.nan)
            linked = ~(np.isnan(at) | np.isnan(thread))
            positions[linked] = self._around(thread[linked].astype(np.int64), at[linked])
        return positions, times

    def _around(self, thread: np.ndarray, at: np.ndarray) -> np.ndarray:
        """op_stacks position of the innermost operator on `thread` around each time `at`."""
        if not len(self.rows):
            return np.full(len(at), -1, dtype=np.int64)
        inner = intervals.innermost(self.thread, self.start, self.end, self.parent, thread, at)
        return np.where(inner >= 0, self.rows[np.maximum(inner, 0)], -1)


def _threads(frame: pd.DataFrame) -> np.ndarray:
    if "thread" not in frame:
        return np.full(len(frame), -1, dtype=np.int64)
    return frame["thread"].fillna(-1).to_numpy("int64")


def _durations(frame: pd.DataFrame) -> np.ndarray:
    return frame["duration_us"].to_numpy("float64", na_value=0.0)
