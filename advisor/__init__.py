"""advisor: ranked, actionable tuning advice from deep-learning performance profiles."""

from typing import Any

from advisor.hookspecs import hookimpl
from advisor.version import __version__

__all__ = ["__version__", "analyze", "hookimpl"]


def __getattr__(name: str) -> Any:
    # Imported lazily so that plugins importing `advisor.hookimpl` stay cheap and acyclic.
    if name == "analyze":
        from advisor.api import analyze

        return analyze
    raise AttributeError(name)
