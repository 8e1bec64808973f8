"""Rows ordered as pandas orders them, on the arrays of a few columns.

Evidence rows and a window's operators are sorted by one or two columns of a handful of
selected rows; on pandas 3, building the DataFrame that `sort_values` needs costs more than
the sort itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


def stable_order(keys: Sequence[tuple[Any, bool]]) -> np.ndarray:
    """The order of rows by (values, ascending) keys, the first key first, ties in their
    given order and missing values last: what `DataFrame.sort_values(kind="stable",
    na_position="last")` gives (each key as the ranks of its distinct values, as pandas
    sorts several columns), without building the DataFrame it needs."""
    ranked = []
    for values, ascending in keys:
        if isinstance(values, pd.arrays.NumpyExtensionArray):  # pandas sorts no wrapped array
            values = values.to_numpy()
        codes, distinct = pd.factorize(values, sort=True)
        codes = codes.astype(np.int64)
        n = len(distinct)
        ranked.append(np.where(codes < 0, n, codes if ascending else n - 1 - codes))
    return np.lexsort(ranked[::-1])
