"""Ships the built-in rule pack (the top-level rules/ folder, installed as advisor_rules)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from advisor.hookspecs import hookimpl


@hookimpl
def advisor_rule_paths() -> list[Path]:
    return [Path(str(files("advisor_rules")))]
