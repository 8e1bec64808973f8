"""Multi-rank analysis: `ranks` and `links` tables built across the profiles of one run.

Slow-rank rules compare ranks with each other, which no single profile can do. When a run
yields profiles for two or more ranks, their per-step figures are summarised into a synthetic
"cluster" profile that only rules reading the cluster tables are evaluated on.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from advisor import steady
from advisor.compat import zip_strict
from advisor.formats.metadata import rows_recording
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta, comm_operations, conform

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

BANDWIDTH_BOUND_BYTES = 1 << 20
"""Mean message size from which a link's throughput measures its bandwidth: msprof-analyze's
packet analysis calls RDMA messages from 1 MB large; smaller ones are latency-bound."""
_MEANS = (
    "duration_us",
    "computing_us",
    "communication_us",
    "comm_not_overlapped_us",
    "free_us",
    "bubble_us",
)
_SCORED = {
    "duration_us": "duration_z",
    "computing_us": "computing_z",
    "free_us": "free_z",
    "communication_us": "communication_z",
}
"""Per-rank means whose outliers mark a straggler, and the column holding their z-score. A
rank with far less communication than the others is the one they wait for in collectives."""


def robust_z(values: pd.Series) -> pd.Series:
    """Iglewicz-Hoaglin modified z-score, 0.6745 (x - median) / MAD.

    The median and MAD are not pulled by the straggler itself, unlike the mean and standard
    deviation. When more than half the ranks are equal the MAD is 0; the mean absolute
    deviation (scaled by 1.2533, its ratio to the standard deviation) takes its place, and all
    ranks equal give 0.
    """
    deviation = values - values.median()
    mad = deviation.abs().median()
    if mad > 0:
        return 0.6745 * deviation / mad
    mean_ad = deviation.abs().mean()
    if mean_ad > 0:
        return deviation / (1.2533 * mean_ad)
    return deviation * 0.0


def _add_straggler_scores(ranks: pd.DataFrame) -> pd.DataFrame:
    """The z-score of each scored metric, and per rank the metric that stands out most.

    Where the pipeline stages are recorded (`pp_stage`) each rank is scored among the ranks
    of its stage: the stages differ by design (the last one computes the loss, the later
    ones wait in the bubble), and scored across them the stages split the median and the
    MAD, so a slow rank within one is lost (16 ranks, stage 1 computing 20% more, a stage-0
    rank 40% more: z 1.31 across, an outlier within; tests/test_multirank.py)."""
    scored = [c for c in _SCORED if c in ranks and ranks[c].notna().any()]
    if not scored:
        return ranks
    stage = ranks["pp_stage"] if "pp_stage" in ranks else pd.Series(0, index=ranks.index)
    by_stage = ranks.groupby(stage.to_numpy(), sort=False)
    for column in scored:
        ranks[_SCORED[column]] = by_stage[column].transform(robust_z)
    z = ranks[[_SCORED[c] for c in scored]].to_numpy(dtype=float)
    worst = np.argmax(np.nan_to_num(np.abs(z), nan=-1.0), axis=1)
    rows = np.arange(len(ranks))
    ranks["straggler_metric"] = [scored[i] for i in worst]
    ranks["straggler_z"] = z[rows, worst]
    values = ranks[scored].to_numpy(dtype=float)
    medians = by_stage[scored].transform("median").to_numpy(dtype=float)
    ranks["straggler_delta_us"] = values[rows, worst] - medians[rows, worst]
    return ranks


def _rank_steps(profile: Profile) -> dict[str, tuple[float, ...]]:
    """One rank's step breakdown as columns: step number and the _MEANS columns it has."""
    steps = profile.tables["steps"]
    columns = {"step": tuple(steps["step"].astype("float64"))}
    columns |= {
        c: tuple(steps[c].to_numpy("float64", na_value=np.nan))
        for c in _MEANS
        if profile.has("steps", c)
    }
    if "communication_us" not in columns and profile.has("comm_ops", "duration_us"):
        # no device timeline (e.g. CPU/gloo): host-side collective time per step
        comm = comm_operations(profile.tables["comm_ops"])
        columns["communication_us"] = _comm_per_step(comm, steps)
    return columns


