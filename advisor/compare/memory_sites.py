"""The places in the code that hold memory, in two memory snapshots side by side: where a
change made the peak grow (compare_allocation_sites). Each side is its device with the
largest peak, the one compare_overall's memory_peak reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.lazy import lazy_module
from advisor.model import Profile

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")

_FIGURES = {"held_at_peak_bytes": "peak_bytes", "held_bytes": "held_bytes"}
"""allocation_sites column -> its name in the compare table (base_/comp_ before it)."""


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
    sides = [
        (frame if frame is not None else pd.DataFrame(columns=list(_FIGURES.values()))).add_prefix(
            prefix
        )
        for frame, prefix in ((base, "base_"), (comp, "comp_"))
    ]
    table = sides[0].join(sides[1], how="outer").fillna(0.0).astype("float64")
    table["diff_bytes"] = table["comp_peak_bytes"] - table["base_peak_bytes"]
    table = table.rename_axis("site").reset_index()
    table["site"] = table["site"].astype("string")
    return table.sort_values(["diff_bytes", "site"], ascending=[False, True], kind="stable")[
        [
            "site",
            "base_peak_bytes",
            "comp_peak_bytes",
            "diff_bytes",
            "base_held_bytes",
            "comp_held_bytes",
        ]
    ].reset_index(drop=True)
