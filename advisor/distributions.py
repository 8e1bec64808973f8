"""The installed distributions' entry points and versions, read from the `*.dist-info` and
`*.egg-info` folders on sys.path.

Every command finds its plugins through the `advisor` entry-point group, and the rule cache
keys on the versions of the libraries that check rules. importlib.metadata answers both, but
importing it costs about 45 ms of CPU (it brings email, zipfile, csv and more), as much as a
fifth of `advisor rules list`; listing each sys.path folder once and reading a small file per
distribution costs a millisecond or two.

What is found follows importlib.metadata's own rules (`MetadataPathFinder`): sys.path in
order, `NAME-VERSION.dist-info` and `NAME.egg-info` folders in each (and the EGG-INFO of a
`*.egg` folder), the first distribution of a normalized name wins, entry_points.txt read as
its ini-like format, Name and Version from METADATA (else PKG-INFO). Where those rules do not
cover the environment (a zip archive on sys.path, an import hook that finds distributions of
its own), importlib.metadata answers instead (`_importlib_only`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from functools import reduce
from importlib import import_module
from importlib.machinery import PathFinder
from typing import Any, NamedTuple

from advisor.compat import importlib_metadata

_VALUE = re.compile(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$")
"""An entry point's value, `module.path:attr.path [extras]` (importlib.metadata's pattern)."""


class PackageNotFoundError(LookupError):
    """No installed distribution has the name asked for."""


class Distribution:
    """One installed distribution: its metadata folder, with Name and Version read when first
    asked for (or given, for one importlib.metadata found: `folder` None)."""

    def __init__(
        self, folder: str | None, name_version: tuple[str | None, str | None] | None = None
    ) -> None:
        self.folder = folder
        self._name_version = name_version

    def read_text(self, filename: str) -> str | None:
        """A file of the metadata folder; None when it is absent or unreadable."""
        if self.folder is None:
            return None
        try:
            with open(os.path.join(self.folder, filename), encoding="utf-8") as handle:
                return handle.read()
        except (OSError, UnicodeDecodeError):
            return None

    def _headers(self) -> tuple[str | None, str | None]:
        if self._name_version is None:
            text = self.read_text("METADATA") or self.read_text("PKG-INFO") or ""
            self._name_version = _header(text, "name"), _header(text, "version")
        return self._name_version

    @property
    def name(self) -> str | None:
        """The Name field, as written (`dl-perf-advisor`)."""
        return self._headers()[0]

    @property
    def version(self) -> str | None:
        """The Version field."""
        return self._headers()[1]


def _header(text: str, field: str) -> str | None:
    """The first `field` of a metadata file's header (RFC 822 style: up to the first empty
    line, names case-insensitive)."""
    for line in text.splitlines():
        if not line.strip():
            return None
        key, colon, value = line.partition(":")
        if colon and not line[:1].isspace() and key.strip().lower() == field:
            return value.strip()
    return None


class EntryPoint(NamedTuple):
    """One entry point: `name = value` under `[group]` of a distribution's entry_points.txt
    (a named tuple: a dataclass costs a millisecond more to define, in every command)."""

    name: str
    value: str
    group: str
    dist: Distribution | None = None

    def load(self) -> Any:
        """The module the value names, or the attribute after its colon (as
        importlib.metadata.EntryPoint.load)."""
        match = _VALUE.match(self.value)
        if match is None:
            raise ValueError(f"{self.value!r} is not `module` or `module:attribute`")
        module = import_module(match["module"])
        return reduce(getattr, filter(None, (match["attr"] or "").split(".")), module)


def normalize(name: str) -> str:
    """A distribution name as its folder name spells it (PEP 503, dashes as underscores)."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


_LISTINGS: dict[str, tuple[int, tuple[tuple[str, str], ...]]] = {}
"""Each sys.path folder's distributions and the folder's modification time when listed."""


