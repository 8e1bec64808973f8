"""advisor.derive: providers run on demand, and what they add is seen by the needs after them.

derive keeps what it found absent until a provider changes the table it is in; these tests
pin that a column a provider adds without declaring it (beside its outputs, or in a table it
does not name) is still seen, so the providers that read it run.
"""

from __future__ import annotations

import pandas as pd

from advisor.derive import derive, present
from advisor.hookspecs import MetricProvider
from advisor.model import Profile, ProfileMeta


def _profile() -> Profile:
    ops = pd.DataFrame({"duration_us": [1.0, 2.0]})
    return Profile(ProfileMeta("test", "."), tables={"ops": ops})


def _reader_of(column: str, runs: list[str]) -> MetricProvider:
    """A provider reading `ops.<column>` and writing `ops.seen`."""

    def compute(profile: Profile) -> None:
        runs.append("reader")
        profile.tables["ops"] = profile.tables["ops"].assign(seen=1)

    return MetricProvider("reader", (f"ops.{column}",), ("ops.seen",), compute)


def test_a_column_added_beside_the_declared_outputs_is_seen():
    runs: list[str] = []

    def both(profile: Profile) -> None:  # declares ops.main, also writes ops.extra
        runs.append("writer")
        profile.tables["ops"] = profile.tables["ops"].assign(main=1.0, extra=2.0)

    writer = MetricProvider("writer", ("ops.duration_us",), ("ops.main",), both)
    profile = _profile()
    # ops.extra is asked for (and found absent) before the writer runs
    derive(profile, ["ops.extra", "ops.main", "ops.seen"], [writer, _reader_of("extra", runs)])
    assert runs == ["writer", "reader"]
    assert profile.tables["ops"]["seen"].tolist() == [1, 1]


def test_a_column_added_in_place_to_a_table_the_provider_does_not_name_is_seen():
    runs: list[str] = []

    def summary(profile: Profile) -> None:  # declares a summary table, also marks ops in place
        runs.append("writer")
        profile.tables["ops"]["extra"] = 3.0
        profile.tables["summary"] = pd.DataFrame({"total_us": [3.0]})

    writer = MetricProvider("writer", ("ops.duration_us",), ("summary.total_us",), summary)
    profile = _profile()
    derive(
        profile, ["ops.extra", "summary.total_us", "ops.seen"], [writer, _reader_of("extra", runs)]
    )
    assert runs == ["writer", "reader"]


def test_an_absent_column_stays_absent_when_nothing_adds_it():
    runs: list[str] = []

    def other(profile: Profile) -> None:
        runs.append("writer")
        profile.tables["summary"] = pd.DataFrame({"total_us": [3.0]})

    writer = MetricProvider("writer", ("ops.duration_us",), ("summary.total_us",), other)
    profile = _profile()
    derive(
        profile, ["ops.extra", "summary.total_us", "ops.seen"], [writer, _reader_of("extra", runs)]
    )
    assert runs == ["writer"]
    assert "seen" not in profile.tables["ops"]


def test_derive_returns_what_is_present_after_the_providers_ran():
    """What derive returns is what evaluation would find (it is handed on to it instead):
    a need found absent before a provider added it reads present, one nothing added absent."""

    def both(profile: Profile) -> None:  # declares ops.main, also writes ops.extra
        profile.tables["ops"] = profile.tables["ops"].assign(main=1.0, extra=2.0)

    writer = MetricProvider("writer", ("ops.duration_us",), ("ops.main",), both)
    profile = _profile()
    needs = ["ops.extra", "ops.main", "ops.nothing", "summary", "ops.duration_us"]
    found = derive(profile, needs, [writer])
    assert found == {
        "ops.extra": True,
        "ops.main": True,
        "ops.nothing": False,
        "summary": False,
        "ops.duration_us": True,
    }
    assert found == {need: present(profile, need) for need in needs}
