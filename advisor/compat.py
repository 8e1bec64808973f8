"""What differs between the Python versions advisor supports (3.9 to 3.13), in one place.

- `zip_strict(*iterables)`: `zip(..., strict=True)` (3.10+): raises ValueError when the
  iterables differ in length, instead of silently dropping the longer ones' tail.
- `tomllib`: the standard library's TOML reader (3.11+), else the `tomli` backport it came from.
- `entry_points(group=...)` with `EntryPoint.dist` (3.10+), else the `importlib_metadata`
  backport.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from itertools import zip_longest
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.9 / 3.10
    import tomli as tomllib

if sys.version_info >= (3, 10):
    from importlib.metadata import EntryPoint, entry_points
else:  # pragma: no cover - exercised on 3.9
    from importlib_metadata import EntryPoint, entry_points

__all__ = ["EntryPoint", "entry_points", "tomllib", "zip_strict"]


def zip_strict(*iterables: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    """`zip(*iterables, strict=True)`: the tuples of zip, and ValueError when one iterable
    runs out before the others."""
    if sys.version_info >= (3, 10):
        return zip(*iterables, strict=True)
    return _zip_checked(iterables)  # pragma: no cover - exercised on 3.9


def _zip_checked(iterables: tuple[Iterable[Any], ...]) -> Iterator[tuple[Any, ...]]:
    missing = object()
    for items in zip_longest(*iterables, fillvalue=missing):
        if any(item is missing for item in items):
            raise ValueError("zip_strict(): arguments have different lengths")
        yield items
