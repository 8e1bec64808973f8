"""Modules imported on first use, so commands that never touch a DataFrame never pay for one.

`advisor --version`, `--help` and `rules list` load the rule engine, the table contracts and
the plugins' hooks, all of which mention numpy or pandas somewhere; importing those two costs
more than everything else these commands do. A module written

    if TYPE_CHECKING:
        import pandas as pd
    else:
        pd = lazy_module("pandas")

reads as usual and type-checks against the real module; the import happens at the first
attribute access (`pd.DataFrame`), and from then on attributes are plain lookups.
"""

from __future__ import annotations

import importlib
import types
from typing import Any


class _LazyModule(types.ModuleType):
    """Stands in for a module until one of its attributes is read."""

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self.__name__)
        # later reads find the attribute in this object's own namespace, without this hook
        self.__dict__.update(module.__dict__)
        return getattr(module, attribute)


def lazy_module(name: str) -> Any:
    """A stand-in for the module `name` that imports it when first used."""
    return _LazyModule(name)
