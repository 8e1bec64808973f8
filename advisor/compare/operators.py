"""Operator comparison: the framework operators of two runs aligned in execution order.

Two runs of one model call the same operators in the same order, with insertions where a
framework or version adds some (a Cast on NPU, a fused optimizer). Aligning the two sequences
(longest matching blocks, as a diff does) pairs each operator with its counterpart, so a
slower operator shows as one row with both times, and an added one as a row with one side.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Optional

from advisor.compare.tree import OperatorTree
from advisor.compat import zip_strict
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

TOP_KERNELS = 3  # kernels named per operator in the detail rows


@dataclass(frozen=True)
class CompareOptions:
    """How operators are matched: by name (mapped through `op_name_map`), optionally by input
    shape; operators launching more than `max_kernel_num` kernels are replaced by their
    children. `base_step` / `comparison_step` narrow a side to one step."""

    use_input_shape: bool = False
    op_name_map: Mapping[str, str] = field(default_factory=dict)
    max_kernel_num: int | None = None
    base_step: int | None = None
    """Compare only this step of the baseline (default: the mean of all its steps)."""
    comparison_step: int | None = None
    """Compare only this step of the comparison."""


def canonical_names(op_name_map: Mapping[str, str]) -> dict[str, str]:
    """Both names of every equivalent pair mapped to the first (the baseline's) name."""
    return {**{b: a for a, b in op_name_map.items()}, **{a: a for a in op_name_map}}


def compare_nodes(tree: OperatorTree, max_kernel_num: int | None) -> np.ndarray:
    """Operator rows to compare, in execution order: the top-level operators, each replaced
    by its children while it launches more than `max_kernel_num` kernels."""
    roots = tree.roots()
    if max_kernel_num is None:
        chosen = roots.tolist()
    else:
        children = tree.children()
        kernels = tree.ops["kernels"].to_numpy()
        chosen, todo = [], list(reversed(roots.tolist()))
        while todo:
            row = todo.pop()
            if kernels[row] > max_kernel_num and children[row]:
                todo.extend(reversed(children[row]))
            else:
                chosen.append(row)
    rows = np.asarray(chosen, dtype=np.int64)
    return rows[np.argsort(tree.ops["start_us"].to_numpy()[rows], kind="stable")]


def _top_kernels(tree: OperatorTree, rows: np.ndarray) -> list[str | None]:
    """'kernel (µs); ...' of the longest kernels under each operator."""
    if not tree.uses_device_time:
        return [None] * len(rows)
    frame = pd.DataFrame(
        {
            "node": tree.climb(tree.kernel_owner, rows),
            "name": tree.kernels["name"].astype(str),
            "us": tree.kernels["duration_us"].to_numpy("float64", na_value=0.0),
        }
    )
    frame = frame[frame["node"] >= 0].sort_values("us", ascending=False, kind="stable")
    texts: list[str | None] = [None] * len(rows)
    for node, group in frame.groupby("node", sort=False):
        top = group.head(TOP_KERNELS)
        texts[int(node)] = "; ".join(
            f"{n} ({u:,.1f} µs)" for n, u in zip_strict(top["name"], top["us"])
        )
    return texts


def _side(
    tree: OperatorTree, rows: np.ndarray, names: dict[str, str], use_device: bool
) -> pd.DataFrame:
    ops = tree.ops.iloc[rows]
    name = ops["name"].astype(str)
    return pd.DataFrame(
        {
            "name": name.to_numpy(),
            "key": name.map(lambda n: names.get(n, n)).to_numpy(),
            "input_shapes": ops["input_shapes"].to_numpy(),
            "time_us": ops["device_us" if use_device else "host_us"].to_numpy(),
            "device_us": ops["device_us"].to_numpy() if tree.uses_device_time else np.nan,
            "host_us": ops["host_us"].to_numpy(),
            "kernels": ops["kernels"].to_numpy(),
            "top_kernels": _top_kernels(tree, rows),
        }
    )


DIFFLIB_CELLS = 1_000_000
"""Up to this many base x comparison operators a stretch is aligned by difflib (longest
matching blocks); difflib is quadratic where names repeat, so longer stretches are first
split at anchors."""

Pair = tuple[Optional[int], Optional[int]]


def _pairs(base: list, comp: list) -> list[Pair]:
    """Aligned positions: matched pairs, and unmatched rows of either side where they occur.

    A stretch small enough goes to difflib as a whole (the alignment it always had); in a
    larger one the shared prefix and suffix match directly and the rest is split at anchors
    (the operators rarest in both sides, matched in order, keeping only an increasing run of
    them), so the work grows about as n log n instead of n**2 with the repeated names of
    real traces (20,000 calls of one operator took minutes)."""
    out: list[Pair] = []
    todo: list[tuple[int, int, int, int] | Pair] = [(0, len(base), 0, len(comp))]
    while todo:
        task = todo.pop()
        if len(task) == 2:
            out.append(task)  # type: ignore[arg-type]
            continue
        b0, b1, c0, c1 = task  # type: ignore[misc]
        if (b1 - b0) * (c1 - c0) <= DIFFLIB_CELLS:
            out += _difflib_pairs(base, comp, b0, b1, c0, c1)
            continue
        while b0 < b1 and c0 < c1 and base[b0] == comp[c0]:
            out.append((b0, c0))
            b0, c0 = b0 + 1, c0 + 1
        tail: list[Pair] = []
        while b1 > b0 and c1 > c0 and base[b1 - 1] == comp[c1 - 1]:
            b1, c1 = b1 - 1, c1 - 1
            tail.append((b1, c1))
        todo.extend(tail)  # popped last-first: in order after the middle
        if (b1 - b0) * (c1 - c0) <= DIFFLIB_CELLS:
            out += _difflib_pairs(base, comp, b0, b1, c0, c1)
            continue
        anchors = _anchors(base[b0:b1], comp[c0:c1])
        if not anchors:
            out += [(b, None) for b in range(b0, b1)] + [(None, c) for c in range(c0, c1)]
            continue
        segments: list[tuple[int, int, int, int] | Pair] = []
        prev_b, prev_c = b0, c0
        for ab, ac in anchors:
            segments += [(prev_b, b0 + ab, prev_c, c0 + ac), (b0 + ab, c0 + ac)]
            prev_b, prev_c = b0 + ab + 1, c0 + ac + 1
        segments.append((prev_b, b1, prev_c, c1))
        todo.extend(reversed(segments))
    return out


def _difflib_pairs(base: list, comp: list, b0: int, b1: int, c0: int, c1: int) -> list[Pair]:
    matcher = difflib.SequenceMatcher(None, base[b0:b1], comp[c0:c1], autojunk=False)
    out: list[Pair] = []
    for tag, i0, i1, j0, j1 in matcher.get_opcodes():
        if tag == "equal":
            out += zip_strict(range(b0 + i0, b0 + i1), range(c0 + j0, c0 + j1))
        else:
            out += [(b0 + b, None) for b in range(i0, i1)] + [(None, c0 + c) for c in range(j0, j1)]
    return out


def _anchors(base: list, comp: list) -> list[tuple[int, int]]:
    """Positions to split two stretches at: every occurrence of the keys rarest in both
    (fewest occurrences on the commoner side), the k-th in one paired with the k-th in the
    other, then the longest run increasing on both sides (patience sorting, n log n)."""
    count_b: dict = {}
    for key in base:
        count_b[key] = count_b.get(key, 0) + 1
    count_c: dict = {}
    for key in comp:
        count_c[key] = count_c.get(key, 0) + 1
    common = [k for k in count_b if k in count_c]
    if not common:
        return []
    rarest = min(max(count_b[k], count_c[k]) for k in common)
    chosen = {k for k in common if max(count_b[k], count_c[k]) == rarest}
    seen: dict = {}
    where_c: dict = {}
    for j, key in enumerate(comp):
        if key in chosen:
            where_c.setdefault(key, []).append(j)
    candidates = []
    for i, key in enumerate(base):
        if key in chosen:
            k = seen.get(key, 0)
            seen[key] = k + 1
            if k < len(where_c[key]):
                candidates.append((i, where_c[key][k]))
    return _increasing(candidates)


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of (i, j) pairs, given in increasing i, whose j increase."""
    tails: list[int] = []  # j of the last pair of the best run of each length
    tail_at: list[int] = []
    back = [-1] * len(pairs)
    for n, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_at.append(n)
        else:
            tails[k], tail_at[k] = j, n
        back[n] = tail_at[k - 1] if k else -1
    run, n = [], tail_at[-1] if tail_at else -1
    while n >= 0:
        run.append(pairs[n])
        n = back[n]
    return run[::-1]


def compare_operators(
    trees: Sequence[OperatorTree], nodes: Sequence[np.ndarray], options: CompareOptions
) -> pd.DataFrame:
    """One row per aligned operator (the compare_ops table) from the baseline's and the
    comparison's trees and their `compare_nodes`. Times are device times when both runs have
    kernels attached to operators, else host times (one measure for both)."""
    names = canonical_names(options.op_name_map)
    use_device = all(tree.uses_device_time for tree in trees)
    sides = [_side(tree, rows, names, use_device) for tree, rows in zip_strict(trees, nodes)]
    keys = [side["key"].tolist() for side in sides]
    if options.use_input_shape:
        keys = [
            list(zip_strict(k, side["input_shapes"].fillna("").tolist()))
            for k, side in zip_strict(keys, sides)
        ]
    pairs = _pairs(*keys)
    columns = ["name", "input_shapes", "time_us", "device_us", "host_us", "kernels", "top_kernels"]
    halves = []
    for prefix, side, index in (
        ("base_", sides[0], [b for b, _ in pairs]),
        ("comp_", sides[1], [c for _, c in pairs]),
    ):
        taken = side.reindex([-1 if i is None else i for i in index])[columns]
        halves.append(taken.add_prefix(prefix).reset_index(drop=True))
    frame = pd.concat(halves, axis=1)
    matched = frame["base_name"].notna() & frame["comp_name"].notna()
    frame.insert(0, "order", np.arange(len(frame)))
    key = [sides[0]["key"].iloc[b] if b is not None else sides[1]["key"].iloc[c] for b, c in pairs]
    frame.insert(1, "name", key)
    frame["status"] = np.select(
        [matched, frame["base_name"].notna()], ["matched", "baseline_only"], "comparison_only"
    )
    base_us, comp_us = frame["base_time_us"].fillna(0.0), frame["comp_time_us"].fillna(0.0)
    frame["diff_us"] = comp_us - base_us
    frame["ratio"] = np.where(base_us > 0, comp_us / base_us.where(base_us > 0), np.nan)
    return frame


def operator_statistic(detail: pd.DataFrame, base_steps: int, comp_steps: int) -> pd.DataFrame:
    """Per operator name: calls and time per step in each run, the diff and the ratio
    (the compare_op_stats table), largest regression first."""
    grouped = (
        detail.groupby("name", sort=False)
        .agg(
            base_count=("base_name", "count"),
            comp_count=("comp_name", "count"),
            base_us=("base_time_us", "sum"),
            comp_us=("comp_time_us", "sum"),
            base_kernels=("base_kernels", "sum"),
            comp_kernels=("comp_kernels", "sum"),
        )
        .reset_index()
    )
    for column, steps in (
        ("base_count", base_steps),
        ("base_us", base_steps),
        ("base_kernels", base_steps),
        ("comp_count", comp_steps),
        ("comp_us", comp_steps),
        ("comp_kernels", comp_steps),
    ):
        grouped[column] = grouped[column] / steps
    grouped["diff_us"] = grouped["comp_us"] - grouped["base_us"]
    grouped["ratio"] = np.where(
        grouped["base_us"] > 0,
        grouped["comp_us"] / grouped["base_us"].where(grouped["base_us"] > 0),
        np.nan,
    )
    return grouped.sort_values("diff_us", ascending=False, kind="stable", ignore_index=True)
