"""Tolerant file helpers shared by every reader.

Profilers write files that break naive parsers: truncated JSON from a killed job, a stray
trailer after msprof's JSON list, duplicated CSV headers, cells with trailing tabs, `N/A` in
numeric columns. These helpers turn each of those into either a repaired value or one
`UnreadableInput` / warning that names the file and the problem, so readers stay short.
"""

from __future__ import annotations

import csv
import gc
import gzip
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from advisor.errors import UnreadableInput
from advisor.progress import FileProgress

# ---------------------------------------------------------------------------------------------
# JSON

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
        if _JSON_TRAILER.fullmatch(data[exc.pos:]):
            return _loads_or_none(data[:exc.pos])
        return None
    if exc.msg.startswith("trailing comma"):
        return _loads_or_none(data[:exc.pos] + data[exc.pos + 1:])
    return None


def _loads_or_none(data: bytes) -> Any | None:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None


# ---------------------------------------------------------------------------------------------
# CSV


CHUNK_BYTES = 8 * 1024 * 1024
TOO_LARGE = "too large to read into memory (free memory or split the export)"


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


def read_csv_strings(path: str | Path, warn: WarnFn | None = None
                     ) -> tuple[list[str], pd.DataFrame]:
    """Read a CSV as strings: the header as written, cells stripped of whitespace and tabs.

    Returns the header names exactly as written (duplicates kept) and a frame whose columns
    are unique internal names: a repeated header gets `#2`, `#3`... (`Reduce Start(us)#2`), so
    columns that msprof repeats per group stay readable by position. A header-only file gives
    an empty frame. The pyarrow engine is used for speed on million-row exports; files it
    rejects (ragged rows) are re-read with the C engine, and `warn` is told so.
    """
    names = _read_header(path)
    columns = unique_names(names)
    options: dict[str, Any] = dict(header=None, skiprows=1, names=columns, dtype=str,
                                   keep_default_na=False, na_values=[], encoding="utf-8")
    try:
        df = (_read_arrow_text(path, columns) if _ARROW_INFERS_TYPES
              else pd.read_csv(path, engine="pyarrow", **options))
    except (pd.errors.ParserError, ValueError):
        try:
            with warnings.catch_warnings():  # ragged rows: extra cells dropped, missing ones empty
                warnings.simplefilter("ignore", pd.errors.ParserWarning)
                df = pd.read_csv(path, engine="c", index_col=False, on_bad_lines="skip",
                                 **options)
            if warn is not None:
                warn(path, "rows with more or fewer cells than the header: extra cells "
                           "ignored, missing cells left empty")
        except (pd.errors.ParserError, ValueError, UnicodeDecodeError) as exc:
            raise UnreadableInput(path, f"cannot parse CSV: {exc}") from None
    except OSError as exc:
        raise UnreadableInput(path, f"cannot read file: {exc.strerror or exc}") from None
    except MemoryError:
        raise UnreadableInput(path, TOO_LARGE) from None
    df = df.fillna("")
    for column in df.columns:
        if _needs_strip(df[column]):
            df[column] = df[column].str.strip()
    return names, df.reset_index(drop=True)


# pandas 2's pyarrow engine infers each column's type and casts it to str afterwards, which
# rounds long decimals (`1736413971558972.912` -> `1736413971558973.0`); pandas 3 reads text.
_ARROW_INFERS_TYPES = int(pd.__version__.split(".")[0]) < 3


def _read_arrow_text(path: str | Path, columns: list[str]) -> pd.DataFrame:
    """What `pd.read_csv(engine="pyarrow", dtype=str, ...)` reads on pandas 3: every cell as
    the text written, the header line skipped, nothing taken as missing."""
    import pyarrow.csv as pa_csv

    table = pa_csv.read_csv(
        path, read_options=pa_csv.ReadOptions(column_names=columns, skip_rows=1),
        convert_options=pa_csv.ConvertOptions(
            column_types=dict.fromkeys(columns, pa.string()), null_values=[],
            strings_can_be_null=False, quoted_strings_can_be_null=False))
    return table.to_pandas()