def _folders(root: str) -> tuple[tuple[str, str], ...]:
    """(normalized name, metadata folder) of each distribution in one sys.path entry, in
    importlib.metadata's order: the dist-info and egg-info folders in listing order, then a
    `*.egg` entry's own EGG-INFO. Listed again only when the folder changed (as
    importlib.metadata does): a command asks for entry points and for several versions."""
    folder = root or os.getcwd()
    try:
        mtime = os.stat(folder).st_mtime_ns
    except OSError:
        return ()
    listed = _LISTINGS.get(folder)
    if listed is None or listed[0] != mtime:
        listed = mtime, tuple(_list(folder))
        _LISTINGS[folder] = listed
    return listed[1]


def _list(root: str) -> Iterator[tuple[str, str]]:
    try:
        children = os.listdir(root)
    except OSError:
        return
    base = os.path.basename(root).lower()
    eggs = []
    for child in children:
        low = child.lower()
        if low.endswith((".dist-info", ".egg-info")):
            yield normalize(low.rpartition(".")[0].partition("-")[0]), os.path.join(root, child)
        elif base.endswith(".egg") and low == "egg-info":
            eggs.append(
                (normalize(base.rpartition(".")[0].partition("-")[0]), os.path.join(root, child))
            )
    yield from eggs


def _importlib_only() -> bool:
    """Whether importlib.metadata could find distributions that are not folders on sys.path:
    in a zip archive on sys.path, or through an import hook other than the standard path
    finder. Then it answers instead."""
    for finder in sys.meta_path:
        if hasattr(finder, "find_distributions") and not _path_finder(finder):
            return True
    return any(os.path.isfile(entry) for entry in sys.path if entry)


def _path_finder(finder: object) -> bool:
    """The standard path finder, or the importlib_metadata backport's copy of its search
    (Python 3.9: added to sys.meta_path once the backport is imported): both find exactly the
    folders read here."""
    kind = finder if isinstance(finder, type) else type(finder)
    return kind is PathFinder or (
        kind.__name__ == "MetadataPathFinder"
        and kind.__module__.partition(".")[0] == "importlib_metadata"
    )


def _installed() -> Iterator[tuple[str, Distribution]]:
    """(normalized name, distribution) of the first distribution of each name on sys.path."""
    seen: set[str] = set()
    for root in list(sys.path):
        for name, folder in _folders(root):
            if name not in seen:
                seen.add(name)
                yield name, Distribution(folder)


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of `group` that the installed distributions declare."""
    if _importlib_only():
        return [
            EntryPoint(ep.name, ep.value, ep.group, _given(ep.dist))
            for ep in importlib_metadata().entry_points(group=group)
        ]
    return [ep for _, dist in _installed() for ep in _entry_points(dist) if ep.group == group]


def _given(dist: Any) -> Distribution | None:
    """A distribution importlib.metadata found, with its name and version read now."""
    if dist is None:
        return None
    return Distribution(None, (dist.metadata["Name"], dist.metadata["Version"]))


def _entry_points(dist: Distribution) -> Iterator[EntryPoint]:
    """entry_points.txt's `name = value` lines under `[group]` headers; blank lines and
    `#` comments skipped, lines before the first header ignored."""
    group = None
    for line in (dist.read_text("entry_points.txt") or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line.strip("[]")
        elif group is not None:
            name, _, value = line.partition("=")
            yield EntryPoint(name.strip(), value.strip(), group, dist)


def version(name: str) -> str | None:
    """The Version of the installed distribution `name` (any spelling: `PyYAML`, `pyyaml`);
    PackageNotFoundError when none is installed."""
    if _importlib_only():
        metadata = importlib_metadata()
        try:
            return metadata.version(name)  # type: ignore[no-any-return]
        except metadata.PackageNotFoundError:
            raise PackageNotFoundError(name) from None
    wanted = normalize(name)
    for found, dist in _installed():
        if found == wanted:
            return dist.version
    raise PackageNotFoundError(name)
