"""Vectorised interval arithmetic (union, intersection, clipping) on NumPy arrays.

Overlap of compute and communication is the core of the step breakdown; device timelines hold
millions of tasks, so everything here is sort + cumulative max, never a Python loop per task.
An interval set is a pair of float64 arrays (starts, ends), merged = sorted and disjoint.
Call stacks are intervals too: `nested_calls` finds the inner levels of host calls, `nest`
the parent of each call and `innermost` the call around a moment (the compare tool's operator
tree and the memory attributed to operators both use them); `longest_overlap` the call that
covers each device gap most.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.compat import zip_strict
from advisor.lazy import lazy_module
from advisor.text_codes import coded

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

Intervals = tuple["np.ndarray", "np.ndarray"]


def merge(starts: np.ndarray, ends: np.ndarray) -> Intervals:
    """Union of possibly overlapping intervals as a sorted, disjoint set."""
    starts = np.asarray(starts, dtype="float64")
    ends = np.asarray(ends, dtype="float64")
    keep = ~(np.isnan(starts) | np.isnan(ends)) & (ends > starts)
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    running_end = np.maximum.accumulate(ends)
    # A new block starts where an interval begins after everything before it has ended.
    new_block = np.empty(starts.size, dtype=bool)
    new_block[0] = True
    new_block[1:] = starts[1:] > running_end[:-1]
    block_ids = np.cumsum(new_block) - 1
    merged_starts = starts[new_block]
    merged_ends = np.zeros(merged_starts.size)
    np.maximum.at(merged_ends, block_ids, running_end)
    return merged_starts, merged_ends


def total(intervals: Intervals) -> float:
    starts, ends = intervals
    return float(np.sum(ends - starts))


def clip(intervals: Intervals, lo: float, hi: float) -> Intervals:
    """The part of a merged set inside [lo, hi]."""
    starts, ends = intervals
    first = np.searchsorted(ends, lo, side="right")
    last = np.searchsorted(starts, hi, side="left")
    s = np.clip(starts[first:last], lo, hi)
    e = np.clip(ends[first:last], lo, hi)
    keep = e > s
    return s[keep], e[keep]


def intersect(a: Intervals, b: Intervals) -> Intervals:
    """Intersection of two merged sets (two-pointer sweep done with searchsorted)."""
    a_s, a_e = a
    b_s, b_e = b
    if a_s.size == 0 or b_s.size == 0:
        return np.empty(0), np.empty(0)
    # For each interval of a, the candidate range of b intervals that may overlap it.
    lo = np.searchsorted(b_e, a_s, side="right")
    hi = np.searchsorted(b_s, a_e, side="left")
    counts = np.maximum(hi - lo, 0)
    a_idx = np.repeat(np.arange(a_s.size), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    b_idx = np.repeat(lo, counts) + offsets
    s = np.maximum(a_s[a_idx], b_s[b_idx])
    e = np.minimum(a_e[a_idx], b_e[b_idx])
    keep = e > s
    return s[keep], e[keep]


def union(a: Intervals, b: Intervals) -> Intervals:
    return merge(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]]))


def covered(merged: Intervals, points: np.ndarray) -> np.ndarray:
    """For each point t, how much of the merged set lies before t: a difference of two of
    these is the part of [a, b) the set covers, for any number of (a, b) at once."""
    starts, ends = merged
    points = np.asarray(points, dtype="float64")
    if len(starts) == 0:
        return np.where(np.isnan(points), np.nan, 0.0)
    before = np.concatenate(([0.0], np.cumsum(ends - starts)))  # length of intervals 0..k-1
    k = np.searchsorted(starts, points, side="right") - 1  # last interval starting by t
    inside = np.clip(
        points - starts[np.clip(k, 0, None)], 0.0, (ends - starts)[np.clip(k, 0, None)]
    )
    out = np.where(k >= 0, before[np.clip(k, 0, None)] + inside, 0.0)
    return np.where(np.isnan(points), np.nan, out)


def covered_between(merged: Intervals, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For each [lo, hi), how much of it the merged set covers (NaN where a bound is)."""
    return covered(merged, hi) - covered(merged, lo)