def _needs_strip(cells: pd.Series) -> bool:
    """Whether any cell has surrounding whitespace (msprof writes a tab after some times).

    Most columns have none: the ASCII test and trim of arrow are several times cheaper than
    trimming every cell, and non-ASCII columns are always stripped (Unicode whitespace).
    """
    if cells.empty:  # nothing to strip; pandas 2 gives such a column no string type
        return False
    array = pa.array(cells, from_pandas=True)
    if not pc.all(pc.string_is_ascii(array)).as_py():
        return True
    trimmed = pc.ascii_trim_whitespace(array)
    return bool(pc.any(pc.not_equal(pc.binary_length(array),
                                    pc.binary_length(trimmed))).as_py())


def _read_header(path: str | Path) -> list[str]:
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            first = next(csv.reader(fh), None)
    except UnicodeDecodeError:
        raise UnreadableInput(path, "not UTF-8 text") from None
    except csv.Error as exc:  # Python < 3.11: "line contains NUL"
        raise UnreadableInput(path, f"cannot parse CSV header: {exc}") from None
    except OSError as exc:
        raise UnreadableInput(path, f"cannot read file: {exc.strerror or exc}") from None
    if not first or not any(cell.strip() for cell in first):
        raise UnreadableInput(path, "empty file (no header line)")
    return [cell.strip() for cell in first]


