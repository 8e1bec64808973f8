"""Where a CANN msprof export keeps its files: what detection needs, without the readers.

The plugin's entry module imports only this, so loading the plugin (every advisor command
does) costs no reader code; the readers import it too, so the names live in one place.
"""

from __future__ import annotations

import re
from pathlib import Path

DB_FILE = re.compile(r"^msprof_(\d+)\.db$")
"""`msprof --type=db`'s database, one per export (a re-export writes another)."""
MERGED_DIR = "mindstudio_profiler_output"
"""CANN 8.x's folder of summaries merged over devices."""


def device_dirs(root: Path) -> list[Path]:
    """The `device_N` folders of a PROF folder, in device order."""
    return sorted(
        (
            p
            for p in root.glob("device_*")
            if p.is_dir() and p.name.removeprefix("device_").isdigit()
        ),
        key=lambda p: int(p.name.removeprefix("device_")),
    )


def newest_database(root: Path) -> Path | None:
    """The newest `msprof_{timestamp}.db` of a PROF folder (a re-export writes another)."""
    stamps = {
        p: int(m.group(1))
        for p in root.glob("msprof_*.db")
        if (m := DB_FILE.match(p.name)) and p.is_file()
    }
    return max(stamps, key=stamps.__getitem__, default=None)
