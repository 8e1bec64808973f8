"""The communication groups a rank's metadata describes: torch_npu's and MindSpore's
`parallel_group_info` (profiler_metadata.json, or META_DATA in the profiler database) names,
for each group the rank belongs to, the parallel dimension it serves (Megatron's tp, dp, pp,
...) and the global rank of each of its members.

HCCL's records number a group's ranks within the group (communication_matrix.json's
`src-dst`, a Notify_Wait task's `dst rank`) and name the group by a hash of its name, so a
rank's communication data alone cannot say which rank of the job a peer is. With these groups
it can: the group's `global_ranks[i]` is its rank i.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from advisor.compat import zip_strict
from advisor.formats.numbers import int_or_none
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

_MASK = 0xFFFFFFFF
_PRIMES = (29, 131)


@dataclass(frozen=True)
class ParallelGroup:
    """One communication group: the name of what it parallelises and its members' global
    ranks, in the order of their numbers within the group."""

    name: str
    global_ranks: tuple[int, ...]

    def global_rank(self, group_rank: int) -> int | None:
        """The global rank of the group's rank `group_rank`, None where the group has none."""
        return self.global_ranks[group_rank] if 0 <= group_rank < len(self.global_ranks) else None


def hccl_group_id(name: str) -> str:
    """The name HCCL's records give a group: two 32-bit polynomial hashes of the group's name
    (primes 29 and 131) side by side in one 64-bit number. Checked on MindStudio Insight's
    4-rank Megatron run, whose `group_name_19` (pp) is `3985310405473756128` in
    communication_matrix.json, and on its 8-rank run's cluster output, whose group
    `10.174.216.241%enp189s0f1_55000_0_1738895486152654` is `212011646445595226`."""
    low = high = 0
    for char in name:
        high = (high * _PRIMES[0] + ord(char)) & _MASK
        low = (low * _PRIMES[1] + ord(char)) & _MASK
    return str((high << 32) | low)


def parallel_groups(info: Any) -> dict[str, ParallelGroup]:
    """The groups of a `parallel_group_info` value, keyed by the id HCCL's records give them;
    entries without a name or a list of integer ranks are left out."""
    if not isinstance(info, dict):
        return {}
    groups = {}
    for key, group in info.items():
        if not isinstance(group, dict) or not isinstance(group.get("global_ranks"), list):
            continue
        ranks = [int_or_none(r) for r in group["global_ranks"]]
        name = group.get("group_name")
        if not isinstance(name, str) or not name or any(r is None for r in ranks):
            continue
        groups[hccl_group_id(str(key))] = ParallelGroup(
            name, tuple(r for r in ranks if r is not None)
        )
    return groups


def with_parallel_groups(comm: pd.DataFrame, groups: dict[str, ParallelGroup]) -> pd.DataFrame:
    """comm_ops with what the groups tell: `parallel_group` (the group's name: tp, dp, pp...),
    `waited_global_rank` (the global rank of `waited_rank`), and each link's `src->dst` in
    global ranks, where the row's group is one of `groups`; other rows as they were."""
    if not groups or "group" not in comm:
        return comm
    found = [groups.get(str(g)) if isinstance(g, str) else None for g in comm["group"].tolist()]
    if not any(found):
        return comm
    out = comm.assign(
        parallel_group=pd.array([g.name if g else None for g in found], dtype="string")
    )
    if "waited_rank" in comm:
        out["waited_global_rank"] = pd.array(
            [
                g.global_rank(int(r)) if g and pd.notna(r) else None
                for g, r in zip_strict(found, comm["waited_rank"].tolist())
            ],
            dtype="Int64",
        )
    if "kind" in comm:
        links = (comm["kind"] == "link").fillna(False).tolist()
        out["name"] = [
            _global_link(name, group) if link and group else name
            for name, group, link in zip_strict(comm["name"].tolist(), found, links)
        ]
    return out


def _global_link(name: str, group: ParallelGroup) -> str:
    """A link's `src->dst` in global ranks; as it was where an end is not in the group."""
    src, _, dst = str(name).partition("->")
    ends = [int_or_none(src), int_or_none(dst)]
    mapped = [group.global_rank(e) if e is not None else None for e in ends]
    return name if None in mapped else f"{mapped[0]}->{mapped[1]}"
