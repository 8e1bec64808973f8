"""One broken timestamp must not ruin a profile's clock.

Profilers write absolute times (epoch µs, device counters) and readers rebase them on the
earliest one. A single event at ts = -1e18 then becomes the origin, and every other time,
subtracted from it in float64, loses all precision: computing time 0, idle 100%. Times
further than a day from the median of a profile's times are broken (no profile spans a day):
the origin ignores them and readers drop their rows with a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

OUTLIER_US = 86_400e6
"""How far from the median of a profile's times a time may lie: a day."""


def table_times(
    tables: Mapping[str, pd.DataFrame], columns: Mapping[str, Sequence[str]]
) -> np.ndarray:
    """Every finite time of `columns` (per table) in `tables`, as one float64 array."""
    times = [
        tables[name][c].to_numpy("float64", na_value=np.nan)
        for name, cols in columns.items()
        if name in tables
        for c in cols
        if c in tables[name]
    ]
    joined = np.concatenate(times) if times else np.empty(0)
    return joined[np.isfinite(joined)]


def robust_origin(times: np.ndarray) -> tuple[float, float]:
    """(the earliest time within OUTLIER_US of the median, that median) of finite times."""
    centre = float(np.median(times))
    return float(times[np.abs(times - centre) <= OUTLIER_US].min()), centre


def drop_far_times(
    tables: dict[str, pd.DataFrame], columns: Mapping[str, Sequence[str]], centre: float
) -> tuple[int, str, float] | None:
    """Remove the rows whose times (`columns` per table) lie more than OUTLIER_US from
    `centre`, all relative to one origin; (how many, the first one's name, its time) when
    any were removed."""
    dropped, example = 0, None
    for name, cols in columns.items():
        frame = tables.get(name)
        if frame is None:
            continue
        far = np.zeros(len(frame), dtype=bool)
        present = [c for c in cols if c in frame]
        for column in present:
            values = frame[column].to_numpy(dtype=np.float64, na_value=np.nan)
            far |= np.abs(values - centre) > OUTLIER_US
        if far.any():
            first = frame[far].iloc[0]
            if example is None:
                label = (
                    first["name"]
                    if "name" in frame
                    else (f"step {first['step']}" if "step" in frame else name)
                )
                example = (str(label), float(first[present[0]]))
            dropped += int(far.sum())
            tables[name] = frame[~far].reset_index(drop=True)
    return (dropped, *example) if example else None


def far_warning(found: tuple[int, str, float], origin: float) -> str:
    """The reader warning naming what drop_far_times removed."""
    count, name, time = found
    return (
        f"{count} event{'s' if count != 1 else ''} more than a day away from the rest of "
        f"the profile ignored (e.g. {name!r} at {time + origin:.17g} µs): a broken "
        "timestamp would otherwise become the time origin"
    )
