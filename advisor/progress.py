"""Progress of reading large files, on the terminal only.

Big traces take seconds to decode; a line with bytes read and events decoded tells the user
the tool is working. It is written to stderr only when stderr is a terminal and the CLI was not
given --quiet, and only for files large enough to be worth it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

MIN_BYTES = 16 * 1024 * 1024
_state = {"quiet": False}


def set_quiet(quiet: bool) -> None:
    _state["quiet"] = quiet


def _active(total_bytes: int) -> bool:
    return not _state["quiet"] and total_bytes >= MIN_BYTES and sys.stderr.isatty()


@dataclass
class FileProgress:
    """Progress of one file; a no-op unless the terminal should show it."""

    name: str
    total_bytes: int
    done_bytes: int = 0
    events: int = 0
    active: bool = field(default=False)
    _last: float = 0.0

    def __post_init__(self) -> None:
        self.active = _active(self.total_bytes)

    def read(self, nbytes: int) -> None:
        self.done_bytes += nbytes
        self._show()

    def decoded(self, events: int) -> None:
        self.events += events
        self._show(force=True)

    def _show(self, force: bool = False) -> None:
        if not self.active:
            return
        now = time.monotonic()
        if not force and now - self._last < 0.2:
            return
        self._last = now
        mb, total = self.done_bytes / 2**20, self.total_bytes / 2**20
        sys.stderr.write(
            f"\r{self.name}: {mb:,.0f}/{total:,.0f} MB read, {self.events:,} events decoded "
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.active:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
