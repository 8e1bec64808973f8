"""The table contract check readers use in their tests."""

from __future__ import annotations

import pandas as pd

from advisor.model import Profile, ProfileMeta, conform, contract_problems


def test_contract_problems_names_each_violation():
    profile = Profile(
        ProfileMeta("t", "mem"),
        {
            "steps": pd.DataFrame(
                {
                    "step": [1],
                    "start_us": [0.0],
                    "end_us": [1.0],
                    "duration_us": [1.0],
                    "colour": ["red"],
                }
            ),
            "device_ops": pd.DataFrame({"name": ["x"], "duration_us": [1.0]}),
            "gadgets": pd.DataFrame({"a": [1]}),
        },
    )
    assert contract_problems(profile) == [
        "steps: unknown column 'colour'",
        "device_ops: missing required column 'core_type'",
        "device_ops: missing required column 'category'",
        "unknown table 'gadgets'",
    ]


def test_contract_holds_for_a_conforming_profile():
    steps = pd.DataFrame({"step": [1], "start_us": [0.0], "end_us": [1.0], "duration_us": [1.0]})
    assert contract_problems(Profile(ProfileMeta("t", "mem"), {"steps": steps})) == []


def test_conform_keeps_labels_as_an_object_index_on_both_paths():
    """Reading a column by an arrow-backed label (pandas 3's default) costs about 60% more;
    conform's tables carry NumPy labels, whether it casts or only selects."""
    cast = conform("steps", pd.DataFrame({"step": ["1"], "start_us": ["0"], "end_us": [1.0]}))
    kept = conform("steps", pd.DataFrame({"step": [1], "start_us": [0.0], "colour": ["red"]}))
    for table, names in ((cast, ["step", "start_us", "end_us"]), (kept, ["step", "start_us"])):
        assert table.columns.dtype == object and table.columns.tolist() == names
    assert cast["start_us"].tolist() == [0.0] and kept["step"].tolist() == [1]
