"""What every source of a rank reads through: its files, its profile so far (tables and
warnings), the device-clock columns to rebase, and tolerant CSV, JSON and text helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from advisor.formats.cann_csv import open_csv
from advisor.formats.numbers import to_numbers
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta

from .names import READER

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

MS = 1000.0


@dataclass
class Rank:
    """One rank's files, its profile so far, and the helpers every source uses."""

    folder: Path
    rank: int
    files: dict[str, Path]
    profile: Profile = field(init=False)
    # absolute device-clock µs columns, rebased together at the end
    clocked: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        meta = ProfileMeta(
            READER,
            str(self.folder),
            framework="MindSpore",
            device_kind="NPU",
            device_id=str(self.rank),
            rank=self.rank,
        )
        self.profile = Profile(meta)

    def warn(
        self,
        file: str | Path,
        problem: str,
        *,
        line: int | None = None,
        column: str | None = None,
        unread: bool = False,
    ) -> None:
        self.profile.warn(
            Path(file).name, problem, line=line, column=column, reader=READER, unread=unread
        )

    def csv(
        self, path: Path, required: tuple[str, ...]
    ) -> tuple[dict[str, str], pd.DataFrame] | None:
        """String cells of a CSV with its required columns; None (warned) otherwise."""
        csv = open_csv(path, path.name, self.warn, required)
        return None if csv is None else (csv.written, csv.df)

    def numbers(self, path: Path, df: pd.DataFrame, column: str) -> pd.Series:
        return to_numbers(df[column], file=path.name, column=column, warn=self.warn)

    def json(self, path: Path) -> Any:
        """Parsed JSON, or None (warned) when the file cannot be read or parsed."""
        try:
            return orjson.loads(path.read_bytes())
        except OSError as exc:
            self.warn(path, f"cannot read file: {exc.strerror or exc}", unread=True)
        except orjson.JSONDecodeError as exc:
            self.warn(path, f"not valid JSON ({exc.msg}, line {exc.lineno})", unread=True)
        return None

    def lines(self, path: Path) -> list[tuple[int, list[str]]] | None:
        """(line number, whitespace-separated cells) of a text file's non-blank lines; None
        (warned) when it cannot be read or is empty."""
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.warn(
                path, f"cannot read file: {getattr(exc, 'strerror', None) or exc}", unread=True
            )
            return None
        lines = [(n, line.split()) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if not lines:
            self.warn(path, "empty file")
            return None
        return lines

    def report_bad(self, path: Path, bad: list[tuple[int, str]], expected: str) -> None:
        """One warning for the (line, text) of lines not in the `expected` form."""
        if bad:
            line, text = bad[0]
            what = "line is" if len(bad) == 1 else "lines are"
            self.warn(
                path,
                f"{len(bad)} {what} not '{expected}' and skipped (first: {text[:60]!r})",
                line=line,
            )
