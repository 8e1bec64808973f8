"""What held memory at the peak in two runs side by side, so that a grown peak names its cause:
the places in the code of two memory snapshots (compare_allocation_sites; each side is its
device with the largest peak, the one compare_overall's memory_peak reports), and the kinds of
tensor of two memory timeline exports (compare_memory_kinds).

A place is a function, a file and a line. Between two runs the script is often edited, and a
line added above a function moves every place in it: the same code would show as one place
shrinking and another growing by the same bytes. So within each function and file, the two
sides' lines are paired by the one shift that pairs more of them than no shift does (code
moved as a block), and a pair is shown as one place, `function (file:base line -> line)`."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

_FIGURES = {"held_at_peak_bytes": "peak_bytes", "held_bytes": "held_bytes"}
"""allocation_sites column -> its name in the compare table (base_/comp_ before it)."""
_KIND_FIGURES = ["at_peak_bytes", "max_bytes"]
"""memory_kinds columns, as the compare table names them (base_/comp_ before them)."""
_PLACE = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")
"""A place memory_snapshot.site_of names from a Python frame: 'function (file:line)'."""


def site_figures(profile: Profile) -> pd.DataFrame | None:
    """Per place in the code, the bytes its blocks held at the peak and still held when the
    snapshot was taken, on the device whose peak the comparison's memory_peak is (the largest
    reserved, else allocated); None without allocation_sites."""
    sites = profile.tables.get("allocation_sites")
    state = profile.tables.get("allocator_state")
    if sites is None or sites.empty or state is None or state.empty:
        return None
    peaks = state["peak_reserved_bytes"].where(
        state["peak_reserved_bytes"] > 0, state["peak_allocated_bytes"]
    )
    device = state["device"].iloc[int(peaks.fillna(-1).to_numpy().argmax())]
    on_device = sites[(sites["device"] == device).fillna(False)]
    return (
        on_device.groupby("site", sort=False)[list(_FIGURES)]
        .sum(min_count=1)
        .rename(columns=_FIGURES)
    )


def compare_sites(base: pd.DataFrame | None, comp: pd.DataFrame | None) -> pd.DataFrame:
    """compare_allocation_sites: every place either snapshot names, the one that grew most at
    the peak first; a place one side lacks held nothing there (0)."""
    frames = [_or_empty(frame, _FIGURES.values()) for frame in (base, comp)]
    moved = moved_places(frames[0].index, frames[1].index)
    renamed = [frame.rename(index=names) for frame, names in zip(frames, moved)]
    return _side_by_side(*renamed, key="site", grown="peak_bytes", figures=("held_bytes",))


def kind_figures(profile: Profile) -> pd.DataFrame | None:
    """Per kind of tensor of a memory timeline export, the bytes it held at the peak and its
    own highest; None without memory_kinds."""
    kinds = profile.tables.get("memory_kinds")
    if kinds is None or kinds.empty:
        return None
    return kinds.groupby("kind", sort=False)[_KIND_FIGURES].sum(min_count=1)


def compare_kinds(base: pd.DataFrame | None, comp: pd.DataFrame | None) -> pd.DataFrame:
    """compare_memory_kinds: every kind either export has, the one that held the most more at
    the peak first."""
    frames = [_or_empty(frame, _KIND_FIGURES) for frame in (base, comp)]
    return _side_by_side(*frames, key="kind", grown="at_peak_bytes", figures=("max_bytes",))


def _or_empty(frame: pd.DataFrame | None, columns: Iterable[str]) -> pd.DataFrame:
    return frame if frame is not None else pd.DataFrame(columns=list(columns))


def _side_by_side(
    base: pd.DataFrame, comp: pd.DataFrame, key: str, grown: str, figures: tuple[str, ...]
) -> pd.DataFrame:
    """Per `key` (the frames' index), `grown` of both sides and its growth (diff_bytes), then
    the other figures of both; 0 where a side lacks the key; the largest growth first."""
    sides = [frame.add_prefix(prefix) for frame, prefix in ((base, "base_"), (comp, "comp_"))]
    table = sides[0].join(sides[1], how="outer").fillna(0.0).astype("float64")
    table["diff_bytes"] = table[f"comp_{grown}"] - table[f"base_{grown}"]
    table = table.rename_axis(key).reset_index()
    table[key] = table[key].astype("string")
    columns = [key, f"base_{grown}", f"comp_{grown}", "diff_bytes"]
    columns += [f"{side}_{figure}" for figure in figures for side in ("base", "comp")]
    return table.sort_values(["diff_bytes", key], ascending=[False, True], kind="stable")[
        columns
    ].reset_index(drop=True)


def moved_places(base: Iterable[str], comp: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(base place -> shown name, comparison place -> shown name) of the places taken to be the
    same code moved: per function and file, the line shift that pairs the most lines of the two
    sides, where it pairs more than no shift (the smallest such shift on a tie)."""
    lines: dict[tuple[str, str], list[dict[int, str]]] = defaultdict(lambda: [{}, {}])
    for side, places in enumerate((base, comp)):
        for place in places:
            match = _PLACE.match(str(place))
            if match:
                lines[match["function"], match["file"]][side][int(match["line"])] = place
    names: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for (function, file), (base_lines, comp_lines) in lines.items():
        shifts = Counter(c - b for b in base_lines for c in comp_lines)
        best = min(shifts, key=lambda d: (-shifts[d], abs(d), d), default=0)
        if shifts[best] <= shifts[0]:
            continue
        for line, place in base_lines.items():
            if line + best in comp_lines:
                shown = f"{function} ({file}:{line} -> {line + best})"
                names[0][place], names[1][comp_lines[line + best]] = shown, shown
    return names
