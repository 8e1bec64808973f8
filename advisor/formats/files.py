"""Whole files: bytes (gunzipped when named .gz) and JSON, with known writer artefacts repaired,
and the limits that keep a hostile file from costing unbounded time or memory.

Profilers write files that break naive parsers: truncated JSON from a killed job, a stray
trailer after msprof's JSON list, a gzip file cut short. These helpers turn each of those into
either a repaired value or one `UnreadableInput` that names the file and the problem, so
readers stay short. A .gz file is inflated through `Inflating`, which stops a decompression
bomb (2 MB that inflate to 2 GB) at the limits of `Limits` instead of inflating all of it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from advisor.collector import collection_paused
from advisor.errors import UnreadableInput
from advisor.lazy import lazy_module
from advisor.units import fmt_bytes

if TYPE_CHECKING:
    import gzip

    import orjson

    from advisor.progress import FileProgress
else:  # a reader's `detect` imports this module for read_head: `rules list` needs neither
    gzip = lazy_module("gzip")
    orjson = lazy_module("orjson")

CHUNK_BYTES = 8 * 1024 * 1024
TOO_LARGE = "too large to read into memory (free memory or split the export)"

# What msprof's C++ timeline writer may leave after the closing `]` of its list (it writes
# objects, then trims a `[ true]`-like suffix; older exports can keep pieces of it).
_JSON_TRAILER = re.compile(rb"[\s\[\],]*(?:true)?[\s\[\],]*")

INFLATED_BYTES_ENV = "ADVISOR_MAX_INFLATED_BYTES"
INFLATE_RATIO_ENV = "ADVISOR_MAX_INFLATE_RATIO"
EVENT_BYTES_ENV = "ADVISOR_MAX_EVENT_BYTES"
RATIO_FLOOR_BYTES = 64 * 1024 * 1024
"""A .gz file is refused for its ratio only past this much inflated data: small files of
repeated content compress far beyond any ratio and cost nothing to read."""
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE = re.compile(r"\s*(\d+)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)
_RATIO = re.compile(r"\s*\d+(?:\.\d*)?\s*")


@dataclass(frozen=True)
class Limits:
    """How much work one input file may cost before it is refused with one line; 0 turns a
    limit off. Real profiles stay far below them; a damaged or hostile one (a gzip bomb, an
    event that never ends) would otherwise take minutes and gigabytes.

    `inflated_bytes`: a .gz file's inflated size. `inflate_ratio`: inflated size over the
    compressed bytes read (real traces inflate 5-20 times; a bomb 1000 times), checked past
    RATIO_FLOOR_BYTES. `event_bytes`: bytes of a trace's event array without an event
    boundary (one event that large, or a run of whitespace), which a reader must hold.
    """

    inflated_bytes: int = 16 << 30
    inflate_ratio: float = 200.0
    event_bytes: int = 256 << 20

    @classmethod
    def from_env(cls, path: str | Path) -> Limits:
        """The defaults, overridden by ADVISOR_MAX_INFLATED_BYTES, ADVISOR_MAX_INFLATE_RATIO
        and ADVISOR_MAX_EVENT_BYTES (sizes as `512M`, `32G` or bytes). Read per file, so
        worker processes get the same limits. An invalid value refuses the file (`path`)
        naming the variable: a limit silently left at its default would surprise."""
        default = cls()
        return cls(
            inflated_bytes=_size_setting(path, INFLATED_BYTES_ENV, default.inflated_bytes),
            inflate_ratio=_ratio_setting(path, INFLATE_RATIO_ENV, default.inflate_ratio),
            event_bytes=_size_setting(path, EVENT_BYTES_ENV, default.event_bytes),
        )


def _size_setting(path: str | Path, name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    match = _SIZE.fullmatch(value)
    if match is None:
        raise UnreadableInput(
            path, f"{name}={value!r} is not a size (bytes, or with K, M, G, T: 512M, 32G)"
        )
    return int(match[1]) * _UNITS[match[2].upper()]


def _ratio_setting(path: str | Path, name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or not value.strip():
        return default
    if _RATIO.fullmatch(value) is None:
        raise UnreadableInput(path, f"{name}={value!r} is not a number (e.g. 500; 0: no limit)")
    return float(value)


def size_setting(size: int) -> str:
    """A size as a limit's variable takes it, in the largest unit that keeps it whole
    (`256M`), so a message can say what to set."""
    for suffix in ("T", "G", "M", "K"):
        if size and size % _UNITS[suffix] == 0:
            return f"{size // _UNITS[suffix]}{suffix}"
    return str(size)


class Chunks(Protocol):
    """What a reader of a file's content needs: the next bytes, `b""` at the end."""

    def read(self, size: int, /) -> bytes: ...


