"""Reading inputs: which reader claims each path, reading claims (in parallel for large or
many-rank runs), and holding every returned profile to the table contract.

This is the one boundary between reader plugins and the core: whatever a reader returns is
checked here, so a third-party reader's mistake is a warning naming it, never a crash later.
A last step the profiler cut off (advisor.steady.trailing_fragment) is left out here too,
whichever format recorded it.
Entries no reader can read (a dangling link, a link loop, a folder named like a file) are
named here too: readers pass over them without a word.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TypeVar

from advisor import steady, units
from advisor.errors import AdvisorError, UnreadableInput
from advisor.executors import dask_executor, ordered_map, process_pool
from advisor.formats.read_ahead import TraceFold
from advisor.locate import CLAIM_SCAN_DEPTH, SEARCH_DEPTH, Claim, broken_entries, locate
from advisor.model import TABLES, Profile, ProfileMeta, TableSpec, hold_to_contract
from advisor.plugin_manager import PluginHost

PARALLEL_MIN_BYTES = 64 * 1024 * 1024
"""Below this much input, and below PARALLEL_MIN_CLAIMS ranks, starting worker processes
costs more than it saves."""
PARALLEL_MIN_CLAIMS = 16
"""From this many ranks workers pay off whatever their size: each rank costs a tenth of a
second or more to read, derive and evaluate, starting a worker about a second (in parallel)."""

R = TypeVar("R")
Workers = tuple[Executor, int]
"""An executor and how many tasks it runs at once."""


def read_claim(
    claim: Claim, tables: Mapping[str, TableSpec] = TABLES
) -> list[Profile] | AdvisorError:
    """Read one claimed path and hold what the reader returns to the table contract; errors
    are returned so they cross process boundaries intact."""
    source = f"reader {claim.reader.name!r} (plugin {claim.plugin!r})"
    try:
        profiles = claim.reader.read(claim.path)
        if not isinstance(profiles, list) or not all(
            isinstance(p, Profile) and isinstance(p.meta, ProfileMeta) for p in profiles
        ):
            return UnreadableInput(
                claim.path,
                f"{source} returned {type(profiles).__name__}, not a list of advisor.model.Profile",
            )
        hints = getattr(claim.reader, "collect", None) or {}
        hints_zh = getattr(claim.reader, "collect_zh", None) or {}
        for profile in profiles:
            profile.meta.collect = {**hints, **profile.meta.collect}
            profile.meta.collect_zh = {**hints_zh, **profile.meta.collect_zh}
            hold_to_contract(profile, source, tables)
            _leave_out_trailing_fragment(profile)
        _warn_broken(claim.path, profiles)
        return profiles
    except AdvisorError as exc:
        return exc
    except Exception as exc:  # reader plugins are third-party code
        return UnreadableInput(claim.path, f"{source} failed: {type(exc).__name__}: {exc}")


def _leave_out_trailing_fragment(profile: Profile) -> None:
    """Drop the step the profiler stopped in from the steps table, saying so: every per-step
    figure (step time, savings, the ranks' comparison) then describes whole steps."""
    steps = profile.tables.get("steps")
    if steps is None:
        return
    row = steady.trailing_fragment(steps, profile.tables.get("device_ops"))
    if row is None:
        return
    step, duration = int(steps["step"].loc[row]), float(steps["duration_us"].loc[row])
    profile.tables["steps"] = steps.drop(index=row).reset_index(drop=True)
    took = units.fmt_us(duration)
    profile.warn_whole(
        f"the last step {step} ({took}) ran no device task while the steps before it did: the "
        "profiler stopped inside it, so it is left out of the steps and of every per-step figure",
        zh=f"最后一个迭代 {step}（{took}）没有运行任何设备任务，而之前的迭代都有：采集在该迭代"
        "中途停止，因此它不计入迭代表，也不计入任何逐迭代的数值",
    )


def _warn_broken(folder: Path, profiles: list[Profile]) -> None:
    """A warning on each profile for each broken entry of its claimed folder, unless the
    reader already named that entry: what it stands for was not read (exit 3)."""
    if not folder.is_dir():
        return
    for entry in broken_entries(folder, CLAIM_SCAN_DEPTH):
        for profile in profiles:
            if not any(w.file == entry.path for w in profile.warnings):
                profile.warn(entry.path, entry.problem, unread=True)


def input_bytes(path: Path) -> int:
    """The bytes of a claimed file, or of every file under a claimed folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def workers_for(claims: Sequence[Claim], jobs: int | None) -> int:
    """Processes to read with: as asked, or automatically for many or several large ranks."""
    if len(claims) < 2:
        return 1
    if jobs is None:
        big = (
            len(claims) >= PARALLEL_MIN_CLAIMS
            or sum(input_bytes(c.path) for c in claims) >= PARALLEL_MIN_BYTES
        )
        jobs = os.cpu_count() or 1 if big else 1
    return max(1, min(jobs, len(claims)))


@dataclass
class Reading:
    """The profiles read from some paths, and what could not be read."""

    profiles: list[Profile] = field(default_factory=list)
    input_errors: list[AdvisorError] = field(default_factory=list)
    plugin_problems: list[str] = field(default_factory=list)


def find_claims(paths: Sequence[Path], host: PluginHost, reading: Reading) -> list[Claim]:
    """The claims of every reader on `paths`; what no reader can read (broken entries beside
    the claims) is recorded in `reading`."""
    readers = host.readers()
    claims: list[Claim] = []
    for path in paths:
        found: list[Claim] = []
        try:
            found = locate(path, readers, reading.plugin_problems)
        except UnreadableInput as exc:
            reading.input_errors.append(exc)
        claims += found
        claimed = [c.path for c in found]
        if path.is_dir() and path not in claimed:  # beside the claims: an input not read
            reading.input_errors += broken_entries(path, SEARCH_DEPTH, claimed)
    return claims


def trace_folds(claims: Sequence[Claim]) -> list[TraceFold]:
    """The trace files the claims' readers will fold, in the claims' order, as the readers
    name them (`Reader.trace_folds`, optional); a reader that fails to name them gets none
    folded ahead and reads as usual."""
    folds: list[TraceFold] = []
    for claim in claims:
        name = getattr(claim.reader, "trace_folds", None)
        if name is None:
            continue
        try:
            folds += [f for f in name(claim.path) if isinstance(f, TraceFold)]
        except Exception:  # reader plugins are third-party code; `read` will speak for it
            continue
    return folds


@contextmanager
def local_workers(workers: int, scheduler: str | None) -> Iterator[Workers | None]:
    """The local processes `map_claims` will read `workers` claims with, started now, so
    that they start while the caller opens its session; None when the claims are read here
    or on a Dask cluster."""
    if scheduler is not None or workers < 2:
        yield None
        return
    with process_pool(workers) as started:
        yield started


def map_claims(
    fn: Callable[[Claim], R],
    claims: Sequence[Claim],
    *,
    workers: int = 1,
    scheduler: str | None = None,
    started: Workers | None = None,
) -> Iterator[R]:
    """`fn` over `claims`, results in the claims' order: on the workers of the Dask cluster
    at `scheduler`, in `workers` processes (see workers_for; those of `started`, from
    local_workers, when given), else here one after the other.
    Only a few claims per worker are in flight at a time, so a caller that reduces each
    result before taking the next holds memory bounded by the workers, not by the claims.
    `fn` must be picklable for workers (a module-level function or a partial of one)."""
    if scheduler is not None:
        with dask_executor(scheduler) as (executor, slots):
            yield from ordered_map(executor, fn, claims, slots)
    elif started is not None:
        executor, slots = started
        yield from ordered_map(executor, fn, claims, slots)
    elif workers > 1:
        with process_pool(workers) as (executor, slots):
            yield from ordered_map(executor, fn, claims, slots)
    else:
        yield from map(fn, claims)


def read_inputs(
    paths: Sequence[Path],
    host: PluginHost,
    *,
    jobs: int | None = None,
    scheduler: str | None = None,
    tables: Mapping[str, TableSpec] | None = None,
) -> Reading:
    """Read every path with the reader that claims it; several ranks in parallel processes,
    or on the workers of the Dask cluster at `scheduler`. `tables` (default: the host's) is
    the contract readers' tables are held to.

    Failures are recorded in the result, never raised: the readable inputs are still analysed.
    """
    reading = Reading()
    claims = find_claims(paths, host, reading)
    read = partial(read_claim, tables=host.tables() if tables is None else tables)
    workers = workers_for(claims, jobs)
    for outcome in map_claims(read, claims, workers=workers, scheduler=scheduler):
        if isinstance(outcome, AdvisorError):
            reading.input_errors.append(outcome)
        else:
            reading.profiles += outcome
    reading.profiles.sort(key=numeric_order)
    return reading


def numeric_order(profile: Profile) -> tuple[int, float]:
    """Ranks, then devices, in numeric order (rank 2 before rank 10); others keep their
    reading order (the sort is stable)."""
    meta = profile.meta
    if meta.rank is not None:
        return 0, meta.rank
    if meta.device_id is not None and meta.device_id.isdigit():
        return 1, int(meta.device_id)
    return 2, 0
