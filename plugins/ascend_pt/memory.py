"""memory_record.csv: the allocator's samples (the database's MEMORY_RECORD is chosen from in
the same way)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisor.formats.cann_csv import open_csv
from advisor.formats.decimal_clock import Clock
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

MIB = float(2**20)  # memory_record: MB of the allocator, binary


def read_memory_record(path: Path, rel: str, clock: Clock, warn: WarnFn) -> pd.DataFrame | None:
    """Allocator samples; one component's series (PTA+GE, else PTA, else every row)."""
    csv = open_csv(
        path, rel, warn, ("Timestamp(us)",), any_of=("Total Allocated(MB)", "Total Reserved(MB)")
    )
    if csv is None:
        return None
    valid = (csv.number("Timestamp(us)").notna() & ~csv.rounded_times("Timestamp(us)")).to_numpy()
    frame = pd.DataFrame({"time_us": np.where(valid, clock.us(csv.cells("Timestamp(us)")), np.nan)})
    for written, column in (
        ("Total Allocated(MB)", "allocated_bytes"),
        ("Total Reserved(MB)", "reserved_bytes"),
    ):
        if csv.has(written):
            frame[column] = csv.number(written) * MIB
    device = csv.text("Device Type")
    if device is not None:
        frame["device"] = device
    return one_component(frame, csv.text("Component"))


def one_component(frame: pd.DataFrame, component: pd.Series | None) -> pd.DataFrame:
    """The samples of one allocator series: PTA+GE (the framework's and CANN's together),
    else PTA, else every row; memory_record.csv and the database's MEMORY_RECORD alike."""
    if component is not None:
        present = set(component.dropna())
        chosen = next((c for c in ("PTA+GE", "PTA") if c in present), None)
        if chosen is not None:
            frame = frame[(component == chosen).to_numpy(dtype=bool)]
    return frame.reset_index(drop=True)
