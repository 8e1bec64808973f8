"""JSON values as numbers and ids: numbers or numeric strings, thread and stream ids as
ints (legacy traces write `stream 7`), with per-value caches for the hot loop."""

from __future__ import annotations

import math
import re
from typing import Any

_DIGITS = re.compile(r"-?\d+")


def json_number(value: Any) -> float | None:
    """A finite number from a JSON value (numbers and numeric strings), else None."""
    if value.__class__ is int:
        return float(value)
    if value.__class__ is float:
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def json_number_or_nan(value: Any) -> float:
    number = json_number(value)
    return math.nan if number is None else number


NO_ID = -(2**63)  # a missing stream or thread id in the int64 columns
MAX_ID = 2**63 - 1


def id_number(value: Any, cache: dict[Any, int]) -> int:
    """Thread or stream id: ints as is (made positive), legacy strings like `stream 7`; NO_ID
    when there is none."""
    if value.__class__ is int:
        return -value if value < 0 else value
    try:
        return cache[value]
    except KeyError:
        pass
    except TypeError:  # unhashable: a list or an object
        return NO_ID
    number = NO_ID
    if isinstance(value, str):
        match = _DIGITS.search(value)
        number = abs(int(match.group())) if match else NO_ID
    elif isinstance(value, float) and value.is_integer():
        number = abs(int(value))
    cache[value] = number
    return number


def int_or_none(value: Any) -> int | None:
    number = json_number(value)
    return int(number) if number is not None and number.is_integer() else None
