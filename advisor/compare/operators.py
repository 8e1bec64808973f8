"""Operator comparison: the framework operators of two runs aligned in execution order.

Two runs of one model call the same operators in the same order, with insertions where a
framework or version adds some (a Cast on NPU, a fused optimizer). Aligning the two sequences
(longest matching blocks, as a diff does) pairs each operator with its counterpart, so a
slower operator shows as one row with both times, and an added one as a row with one side.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from advisor.compare.tree import OperatorTree
from advisor.compat import zip_strict

TOP_KERNELS = 3  # kernels named per operator in the detail rows


@dataclass(frozen=True)
class CompareOptions:
    """How operators are matched: by name (mapped through `op_name_map`), optionally by input
    shape; operators launching more than `max_kernel_num` kernels are replaced by their
    children."""

    use_input_shape: bool = False
    op_name_map: Mapping[str, str] = field(default_factory=dict)
    max_kernel_num: int | None = None


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
    frame = pd.DataFrame({
        "node": tree.climb(tree.kernel_owner, rows), "name": tree.kernels["name"].astype(str),
        "us": tree.kernels["duration_us"].to_numpy("float64", na_value=0.0)})
    frame = frame[frame["node"] >= 0].sort_values("us", ascending=False, kind="stable")
    texts: list[str | None] = [None] * len(rows)
    for node, group in frame.groupby("node", sort=False):
        top = group.head(TOP_KERNELS)
        texts[int(node)] = "; ".join(f"{n} ({u:,.1f} µs)"
                                     for n, u in zip_strict(top["name"], top["us"]))
    return texts


def _side(tree: OperatorTree, rows: np.ndarray, names: dict[str, str], use_device: bool
          ) -> pd.DataFrame:
    ops = tree.ops.iloc[rows]
    name = ops["name"].astype(str)
    return pd.DataFrame({
        "name": name.to_numpy(), "key": name.map(lambda n: names.get(n, n)).to_numpy(),
        "input_shapes": ops["input_shapes"].to_numpy(),
        "time_us": ops["device_us" if use_device else "host_us"].to_numpy(),
        "device_us": ops["device_us"].to_numpy() if tree.uses_device_time else np.nan,
        "host_us": ops["host_us"].to_numpy(), "kernels": ops["kernels"].to_numpy(),
        "top_kernels": _top_kernels(tree, rows)})


def _pairs(base: list, comp: list) -> list[tuple[int | None, int | None]]:
    """Aligned positions: matched pairs, and unmatched rows of either side where they occur."""
    matcher = difflib.SequenceMatcher(None, base, comp, autojunk=False)
    out: list[tuple[int | None, int | None]] = []
    for tag, b0, b1, c0, c1 in matcher.get_opcodes():
        if tag == "equal":
            out += zip_strict(range(b0, b1), range(c0, c1))
        else:
            out += [(b, None) for b in range(b0, b1)] + [(None, c) for c in range(c0, c1)]
    return out


def compare_operators(trees: Sequence[OperatorTree], nodes: Sequence[np.ndarray],
                      options: CompareOptions) -> pd.DataFrame:
    """One row per aligned operator (the compare_ops table) from the baseline's and the
    comparison's trees and their `compare_nodes`. Times are device times when both runs have
    kernels attached to operators, else host times (one measure for both)."""
    names = canonical_names(options.op_name_map)
    use_device = all(tree.uses_device_time for tree in trees)
    sides = [_side(tree, rows, names, use_device)
             for tree, rows in zip_strict(trees, nodes)]
    keys = [side["key"].tolist() for side in sides]
    if options.use_input_shape:
        keys = [list(zip_strict(k, side["input_shapes"].fillna("").tolist()))
                for k, side in zip_strict(keys, sides)]
    pairs = _pairs(*keys)
    columns = ["name", "input_shapes", "time_us", "device_us", "host_us", "kernels",
               "top_kernels"]
    halves = []
    for prefix, side, index in (("base_", sides[0], [b for b, _ in pairs]),
                                ("comp_", sides[1], [c for _, c in pairs])):
        taken = side.reindex([-1 if i is None else i for i in index])[columns]
        halves.append(taken.add_prefix(prefix).reset_index(drop=True))
    frame = pd.concat(halves, axis=1)
    matched = frame["base_name"].notna() & frame["comp_name"].notna()
    frame.insert(0, "order", np.arange(len(frame)))
    key = [sides[0]["key"].iloc[b] if b is not None else sides[1]["key"].iloc[c]
           for b, c in pairs]
    frame.insert(1, "name", key)
    frame["status"] = np.select([matched, frame["base_name"].notna()],
                                ["matched", "baseline_only"], "comparison_only")
    base_us, comp_us = frame["base_time_us"].fillna(0.0), frame["comp_time_us"].fillna(0.0)
    frame["diff_us"] = comp_us - base_us
    frame["ratio"] = np.where(base_us > 0, comp_us / base_us.where(base_us > 0), np.nan)
    return frame


def operator_statistic(detail: pd.DataFrame, base_steps: int, comp_steps: int
                       ) -> pd.DataFrame:
    """Per operator name: calls and time per step in each run, the diff and the ratio
    (the compare_op_stats table), largest regression first."""
    grouped = detail.groupby("name", sort=False).agg(
        base_count=("base_name", "count"), comp_count=("comp_name", "count"),
        base_us=("base_time_us", "sum"), comp_us=("comp_time_us", "sum"),
        base_kernels=("base_kernels", "sum"), comp_kernels=("comp_kernels", "sum"),
    ).reset_index()
    for column, steps in (("base_count", base_steps), ("base_us", base_steps),
                          ("base_kernels", base_steps), ("comp_count", comp_steps),
                          ("comp_us", comp_steps), ("comp_kernels", comp_steps)):
        grouped[column] = grouped[column] / steps
    grouped["diff_us"] = grouped["comp_us"] - grouped["base_us"]
    grouped["ratio"] = np.where(grouped["base_us"] > 0,
                                grouped["comp_us"] / grouped["base_us"].where(
                                    grouped["base_us"] > 0), np.nan)
    return grouped.sort_values("diff_us", ascending=False, kind="stable", ignore_index=True)