def _comm_per_step(comm: pd.DataFrame, steps: pd.DataFrame) -> tuple[float, ...]:
    """The collectives' time in each step window (by start), else their total spread evenly
    over the steps when either side has no times."""
    if "start_us" not in comm or not {"start_us", "end_us"} <= set(steps):
        return (float(comm["duration_us"].sum()) / len(steps),) * len(steps)
    start = comm["start_us"].to_numpy("float64", na_value=np.nan)
    duration = comm["duration_us"].to_numpy("float64", na_value=0.0)
    windows = zip_strict(steps["start_us"].to_numpy("float64"), steps["end_us"].to_numpy("float64"))
    return tuple(float(duration[(start >= lo) & (start < hi)].sum()) for lo, hi in windows)


def _rank_row(summary: RankSummary, left_out: set[float]) -> dict[str, float | int]:
    """Means per step of one rank's step breakdown over the steps no rank spent warming up:
    a warm-up step of one rank (advisor.steady) would otherwise make it look like a straggler,
    and the ranks are compared over the same steps."""
    steps = summary.steps
    keep = np.array([s not in left_out for s in steps["step"]], dtype=bool)
    if not keep.any():
        keep[:] = True
    row: dict[str, float | int] = {
        "rank": summary.rank,
        "steps": int(keep.sum()),
        "warmup_steps": int((~keep).sum()),
        "warmup_us": _mean(np.asarray(steps["duration_us"])[~keep]) if (~keep).any() else 0.0,
    }
    row |= {c: _mean(np.asarray(v)[keep]) for c, v in steps.items() if c != "step"}
    return row


def _mean(values: np.ndarray) -> float:
    """Mean of the present values; NaN when there are none (as pandas' mean)."""
    present = values[~np.isnan(values)]
    return float(present.mean()) if present.size else float("nan")


def _metadata_number(profile: Profile, key: str) -> int | None:
    """An integer fact of the profile's `metadata` table, or None."""
    table = profile.tables.get("metadata")
    rows = [] if table is None else rows_recording(table, key)
    if not rows:
        return None
    values = pd.to_numeric(table["value"].iloc[rows], errors="coerce").dropna()
    if values.empty or not float(values.iloc[0]).is_integer():
        return None
    return int(values.iloc[0])


def pipeline_stage(rank: int, profile: Profile) -> int | None:
    """The rank's pipeline-parallel stage: recorded (`distributed.pp_stage`), or from the
    pipeline size of Megatron-style arguments (`distributed.pipeline_model_parallel_size`),
    whose default rank order puts world_size / pp consecutive ranks in each stage."""
    stage = _metadata_number(profile, "distributed.pp_stage")
    if stage is not None:
        return stage
    size = _metadata_number(profile, "distributed.pipeline_model_parallel_size")
    world = profile.meta.world_size or _metadata_number(profile, "distributed.world_size")
    if size and size > 1 and world and world % size == 0 and 0 <= rank < world:
        return rank // (world // size)
    return None


def _add_stages(ranks: pd.DataFrame, stages: list[int | None]) -> pd.DataFrame:
    """`pp_stage`, `stage_label`, `stage_computing_us` and `stage_least_computing_us` (the
    mean and the least computing of the rank's stage) where the stages are known; where they
    are not but the steps record a pipeline bubble, each rank stands for itself (labelled so).
    The ranks of one stage compute the same layers, so their computing is compared within it
    (CLUSTER-004) and the stages' means against each other (CLUSTER-006)."""
    if "computing_us" not in ranks or ranks["computing_us"].isna().all():
        return ranks
    if sum(s is not None for s in stages) == len(ranks) and len(set(stages)) > 1:
        ranks["pp_stage"] = stages
        per_stage = ranks.groupby("pp_stage")["computing_us"]
        ranks["stage_computing_us"] = per_stage.transform("mean")
        ranks["stage_least_computing_us"] = per_stage.transform("min")
        ranks["stage_label"] = [f"stage {s}" for s in stages]
    elif "bubble_us" in ranks and (ranks["bubble_us"] > 0).any():
        ranks["stage_computing_us"] = ranks["computing_us"]
        ranks["stage_least_computing_us"] = ranks["computing_us"]
        ranks["stage_label"] = [f"rank {r} (stage not recorded)" for r in ranks["rank"]]
    return ranks


