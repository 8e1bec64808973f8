"""Framework operators of one profile as a call tree, with the device kernels each launched.

Profilers record operators as nested host intervals per thread (aten::linear contains
aten::addmm) and kernels on the device. Comparing two runs needs both: the operator a user
recognises and the device time it caused. Kernels are attached through `device_ops.launch_us`
/ `launch_thread` (the host call that launched them) to the innermost operator around that
call; an operator's time is then the device time of its whole subtree, or its host duration in
a profile without launched kernels (a CPU-only run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from advisor.intervals import innermost, nest
from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

FRAMEWORK_KINDS = ("aten", "optimizer")
"""host_ops kinds that are framework operators (Optimizer.step#SGD.step included, as users
name it in --op-name-map)."""

MODULE_PREFIX = "nn.Module: "
"""python_function events of nn.Module.forward calls (recorded with with_stack=True)."""


@dataclass
class OperatorTree:
    """Framework operators of one profile, sorted by (thread, start), with subtree figures.

    `ops` columns: name, input_shapes, thread, start_us, end_us, host_us, parent, depth,
    device_us (kernel time of the subtree), kernels (kernel count of the subtree), time_us
    (device_us where kernels are attached, else host_us: what a run alone is measured by).
    `kernel_owner[i]` is the operator row owning device_ops row i (-1: not attached).
    """

    ops: pd.DataFrame
    kernels: pd.DataFrame
    kernel_owner: np.ndarray
    uses_device_time: bool

    def roots(self) -> np.ndarray:
        return np.flatnonzero(self.ops["parent"].to_numpy() < 0)

    def children(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(len(self.ops))]
        for child, parent in enumerate(self.ops["parent"].to_numpy().tolist()):
            if parent >= 0:
                out[parent].append(child)
        return out

    def climb(self, rows: np.ndarray, nodes: np.ndarray) -> np.ndarray:
        """For each operator row (-1: none), the position in `nodes` of the node it is or lies
        under (-1: under none of them)."""
        parent = self.ops["parent"].to_numpy()
        position = np.full(len(self.ops), -1, dtype=np.int64)
        position[nodes] = np.arange(len(nodes))
        out = np.full(len(rows), -1, dtype=np.int64)
        for k, row in enumerate(rows.tolist()):
            while row >= 0 and position[row] < 0:
                row = int(parent[row])
            if row >= 0:
                out[k] = position[row]
        return out


def sorted_intervals(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows with a start and a thread, sorted for `nest` (thread, start, longest first)."""
    frame = frame[frame["start_us"].notna() & frame["duration_us"].notna()]
    thread = frame["thread"].fillna(-1) if "thread" in frame else pd.Series(-1, frame.index)
    frame = frame.assign(
        thread=pd.array(thread, dtype="int64"), end_us=frame["start_us"] + frame["duration_us"]
    )
    return frame.sort_values(
        ["thread", "start_us", "duration_us"],
        ascending=[True, True, False],
        kind="stable",
        ignore_index=True,
    )


def framework_operators(host: pd.DataFrame) -> pd.Series:
    return host["kind"].isin(FRAMEWORK_KINDS).fillna(False)


def modules(host: pd.DataFrame) -> pd.Series:
    return (host["kind"].eq("python") & host["name"].str.startswith(MODULE_PREFIX)).fillna(False)


def operator_tree(
    profile: Profile, select: Callable[[pd.DataFrame], pd.Series] = framework_operators
) -> OperatorTree:
    """The tree of the host_ops rows `select` picks (framework operators, or nn.Module calls),
    with the kernels launched under each; empty when the profile records none."""
    host = profile.tables.get("host_ops")
    if host is None or "start_us" not in host:
        host = pd.DataFrame(
            {
                "name": pd.Series(dtype="string"),
                "kind": pd.Series(dtype="string"),
                "start_us": pd.Series(dtype="float64"),
                "duration_us": pd.Series(dtype="float64"),
            }
        )
    host = host[select(host)]
    ops = sorted_intervals(host)
    thread = ops["thread"].to_numpy("int64")
    start = ops["start_us"].to_numpy("float64")
    end = ops["end_us"].to_numpy("float64")
    parent = nest(thread, start, end)
    kernels = profile.tables.get("device_ops", pd.DataFrame(columns=["name", "duration_us"]))
    owner = np.full(len(kernels), -1, dtype=np.int64)
    if {"launch_us", "launch_thread"} <= set(kernels.columns):
        linked = (kernels["launch_us"].notna() & kernels["launch_thread"].notna()).to_numpy()
        rows = np.flatnonzero(linked)
        owner[rows] = innermost(
            thread,
            start,
            end,
            parent,
            kernels["launch_thread"].to_numpy("float64", na_value=np.nan)[rows].astype("int64"),
            kernels["launch_us"].to_numpy("float64", na_value=np.nan)[rows],
        )
    attached = owner >= 0
    device_us = np.zeros(len(ops))
    count = np.zeros(len(ops), dtype=np.int64)
    np.add.at(
        device_us,
        owner[attached],
        kernels["duration_us"].to_numpy("float64", na_value=0.0)[attached],
    )
    np.add.at(count, owner[attached], 1)
    depth = np.zeros(len(ops), dtype=np.int64)
    for i, p in enumerate(parent.tolist()):  # parents come before their children
        if p >= 0:
            depth[i] = depth[p] + 1
    for i in np.argsort(-depth, kind="stable").tolist():  # children before parents
        p = parent[i]
        if p >= 0:
            device_us[p] += device_us[i]
            count[p] += count[i]
    uses_device = bool(attached.any())
    host_us = ops["duration_us"].to_numpy("float64")
    shapes = ops["input_shapes"] if "input_shapes" in ops else pd.Series(pd.NA, index=ops.index)
    frame = pd.DataFrame(
        {
            "name": ops["name"].astype("string"),
            "input_shapes": shapes.astype("string"),
            "thread": thread,
            "start_us": start,
            "end_us": end,
            "host_us": host_us,
            "parent": parent,
            "depth": depth,
            "device_us": device_us,
            "kernels": count,
            "time_us": device_us if uses_device else host_us,
        }
    )
    return OperatorTree(frame, kernels, owner, uses_device)
