"""msprof export file names: which files hold the same data, and the newest export of each.

msprof re-exports into the same folder with a new timestamp and splits big files into slices,
so one folder can hold several copies of the same table; reading all of them would double every
number.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

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


def parse_export_name(path: str | Path, bare: Collection[str] = ()) -> ExportName | None:
    """Parse an msprof export name; None for names that follow none of the patterns. A bare
    `{type}.csv` is an export only where its type is one of `bare`: msprof never writes one,
    but an export copied out and renamed (`op_summary.csv`) is still one."""
    path = Path(path)
    match = _EXPORT_NAME.fullmatch(path.name)
    if match is None:
        return None
    if match["device"] is None and match["timestamp"] is None and match["type"] not in bare:
        return None

    def num(group: str) -> int | None:
        return int(match[group]) if match[group] is not None else None

    return ExportName(
        path,
        match["type"],
        num("device"),
        num("model"),
        num("iteration"),
        int(match["slice"] or 0),
        match["timestamp"] or "",
    )


@dataclass(frozen=True)
class Superseded:
    """An older export that `select_exports` skipped in favour of a newer one."""

    type: str
    kept: tuple[Path, ...]
    ignored: tuple[Path, ...]


def select_exports(
    paths: Iterable[str | Path], bare: Collection[str] = ()
) -> tuple[dict[str, list[Path]], list[Superseded]]:
    """Group export files by type, newest export only, slices in order (`bare`: the types
    whose name without device or timestamp counts, see parse_export_name).

    msprof re-exports into the same folder with a new timestamp, so one folder can hold
    several copies of the same data; reading all of them would double every number. For
    each series (type, device, model, iteration) only the newest timestamp is kept and the
    others are reported. Different series of one type (several models or iterations) are
    all kept, ordered by device, model and iteration.
    """
    by_series: dict[tuple, dict[str, list[ExportName]]] = {}
    for path in paths:
        name = parse_export_name(path, bare)
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
