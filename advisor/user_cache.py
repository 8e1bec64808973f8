"""The user's cache directory: where advisor keeps what it can always work out again.

Two things live there: validated rule files and compiled templates (advisor.engine.rule_cache),
and the parsed copies of the data catalogues plugins ship (advisor.small_files.package_yaml)
that ship no parsed copy of their own.
Every entry is named by a hash of everything that decides its content, written by advisor
itself to a temporary file and renamed into place, so two runs racing see either no entry or
a whole one; an entry that cannot be read or has the wrong shape is ignored and rewritten.

Where: $ADVISOR_CACHE_DIR, else $XDG_CACHE_HOME/advisor, else ~/.cache/advisor (on Windows
%LOCALAPPDATA%/advisor/cache); ADVISOR_NO_CACHE=1 turns the cache off.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hashlib import blake2b
else:
    try:  # hashlib's own BLAKE2, without hashlib loading OpenSSL's (3 ms in every command)
        from _blake2 import blake2b
    except ImportError:  # a Python built without it
        from hashlib import blake2b

CACHE_DIR_ENV = "ADVISOR_CACHE_DIR"
NO_CACHE_ENV = "ADVISOR_NO_CACHE"


def entry_hash(data: bytes = b"") -> blake2b:
    """A hash object (hashlib's interface: update, copy, hexdigest) for an entry's name:
    BLAKE2b of 32 bytes, whose collisions are as unlikely as SHA-256's."""
    return blake2b(data, digest_size=32)


def cache_off() -> bool:
    """Whether ADVISOR_NO_CACHE turns the cache off (every rule file is then checked)."""
    return os.environ.get(NO_CACHE_ENV, "").strip() not in ("", "0")


def cache_dir() -> Path | None:
    """Where advisor keeps its cache, or None when the cache is turned off."""
    if cache_off():
        return None
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "advisor"
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        return Path(os.environ["LOCALAPPDATA"]) / "advisor" / "cache"
    try:
        return Path.home() / ".cache" / "advisor"
    except (RuntimeError, KeyError):  # no home directory (a bare container user): no cache
        return None


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` so a racing run sees the old file or this one, never a torn
    one; a read-only home or a full disk leaves the cache as it was (the next run redoes the
    work)."""
    import tempfile  # imported by the runs that write: a warm one does not

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            os.replace(temp, path)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except (OSError, ValueError):
        return


def store_json(path: Path, value: Any) -> None:
    """Write `value` to `path` as JSON (write_atomically), unless JSON would not give it back
    exactly as it is (a YAML date, a number key, a NaN, a lone surrogate): such a value is
    worked out again by the next run instead."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        if json.loads(text) != value:
            return
        data = text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):  # ValueError: also a lone surrogate
        return
    write_atomically(path, data)
