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
    moved = conform("steps", pd.DataFrame({"end_us": [2.0], "colour": ["red"], "step": [3]}))
    for table, names in (
        (cast, ["step", "start_us", "end_us"]),
        (kept, ["step", "start_us"]),
        (moved, ["step", "end_us"]),  # the contract's order
    ):
        assert table.columns.dtype == object and table.columns.tolist() == names
    assert cast["start_us"].tolist() == [0.0] and kept["step"].tolist() == [1]
    assert moved.to_dict("list") == {"step": [3], "end_us": [2.0]}


def test_whole_number_columns_are_rounded_and_missing_out_of_range():
    """A contract integer column given as floats is rounded (half to even, as NumPy), and
    missing where the value is missing, infinite or beyond int64; an int64 column stays
    int64 where nothing is missing, and becomes nullable where something is."""
    values = [2.4, 2.5, -0.4, float("nan"), float("inf"), -float("inf"), 2.0**64, -(2.0**62)]
    frame = conform("steps", pd.DataFrame({"step": [1.0, 2.0], "model_id": [3.6, None]}))
    assert frame["step"].dtype == "int64" and frame["step"].tolist() == [1, 2]
    assert str(frame["model_id"].dtype) == "Int64" and frame["model_id"].tolist()[0] == 4
    assert frame["model_id"].isna().tolist() == [False, True]
    steps = conform("steps", pd.DataFrame({"step": values, "model_id": values}))
    expected = [2, 2, 0, None, None, None, None, -(2**62)]
    for column in ("step", "model_id"):
        assert str(steps[column].dtype) == "Int64"
        assert [None if pd.isna(v) else v for v in steps[column].tolist()] == expected
    texts = conform("steps", pd.DataFrame({"step": ["7", "x", "8.5"]}))
    assert [None if pd.isna(v) else v for v in texts["step"].tolist()] == [7, None, 8]


def test_has_is_true_when_any_cell_of_the_column_holds_a_value():
    frame = pd.DataFrame(
        {
            "first": [1.0, None, None],
            "later": [None, None, 2.0],
            "none": [None, None, None],
            "text": pd.array([pd.NA, "x", pd.NA], dtype="string"),
            "shapes": [[8, 3], None, None],
            "blank": ["", None, None],
        }
    )
    profile = Profile(ProfileMeta(path="p", source_format="test"), {"t": frame})
    assert profile.has("t")
    assert all(profile.has("t", c) for c in ("first", "later", "text", "shapes", "blank"))
    assert not profile.has("t", "none")
    assert not profile.has("t", "absent")
    assert not profile.has("other")
    empty = Profile(ProfileMeta(path="p", source_format="test"), {"t": frame.iloc[0:0]})
    assert not empty.has("t", "first")
    # a column read as it is, whatever the first cell: the same answer as counting
    for column in frame.columns:
        assert profile.has("t", column) == (frame[column].count() > 0)
