"""The warning callback of format helpers.

Helpers report a bad cell or file instead of raising, so one broken column does not cost the
whole profile; they report through this callback, which `Profile.warn` fits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol


class WarnFn(Protocol):
    """`Profile.warn`-compatible callback."""

    def __call__(
        self,
        file: str | Path,
        problem: str,
        *,
        line: int | None = ...,
        column: str | None = ...,
        unread: bool = ...,
    ) -> None: ...


class HeldWarnings:
    """A WarnFn that keeps what it is told until `replay`: a file parsed ahead of its turn
    tells its problems where the file is taken, in the order the files always had."""

    def __init__(self) -> None:
        self.held: list[tuple[str | Path, str, dict[str, Any]]] = []

    def __call__(self, file: str | Path, problem: str, **where: Any) -> None:
        self.held.append((file, problem, where))

    def replay(self, warn: WarnFn) -> None:
        for file, problem, where in self.held:
            warn(file, problem, **where)
