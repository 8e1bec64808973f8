"""Ships the built-in rule pack (the top-level rules/ folder, installed as advisor_rules)."""

from __future__ import annotations

from pathlib import Path

import advisor_rules
from advisor.hookspecs import hookimpl


@hookimpl
def advisor_rule_paths() -> list[Path]:
    # the package's folder, as importlib.resources.files() gives it (without importing that
    # module and the tempfile and shutil it brings, which listing rules does not need)
    return [Path(advisor_rules.__file__).parent]
