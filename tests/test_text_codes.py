"""Text predicates answered per distinct value (advisor/text_codes.py): the same masks
as pandas' own string methods, codes kept only while the column's data lives and never
reused for data written since."""

from __future__ import annotations

import gc
import re

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor import text_codes
from advisor.engine.functions import contains, isin, matches, startswith

names = st.lists(
    st.one_of(st.none(), st.sampled_from(["aten::add", "aten::ADDMM", "cudaFree", "Free", "é"])),
    max_size=30,
)


@settings(max_examples=100, deadline=None)
@given(names)
def test_the_masks_are_pandas_string_methods_row_by_row(values):
    for dtype in ("string[pyarrow]", "string[python]", object):
        column = pd.Series(values, dtype=dtype, index=range(100, 100 + len(values)))
        text = column.astype("string")
        cases = [
            (contains(column, "add"), text.str.contains("add", case=False, regex=False)),
            (contains(column, "add", case=True), text.str.contains("add", regex=False)),
            (startswith(column, ("aten", "cuda")), text.str.startswith(("aten", "cuda"))),
            (matches(column, "^aten::add(?:mm)?$"), text.str.contains("^aten::add(?:mm)?$")),
            (isin(column, "aten::add", "é"), text.isin(["aten::add", "é"])),
            (isin(column, ("Free",)), text.isin(["Free"])),
        ]
        for got, want in cases:
            assert got.index.equals(column.index) and got.dtype == bool
            assert got.tolist() == want.fillna(False).astype(bool).tolist()
        mask = text_codes.isin_mask(column, ("aten::add", "é"))
        assert mask.dtype == bool and mask.tolist() == column.isin(["aten::add", "é"]).tolist()
        prefixed = text_codes.passing_mask(column, lambda t: t.startswith(("aten", "cuda")))
        want = text.str.startswith(("aten", "cuda")).fillna(False).astype(bool)
        assert prefixed.dtype == bool and prefixed.tolist() == want.tolist()
        matched = text_codes.passing_mask(column, re.compile("(?:cuda)?Free").match)
        assert matched.tolist() == text.str.match("(?:cuda)?Free").fillna(False).tolist()


def test_codes_are_kept_for_the_columns_data_and_dropped_with_it():
    frame = pd.DataFrame({"name": pd.Series(["a", "b", None, "a"], dtype="string[pyarrow]")})
    codes, distinct = text_codes.coded(frame["name"])
    assert codes.tolist() == [0, 1, -1, 0] and distinct.tolist() == ["a", "b"]
    assert not codes.flags.writeable  # kept for every caller: none may write into them
    # another selection of the same column: the same codes, not worked out again
    assert text_codes.coded(frame["name"])[0] is codes
    assert text_codes.coded(frame[["name"]]["name"])[0] is codes
    before = len(text_codes._CODED)
    del frame
    gc.collect()
    assert len(text_codes._CODED) == before - 1


@pytest.mark.parametrize("dtype", ["string[pyarrow]", "string[python]"])
def test_a_write_into_the_column_is_seen(dtype):
    column = pd.Series(["cudaFree", "x"], dtype=dtype)
    assert matches(column, "Free$").tolist() == [True, False]
    column.iloc[1] = "aclrtFree"
    assert matches(column, "Free$").tolist() == [True, True]
    assert contains(column, "ACLRT").tolist() == [False, True]


def _factorized_as_string(column: pd.Series) -> tuple[list[int], pd.Series]:
    codes, uniques = pd.factorize(column.astype("string"))
    return codes.tolist(), pd.Series(uniques)


@settings(max_examples=100, deadline=None)
@given(st.lists(names, min_size=1, max_size=3))
def test_arrow_text_is_coded_as_pandas_factorizes_it_as_string(chunks):
    """The dictionary-encoding path gives pandas' codes and distinct texts (and their dtype)
    for arrow text of one or several chunks, the nullable and the NaN string dtypes."""
    import pyarrow as pa

    data = pa.chunked_array(chunks, type=pa.large_string())
    columns = [
        pd.Series(pd.arrays.ArrowStringArray(data)),
        pd.Series(sum(chunks, []), dtype="string[pyarrow]"),
        pd.Series(pd.array(sum(chunks, []), dtype=pd.ArrowDtype(pa.string()))),
    ]
    columns.append(pd.Series(sum(chunks, []), dtype="str"))  # pandas 3: arrow, NaN missing
    for column in columns:
        text_codes._CODED.clear()
        codes, distinct = text_codes.coded(column)
        want_codes, want_distinct = _factorized_as_string(column)
        assert codes.tolist() == want_codes
        pd.testing.assert_series_equal(pd.Series(distinct), want_distinct)
