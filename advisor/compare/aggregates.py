"""Communication per collective type, memory per operator and time per nn.Module, of two runs.

Each is a per-step total in both runs with the difference and the ratio, so a regression is
one sortable column whatever the number of steps each run profiled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.compare.tree import OperatorTree, innermost
from advisor.lazy import lazy_module
from advisor.model import Profile, comm_operations

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


def side_by_side(
    base: pd.DataFrame,
    comp: pd.DataFrame,
    key: str,
    value: str,
    base_steps: int,
    comp_steps: int,
    extra: tuple[str, ...] = (),
) -> pd.DataFrame:
    """Outer join of per-key `count`, `value` (and `extra`) sums, per step, with diff/ratio.

    `base` and `comp` hold one row per event with the key and the summed columns.
    """
    sums = []
    for frame, prefix, steps in ((base, "base_", base_steps), (comp, "comp_", comp_steps)):
        grouped = frame.groupby(key, sort=False).agg(
            count=(value, "size"), **{c: (c, "sum") for c in (value, *extra)}
        )
        sums.append((grouped / steps).add_prefix(prefix))
    table = sums[0].join(sums[1], how="outer").reset_index()
    base_value = table[f"base_{value}"].fillna(0.0)
    comp_value = table[f"comp_{value}"].fillna(0.0)
    table = table.fillna({c: 0.0 for c in table.columns if c != key})
    table["diff"] = comp_value - base_value
    table["ratio"] = comp_value / base_value.where(base_value > 0)
    return table.sort_values("diff", ascending=False, kind="stable", ignore_index=True)


def collective_events(profile: Profile) -> pd.DataFrame:
    """Communication operations (links of a matrix excluded) keyed by collective type."""
    comm = profile.tables.get("comm_ops")
    if comm is None or comm.empty:
        return pd.DataFrame(
            {
                "op": pd.Series(dtype=str),
                "duration_us": pd.Series(dtype=float),
                "bytes": pd.Series(dtype=float),
                "wait_us": pd.Series(dtype=float),
            }
        )
    comm = comm_operations(comm)
    op = comm["op"].fillna(comm["name"]) if "op" in comm else comm["name"]
    return pd.DataFrame(
        {
            "op": op.astype(str).to_numpy(),
            "duration_us": comm["duration_us"].to_numpy(),
            "bytes": comm["bytes"].to_numpy() if "bytes" in comm else np.nan,
            "wait_us": comm["wait_us"].to_numpy() if "wait_us" in comm else np.nan,
        }
    )


def allocations(
    profile: Profile, tree: OperatorTree, nodes: np.ndarray, names: list[str]
) -> pd.DataFrame:
    """Memory allocated inside each compared operator: rises of the allocated total between
    consecutive samples of a device, charged to the innermost operator open at that moment
    (any thread: samples carry no thread), then to the compared operator above it."""
    memory = profile.tables.get("memory")
    empty = pd.DataFrame({"name": pd.Series(dtype=str), "bytes": pd.Series(dtype=float)})
    if memory is None or not profile.has("memory", "allocated_bytes") or tree.ops.empty:
        return empty
    device = memory["device"].fillna("") if "device" in memory else ""
    samples = memory.assign(device=device).sort_values(["device", "time_us"], kind="stable")
    rise = samples.groupby("device", sort=False)["allocated_bytes"].diff()
    samples = samples[rise > 0].assign(bytes=rise[rise > 0])
    if samples.empty:
        return empty
    ops = tree.ops
    at = samples["time_us"].to_numpy("float64")
    best = np.full(len(at), -1, dtype=np.int64)
    starts = ops["start_us"].to_numpy()
    for thread in np.unique(ops["thread"].to_numpy()).tolist():
        found = innermost(
            ops["thread"].to_numpy(),
            starts,
            ops["end_us"].to_numpy(),
            ops["parent"].to_numpy(),
            np.full(len(at), thread),
            at,
        )
        later = (found >= 0) & ((best < 0) | (starts[np.maximum(found, 0)] > starts[best]))
        best[later] = found[later]
    node = tree.climb(best, nodes)
    keep = node >= 0
    return pd.DataFrame(
        {
            "name": np.asarray(names, dtype=object)[node[keep]],
            "bytes": samples["bytes"].to_numpy()[keep],
        }
    )


def module_events(tree: OperatorTree) -> pd.DataFrame:
    """One row per nn.Module call: its path from the outermost module, and its time."""
    ops = tree.ops
    names = ops["name"].astype(str).str.removeprefix("nn.Module: ").tolist()
    parent = ops["parent"].to_numpy().tolist()
    paths: list[str] = []
    for i, name in enumerate(names):  # parents come first
        paths.append(f"{paths[parent[i]]}/{name}" if parent[i] >= 0 else name)
    return pd.DataFrame(
        {"module": paths, "time_us": ops["time_us"].to_numpy(), "depth": ops["depth"].to_numpy()}
    )
