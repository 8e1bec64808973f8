"""Why a rule could not run on a profile: data this format never records, or data this profile
lacks and the profiler could have collected.

A user reading "21 rules not applicable" cannot act on it. Rules whose data the format cannot
hold (AOE results in a GPU trace) are noise and are only counted; rules whose data is missing
because of how the profile was collected are shown with the setting that records it. Readers
declare those settings as `collect` hints (need -> how to collect it); a need no hint covers,
directly or through the metric providers that derive it, is one the format never records. A
table's hint covers its required columns; an optional column needs its own hint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from advisor.derive import present
from advisor.hookspecs import MetricProvider
from advisor.model import TABLES, Profile

MISSING = "missing"
"""The profile lacks data its format can record: shown, with how to collect it."""
NOT_RECORDED = "not_recorded"
"""The format never records the data: counted, hidden by default."""


@dataclass(frozen=True)
class Inapplicable:
    """One rule that did not run on one profile, and why."""

    reason: str  # MISSING or NOT_RECORDED
    collect: tuple[str, ...] = ()

    def in_language(self, lang: str, texts_zh: Mapping[str, str]) -> Inapplicable:
        """The same, its hints in Chinese where `lang` is zh and the reader gave them."""
        if lang != "zh" or not self.collect:
            return self
        return replace(self, collect=tuple(texts_zh.get(c, c) for c in self.collect))


def _hint(need: str, profile: Profile, hints: Mapping[str, str]) -> str | None:
    """The reader's hint for a "table.column" need, else its table's hint when the profile
    lacks the table and the column is one every such table has (a required column): other
    columns, such as FLOPs, need a hint of their own to count as recordable."""
    if need in hints:
        return hints[need]
    table, _, column = need.partition(".")
    spec = TABLES.get(table)
    if table in profile.tables or spec is None:
        return None
    col = spec.column(column) if column else None
    return hints.get(table) if not column or (col is not None and col.required) else None


def _hints_for(
    need: str,
    profile: Profile,
    hints: Mapping[str, str],
    providers: Sequence[MetricProvider],
    seen: set[str],
    known: dict[str, bool],
) -> list[str] | None:
    """How to collect `need`: its own hint, or the hints of a provider's missing inputs;
    None when no way is known (the format never records it). `known`: what is present."""
    hint = _hint(need, profile, hints)
    if hint:
        return [hint]
    if need in seen:
        return None
    seen.add(need)
    for provider in providers:
        if need not in provider.outputs:
            continue
        found: list[str] = []
        for source in (i for i in provider.inputs if not _present(profile, i, known)):
            more = _hints_for(source, profile, hints, providers, seen, known)
            if more is None:
                break
            found += more
        else:
            if found:
                return found
    return None


def _present(profile: Profile, need: str, known: dict[str, bool]) -> bool:
    if need not in known:
        known[need] = present(profile, need)
    return known[need]


def explain(
    profile: Profile,
    missing: Sequence[str],
    providers: Sequence[MetricProvider],
    known: dict[str, bool] | None = None,
    hinted: dict[str, list[str] | None] | None = None,
) -> Inapplicable:
    """Classify one not-applicable rule from the needs it lacks on `profile`.

    Entries that are not table names (a rule's runtime "no data" message) mean the data
    exists in kind but not in this profile, so they count as missing without a hint.
    `known` remembers what is present, `hinted` how each need is collected, across the rules
    of one evaluation (the tables do not change while rules are evaluated, and dozens of
    rules lack the same columns).
    """
    known = {} if known is None else known
    hinted = {} if hinted is None else hinted
    hints = profile.meta.collect
    collect: list[str] = []
    for need in missing:
        table = need.partition(".")[0]
        if not table.isidentifier():
            continue
        if need not in hinted:
            hinted[need] = _hints_for(need, profile, hints, providers, set(), known)
        found = hinted[need]
        if found is None:
            return Inapplicable(NOT_RECORDED)
        collect += found
    return Inapplicable(MISSING, tuple(dict.fromkeys(collect)))
