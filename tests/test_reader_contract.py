"""The core holds every reader's tables to the contract: a plugin's mistake is a warning naming
it, and the other ranks' (and the same rank's other) data are still analysed and reported."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

import advisor
from advisor.hookspecs import hookimpl
from advisor.model import Column, Profile, ProfileMeta, TableSpec, hold_to_contract
from advisor.outputs import write_outputs
from advisor.plugin_manager import PluginHost

STEPS_US = [1000.0, 1100.0, 1050.0]


class SloppyReader:
    """Rank 0 gives step ends as numeric text, rank 1 as garbage text (the reported crash),
    and both add a table nobody documented and a device_ops without its required columns."""

    name = "sloppy"
    formats = ("sloppy test ranks (rank_*.sloppy)",)

    def detect(self, path: Path) -> bool:
        return path.suffix == ".sloppy"

    def read(self, path: Path) -> list[Profile]:
        rank = int(path.stem.split("_")[1])
        starts = [0.0, 1000.0, 2100.0]
        ends = [str(s + d) for s, d in zip(starts, STEPS_US)] if rank == 0 else ["soon"] * 3
        steps = pd.DataFrame(
            {
                "step": [1, 2, 3],
                "start_us": starts,
                "end_us": ends,
                "duration_us": STEPS_US,
                "note": ["x"] * 3,
            }
        )
        return [
            Profile(
                ProfileMeta(
                    "sloppy",
                    str(path),
                    rank=rank,
                    world_size=2,
                    # figures a plugin computed with NumPy, kept as NumPy scalars
                    extra={"clock_ghz": np.float64(1.8), "cores": np.int64(rank + 8)},
                ),
                {
                    "steps": steps,
                    "mystery": pd.DataFrame({"a": [1]}),
                    "device_ops": pd.DataFrame({"name": ["MatMul"]}),
                },
            )
        ]


@hookimpl
def advisor_readers():
    return [SloppyReader()]


@pytest.fixture
def ranks(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    folder.mkdir()
    for rank in (0, 1):
        (folder / f"rank_{rank}.sloppy").write_text("x", encoding="utf-8")
    return folder


def test_bad_reader_output_is_warned_about_and_every_rank_reported(ranks, tmp_path):
    host = PluginHost(extra=[("sloppy_plugin", SimpleNamespace(advisor_readers=advisor_readers))])
    result = advisor.analyze(ranks, host=host)
    assert result.input_errors == [] and host.failed() == []
    by_rank = {a.profile.meta.rank: a for a in result.analyses if a.profile.meta.rank is not None}
    assert set(by_rank) == {0, 1}
    source = "reader 'sloppy' (plugin 'sloppy_plugin')"
    for analysis in by_rank.values():
        problems = [w.problem for w in analysis.profile.warnings if w.reader == source]
        assert "unknown table 'mystery'; the table is left out" in problems
        assert (
            "table 'device_ops' lacks its required column 'core_type'; the table is left "
            "out" in problems
        )
        assert "steps: undocumented column 'note' left out" in problems
        assert "mystery" not in analysis.tables and "device_ops" not in analysis.tables
        assert analysis.tables["steps"]["end_us"].dtype == "float64"
    # Numeric text is a lossless cast, so no warning; garbage text is named with its count.
    assert not any("end_us" in w.problem for w in by_rank[0].profile.warnings)
    assert by_rank[0].tables["steps"]["end_us"].tolist() == [1000.0, 2100.0, 3150.0]
    assert "steps.end_us: 3 of 3 values are not float64 and are left out" in [
        w.problem for w in by_rank[1].profile.warnings
    ]
    written = write_outputs(result, tmp_path / "out", ["json"], host)
    names = {p.name for p in written}
    assert {"prof_rule_rank0.json", "prof_rule_rank1.json"} <= names
    report = json.loads((tmp_path / "out/prof_rule_rank1.json").read_text(encoding="utf-8"))
    assert any(w["reader"] == source and "end_us" in w["problem"] for w in report["warnings"])
    assert report["profile"]["extra"] == {"clock_ghz": 1.8, "cores": 9}


def test_reader_returning_no_profiles_list_is_one_input_error(tmp_path):
    class Wrong(SloppyReader):
        def read(self, path: Path):  # type: ignore[override]
            return {"steps": pd.DataFrame()}

    @hookimpl
    def advisor_readers():  # noqa: F811 (a second plugin's hook)
        return [Wrong()]

    path = tmp_path / "rank_0.sloppy"
    path.write_text("x", encoding="utf-8")
    host = PluginHost(extra=[("wrong", SimpleNamespace(advisor_readers=advisor_readers))])
    result = advisor.analyze(path, host=host)
    (error,) = result.input_errors
    assert (
        "reader 'sloppy' (plugin 'wrong') returned dict, not a list of "
        "advisor.model.Profile" in str(error)
    )


def test_conformed_tables_pass_untouched():
    steps = advisor.model.conform(
        "steps",
        pd.DataFrame({"step": [1], "start_us": [0.0], "end_us": [5.0], "duration_us": [5.0]}),
    )
    profile = Profile(ProfileMeta("t", "mem"), {"steps": steps})
    hold_to_contract(profile, "reader 't'")
    assert profile.tables["steps"] is steps and profile.warnings == []


def test_plugin_tables_are_held_to_their_own_spec():
    spec = TableSpec("team_costs", "cost line", (Column("cost", "float64", "", "cost", True),))
    profile = Profile(ProfileMeta("t", "mem"), {"team_costs": pd.DataFrame({"cost": ["1", "x"]})})
    hold_to_contract(profile, "reader 't'", {"team_costs": spec})
    assert profile.tables["team_costs"]["cost"].tolist()[0] == 1.0
    assert [w.problem for w in profile.warnings] == [
        "team_costs.cost: 1 of 2 values are not float64 and are left out"
    ]
