"""advisor: ranked, actionable tuning advice from deep-learning performance profiles."""

from advisor.hookspecs import hookimpl

__version__ = "0.1.0"
__all__ = ["__version__", "hookimpl"]
