"""What differs between the Python versions advisor supports (3.9 to 3.13), in one place.

- `zip_strict(*iterables)`: `zip(..., strict=True)` (3.10+): raises ValueError when the
  iterables differ in length, instead of silently dropping the longer ones' tail.
- `tomllib()`: the standard library's TOML reader (3.11+), else the `tomli` backport it came
  from; imported when called, since only a run with a pyproject.toml config reads TOML.
- `importlib_metadata()`: importlib.metadata with `entry_points(group=...)` and
  `EntryPoint.dist` (3.10+), else the `importlib_metadata` backport; imported when called,
  since importing it costs about 45 ms (advisor.distributions reads what advisor needs
  without it).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from itertools import zip_longest
from types import ModuleType
from typing import Any

__all__ = ["importlib_metadata", "tomllib", "zip_strict"]


def tomllib() -> ModuleType:
    """tomllib (the `tomli` backport before 3.11)."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    import tomli  # pragma: no cover - exercised on 3.9 / 3.10

    return tomli  # pragma: no cover


def importlib_metadata() -> ModuleType:
    """importlib.metadata as of Python 3.10 (the backport on 3.9)."""
    if sys.version_info >= (3, 10):
        import importlib.metadata

        return importlib.metadata
    import importlib_metadata as backport  # pragma: no cover - exercised on 3.9

    return backport  # pragma: no cover


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
