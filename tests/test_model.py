"""The table contract check readers use in their tests."""

from __future__ import annotations

import pandas as pd

from advisor.model import Profile, ProfileMeta, contract_problems


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