def _count_stages(ranks: pd.DataFrame) -> pd.DataFrame:
    """`pipeline_stages` on every row: how many pipeline stages the ranks form (1 without a
    pipeline), so that rules comparing all ranks can leave the stages' differences to the
    stage rules; and, with stages, the mean and the shortest step time of each rank's stage
    (`stage_duration_us`, `stage_fastest_us`), so that a slow rank is told against its own
    stage: the last stages' steps hold the bubble, their waits for the first ones."""
    if "stage_label" not in ranks:
        ranks["pipeline_stages"] = 1
        return ranks
    ranks["pipeline_stages"] = ranks["stage_label"].nunique()
    per_stage = ranks.groupby("stage_label")["duration_us"]
    ranks["stage_duration_us"] = per_stage.transform("mean")
    ranks["stage_fastest_us"] = per_stage.transform("min")
    return ranks


def _rank_links(profile: Profile) -> dict[str, Any] | None:
    """One rank's totals per link and transport from its communication-matrix rows, as
    columns (name, transport, bytes, duration_us, ops); None without such rows."""
    comm = profile.tables.get("comm_ops")
    if comm is None or not {"kind", "transport"} <= set(comm):
        return None
    links = comm[(comm["kind"] == "link").fillna(False)]
    if links.empty:
        return None
    links = links.assign(
        transport=links["transport"].fillna("unknown"), bytes=links.get("bytes", np.nan)
    )
    per_rank = links.groupby(["name", "transport"]).agg(
        bytes=("bytes", lambda b: b.sum(min_count=1)),
        duration_us=("duration_us", "sum"),
        ops=("duration_us", "size"),
    )
    table = per_rank.reset_index()
    return {str(c): table[c].to_numpy() for c in table.columns}


def build_links(summaries: Sequence[RankSummary]) -> pd.DataFrame | None:
    """One row per link and transport from the communication-matrix rows of every rank.

    Both ends of a link may list it, so each rank's total for the link is averaged over the
    ranks reporting it rather than added up. Bandwidth is recomputed from bytes and transit
    time, which weighs every operation on the link by its size, not by its count.
    """
    frames = [
        pd.DataFrame(s.links).assign(reported_by=str(s.rank))
        for s in sorted(summaries, key=lambda s: s.rank)
        if s.links is not None
    ]
    if not frames:
        return None
    out = (
        pd.concat(frames, ignore_index=True)
        .groupby(["name", "transport"])
        .agg(
            bytes=("bytes", "mean"),
            duration_us=("duration_us", "mean"),
            ops=("ops", "max"),
            reported_by=("reported_by", ",".join),
        )
        .reset_index()
    )
    ends = out["name"].str.split("->", n=1, expand=True).reindex(columns=[0, 1])
    out["src_rank"] = pd.to_numeric(ends[0], errors="coerce")
    out["dst_rank"] = pd.to_numeric(ends[1], errors="coerce")
    # a rank's copy to itself and a same-device (LOCAL) copy use no link between ranks
    local = (out["src_rank"] == out["dst_rank"]) | (out["transport"].str.upper() == "LOCAL")
    out = out[~local.fillna(False)].reset_index(drop=True)
    if out.empty:
        return None
    # bytes per µs is MB/s, so GB/s is bytes / µs / 1e3
    out["bandwidth_gbps"] = out["bytes"] / out["duration_us"].where(out["duration_us"] > 0) / 1e3
    out["message_bytes"] = out["bytes"] / out["ops"].where(out["ops"] > 0)
    # the typical bandwidth of a transport comes from the links that are bandwidth-bound
    bound = out["bandwidth_gbps"].where(out["message_bytes"] >= BANDWIDTH_BOUND_BYTES)
    median = bound.groupby(out["transport"]).transform("median")
    out["bandwidth_ratio"] = out["bandwidth_gbps"] / median.where(median > 0)
    return conform("links", out)