def unique_names(names: Iterable[str]) -> list[str]:
    """Make repeated names unique by position: `a, a, a` -> `a, a#2, a#3`."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


class WarnFn(Protocol):
    """`Profile.warn`-compatible callback."""

    def __call__(self, file: str | Path, problem: str, *, line: int | None = ...,
                 column: str | None = ...) -> None: ...


MISSING_TOKENS = frozenset({"", "n/a", "na", "-", "none", "nan", "null"})
"""Cell texts that mean "no value" (compared case-insensitively); never warned about."""
_MISSING_ARRAY = pa.array(sorted(MISSING_TOKENS), type=pa.string())


def to_numbers(series: pd.Series, *, file: str | Path, column: str, warn: WarnFn) -> pd.Series:
    """Convert string cells to float64; missing markers become NaN silently.

    Any other text that is not a finite number (including `inf`) also becomes NaN, and one
    warning for the column says how many cells were bad and quotes the first. The series must
    be positioned as read from the file (row 0 = line 2, after the header), so the warning can
    name the line.
    """
    numbers = _plain_numbers(series)
    if numbers is not None:
        return pd.Series(numbers, index=series.index, dtype="float64")
    text = series.astype("string").fillna("").str.strip()
    missing = text.str.lower().isin(MISSING_TOKENS).to_numpy(dtype=bool)
    values = pd.to_numeric(text.where(~missing, None), errors="coerce").astype("float64")
    numbers = values.to_numpy()
    bad = ~missing & ~np.isfinite(numbers)
    if bad.any():
        first = int(np.argmax(bad))
        count = int(bad.sum())
        cells = "cell is" if count == 1 else "cells are"
        warn(file, f"{count} {cells} not numbers (first: {text.iloc[first]!r})",
             line=first + 2, column=column)
        numbers = np.where(bad, np.nan, numbers)
    return pd.Series(numbers, index=series.index, dtype="float64")


def _plain_numbers(series: pd.Series) -> np.ndarray | None:
    """float64 of cells that are all finite numbers or missing markers, by arrow's cast (a
    fraction of pandas' per-cell parse on million-row columns); None when any cell is something
    else, which `to_numbers` then finds and reports."""
    try:
        array = pa.array(series, type=pa.string(), from_pandas=True)
        missing = pc.is_in(pc.utf8_lower(array),
                           value_set=_MISSING_ARRAY)
        numbers = pc.cast(pc.if_else(missing, None, array), pa.float64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    values = numbers.to_numpy(zero_copy_only=False)
    finite_or_missing = np.isfinite(values) | pc.fill_null(missing, True).to_numpy(
        zero_copy_only=False)
    return values if finite_or_missing.all() else None


# ---------------------------------------------------------------------------------------------
# msprof export file names

_EXPORT_NAME = re.compile(
    r"(?P<type>[a-z][a-z0-9_]*?)"
    r"(?:_(?P<device>\d{1,9})(?:_(?P<model>\d{1,9}))?_(?P<iteration>\d{1,9}))?"
    r"(?:_slice_(?P<slice>\d{1,9}))?"
    r"(?:_(?P<timestamp>\d{14}))?"
    r"\.(?P<ext>csv|json)"
)


@dataclass(frozen=True)
class ExportName:
    """The parts of an msprof export file name.

    Covers per-device `{type}_{device}[_{model}]_{iter}[_slice_{k}][_{YYYYMMDDhhmmss}]`
    (6.3-7.x; the timestamp may be absent, as in the older `{type}_{device}_{model}_{iter}`)
    and merged `{type}[_slice_{k}]_{YYYYMMDDhhmmss}` (CANN 8.x `mindstudio_profiler_output`).
    """

    path: Path
    type: str
    device: int | None
    model: int | None
    iteration: int | None
    slice: int
    timestamp: str  # "" when the name has none (sorts as the oldest)

    @property
    def series(self) -> tuple[str, int | None, int | None, int | None]:
        """Files with the same series hold the same data; only one export of it is read."""
        return (self.type, self.device, self.model, self.iteration)


def parse_export_name(path: str | Path) -> ExportName | None:
    """Parse an msprof export name; None for names that follow none of the patterns."""
    path = Path(path)
    match = _EXPORT_NAME.fullmatch(path.name)
    if match is None:
        return None
    if match["device"] is None and match["timestamp"] is None:
        return None  # a bare `{type}.csv` is not an msprof export

    def num(group: str) -> int | None:
        return int(match[group]) if match[group] is not None else None

    return ExportName(path, match["type"], num("device"), num("model"), num("iteration"),
                      int(match["slice"] or 0), match["timestamp"] or "")


@dataclass(frozen=True)
class Superseded:
    """An older export that `select_exports` skipped in favour of a newer one."""

    type: str
    kept: tuple[Path, ...]
    ignored: tuple[Path, ...]


def select_exports(paths: Iterable[str | Path]) -> tuple[dict[str, list[Path]],
                                                         list[Superseded]]:
    """Group export files by type, newest export only, slices in order.

    msprof re-exports into the same folder with a new timestamp, so one folder can hold
    several copies of the same data; reading all of them would double every number. For
    each series (type, device, model, iteration) only the newest timestamp is kept and the
    others are reported. Different series of one type (several models or iterations) are
    all kept, ordered by device, model and iteration.
    """
    by_series: dict[tuple, dict[str, list[ExportName]]] = {}
    for path in paths:
        name = parse_export_name(path)
        if name is not None:
            by_series.setdefault(name.series, {}).setdefault(name.timestamp, []).append(name)
    chosen: dict[str, list[Path]] = {}
    superseded = []
    for series in sorted(by_series, key=_series_order):
        exports = by_series[series]
        newest = max(exports)
        kept = [n.path for n in sorted(exports[newest], key=lambda n: n.slice)]
        chosen.setdefault(series[0], []).extend(kept)
        older = sorted(n.path for ts, names in exports.items() if ts != newest for n in names)
        if older:
            superseded.append(Superseded(series[0], tuple(kept), tuple(older)))
    return chosen, superseded


def _series_order(series: tuple) -> tuple:
    return tuple(-1 if part is None else part for part in series)


def files_with_suffix(folder: Path, suffix: str) -> list[Path]:
    """Regular files of a folder with the suffix, sorted; [] when the folder is missing."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix == suffix and p.is_file())


__all__ = [
    "ExportName", "MISSING_TOKENS", "Superseded", "WarnFn", "files_with_suffix", "load_json",
    "parse_export_name", "read_csv_strings", "select_exports", "to_numbers", "unique_names",
]
