"""How numbers read to people, wherever they are shown: reports, the terminal, `advisor top`,
and the messages rules write (their `us`, `pct` and `num` template filters), so one value
reads the same in a finding's message and in the table beside it.

- durations (µs) keep about three significant digits (2 decimals below 10, 1 below 100, none
  from 100) and switch to ms from 10,000 µs; byte sizes the same, in B, KiB, MiB, GiB, TiB;
- a non-zero value that would print as zero says so: "<0.01 ms", "<0.1%" (negative: "-<0.1%");
- percentages have one decimal unless asked for more; counts have thousands separators;
- missing values (None, NaN) are an en dash, not "nan" or "None", which read like bugs.

It sits below the rule engine and the renderers, importing neither.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

MISSING = "–"


def is_missing(x: Any) -> bool:
    """None or NaN: a value to show as MISSING."""
    return x is None or (isinstance(x, float) and math.isnan(x))


def finite(x: Any) -> bool:
    """A real number that can be scaled and rounded (not a bool, NaN or infinity)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _decimals(x: float) -> int:
    """Fewer decimals for bigger numbers: about three significant digits, never fewer integers."""
    ax = abs(x)
    if ax == 0 or ax >= 100:
        return 0
    return 2 if ax < 10 else 1


def _below_shown(x: float, smallest: str) -> str:
    """A non-zero value too small for the decimals shown: "<0.01", or "-<0.01" below zero."""
    return ("-" if x < 0 else "") + "<" + smallest


@dataclass(frozen=True)
class Scale:
    """The units of one quantity, smallest first: (name, size in the smallest unit, the
    value from which it is used, whether it shows decimals)."""

    units: tuple[tuple[str, float, float, bool], ...]

    def unit(self, values: Iterable[Any]) -> str:
        """The unit the largest of `values` (missing ones ignored) is shown in."""
        largest = max((abs(v) for v in values if not is_missing(v)), default=0.0)
        return next(name for name, _, start, _ in reversed(self.units) if largest >= start)

    def show(self, x: Any, unit: str) -> str:
        """`x` (in the smallest unit) as a number of `unit`, without the unit's name."""
        if not finite(x):
            return fmt_num(x)
        size, fractions = next((size, f) for name, size, _, f in self.units if name == unit)
        value = x / size
        if not fractions:
            return f"{value:,.0f}"
        if 0 < abs(value) < 0.005:
            return _below_shown(value, "0.01")
        return f"{value:,.{_decimals(value)}f}"


TIME = Scale((("µs", 1, 0, True), ("ms", 1_000, 10_000, True)))
"""Durations, given in µs: ms from 10,000 µs, so 9,999 µs stays exact."""
SIZE = Scale(
    (
        ("B", 1, 0, False),
        ("KiB", 2**10, 2**10, True),
        ("MiB", 2**20, 2**20, True),
        ("GiB", 2**30, 2**30, True),
        ("TiB", 2**40, 2**40, True),
    )
)
"""Byte sizes, given in bytes."""


def column_unit(values: Iterable[Any]) -> str:
    """The one unit ("µs" or "ms") for a column of µs durations: the one fmt_us would pick for
    the largest; missing values are ignored; an empty column is µs."""
    return TIME.unit(values)


def fmt_us_as(x: float | None, unit: str) -> str:
    """A duration given in µs, shown in `unit` ("µs" or "ms", from column_unit) whatever its
    size; a tiny non-zero value in a ms column reads "<0.01 ms" rather than "0.00 ms"."""
    return MISSING if is_missing(x) else f"{TIME.show(x, unit)} {unit}"


def fmt_us(x: float | None) -> str:
    """A duration given in µs, in the unit its size needs ("9,999 µs", "12.3 ms")."""
    return fmt_us_as(x, column_unit([x]))


def fmt_bytes(x: float | None) -> str:
    """A size given in bytes, in the binary unit its size needs ("512 B", "1.50 MiB")."""
    if is_missing(x):
        return MISSING
    unit = SIZE.unit([x])
    return f"{SIZE.show(x, unit)} {unit}"


def fmt_pct(ratio: float | None, digits: int = 1) -> str:
    """A 0..1 ratio as a percentage with `digits` decimals; a tiny non-zero share says "<0.1%"
    instead of "0.0%"."""
    if ratio is None or math.isnan(ratio):
        return MISSING
    if math.isinf(ratio):
        return fmt_num(ratio) + "%"
    pct = ratio * 100
    smallest = 10.0**-digits
    if 0 < abs(pct) < smallest / 2:
        return _below_shown(pct, f"{smallest:.{digits}f}%")
    return f"{pct:.{digits}f}%"


def fmt_num(x: Any, digits: int | None = None) -> str:
    """A plain number with thousands separators (a fraction with `digits` decimals when
    given, else about four significant digits); anything else as readable text."""
    if is_missing(x):
        return MISSING
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if math.isinf(x):
            return "∞" if x > 0 else "-∞"
        if x.is_integer() and abs(x) < 1e15:
            return f"{int(x):,}"
        if digits is not None:
            return f"{x:,.{digits}f}"
        if abs(x) >= 100:
            return f"{x:,.1f}"
        return f"{x:.4g}"
    if isinstance(x, str):
        return x
    if isinstance(x, (list, tuple)):
        return ", ".join(fmt_num(v) for v in x)
    return json.dumps(x, default=str, ensure_ascii=False)
