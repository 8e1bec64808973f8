"""Text cells and trace values as numbers.

Numeric columns of profiler CSVs hold `N/A`, `-` or stray text between the numbers, and trace
files write numbers as JSON numbers or strings. A missing marker is no value; anything else
that is not a number is counted and reported once per column, with its line, instead of
failing the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
    pa = lazy_module("pyarrow")
    pc = lazy_module("pyarrow.compute")

MISSING_TOKENS = frozenset({"", "n/a", "na", "-", "none", "nan", "null"})
"""Cell texts that mean "no value" (compared case-insensitively); never warned about."""


@cache
def _missing_array() -> pa.Array:
    """MISSING_TOKENS as an arrow array, built on first use (pyarrow is imported lazily)."""
    return pa.array(sorted(MISSING_TOKENS), type=pa.string())


def to_numbers(series: pd.Series, *, file: str | Path, column: str, warn: WarnFn) -> pd.Series:
    """Convert string cells to float64; missing markers become NaN silently.

    Any other text that is not a finite number (including `inf`) also becomes NaN, and one
    warning for the column says how many cells were bad and quotes the first. The series must
    be positioned as read from the file (row 0 = line 2, after the header), so the warning can
    name the line.
    """
    numbers = _plain_numbers(series)
    if numbers is not None:
        return pd.Series(numbers, index=series.index, dtype="float64")
    text = series.astype("string").fillna("").str.strip()
    missing = text.str.lower().isin(MISSING_TOKENS).to_numpy(dtype=bool)
    values = pd.to_numeric(text.where(~missing, None), errors="coerce").astype("float64")
    numbers = values.to_numpy()
    bad = ~missing & ~np.isfinite(numbers)
    if bad.any():
        first = int(np.argmax(bad))
        count = int(bad.sum())
        cells = "cell is" if count == 1 else "cells are"
        warn(
            file,
            f"{count} {cells} not numbers (first: {text.iloc[first]!r})",
            line=first + 2,
            column=column,
        )
        numbers = np.where(bad, np.nan, numbers)
    return pd.Series(numbers, index=series.index, dtype="float64")


def _plain_numbers(series: pd.Series) -> np.ndarray | None:
    """float64 of cells that are all finite numbers or missing markers, by arrow's cast (a
    fraction of pandas' per-cell parse on million-row columns); None when any cell is something
    else, which `to_numbers` then finds and reports."""
    try:
        array = pa.array(series, type=pa.string(), from_pandas=True)
        missing = pc.is_in(pc.utf8_lower(array), value_set=_missing_array())
        numbers = pc.cast(pc.if_else(missing, None, array), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    values = numbers.to_numpy(zero_copy_only=False)
    finite_or_missing = np.isfinite(values) | pc.fill_null(missing, True).to_numpy(
        zero_copy_only=False
    )
    return values if finite_or_missing.all() else None


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
"""A number as arrow's cast to float64 reads it, and Python's float() alike (both round
correctly): ASCII digits only, no surrounding space, no `_`, no hex, no inf or nan."""


def decimal_cells(cells: Sequence[str]) -> np.ndarray | None:
    """float64 of stripped text cells that are all plain decimal numbers or missing markers,
    what `to_numbers` gives for them, read without a pandas or arrow call (for a small file's
    few hundred cells, those calls cost more than the reading); None when any cell is
    something else or too large for a float, which `to_numbers` then reads and reports."""
    match, values = _DECIMAL.fullmatch, []
    for cell in cells:
        if match(cell):
            values.append(float(cell))
        elif cell.lower() in MISSING_TOKENS:
            values.append(math.nan)
        else:
            return None
    numbers = np.array(values, dtype="float64")
    return None if np.isinf(numbers).any() else numbers


def trace_number(value: Any) -> float:
    """A trace number as float (written as a number or, in newer files, a string); NaN when
    it is none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def int_or_none(value: Any) -> int | None:
    """A finite trace number as int, else None."""
    number = trace_number(value)
    return int(number) if np.isfinite(number) else None


def int_from_text(text: Any) -> int | None:
    """An integer written as text (`-?\\d+` once stripped), else None."""
    text = str(text).strip()
    return int(text) if re.fullmatch(r"-?\d+", text) else None


def finite_float(text: Any) -> float:
    """A finite number written as text, else NaN."""
    try:
        value = float(str(text).strip())
    except ValueError:
        return np.nan
    return value if np.isfinite(value) else np.nan
