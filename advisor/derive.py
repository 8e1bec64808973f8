"""Runs metric providers on demand: only for outputs a rule needs and the profile lacks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from advisor.hookspecs import MetricProvider
from advisor.model import Profile


def present(profile: Profile, need: str) -> bool:
    """True when a "table" or "table.column" requirement is available with data."""
    table, _, column = need.partition(".")
    return profile.has(table, column or None)


def derive(
    profile: Profile, needs: Iterable[str], providers: Sequence[MetricProvider]
) -> dict[str, bool]:
    """Run the providers that can supply missing needs, each at most once per profile, and
    return whether each need is present after them (`present`'s answers, which evaluation
    asks again otherwise, while the tables stay as they are).

    A provider's missing inputs are derived first by the providers that output them, so
    providers run in dependency order whatever order they were registered in. A provider
    failure becomes a profile warning: the rules depending on it then show up as "not
    applicable" with the missing column named.
    """
    supplier = _Supplier(profile, providers)
    for need in needs:
        supplier.supply(need, set())
    known = supplier.known
    return {need: known[need] if need in known else present(profile, need) for need in needs}


class _Supplier:
    """The derivation of one profile's needs. It remembers what is present or absent
    (hundreds of needs ask about the same few dozen columns) until a provider changes a
    table: then only the needs of that table are asked again."""

    def __init__(self, profile: Profile, providers: Sequence[MetricProvider]) -> None:
        self.profile = profile
        self.known: dict[str, bool] = {}
        self.suppliers: dict[str, list[MetricProvider]] = {}  # in registration order
        for provider in providers:
            for output in provider.outputs:
                self.suppliers.setdefault(output, []).append(provider)

    def supply(self, need: str, pending: set[str]) -> bool:
        """Whether `need` is present, after running what supplies it; `pending` holds the
        needs being supplied further up, so providers that need each other's outputs stop."""
        known = self.known
        if need not in known:
            known[need] = present(self.profile, need)
        if known[need]:
            return True
        if need in pending:
            return False
        pending.add(need)
        done = self.profile.providers_run
        for provider in self.suppliers.get(need, ()):
            if provider.name in done:
                continue
            if not all(self.supply(i, pending) for i in provider.inputs):
                continue
            done.add(provider.name)
            self._compute(provider)
            if present(self.profile, need):
                return True
        return False

    def _compute(self, provider: MetricProvider) -> None:
        """Run `provider`, then forget what was absent of the tables it changed: those it
        names in its outputs, and any it replaced or added (providers only add tables and
        columns, MetricProvider: what was there still is)."""
        tables = self.profile.tables
        before = {name: (id(df), len(df.columns)) for name, df in tables.items()}
        try:
            provider.compute(self.profile)
        except Exception as exc:  # a provider is plugin code
            self.profile.warn(
                f"<metric {provider.name}>", f"metric provider failed: {type(exc).__name__}: {exc}"
            )
        changed = {output.partition(".")[0] for output in provider.outputs}
        changed.update(
            name for name, df in tables.items() if before.get(name) != (id(df), len(df.columns))
        )
        for need in [n for n, there in self.known.items() if not there]:
            if need.partition(".")[0] in changed:
                del self.known[need]
