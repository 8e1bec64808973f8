"""CANN summary CSVs (msprof's op_summary, torch_npu's kernel_details, MindSpore's files).

Each CSV is read as text (`csv_text`) and only the columns a table needs are converted, so a
bad cell costs one warning, never the file. A file without its required columns, or without
rows, is one warning and no table.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.compat import zip_strict
from advisor.errors import UnreadableInput
from advisor.formats.csv_text import read_csv_text
from advisor.formats.numbers import MISSING_TOKENS, decimal_cells, to_numbers
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

COARSEST_TIME_US = 1000.0
"""A time written with less precision than this (a spreadsheet's `1.69512E+15`) is no time."""
_SCIENTIFIC = re.compile(r"[+-]?\d+(?:\.(\d*))?[eE]([+-]?\d+)")

DEVICE_COLUMN = "_device"
"""The `Device_id` of each row of a merged summary (dropped by `conform`)."""


class SummaryCsv:
    """One summary CSV: string cells, plus numeric columns that report their bad cells."""

    def __init__(self, path: Path, rel: str, warn: WarnFn) -> None:
        self.rel = rel
        self.warn = warn
        # the reader names its files relative to the profile: so do the CSV parser's warnings
        self._text = read_csv_text(
            path, lambda _path, problem, **where: warn(rel, problem, **where)
        )
        self.rows = self._text.rows
        self.index = pd.RangeIndex(self.rows)
        self.written = dict(zip_strict(self._text.columns, self._text.names))  # `X#2` -> `X`

    @property
    def df(self) -> pd.DataFrame:
        """Every column as written (stripped), built on first use for a small file."""
        return self._text.frame

    def has(self, column: str) -> bool:
        return column in self.written

    def first(self, *columns: str) -> str | None:
        return next((c for c in columns if self.has(c)), None)

    def copies(self, column: str) -> list[str]:
        """Internal names of every column written as `column` (msprof repeats some)."""
        return [c for c in self.written if c == column or c.startswith(f"{column}#")]

    def rename(self, mapping: dict[str, str]) -> None:
        """Give columns the names a reader knows them by (`old -> new`)."""
        self._text = self._text.renamed(mapping)
        self.written = {mapping.get(c, c): w for c, w in self.written.items()}

    def cells(self, column: str) -> pd.Series:
        """The column's cells as written (stripped), missing markers included."""
        small = self._text.cells
        if small is None:
            return self.df[column]
        return pd.Series(small[column], index=self.index, name=column, dtype=_text_dtype())

    def text(self, column: str | None) -> pd.Series | None:
        """The column's cells, missing markers as missing values."""
        if column is None or not self.has(column):
            return None
        small = self._text.cells
        if small is None:
            cells = self.df[column]
            return cells.mask(cells.str.lower().isin(MISSING_TOKENS))
        texts = [math.nan if c.lower() in MISSING_TOKENS else c for c in small[column]]
        return pd.Series(texts, index=self.index, name=column, dtype=_text_dtype())

    def number(self, column: str | None) -> pd.Series | None:
        if column is None or not self.has(column):
            return None
        small = self._text.cells
        numbers = None if small is None else decimal_cells(small[column])
        if numbers is not None:
            return pd.Series(numbers, index=self.index, dtype="float64")
        return to_numbers(
            self.cells(column), file=self.rel, column=self.written[column], warn=self.warn
        )

    def rounded_times(self, column: str) -> pd.Series:
        """Which cells of a time column (µs) are written in scientific notation too short to
        place them (their last digit worth more than COARSEST_TIME_US: `1.69512E+15` is worth
        1e10 µs, as a spreadsheet saves an epoch time), with one warning naming them; such
        times would put their rows hours away from the rest of the profile."""
        cells = self.cells(column)
        coarse = [
            bool(m) and 10.0 ** (int(m.group(2)) - len(m.group(1) or "")) > COARSEST_TIME_US
            for m in map(_SCIENTIFIC.fullmatch, cells)
        ]
        rounded = pd.Series(coarse, index=self.index, dtype=bool)
        if rounded.any():
            example, count = cells[rounded].iloc[0], int(rounded.sum())
            self.warn(
                self.rel,
                f"{count:,} {'time is' if count == 1 else 'times are'} rounded in scientific "
                f"notation (e.g. {example}, as a spreadsheet saves them) and left out",
                column=self.written[column],
            )
        return rounded


@cache
def _text_dtype() -> Any:
    """The dtype pandas gives a column of text (str on pandas 3, object before), which a
    frame of the whole file would have."""
    return pd.Series(["text"]).dtype


def open_csv(
    path: Path, rel: str, warn: WarnFn, required: Sequence[str], any_of: Sequence[str] = ()
) -> SummaryCsv | None:
    """A CSV with its required columns (and one of `any_of`) and at least one row; otherwise
    warn with the problem and return None."""
    try:
        csv = SummaryCsv(path, rel, warn)
    except UnreadableInput as exc:
        warn(rel, exc.problem, unread=True)
        return None
    missing = [c for c in required if not csv.has(c)]
    if any_of and not any(csv.has(c) for c in any_of):
        missing.append(any_of[0])
    if missing:
        warn(rel, f"missing column {missing[0]!r}", column=missing[0])
        return None
    if not csv.rows:
        warn(rel, "no data rows (header only)")
        return None
    return csv


def frame_of(columns: dict[str, pd.Series | None]) -> pd.DataFrame:
    """A table of the columns the file has (None: a column it lacks)."""
    return pd.DataFrame({k: v for k, v in columns.items() if v is not None})


@dataclass(frozen=True)
class CsvKind:
    """One kind of summary CSV: the table it gives, its required columns, how to build it."""

    table: str
    required: tuple[str, ...]
    build: Callable[[SummaryCsv], pd.DataFrame]


def read_summary_table(kind: CsvKind, path: Path, rel: str, warn: WarnFn) -> pd.DataFrame | None:
    """Read one summary CSV of a known kind, each row's `Device_id` in DEVICE_COLUMN when the
    file has one; warn and return None when it is unusable."""
    csv = open_csv(path, rel, warn, kind.required)
    if csv is None:
        return None
    table = kind.build(csv)
    devices = csv.text("Device_id")
    return table.assign(**{DEVICE_COLUMN: devices}) if devices is not None else table
