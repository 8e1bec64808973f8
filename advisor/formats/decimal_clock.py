"""Timestamps written as decimal text, kept to the digit, on one clock per profile.

torch_npu and MindSpore write epoch microseconds (~1.7e15) with three decimals, where float64
keeps only 0.25 µs. Every timestamp is therefore split into its whole µs, taken exactly, and
its fraction; the whole part is rebased on one integer origin before the two are added, so
times keep the digits written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from advisor.formats.interning import utf8, utf8_bytes
from advisor.formats.timebase import robust_origin
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

_PLAIN_DECIMAL = r"^(?P<sign>[+-]?)(?P<whole>\d+)(?:\.(?P<frac>\d*))?$"


def _texts(values: Iterable[Any]) -> pa.Array:
    """Timestamps as text: strings as written, numbers by their shortest repr. A list (what
    a trace's reader passes) is taken without importing pandas: a read-ahead child
    (advisor.formats.read_ahead) folds a trace without it."""
    if not isinstance(values, list):
        if isinstance(values, pd.Series) and isinstance(values.dtype, pd.StringDtype):
            return pa.array(values, from_pandas=True)  # the arrow cells themselves, no copy
        values = list(values)
    try:  # the usual case: every value a string (or null)
        return pa.array(values, type=pa.string())
    except (pa.ArrowTypeError, pa.ArrowInvalid, UnicodeEncodeError):
        pass
    return pa.array(
        [
            utf8(v) if isinstance(v, str) else None if v is None or isinstance(v, bool) else repr(v)
            for v in values
        ],
        type=pa.string(),
    )


def exact_parts(values: Iterable[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Whole µs and fraction of each timestamp as written (strings or numbers); NaN if none.

    `"1704161511420306.491"` -> (1704161511420306.0, 0.491): the whole part is exact in float64
    up to 2**53 µs, and the fraction keeps its digits, so `(whole - origin) + fraction` is the
    exact difference to within float64 rounding of a small number. Numbers that are not plain
    decimals (`1.7e15`) carry no more precision than their float value.
    """
    texts = pc.utf8_trim_whitespace(_texts(values))
    fast = _same_layout_parts(texts)
    if fast is not None:
        return fast
    parts = pc.extract_regex(texts, _PLAIN_DECIMAL)
    whole = pc.cast(pc.struct_field(parts, "whole"), pa.float64())
    digits = pc.struct_field(parts, "frac")
    length = pc.utf8_length(digits)
    frac = pc.divide(
        pc.cast(pc.if_else(pc.equal(length, 0), "0", digits), pa.float64()),
        pc.power(10.0, pc.cast(length, pa.float64())),
    )
    negative = pc.fill_null(pc.equal(pc.struct_field(parts, "sign"), "-"), False)
    negative = negative.to_numpy(zero_copy_only=False)
    whole = whole.to_numpy(zero_copy_only=False).astype("float64")
    frac = frac.to_numpy(zero_copy_only=False).astype("float64")
    if negative.any():
        whole = np.where(negative, -whole, whole)
        frac = np.where(negative, -frac, frac)
    other = np.isnan(whole) & pc.is_valid(texts).to_numpy(zero_copy_only=False)
    if other.any():  # exponents and the like: as precise as their float value
        text = pd.Series(texts.to_numpy(zero_copy_only=False)[other], dtype="object")
        value = np.array(pd.to_numeric(text, errors="coerce"), dtype="float64")
        value[~np.isfinite(value)] = np.nan
        whole[other] = np.floor(value)
        frac[other] = value - np.floor(value)
    return whole, np.where(np.isnan(whole), np.nan, frac)


MAX_FIXED_DIGITS = 18
"""Digits of a whole part read as an int64 (10**18 < 2**63); longer ones take the regex."""


def _same_layout_parts(texts: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """exact_parts of texts that all have the same length and the `.` at the same place.

    Profilers write every ts with the same digits (`1704161511420306.491`), so the common case
    needs no regex: the cells are the rows of one byte matrix (the array's data buffer), read
    digit by digit in NumPy (~40 ns a value; arrow's string kernels took ~130). None when the
    layout varies or a part is not all ASCII digits (signs, exponents, spaces inside): the
    regex then reads them.
    """
    cells = _byte_matrix(texts)
    if cells is None:
        return None
    dots = np.flatnonzero(cells[0] == ord("."))
    dot = int(dots[0]) if dots.size else cells.shape[1]
    whole = _digits_value(cells[:, :dot])
    if whole is None or (dot < cells.shape[1] and not (cells[:, dot] == ord(".")).all()):
        return None
    if dot >= cells.shape[1] - 1:  # no fraction digits ("17", "3.")
        return whole.astype("float64"), np.zeros(len(whole))
    frac = _digits_value(cells[:, dot + 1 :])
    if frac is None:
        return None
    # int64 to float64 rounds as parsing the text does: the same values as arrow's cast
    return whole.astype("float64"), frac.astype("float64") / 10.0 ** (cells.shape[1] - dot - 1)


def _byte_matrix(texts: pa.Array) -> np.ndarray | None:
    """The cells of a string array as rows of a uint8 matrix, when none is null and all have
    one length (then its bytes are the rows one after the other); else None."""
    if len(texts) == 0 or texts.null_count:
        return None
    offsets, data = utf8_bytes(texts)
    width = int(offsets[1])
    if width == 0 or not (np.diff(offsets) == width).all():
        return None
    return data.reshape(len(texts), width)


def _digits_value(cells: np.ndarray) -> np.ndarray | None:
    """The integer each row of ASCII digits spells; None when a byte is no digit, or there are
    none or too many of them. A digit place at a time: the temporaries are a column's, not
    the whole matrix as int64 (8 bytes a character: 77 MB for the ts of 480,000 flows)."""
    if not 0 < cells.shape[1] <= MAX_FIXED_DIGITS:
        return None
    value = np.zeros(len(cells), dtype=np.int64)
    for place in cells.T:
        digit = place - ord("0")  # uint8: a byte below "0" wraps to 208 and above
        if (digit > 9).any():
            return None
        value = value * 10 + digit
    return value


class Clock:
    """One integer origin (whole µs) for every time of a profile, fixed by the first file."""

    def __init__(self) -> None:
        self.origin: float | None = None

    def us(self, values: Iterable[Any]) -> np.ndarray:
        return self.from_parts(*exact_parts(values))

    def from_parts(
        self, whole: np.ndarray, frac: np.ndarray, among: np.ndarray | None = None
    ) -> np.ndarray:
        """Times from `exact_parts`; the first call fixes the origin at its earliest whole µs
        (of the rows `among` selects, when given) within a day of their median: a broken
        timestamp must not become the origin of every other time."""
        if self.origin is None:
            valid = whole if among is None else whole[among]
            valid = valid[np.isfinite(valid)]
            if valid.size:
                self.origin = robust_origin(valid)[0]
        return (whole - (self.origin or 0.0)) + frac
