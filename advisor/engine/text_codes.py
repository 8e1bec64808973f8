"""A text column as codes of its distinct values, worked out once per column.

Text predicates (matches, contains, startswith) are answered for each distinct value and
spread to the rows through the codes: a million host operators have a few hundred names. Many
rules test the same column (HOST-005 alone searches host_ops.name four times), so the codes of
an arrow-backed column are kept while its data lives. Arrow data never changes (a pandas write
into the column replaces it), so the data object itself is the key; a weak reference drops the
entry with the data.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

_CODED: dict[int, tuple[weakref.ref[Any], np.ndarray, pd.Series]] = {}


def coded(series: pd.Series) -> tuple[np.ndarray, pd.Series]:
    """(codes, distinct texts) of `series` as text: each row's code into the distinct texts,
    -1 where it is missing."""
    data = _arrow_data(series)
    if data is not None:
        known = _CODED.get(id(data))
        if known is not None and known[0]() is data:
            return known[1], known[2]
    codes, uniques = pd.factorize(series.astype("string"))
    distinct = pd.Series(uniques)
    if data is not None:
        key = id(data)
        _CODED[key] = (weakref.ref(data, lambda _: _CODED.pop(key, None)), codes, distinct)
    return codes, distinct


def spread(codes: np.ndarray, hits: Any, index: pd.Index, name: Any = None) -> pd.Series:
    """A row mask from a mask over the distinct texts; missing rows are False."""
    mask = np.zeros(len(codes), dtype=bool)
    found = codes >= 0
    mask[found] = np.asarray(hits, dtype=bool)[codes[found]]
    return pd.Series(mask, index=index, name=name)


def _arrow_data(series: pd.Series) -> Any:
    """The arrow data behind an arrow-backed column (the same object for every selection
    of the column), else None: other arrays can be written in place."""
    array = series.array
    if isinstance(array, pd.arrays.ArrowExtensionArray):
        return array.__arrow_array__()
    return None