@dataclass(frozen=True)
class WaitedPeer:
    """The peer a rank waited for longest in its collectives (_waited_for): its number in
    the communication group, the group, and, where the rank's metadata describes the group,
    its global rank and what the group parallelises (tp, dp, pp...)."""

    rank: int
    group: str | None
    global_rank: int | None = None
    parallel_group: str | None = None


@dataclass(frozen=True)
class RankSummary:
    """What the cluster profile needs of one rank's derived profile: its step breakdown,
    warm-up steps, pipeline stage and link totals. Small and free of DataFrames, so a run can
    keep one per rank after dropping the rank's tables (api.analyze(keep_tables=False))."""

    rank: int
    steps: dict[str, tuple[float, ...]]
    """The rank's step breakdown by column: step numbers and per-step figures."""
    warmup: frozenset[float]
    """Step numbers of its warm-up steps (advisor.steady)."""
    stage: int | None
    links: dict[str, Any] | None
    """The rank's totals per link (columns as arrays), None without link rows."""
    meta: ProfileMeta
    waited_for: WaitedPeer | None = None
    """The peer this rank waited for longest (_waited_for)."""


def rank_summary(profile: Profile) -> RankSummary | None:
    """The summary of a derived profile that has a rank and step durations, else None."""
    rank = profile.meta.rank
    if rank is None or not profile.has("steps", "duration_us"):
        return None
    steps = profile.tables["steps"]
    warm = steps.loc[steady.warmup_mask(steps).to_numpy(bool), "step"]
    return RankSummary(
        rank,
        _rank_steps(profile),
        frozenset(warm.astype("float64")),
        pipeline_stage(rank, profile),
        _rank_links(profile),
        profile.meta,
        _waited_for(profile),
    )


def _waited_for(profile: Profile) -> WaitedPeer | None:
    """The peer (rank, as numbered in the group, and group) whose waits took this rank longest
    in all: each collective's longest wait on another rank (comm_ops.waited_rank, from the HCCL
    tasks) summed per peer; None where no collective names one."""
    comm = profile.tables.get("comm_ops")
    if comm is None or "waited_rank" not in comm or not comm["waited_rank"].notna().any():
        return None
    column = {"group": "group", "global": "waited_global_rank", "dimension": "parallel_group"}
    waits = pd.DataFrame(
        {
            "peer": comm["waited_rank"],
            "us": comm["peer_wait_us"],
            **{k: comm[c].astype("object") if c in comm else None for k, c in column.items()},
        }
    ).dropna(subset=["peer"])
    totals = waits.fillna({"group": ""}).groupby(["group", "peer"], sort=True)["us"].sum()
    group, peer = totals.idxmax()  # ties: the first group and peer in sort order
    chosen = waits[(waits["group"].fillna("") == group) & (waits["peer"] == peer)].iloc[0]
    return WaitedPeer(
        int(peer),
        str(group) or None,
        None if pd.isna(chosen["global"]) else int(chosen["global"]),
        None if pd.isna(chosen["dimension"]) else str(chosen["dimension"]),
    )


def build_cluster(profiles: Sequence[Profile]) -> Profile | None:
    """A profile holding the `ranks` (and `links`) tables, or None with fewer than two ranks
    with steps."""
    return cluster_profile([s for p in profiles if (s := rank_summary(p)) is not None])


@dataclass(frozen=True)
class MixedRuns:
    """Why the profiles of a run are not the ranks of one training job, so that comparing
    them as ranks would blame a "slow rank" for what is another run: a rank number read in
    several profiles (`paths`), or runs of different sizes (`world_sizes`)."""

    rank: int | None = None
    paths: tuple[str, ...] = ()
    world_sizes: tuple[int, ...] = ()


