"""A text column as codes of its distinct values, worked out once per column.

Text predicates (the rules' matches, contains, startswith, isin and `==`; the metric
providers' sets of operator kinds and name prefixes) are answered for each distinct value and
spread to the rows through the codes: a million host operators have a few hundred names and a
handful of kinds. Many rules and providers test the same column (HOST-005 alone searches
host_ops.name four times; seven places ask host_ops.kind), so the codes of an arrow-backed
column are kept while its data lives, read-only, for every caller. Arrow data never changes (a
pandas write into the column replaces it), so the data object itself is the key; a weak
reference drops the entry with the data.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection
from functools import cache
from typing import TYPE_CHECKING, Any

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
    pa = lazy_module("pyarrow")

_CODED: dict[int, tuple[weakref.ref[Any], np.ndarray, Any]] = {}


def coded(series: pd.Series) -> tuple[np.ndarray, Any]:
    """(codes, distinct texts) of `series` as text: each row's code into the distinct texts,
    -1 where it is missing. The distinct texts are a pandas string array (wrap it in a Series
    for the `.str` methods): a Series of them costs more than the encoding itself."""
    data = _arrow_data(series)
    if data is not None:
        known = _CODED.get(id(data))
        if known is not None and known[0]() is data:
            return known[1], known[2]
    if data is not None and _arrow_text(data.type):
        codes, distinct = _encoded(data)
    else:
        codes, distinct = series.astype("string").array.factorize()
    if data is not None:
        codes.flags.writeable = False  # shared by every caller from now on
        key = id(data)
        _CODED[key] = (weakref.ref(data, lambda _: _CODED.pop(key, None)), codes, distinct)
    return codes, distinct


def nullable_arrow_text(series: pd.Series) -> bool:
    """Whether `series` is arrow text with NA missing values (pandas' "string[pyarrow]"): its
    comparisons with texts can be answered per distinct value, missing rows false as pandas'
    masks make them."""
    dtype = series.dtype
    return (  # pandas 2.2's StringDtype has no na_value: its missing values are NA
        isinstance(dtype, pd.StringDtype)
        and dtype.storage == "pyarrow"
        and getattr(dtype, "na_value", pd.NA) is pd.NA
    )


def _arrow_text(data_type: pa.DataType) -> bool:
    """Whether arrow data of this type is text that `astype("string")` keeps as arrow text:
    pandas' "string" dtype is arrow-backed (pandas 3; pandas 2 makes it Python objects)."""
    return _string_is_arrow() and (
        pa.types.is_string(data_type) or pa.types.is_large_string(data_type)
    )


@cache
def _string_is_arrow() -> bool:
    return pd.StringDtype().storage == "pyarrow" and pd.StringDtype().na_value is pd.NA


def _encoded(data: pa.ChunkedArray) -> tuple[np.ndarray, Any]:
    """(codes, distinct texts) by arrow's dictionary encoding, as pandas' factorize of the
    column as "string" makes them (first seen first, -1 where missing) without the column
    converted first: 30 us against 200 us on a small column, a dozen columns a profile."""
    encoded = data.dictionary_encode()
    if len(encoded) == 0:
        empty = pa.array([], type=data.type)
        return np.array([], dtype=np.intp), pd.arrays.ArrowStringArray(empty)
    combined = encoded.combine_chunks()
    indices = combined.indices
    if indices.null_count:
        indices = indices.fill_null(-1)
    codes = indices.to_numpy(zero_copy_only=False, writable=True).astype(np.intp, copy=False)
    return codes, pd.arrays.ArrowStringArray(combined.dictionary)


def isin_mask(series: pd.Series, texts: Collection[str]) -> np.ndarray:
    """Rows of `series` equal to one of `texts`, as NumPy bools (missing rows false, as
    pandas' `isin` has them): per distinct value for nullable arrow text, else pandas' isin."""
    wanted = list(texts)
    if not nullable_arrow_text(series):
        return series.isin(wanted).to_numpy(bool, na_value=False)
    codes, distinct = coded(series)
    return rows_mask(codes, np.isin(distinct.to_numpy(object), wanted))


def passing_mask(series: pd.Series, test: Callable[[str], Any]) -> np.ndarray:
    """Rows of `series` whose text passes `test` (a prefix, a regex), as NumPy bools, missing
    rows false; `test` is asked once per distinct text."""
    codes, distinct = coded(series)
    texts = distinct.to_numpy(object).tolist()
    return rows_mask(codes, np.fromiter(map(bool, map(test, texts)), bool, len(texts)))


def rows_mask(codes: np.ndarray, hits: Any) -> np.ndarray:
    """A row mask (NumPy bools) from a mask over the distinct texts; missing rows false."""
    mask = np.zeros(len(codes), dtype=bool)
    found = codes >= 0
    mask[found] = np.asarray(hits, dtype=bool)[codes[found]]
    return mask


def spread(codes: np.ndarray, hits: Any, index: pd.Index, name: Any = None) -> pd.Series:
    """`rows_mask` as a Series over `index`."""
    return pd.Series(rows_mask(codes, hits), index=index, name=name)


def _arrow_data(series: pd.Series) -> Any:
    """The arrow data behind an arrow-backed column (the same object for every selection
    of the column), else None: other arrays can be written in place."""
    array = series.array
    if isinstance(array, pd.arrays.ArrowExtensionArray):
        return array.__arrow_array__()
    return None
