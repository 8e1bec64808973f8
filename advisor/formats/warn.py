"""The warning callback of format helpers.

Helpers report a bad cell or file instead of raising, so one broken column does not cost the
whole profile; they report through this callback, which `Profile.warn` fits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


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
