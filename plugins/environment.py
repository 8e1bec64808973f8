"""`env_advice`: the environment settings of a profile that slow the run.

The variables, their slow values and the value to use are data (`env_catalogue.yaml`, shipped
beside this module), not code: a new variable is one more entry, and the ENV-* rules that
report the table stay as they are.
"""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any

from advisor.hookspecs import MetricProvider, hookimpl
from advisor.lazy import lazy_module
from advisor.model import Profile, conform
from advisor.small_files import package_yaml
from advisor.text_codes import passing_mask

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

CATALOGUE = "env_catalogue.yaml"
_CONDITIONS = ("equals", "set", "int_below", "unset_or_int_below", "unset_or_equals", "lacks")
ALLOCATOR_CALLS = re.compile(
    r"^(?:aclMallocMemInner|aclrtMalloc|aclrtFree|cudaMalloc|cudaFree|hipMalloc|hipFree)"
)
"""Runtime allocation and free calls on the host timeline (as MEM-003 counts them)."""


@cache
def catalogue() -> tuple[dict[str, Any], ...]:
    """The catalogue's entries, each checked to hold exactly one known condition."""
    entries = package_yaml(__package__, CATALOGUE)  # read on first use: listing rules never does
    for entry in entries:
        conditions = [c for c in _CONDITIONS if c in entry]
        if len(conditions) != 1 or not {"name", "area", "recommended", "reason"} <= set(entry):
            raise ValueError(f"{CATALOGUE}: bad entry {entry.get('name')!r}")
    return tuple(entries)


def _integer(value: str) -> int | None:
    try:
        return int(value.strip())
    except ValueError:
        return None


def slow(entry: dict[str, Any], value: str) -> bool:
    """Whether a recorded value meets the entry's condition (empty means unset)."""
    value = value.strip()
    lowered = value.lower()
    number = _integer(value)
    if "equals" in entry:
        return lowered in {str(v).lower() for v in entry["equals"]}
    if "set" in entry:
        return value != ""
    if "int_below" in entry:
        return number is not None and number < entry["int_below"]
    if "unset_or_int_below" in entry:
        return value == "" or (number is not None and number < entry["unset_or_int_below"])
    if "unset_or_equals" in entry:
        return value == "" or lowered in {str(v).lower() for v in entry["unset_or_equals"]}
    return str(entry["lacks"]) not in value


def allocator_calls(profile: Profile) -> int:
    """Runtime allocator calls the host timeline recorded (0 without one)."""
    host = profile.tables.get("host_ops")
    if host is None or "name" not in host:
        return 0
    return int(passing_mask(host["name"], ALLOCATOR_CALLS.match).sum())


COLUMNS = (
    "name",
    "value",
    "slow",
    "observed",
    "recommended",
    "area",
    "reason",
    "reason_zh",
    "source",
)
"""env_advice's columns, in the documented order."""


def env_advice(profile: Profile) -> None:
    """One row per recorded environment variable the catalogue knows, `slow` where its value
    is one the catalogue calls slow (and, for an entry with `when_allocator_calls`, the
    timeline shows that many allocator calls): a profile whose settings are all fine still
    has rows, so the ENV rules pass on it instead of finding nothing to judge."""
    metadata = profile.tables["metadata"]
    keys = metadata["key"].tolist()  # a few dozen rows: lists, not a pandas mask
    sources = metadata["source"].tolist() if "source" in metadata else [None] * len(keys)
    recorded = {
        key[4:]: (str(value), None if pd.isna(source) else str(source))
        for key, value, source in zip(keys, metadata["value"].tolist(), sources)
        if isinstance(key, str) and key.startswith("env.")
    }
    rows = []
    calls = -1  # counted the first time an entry depends on it: a regex over every host op
    for entry in catalogue():
        if entry["name"] not in recorded:
            continue
        value, source = recorded[entry["name"]]
        needed = entry.get("when_allocator_calls")
        if needed and calls < 0:
            calls = allocator_calls(profile)
        observed = f"{calls:,} allocator calls on the timeline" if needed and calls else None
        rows.append(
            {
                "name": entry["name"],
                "value": value,
                "slow": slow(entry, value) and (not needed or calls >= needed),
                "observed": observed,
                "recommended": str(entry["recommended"]),
                "area": entry["area"],
                "reason": entry["reason"],
                "reason_zh": entry.get("reason_zh"),
                "source": source,
            }
        )
    table = {  # built in the documented dtypes, which conform then passes through
        column: np.array([row[column] for row in rows], dtype=bool)
        if column == "slow"
        else pd.array([row[column] for row in rows], dtype="string")
        for column in COLUMNS
    }
    profile.tables["env_advice"] = conform("env_advice", pd.DataFrame(table))


PROVIDERS = [
    MetricProvider(
        "env_advice",
        ("metadata.key", "metadata.value"),
        tuple(
            f"env_advice{c}"
            for c in (
                "",
                ".name",
                ".value",
                ".slow",
                ".observed",
                ".recommended",
                ".area",
                ".reason",
                ".source",
            )
        ),
        env_advice,
        "env_advice: the recorded environment variables the catalogue knows, slow or not",
    )
]


@hookimpl
def advisor_metrics() -> list[MetricProvider]:
    return PROVIDERS