class Inflating:
    """A .gz file's content, inflated chunk by chunk and refused with one `UnreadableInput`
    past `limits`, so a bomb costs the time and memory of the limit, not of its content."""

    def __init__(self, path: Path, raw: BinaryIO, limits: Limits) -> None:
        self._path = path
        self._raw = raw
        self._limits = limits
        self._gzip = gzip.GzipFile(fileobj=raw)
        self.inflated = 0

    def read(self, size: int, /) -> bytes:
        chunk = self._gzip.read(size)
        self.inflated += len(chunk)
        limits = self._limits
        if limits.inflated_bytes and self.inflated > limits.inflated_bytes:
            raise UnreadableInput(
                self._path,
                f"inflates to more than {fmt_bytes(limits.inflated_bytes)}; if the file is "
                f"genuine, raise {INFLATED_BYTES_ENV} "
                f"(now {size_setting(limits.inflated_bytes)})",
            )
        packed = max(self._raw.tell(), 1)
        if (
            limits.inflate_ratio
            and self.inflated > RATIO_FLOOR_BYTES
            and self.inflated > limits.inflate_ratio * packed
        ):
            raise UnreadableInput(
                self._path,
                f"inflates over {limits.inflate_ratio:g} times its compressed size "
                f"({fmt_bytes(self.inflated)} from the first {fmt_bytes(packed)}), like a "
                f"decompression bomb; if the file is genuine, raise {INFLATE_RATIO_ENV} "
                f"(now {limits.inflate_ratio:g})",
            )
        return chunk


@contextmanager
def open_content(path: Path, limits: Limits) -> Iterator[tuple[Chunks, BinaryIO]]:
    """The file's content (inflated within `limits` when it is named .gz) and the raw file,
    whose position says how much of the file was read (for progress)."""
    with open(path, "rb") as raw:
        yield (Inflating(path, raw, limits) if path.suffix.lower() == ".gz" else raw), raw


def load_json(path: str | Path, progress: FileProgress | None = None) -> Any:
    """Parse a JSON file (gzipped when named .gz), repairing only msprof's known trailers.

    Raises `UnreadableInput` for unreadable, empty, truncated or otherwise invalid files, with
    the byte offset of the problem so the user can look at it. The garbage collector is paused
    while decoding: building millions of small objects otherwise triggers it over and over.
    """
    data = read_bytes(path, progress)
    if not data.strip():
        raise UnreadableInput(path, "empty file")
    with collection_paused():
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


HEAD_RAW_BYTES = 64 * 1024
"""Of a .gz file, read_head inflates this much at most: a head of up to as much content."""


def read_head(path: Path, size: int) -> bytes:
    """The first `size` bytes of a file's content, inflated when it is named .gz (what there
    is of a cut one); b"" when it cannot be read. For readers' `detect`, which looks at a
    file's start and must never fail."""
    import zlib  # here: only a .gz file needs it

    try:
        with open(path, "rb") as raw:
            if not path.name.lower().endswith(".gz"):
                return raw.read(size)
            data = raw.read(max(size, HEAD_RAW_BYTES))
        return zlib.decompressobj(wbits=31).decompress(data, size)
    except (OSError, zlib.error):
        return b""


def read_bytes(path: str | Path, progress: FileProgress | None = None) -> bytes:
    """The whole content of a file, gunzipped (within `Limits`) when it ends in .gz, reporting
    progress.

    Raises UnreadableInput for unreadable files, for a .gz that is not gzip data and for one
    past the limits.
    """
    path = Path(path)
    with reading(path), open_content(path, Limits.from_env(path)) as (content, raw):
        chunks = []
        while chunk := content.read(CHUNK_BYTES):
            chunks.append(chunk)
            if progress is not None:
                progress.read(raw.tell() - progress.done_bytes)
        return b"".join(chunks)


@contextmanager
def reading(path: Path) -> Iterator[None]:
    """What reading a file's content can raise (the disk, gzip, memory), as one
    UnreadableInput naming the file."""
    try:
        yield
    except gzip.BadGzipFile:
        raise UnreadableInput(path, "not gzip data although the name ends in .gz") from None
    except EOFError:
        raise UnreadableInput(path, "truncated gzip data") from None
    except OSError as exc:
        raise UnreadableInput(path, f"cannot read file: {exc.strerror or exc}") from None
    except MemoryError:
        raise UnreadableInput(path, TOO_LARGE) from None


def files_with_suffix(folder: Path, suffix: str) -> list[Path]:
    """Regular files of a folder with the suffix, sorted; [] when the folder is missing."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == suffix and p.is_file())