def longest_overlap(
    lo: np.ndarray, hi: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each window [lo, hi) (windows that do not overlap, as device gaps), the interval
    of (starts, ends) overlapping it most and by how much: (its index, -1 where none does;
    the overlap, 0 there). Ties go to the interval that starts first. Each interval is paired
    with the windows it spans, found by binary search, so the work follows the pairs, not
    windows x intervals."""
    lo, hi = np.asarray(lo, dtype="float64"), np.asarray(hi, dtype="float64")
    starts, ends = np.asarray(starts, dtype="float64"), np.asarray(ends, dtype="float64")
    best, most = np.full(len(lo), -1, dtype=np.int64), np.zeros(len(lo))
    if len(lo) == 0 or len(starts) == 0:
        return best, most
    order = np.argsort(lo, kind="stable")
    lo_sorted, hi_sorted = lo[order], hi[order]
    first = np.searchsorted(hi_sorted, starts, side="right")  # first window ending after start
    past = np.searchsorted(lo_sorted, ends, side="left")  # windows from here start at its end
    spans = np.clip(past - first, 0, None)
    interval = np.repeat(np.arange(len(starts)), spans)
    window = (
        np.repeat(first, spans)
        + np.arange(len(interval))
        - np.repeat(spans.cumsum() - spans, spans)
    )
    overlap = np.minimum(ends[interval], hi_sorted[window]) - np.maximum(
        starts[interval], lo_sorted[window]
    )
    keep = overlap > 0
    interval, window, overlap = interval[keep], window[keep], overlap[keep]
    ranked = np.lexsort((starts[interval], -overlap, window))
    top = ranked[np.flatnonzero(np.diff(window[ranked], prepend=-1) != 0)]
    best[order[window[top]]] = interval[top]
    most[order[window[top]]] = overlap[top]
    return best, most


def nested(starts: np.ndarray, ends: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """True for each interval that starts inside an earlier (or equally early and longer)
    interval of the same group: the inner levels of a call stack, whose time the outer call
    already holds. Intervals without a start are never nested. `groups` are any labels; one
    sort, then a running maximum per group."""
    starts = np.asarray(starts, dtype="float64")
    ends = np.asarray(ends, dtype="float64")
    if len(starts) == 0:
        return np.zeros(0, dtype=bool)
    codes = pd.factorize(np.asarray(groups), use_na_sentinel=False)[0]
    order = _stack_order(codes, starts, ends)
    s, e, g = starts[order], ends[order], codes[order]
    reach = np.where(np.isnan(e), -np.inf, e)
    first = np.concatenate(([True], g[1:] != g[:-1]))
    bounds = np.append(np.flatnonzero(first), len(g)).tolist()
    for lo, hi in zip_strict(bounds[:-1], bounds[1:]):  # groups are few: kinds x threads
        np.maximum.accumulate(reach[lo:hi], out=reach[lo:hi])
    before = np.concatenate(([-np.inf], reach[:-1]))
    inside = ~first & (s < before) & ~np.isnan(s)
    out = np.zeros(len(starts), dtype=bool)
    out[order] = inside
    return out


def _stack_order(codes: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Rows by group, then start; of two starting together the longer (outer) first; rows
    without a start last in their group, in file order (they hold no call and are in none).
    Profilers write calls nearly in start order, which a stable sort by start takes in a
    few passes, so only runs of equal starts are sorted again by end: np.lexsort over the
    three keys sorted each in full, 2-3x the time on a million rows."""
    order = np.argsort(starts, kind="stable")
    ordered = starts[order]
    same = ordered[1:] == ordered[:-1]  # missing starts are never equal: they stay in order
    tied = np.zeros(len(order), dtype=bool)
    tied[1:] |= same
    tied[:-1] |= same
    runs = np.flatnonzero(tied)
    if runs.size:
        rows = order[runs]
        order[runs] = rows[np.lexsort((-ends[rows], starts[rows]))]
    return order[np.argsort(codes[order], kind="stable")]


def nested_calls(host_ops: pd.DataFrame, rows: np.ndarray | None = None) -> np.ndarray:
    """Per host_ops row: does it lie within another call of its kind on its thread (see the
    `nested` column)? All False without start times, where nothing can be placed. `rows`:
    positions of the only rows to consider, as if the table held just those (read from the
    table's columns, not from a selection of its rows)."""
    count = len(host_ops) if rows is None else len(rows)
    if "start_us" not in host_ops or not count:
        return np.zeros(count, dtype=bool)

    def at(column: str) -> Any:
        values = host_ops[column].array
        return values if rows is None else values.take(rows)

    start = np.asarray(at("start_us").to_numpy("float64", na_value=np.nan))
    end = start + at("duration_us").to_numpy("float64", na_value=0.0)
    kinds = coded(host_ops["kind"])[0]  # the column's codes, kept for it; missing: -1
    groups = kinds if rows is None else kinds[rows]
    if "thread" in host_ops:  # kind and thread as one code (missing ones a value of their own)
        threads = pd.factorize(at("thread"), use_na_sentinel=False)[0]
        groups = groups * (int(threads.max(initial=0)) + 1) + threads
    return nested(start, end, groups)


def complement(merged: Intervals, lo: float, hi: float) -> Intervals:
    """The parts of [lo, hi] a merged set leaves uncovered (the device's idle time in a step,
    given its busy time)."""
    s, e = clip(merged, lo, hi)
    starts = np.concatenate(([lo], e))
    ends = np.concatenate((s, [hi]))
    keep = ends > starts
    return starts[keep], ends[keep]


def subtract(a: Intervals, b: Intervals) -> Intervals:
    """The parts of merged set `a` outside merged set `b`."""
    if a[0].size == 0 or b[0].size == 0:
        return a
    lo, hi = float(min(a[0][0], b[0][0])), float(max(a[1][-1], b[1][-1]))
    return intersect(a, complement(b, lo, hi))


_CHUNK = 65_536
"""Rows `nest` reads into Python lists at a time: a loop over lists runs several times
faster than one over array items, and a chunk bounds the lists' memory."""


def nest(thread: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Parent position of each interval (-1 for a root), given rows sorted by (thread, start,
    longest first). An interval's parent is the innermost earlier one on its thread that is
    still open at its start."""
    parent = np.full(len(start), -1, dtype=np.int64)
    open_rows: list[int] = []  # the stack of open intervals, innermost last ...
    open_ends: list[Any] = []  # ... and their ends
    last_thread: Any = None
    for lo in range(0, len(start), _CHUNK):
        hi = min(lo + _CHUNK, len(start))
        found = [-1] * (hi - lo)
        rows = zip(thread[lo:hi].tolist(), start[lo:hi].tolist(), end[lo:hi].tolist())
        for i, (row_thread, row_start, row_end) in enumerate(rows):
            if row_thread != last_thread:
                open_rows.clear()
                open_ends.clear()
                last_thread = row_thread
            while open_ends and open_ends[-1] <= row_start:
                open_rows.pop()
                open_ends.pop()
            if open_rows:
                found[i] = open_rows[-1]
            open_rows.append(lo + i)
            open_ends.append(row_end)
        parent[lo:hi] = found
    return parent


def innermost(
    thread: np.ndarray,
    start: np.ndarray,
    end: np.ndarray,
    parent: np.ndarray,
    at_thread: np.ndarray,
    at: np.ndarray,
) -> np.ndarray:
    """Position of the innermost interval on `at_thread` containing each time `at` (-1: none).

    Intervals are sorted as for `nest`. The latest interval starting at or before a point
    either contains it or has closed, in which case one of its ancestors may still contain it:
    all points of a thread are placed by one search, then climb together, one level a pass."""
    found = np.full(len(at), -1, dtype=np.int64)
    if not len(start) or not len(at):
        return found
    threads, first = np.unique(thread, return_index=True)
    last = np.append(first[1:], len(thread))
    at_thread = np.asarray(at_thread)
    for value, lo, hi in zip_strict(threads.tolist(), first.tolist(), last.tolist()):
        points = np.flatnonzero(at_thread == value)
        if not len(points):
            continue
        when = at[points]
        row = lo + np.searchsorted(start[lo:hi], when, side="right") - 1
        climbing = np.flatnonzero(row >= lo)
        climbing = climbing[end[row[climbing]] <= when[climbing]]
        while len(climbing):  # parents of a thread's rows are on that thread, or -1
            row[climbing] = parent[row[climbing]]
            climbing = climbing[row[climbing] >= lo]
            climbing = climbing[end[row[climbing]] <= when[climbing]]
        found[points] = np.where(row >= lo, row, -1)
    return found
