"""Whole files: bytes (gunzipped when named .gz) and JSON, with known writer artefacts repaired.

Profilers write files that break naive parsers: truncated JSON from a killed job, a stray
trailer after msprof's JSON list, a gzip file cut short. These helpers turn each of those into
either a repaired value or one `UnreadableInput` that names the file and the problem, so
readers stay short.
"""

from __future__ import annotations

import gc
import gzip
import re
from pathlib import Path
from typing import Any

import orjson

from advisor.errors import UnreadableInput
from advisor.progress import FileProgress

CHUNK_BYTES = 8 * 1024 * 1024
TOO_LARGE = "too large to read into memory (free memory or split the export)"

# What msprof's C++ timeline writer may leave after the closing `]` of its list (it writes
# objects, then trims a `[ true]`-like suffix; older exports can keep pieces of it).
_JSON_TRAILER = re.compile(rb"[\s\[\],]*(?:true)?[\s\[\],]*")


def load_json(path: str | Path, progress: FileProgress | None = None) -> Any:
    """Parse a JSON file (gzipped when named .gz), repairing only msprof's known trailers.

    Raises `UnreadableInput` for unreadable, empty, truncated or otherwise invalid files, with
    the byte offset of the problem so the user can look at it. The garbage collector is paused
    while decoding: building millions of small objects otherwise triggers it over and over.
    """
    data = read_bytes(path, progress)
    if not data.strip():
        raise UnreadableInput(path, "empty file")
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        repaired = repair_json(data, exc)
        if repaired is not None:
            return repaired
        if exc.msg.startswith("unexpected end of data"):
            raise UnreadableInput(path, f"truncated JSON (ends at byte {len(data)})") from None
        raise UnreadableInput(path, f"invalid JSON at byte {exc.pos}: {exc.msg}") from None
    except MemoryError:
        raise UnreadableInput(path, TOO_LARGE) from None
    finally:
        if gc_was_on:
            gc.enable()


def repair_json(data: bytes, exc: orjson.JSONDecodeError) -> Any | None:
    """Return the document when the error is a known writer artefact, else None."""
    if exc.msg.startswith("unexpected content after document"):
        if _JSON_TRAILER.fullmatch(data[exc.pos :]):
            return _loads_or_none(data[: exc.pos])
        return None
    if exc.msg.startswith("trailing comma"):
        return _loads_or_none(data[: exc.pos] + data[exc.pos + 1 :])
    return None


def _loads_or_none(data: bytes) -> Any | None:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


def read_bytes(path: str | Path, progress: FileProgress | None = None) -> bytes:
    """The whole content of a file, gunzipped when it ends in .gz, reporting progress.

    Raises UnreadableInput for unreadable files and for a .gz that is not gzip data.
    """
    path = Path(path)
    try:
        with open(path, "rb") as raw:
            opened = gzip.GzipFile(fileobj=raw) if path.suffix == ".gz" else raw
            chunks = []
            while chunk := opened.read(CHUNK_BYTES):
                chunks.append(chunk)
                if progress is not None:
                    progress.read(raw.tell() - progress.done_bytes)
    except gzip.BadGzipFile:
        raise UnreadableInput(path, "not gzip data although the name ends in .gz") from None
    except EOFError:
        raise UnreadableInput(path, "truncated gzip data") from None
    except OSError as exc:
        raise UnreadableInput(path, f"cannot read file: {exc.strerror or exc}") from None
    except MemoryError:
        raise UnreadableInput(path, TOO_LARGE) from None
    try:
        return b"".join(chunks)
    except MemoryError:
        raise UnreadableInput(path, TOO_LARGE) from None


def files_with_suffix(folder: Path, suffix: str) -> list[Path]:
    """Regular files of a folder with the suffix, sorted; [] when the folder is missing."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == suffix and p.is_file())
