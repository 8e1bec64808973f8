"""Finds which reader claims a path: the path itself first, then its sub-folders; and the
entries that stand where a profile's file may be but cannot be read.

A folder may hold several profiles (one per rank, or a profile beside other files); each
claimed sub-path is read separately. Detection must be cheap, so only names are looked at.
Valid links are followed (a folder of links to rank folders is common); a profile reached twice
through links is read once, and the second path named.
Readers list a folder's regular files and pass over a dangling link, a link loop or a folder
named like a file without a word; `broken_entries` finds those, so each can be named.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from advisor.errors import UnreadableInput
from advisor.hookspecs import Reader

SEARCH_DEPTH = 2
CLAIM_SCAN_DEPTH = 4
"""Levels of a claimed folder searched for broken entries: a profile's files lie at most this
deep (rank_ascend_pt/PROF_x/device_0/summary/op_summary.csv)."""
_FILE_NAME = re.compile(r".+\.(?:csv|json|gz|txt|db|json\.\d+)", re.IGNORECASE)
"""Names profilers give files, never folders (`info.json.0` included)."""


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


def broken_entry(path: Path, *, is_link: bool, is_dir: bool) -> str | None:
    """Why an entry cannot be read as a file (`is_link`, `is_dir`: what lstat says it is): a
    dangling link, a link loop, a folder with a file's name; None when nothing is wrong."""
    if is_link:
        try:
            path.stat()
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "a symbolic link loop"
            if exc.errno == errno.ENOENT:
                return f"a dangling link (to {os.readlink(path)!r})"
            return f"a link that cannot be followed ({exc.strerror})"
        return None
    if is_dir and _FILE_NAME.fullmatch(path.name):
        return "a folder where a file is expected"
    return None


def broken_entries(root: Path, depth: int, claimed: Sequence[Path] = ()) -> list[UnreadableInput]:
    """The broken entries (see `broken_entry`) in the folder `root`, at most `depth` levels
    down, without following links, sorted by path. A `claimed` path is left to the scan of its
    own claim, and a folder holding one is a container whatever its name."""
    found: list[UnreadableInput] = []
    own = set(claimed)  # sets: a folder of thousands of ranks is as many claims
    holders = {folder for path in claimed for folder in path.parents}
    pending = [(root, 1)]
    while pending:
        folder, level = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue  # an unlistable folder is reported by whoever needs it
        for entry in entries:
            path = Path(entry.path)
            if path in own:
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            if is_dir and path in holders:
                problem = None
            else:
                problem = broken_entry(path, is_link=entry.is_symlink(), is_dir=is_dir)
            if problem is not None:
                found.append(UnreadableInput(path, problem))
            elif is_dir and level < depth:
                pending.append((path, level + 1))
    return sorted(found, key=lambda e: e.path)


def locate(path: Path, readers: Sequence[tuple[str, Reader]], problems: list[str]) -> list[Claim]:
    """Claims for a path; raises UnreadableInput when nothing under it is recognised."""
    if not path.exists():
        problem = broken_entry(path, is_link=path.is_symlink(), is_dir=False)
        raise UnreadableInput(path, (problem or "no such file or directory").removesuffix(""))
    claims: list[Claim] = []
    first_path: dict[Path, Path] = {}  # a claimed profile's real path -> the path that reached it
    pending = [(path, 0)]
    while pending:
        current, depth = pending.pop(0)
        claim = _claim(current, readers, problems)
        if claim:
            real = current.resolve()
            if real in first_path:
                problems.append(
                    f"warning: {current}: the same profile as {first_path[real]} "
                    "(through a link), read once"
                )
            else:
                first_path[real] = current
                claims.append(claim)
            continue
        if current.is_dir() and depth < SEARCH_DEPTH:
            try:  # broken links are left to broken_entries, which names them
                children = sorted(
                    (p for p in current.iterdir() if p.exists() or not p.is_symlink()),
                    key=natural_key,
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
