"""CSV files read as the text written: every cell a stripped string, duplicate headers kept.

Profilers' CSVs repeat headers (msprof writes one `Reduce Start(us)` per group), pad cells with
tabs and mix `N/A` into numeric columns. Reading every cell as text keeps each value as
written; `advisor.formats.numbers.to_numbers` then converts the columns a reader needs and
reports their bad cells.
"""

from __future__ import annotations

import csv
import io
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.formats.files import TOO_LARGE
from advisor.formats.interning import utf8_bytes
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")
    pa = lazy_module("pyarrow")


@dataclass
class CsvText:
    """A CSV read as text. A small file keeps its cells as lists (`cells`), from which a
    reader builds only the columns it converts: a DataFrame of every column, dozens of them
    for a few hundred rows, costs more than the reading. `frame` builds that DataFrame
    (once) for the readers that want it, and is what a larger file is read into."""

    names: list[str]  # the header as written, duplicates kept
    columns: list[str]  # unique internal names: a repeated header gets `#2`, `#3`...
    rows: int
    cells: dict[str, list[str]] | None  # a small file's stripped cells by internal name
    _frame: pd.DataFrame | None = None

    @property
    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            assert self.cells is not None
            self._frame = pd.DataFrame(self.cells, index=pd.RangeIndex(self.rows))
        return self._frame

    def renamed(self, mapping: dict[str, str]) -> CsvText:
        """The same cells, columns named `old -> new` by `mapping` (others as they were)."""
        cells, frame = self.cells, self._frame
        return CsvText(
            self.names,
            [mapping.get(c, c) for c in self.columns],
            self.rows,
            None if cells is None else {mapping.get(c, c): v for c, v in cells.items()},
            None if frame is None else frame.rename(columns=mapping),
        )


def read_csv_strings(
    path: str | Path, warn: WarnFn | None = None
) -> tuple[list[str], pd.DataFrame]:
    """Read a CSV as strings: the header names as written and a frame of every cell (see
    `read_csv_text`)."""
    text = read_csv_text(path, warn)
    return text.names, text.frame


def read_csv_text(path: str | Path, warn: WarnFn | None = None) -> CsvText:
    """Read a CSV as strings: the header as written, cells stripped of whitespace and tabs.

    Keeps the header names exactly as written (duplicates kept) and gives the columns unique
    internal names: a repeated header gets `#2`, `#3`... (`Reduce Start(us)#2`), so columns
    that msprof repeats per group stay readable by position. A header-only file gives no
    rows. A small regular file is read by the csv module; otherwise the pyarrow engine is
    used for speed on million-row exports, and files it rejects (ragged rows) are re-read
    with the C engine, and `warn` is told so.
    """
    names = _read_header(path)
    columns = unique_names(names)
    cells = _read_small(path, columns)
    if cells is not None:
        return CsvText(names, columns, len(cells[columns[0]]), cells)
    options: dict[str, Any] = dict(
        header=None,
        skiprows=1,
        names=columns,
        dtype=str,
        keep_default_na=False,
        na_values=[],
        encoding="utf-8",
    )
    try:
        df = (
            _read_arrow_text(path, columns)
            if _arrow_infers_types()
            else pd.read_csv(path, engine="pyarrow", **options)
        )
    except (pd.errors.ParserError, ValueError):
        try:
            with warnings.catch_warnings():  # ragged rows: extra cells dropped, missing ones empty
                warnings.simplefilter("ignore", pd.errors.ParserWarning)
                df = pd.read_csv(path, engine="c", index_col=False, on_bad_lines="skip", **options)
            if warn is not None:
                warn(
                    path,
                    "rows with more or fewer cells than the header: extra cells "
                    "ignored, missing cells left empty",
                )
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
    df = df.reset_index(drop=True)
    return CsvText(names, columns, len(df), None, df)


SMALL_CSV_BYTES = 256 * 1024
"""Below this size the csv module reads faster than pyarrow, whose reader costs some
milliseconds to start (most summary CSVs of a run are a few KB)."""


def _read_small(path: str | Path, columns: list[str]) -> dict[str, list[str]] | None:
    """The cells of a small, regular CSV by column, read with the csv module as pyarrow reads
    them: the header line skipped, empty lines ignored, cells stripped. None (read it the
    other way) for a large file, and for anything irregular, whose handling (and warning)
    stays with the other path: a row of another length than the header, a quoted cell
    across lines, text after a closing quote, no data rows, text that is not UTF-8."""
    try:
        if Path(path).stat().st_size > SMALL_CSV_BYTES:
            return None
        with open(path, encoding="utf-8", newline="") as fh:
            text = fh.read()
        reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        next(reader, None)  # the header, read by _read_header
        rows = [row for row in reader if row]
        if not rows or reader.line_num - 1 != len(rows) + _empty_lines(text):
            return None
        if any(len(row) != len(columns) for row in rows):
            return None
        return {
            name: [cell.strip() for cell in column]
            for name, column in zip_strict(columns, zip(*rows))
        }
    except (OSError, UnicodeDecodeError, csv.Error):  # csv.Error: text after a closing quote
        return None
    except MemoryError:
        raise UnreadableInput(path, TOO_LARGE) from None


def _empty_lines(text: str) -> int:
    """Lines with nothing on them, after the header (the csv module gives them no row)."""
    return sum(1 for line in text.splitlines()[1:] if not line)


# pandas 2's pyarrow engine infers each column's type and casts it to str afterwards, which
# rounds long decimals (`1736413971558972.912` -> `1736413971558973.0`); pandas 3 reads text.
def _arrow_infers_types() -> bool:
    return int(pd.__version__.split(".")[0]) < 3


def _read_arrow_text(path: str | Path, columns: list[str]) -> pd.DataFrame:
    """What `pd.read_csv(engine="pyarrow", dtype=str, ...)` reads on pandas 3: every cell as
    the text written, the header line skipped, nothing taken as missing."""
    import pyarrow.csv as pa_csv

    table = pa_csv.read_csv(
        path,
        read_options=pa_csv.ReadOptions(column_names=columns, skip_rows=1),
        convert_options=pa_csv.ConvertOptions(
            column_types=dict.fromkeys(columns, pa.string()),
            null_values=[],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    return table.to_pandas()


_ASCII_SPACE = (9, 10, 11, 12, 13, 32)
"""The bytes arrow's ascii_trim_whitespace trims (tab, newlines, vertical tab, form feed,
carriage return, space)."""


def _needs_strip(cells: pd.Series) -> bool:
    """Whether any cell has surrounding whitespace (msprof writes a tab after some times).

    Most columns have none: testing the first and last byte of every cell at once is many
    times cheaper than trimming every cell, and non-ASCII columns are always stripped (Unicode
    whitespace).
    """
    if cells.empty:  # nothing to strip; pandas 2 gives such a column no string type
        return False
    offsets, data = utf8_bytes(pa.array(cells, from_pandas=True))
    if (data >= 0x80).any():
        return True
    starts, ends = offsets[:-1], offsets[1:]
    filled = ends > starts
    if not filled.all():
        starts, ends = starts[filled], ends[filled]
    space = np.zeros(256, dtype=bool)
    space[list(_ASCII_SPACE)] = True
    return bool(space[data[starts]].any() or space[data[ends - 1]].any())


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
