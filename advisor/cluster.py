"""Multi-rank analysis: one `ranks` table built across the profiles of one run.

Slow-rank rules compare ranks with each other, which no single profile can do. When a run
yields profiles for two or more ranks, their per-step figures are summarised into a synthetic
"cluster" profile that only rules reading the `ranks` table are evaluated on.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import pandas as pd

from advisor.model import Profile, ProfileMeta, conform

_MEANS = ("duration_us", "computing_us", "communication_us", "comm_not_overlapped_us", "free_us")


def build_cluster(profiles: Sequence[Profile]) -> Profile | None:
    """A profile holding the `ranks` table, or None with fewer than two ranks with steps."""
    by_rank: dict[int, Profile] = {}
    for profile in profiles:
        rank = profile.meta.rank
        if rank is not None and profile.has("steps", "duration_us") and rank not in by_rank:
            by_rank[rank] = profile
    if len(by_rank) < 2:
        return None
    rows = []
    for rank, profile in sorted(by_rank.items()):
        steps = profile.tables["steps"]
        row = {"rank": rank, "steps": len(steps)}
        row |= {c: steps[c].mean() for c in _MEANS if profile.has("steps", c)}
        if "communication_us" not in row and profile.has("comm_ops", "duration_us"):
            # no device timeline (e.g. CPU/gloo): host-side collective time per step
            comm = profile.tables["comm_ops"]
            if "kind" in comm:
                comm = comm[(comm["kind"] != "link").fillna(True)]
            row["communication_us"] = comm["duration_us"].sum() / len(steps)
        rows.append(row)
    members = list(by_rank.values())
    first = members[0].meta
    meta = ProfileMeta(
        source_format="cluster", path=os.path.commonpath([p.meta.path for p in members]),
        framework=first.framework, device_kind=first.device_kind, world_size=len(by_rank),
        files_read=[f for p in members for f in p.meta.files_read],
        extra={"ranks": sorted(by_rank)})
    return Profile(meta, {"ranks": conform("ranks", pd.DataFrame(rows))})