def mixed_runs(
    summaries: Sequence[RankSummary], read: Sequence[ProfileMeta] = ()
) -> MixedRuns | None:
    """What tells that the profiles read come from several runs, when `summaries` hold two
    ranks or more (a cluster would be built); None when they may be one run's ranks. A subset
    of a job's ranks is one run: only a repeated rank or disagreeing world sizes tell runs
    apart. `read`: every profile read (default: the summaries'), those without steps too: a
    rank read in two places is two runs whether or not both recorded steps."""
    if len({s.rank for s in summaries}) < 2:
        return None
    metas = list(read) or [s.meta for s in summaries]
    paths: dict[int, list[str]] = {}
    for meta in metas:
        if meta.rank is not None and meta.path not in paths.get(meta.rank, []):
            paths.setdefault(meta.rank, []).append(meta.path)
    repeated = sorted(rank for rank, found in paths.items() if len(found) > 1)
    if repeated:
        return MixedRuns(rank=repeated[0], paths=tuple(paths[repeated[0]]))
    sizes = {m.world_size for m in metas if m.world_size is not None}
    return MixedRuns(world_sizes=tuple(sorted(sizes))) if len(sizes) > 1 else None


def _folder(path: str) -> str:
    """The folder a profile's `files_read` are named in: its path, or the folder of its file."""
    return path if os.path.isdir(path) else os.path.dirname(path)


def _files_of(members: Sequence[RankSummary], common: str) -> list[str]:
    """The ranks' files, each once, named from the folder of their common path: each rank's
    own names (`ASCEND_PROFILER_OUTPUT/trace_view.json`) would not say whose they are, and
    ranks read from one file or folder (msprof-analyze's cluster output) list it once."""
    base = _folder(common)
    return list(
        dict.fromkeys(
            os.path.relpath(os.path.join(_folder(s.meta.path), f), base)
            for s in members
            for f in s.meta.files_read
        )
    )


def _job_ranks(members: Sequence[RankSummary], links: pd.DataFrame | None) -> int | None:
    """How many ranks the job has as far as the profiles tell (ranks.job_ranks): the largest
    world size a rank records, or the profiled ranks with those their communication matrices
    link them to, whichever is more; None when neither is recorded. MindStudio Insight's
    2-rank run links ranks 0 and 1 with eight ranks: two of eight were profiled."""
    sizes = [s.meta.world_size for s in members if s.meta.world_size]
    if links is not None:
        named = pd.concat([links["src_rank"], links["dst_rank"]]).dropna().astype(int)
        sizes.append(len(set(named) | {s.rank for s in members}))
    return max(sizes, default=None)


def cluster_profile(summaries: Sequence[RankSummary]) -> Profile | None:
    """build_cluster from the ranks' summaries (the first of each rank counts: see
    mixed_runs for summaries that hold a rank twice), or None with fewer than two ranks."""
    by_rank: dict[int, RankSummary] = {}
    for summary in summaries:
        by_rank.setdefault(summary.rank, summary)
    if len(by_rank) < 2:
        return None
    members = [by_rank[r] for r in sorted(by_rank)]
    left_out = set().union(*(s.warmup for s in members))
    ranks = pd.DataFrame([_rank_row(s, left_out) for s in members])
    ranks = _count_stages(_add_stages(ranks, [s.stage for s in members]))
    if any(s.waited_for for s in members):
        peers = [s.waited_for for s in members]
        ranks["waited_rank"] = [p.rank if p else None for p in peers]
        ranks["waited_group"] = [p.group if p else None for p in peers]
        ranks["waited_global_rank"] = [p.global_rank if p else None for p in peers]
        ranks["waited_parallel_group"] = [p.parallel_group if p else None for p in peers]
    links = build_links(members)
    ranks["job_ranks"] = _job_ranks(members, links)
    tables = {"ranks": conform("ranks", _add_straggler_scores(ranks))}
    if links is not None:
        tables["links"] = links
    first = members[0].meta
    common = os.path.commonpath([s.meta.path for s in members])
    meta = ProfileMeta(
        source_format="cluster",
        path=common,
        framework=first.framework,
        device_kind=first.device_kind,
        world_size=len(by_rank),
        files_read=_files_of(members, common),
        extra={"ranks": sorted(by_rank)},
    )
    return Profile(meta, tables)
