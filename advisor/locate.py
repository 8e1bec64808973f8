"""Finds which reader claims a path: the path itself first, then its sub-folders.

A folder may hold several profiles (one per rank, or a profile beside other files); each
claimed sub-path is read separately. Detection must be cheap, so only names are looked at.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import UnreadableInput
from advisor.hookspecs import Reader

SEARCH_DEPTH = 2


@dataclass(frozen=True)
class Claim:
    """A path and the reader (with its plugin's name) that will read it."""

    path: Path
    reader: Reader
    plugin: str


def _claim(path: Path, readers: Sequence[tuple[str, Reader]], problems: list[str]) -> Claim | None:
    for plugin, reader in readers:
        try:
            if reader.detect(path):
                return Claim(path, reader, plugin)
        except Exception as exc:  # reader plugins are third-party code
            problems.append(
                f"plugin {plugin!r} failed to inspect {path}: {type(exc).__name__}: {exc}"
            )
    return None


def natural_key(path: Path) -> list[tuple[int, int | str]]:
    """Order names as people count: rank_2 before rank_10 (digits compared as numbers)."""
    return [
        (0, int(part)) if part.isdigit() else (1, part)
        for part in re.split(r"(\d+)", path.name)
        if part
    ]


def locate(path: Path, readers: Sequence[tuple[str, Reader]], problems: list[str]) -> list[Claim]:
    """Claims for a path; raises UnreadableInput when nothing under it is recognised."""
    if not path.exists():
        raise UnreadableInput(path, "no such file or directory")
    claims: list[Claim] = []
    pending = [(path, 0)]
    while pending:
        current, depth = pending.pop(0)
        claim = _claim(current, readers, problems)
        if claim:
            claims.append(claim)
            continue
        if current.is_dir() and depth < SEARCH_DEPTH:
            try:
                children = sorted(
                    (p for p in current.iterdir() if not p.is_symlink()), key=natural_key
                )
            except OSError as exc:
                raise UnreadableInput(current, f"cannot list directory: {exc.strerror}") from None
            pending += [(child, depth + 1) for child in children]
    if not claims:
        formats = sorted({f for _, r in readers for f in r.formats})
        what = (
            "an empty directory"
            if path.is_dir() and not any(path.iterdir())
            else "nothing advisor can read"
        )
        raise UnreadableInput(path, f"{what} (looked for: {', '.join(formats) or 'no readers'})")
    return claims
