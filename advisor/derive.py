"""Runs metric providers on demand: only for outputs a rule needs and the profile lacks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from advisor.hookspecs import MetricProvider
from advisor.model import Profile


def present(profile: Profile, need: str) -> bool:
    """True when a "table" or "table.column" requirement is available with data."""
    table, _, column = need.partition(".")
    return profile.has(table, column or None)


def derive(profile: Profile, needs: Iterable[str], providers: Sequence[MetricProvider]) -> None:
    """Run the providers that can supply missing needs, each at most once per profile.

    A provider's missing inputs are derived first by the providers that output them, so
    providers run in dependency order whatever order they were registered in. A provider
    failure becomes a profile warning: the rules depending on it then show up as "not
    applicable" with the missing column named.
    """
    known: dict[str, bool] = {}
    for need in needs:
        _supply(profile, need, providers, set(), known)


def _supply(
    profile: Profile,
    need: str,
    providers: Sequence[MetricProvider],
    pending: set[str],
    known: dict[str, bool],
) -> bool:
    """Whether `need` is present, after running what supplies it; `pending` holds the needs
    being supplied further up, so providers that need each other's outputs stop. `known`
    remembers what is present or absent until a provider adds to the tables (hundreds of
    needs ask about the same few dozen columns)."""
    if need not in known:
        known[need] = present(profile, need)
    if known[need]:
        return True
    if need in pending:
        return False
    pending.add(need)
    done = profile.providers_run
    for provider in providers:
        if provider.name in done or need not in provider.outputs:
            continue
        if not all(_supply(profile, i, providers, pending, known) for i in provider.inputs):
            continue
        done.add(provider.name)
        try:
            provider.compute(profile)
        except Exception as exc:  # a provider is plugin code
            profile.warn(
                f"<metric {provider.name}>", f"metric provider failed: {type(exc).__name__}: {exc}"
            )
        # providers only add tables and columns (MetricProvider): what was there still is
        for name in [n for n, there in known.items() if not there]:
            del known[name]
        if present(profile, need):
            return True
    return False
