"""Interval arithmetic checked against a brute-force 1-µs bitmap."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor import intervals

span = st.tuples(st.integers(0, 200), st.integers(0, 50)).map(lambda t: (t[0], t[0] + t[1]))
spans = st.lists(span, max_size=30)


def bitmap(pairs: list[tuple[int, int]]) -> np.ndarray:
    cover = np.zeros(260, dtype=bool)
    for s, e in pairs:
        cover[s:e] = True
    return cover


def as_set(pairs: list[tuple[int, int]]) -> intervals.Intervals:
    arr = np.array(pairs, dtype="float64").reshape(-1, 2)
    return intervals.merge(arr[:, 0], arr[:, 1])


@settings(max_examples=200, deadline=None)
@given(spans)
def test_merge_total_equals_bitmap(pairs):
    merged = as_set(pairs)
    assert intervals.total(merged) == bitmap(pairs).sum()
    starts, ends = merged
    assert np.all(starts[1:] > ends[:-1])  # disjoint and sorted


@settings(max_examples=200, deadline=None)
@given(spans, spans)
def test_intersect_and_union_equal_bitmap(a, b):
    inter = intervals.intersect(as_set(a), as_set(b))
    assert intervals.total(inter) == (bitmap(a) & bitmap(b)).sum()
    assert intervals.total(intervals.union(as_set(a), as_set(b))) == (bitmap(a) | bitmap(b)).sum()


@settings(max_examples=200, deadline=None)
@given(spans, st.integers(0, 250), st.integers(0, 250))
def test_clip_equals_bitmap_window(pairs, lo, hi):
    lo, hi = min(lo, hi), max(lo, hi)
    clipped = intervals.clip(as_set(pairs), lo, hi)
    assert intervals.total(clipped) == bitmap(pairs)[lo:hi].sum()


def test_nan_and_empty_intervals_are_ignored():
    merged = intervals.merge(np.array([0.0, np.nan, 5.0]), np.array([2.0, 3.0, 5.0]))
    assert intervals.total(merged) == 2.0


def test_nested_marks_inner_levels_of_each_group_only():
    # group a: an outer call [0, 10) with two levels inside; a later call [20, 25) stands alone
    # group b: [2, 4) overlaps a's outer call but is another kind/thread: not nested
    starts = np.array([5.0, 0.0, 1.0, 20.0, 2.0, 0.0, np.nan])
    ends = np.array([6.0, 10.0, 9.0, 25.0, 4.0, 3.0, np.nan])
    groups = np.array(["a", "a", "a", "a", "b", "c", "a"])
    assert intervals.nested(starts, ends, groups).tolist() == [
        True,
        False,
        True,
        False,
        False,
        False,
        False,
    ]
    # two calls starting together: the longer is the outer one, whichever comes first
    assert intervals.nested(
        np.array([0.0, 0.0]), np.array([1.0, 5.0]), np.array(["a", "a"])
    ).tolist() == [True, False]


calls = st.lists(
    st.tuples(
        st.sampled_from(["a", "b"]),
        st.one_of(st.integers(0, 20).map(float), st.just(np.nan)),  # few starts: many ties
        st.integers(0, 8).map(float),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(calls)
def test_nested_is_true_for_calls_inside_an_earlier_or_longer_one_of_their_group(rows):
    """Brute force: a call is nested when a call of its group placed before it in (start,
    longest first, file order) order reaches past its start; calls without a start never
    are, and never hold another."""
    groups = np.array([g for g, _, _ in rows], dtype=object)
    starts = np.array([s for _, s, _ in rows], dtype="float64")
    ends = starts + np.array([d for _, _, d in rows], dtype="float64")
    placed = [i for i in range(len(rows)) if not np.isnan(starts[i])]
    before = sorted(placed, key=lambda i: (starts[i], -ends[i], i))
    want = [
        i in placed
        and any(groups[j] == groups[i] and ends[j] > starts[i] for j in before[: before.index(i)])
        for i in range(len(rows))
    ]
    assert intervals.nested(starts, ends, groups).tolist() == want


@settings(max_examples=200, deadline=None)
@given(spans, spans)
def test_covered_gives_the_part_of_each_window_the_set_covers(pairs, windows):
    merged = as_set(pairs)
    lo = np.array([w[0] for w in windows], dtype="float64")
    hi = np.array([w[1] for w in windows], dtype="float64")
    got = intervals.covered_between(merged, lo, hi)
    cover = bitmap(pairs)
    assert got.tolist() == [float(cover[int(a) : int(b)].sum()) for a, b in zip(lo, hi)]


def _parents_by_brute_force(thread, start, end) -> list[int]:
    """The innermost earlier call on the same thread still open at each call's start (the
    latest of those that contain it: calls sorted by thread, start, longest first)."""
    return [
        max(
            (j for j in range(i) if thread[j] == thread[i] and end[j] > start[i]),
            default=-1,
        )
        for i in range(len(start))
    ]


stacked_calls = st.lists(
    st.tuples(st.integers(0, 2), st.integers(0, 30), st.integers(0, 12)), max_size=40
)
moments = st.lists(st.tuples(st.integers(-1, 3), st.integers(-2, 45)), max_size=30)


@settings(max_examples=300, deadline=None)
@given(stacked_calls, moments, st.sampled_from([1, 2, 5, 65_536]))
def test_nest_and_innermost_find_the_enclosing_calls(rows, points, chunk):
    """Brute force over calls that nest properly (each one inside its parent or after it):
    `nest` gives each call its innermost open caller, `innermost` each moment the innermost
    call of its thread holding it, with `nest` reading the calls a few at a time."""
    rows = sorted(rows, key=lambda r: (r[0], r[1], -r[2]))
    thread = np.array([t for t, _, _ in rows], dtype="int64")
    start = np.array([s for _, s, _ in rows], dtype="float64")
    end = start + np.array([d for _, _, d in rows], dtype="float64")
    want_parent = _parents_by_brute_force(thread, start, end)
    for i, p in enumerate(want_parent):  # a call outlasting its parent is not a stack
        if p >= 0:
            end[i] = min(end[i], end[p])
    want_parent = _parents_by_brute_force(thread, start, end)
    original = intervals._CHUNK
    intervals._CHUNK = chunk
    try:
        parent = intervals.nest(thread, start, end)
    finally:
        intervals._CHUNK = original
    assert parent.tolist() == want_parent
    at_thread = np.array([t for t, _ in points], dtype="int64")
    at = np.array([float(m) for _, m in points], dtype="float64")
    want = [
        max(
            (i for i in range(len(start)) if thread[i] == t and start[i] <= m < end[i]),
            default=-1,
        )
        for t, m in zip(at_thread, at)
    ]
    assert intervals.innermost(thread, start, end, parent, at_thread, at).tolist() == want


host_calls = st.lists(
    st.tuples(
        st.sampled_from(["aten", "python", None]),
        st.sampled_from([1, 2, None]),
        st.one_of(st.integers(0, 20).map(float), st.just(np.nan)),
        st.integers(0, 8).map(float),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(host_calls, st.data())
def test_nested_calls_groups_host_calls_by_kind_and_thread(rows, data):
    """Brute force over a host_ops table (missing kinds and threads a group of their own),
    whole or a selection of its rows: a call is nested when a call of its kind and thread
    placed before it (start, longest first, row order) reaches past its start."""
    import pandas as pd

    table = pd.DataFrame(
        {
            "name": pd.Series([f"op{i}" for i in range(len(rows))], dtype="string"),
            "kind": pd.Series([k for k, _, _, _ in rows], dtype="string"),
            "thread": pd.Series([t for _, t, _, _ in rows], dtype="Int64"),
            "start_us": [s for _, _, s, _ in rows],
            "duration_us": [d for _, _, _, d in rows],
        }
    )
    chosen = data.draw(st.lists(st.sampled_from(range(len(rows))), unique=True)) if rows else []
    for positions in (None, np.array(sorted(chosen), dtype=np.int64)):
        picked = list(range(len(rows))) if positions is None else positions.tolist()
        group = {i: (str(rows[i][0]), str(rows[i][1])) for i in picked}
        start = {i: rows[i][2] for i in picked}
        end = {i: rows[i][2] + rows[i][3] for i in picked}
        placed = [i for i in picked if not np.isnan(start[i])]
        before = sorted(placed, key=lambda i: (start[i], -end[i], i))
        want = [
            i in placed
            and any(group[j] == group[i] and end[j] > start[i] for j in before[: before.index(i)])
            for i in picked
        ]
        assert intervals.nested_calls(table, positions).tolist() == want


disjoint_windows = st.lists(st.integers(0, 200), max_size=20, unique=True).map(sorted)


@settings(max_examples=300, deadline=None)
@given(spans, disjoint_windows, st.randoms(use_true_random=False))
def test_longest_overlap_picks_the_interval_covering_each_window_most(pairs, cuts, rnd):
    # windows from consecutive cut points, some left out, given in a shuffled order
    windows = [(a, b) for a, b in zip(cuts[:-1], cuts[1:]) if rnd.random() < 0.7]
    rnd.shuffle(windows)
    lo = np.array([w[0] for w in windows], dtype="float64")
    hi = np.array([w[1] for w in windows], dtype="float64")
    starts = np.array([p[0] for p in pairs], dtype="float64")
    ends = np.array([p[1] for p in pairs], dtype="float64")
    best, most = intervals.longest_overlap(lo, hi, starts, ends)
    for w, (a, b) in enumerate(windows):
        overlaps = [(min(e, b) - max(s, a), -s, -i) for i, (s, e) in enumerate(pairs)]
        top = max((o for o in overlaps if o[0] > 0), default=None)
        assert (best[w], most[w]) == ((-1, 0.0) if top is None else (-top[2], top[0]))
