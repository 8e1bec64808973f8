"""The `AI Core Freq` counter of Ascend timelines (torch_npu trace_view.json, msprof_*.json) as
the aicore_freq table: each sample holds from its time to the next sample's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")

COUNTER = "AI Core Freq"
"""Name of the counter events (`ph: "C"`, `args: {"MHz": ...}`) and of their process."""


def freq_samples(ts_us: np.ndarray, mhz: np.ndarray, end_us: float | None) -> pd.DataFrame | None:
    """aicore_freq rows from counter samples (times on the profile clock).

    Samples without a finite time or a positive frequency are dropped; of several samples at
    one time the last is kept. The last sample holds to `end_us` (the device timeline's end)
    when that lies after it. rated_mhz is the highest sample until `with_rated` sets the
    chip's own (the trace does not name it).
    """
    ts = np.asarray(ts_us, dtype="float64")
    freq = np.asarray(mhz, dtype="float64")
    keep = np.isfinite(ts) & np.isfinite(freq) & (freq > 0)
    if not keep.any():
        return None
    frame = (
        pd.DataFrame({"start_us": ts[keep], "freq_mhz": freq[keep]})
        .sort_values("start_us", kind="stable")
        .drop_duplicates("start_us", keep="last")
        .reset_index(drop=True)
    )
    ends = frame["start_us"].shift(-1).to_numpy(float, copy=True)
    last = float(frame["start_us"].iloc[-1])
    ends[-1] = end_us if end_us is not None and np.isfinite(end_us) and end_us > last else last
    frame["end_us"] = ends
    frame["duration_us"] = frame["end_us"] - frame["start_us"]
    frame["rated_mhz"] = float(frame["freq_mhz"].max())
    return frame[["start_us", "end_us", "duration_us", "freq_mhz", "rated_mhz"]]


def freq_until_tasks_end(
    samples: tuple[np.ndarray, np.ndarray] | None, device_ops: pd.DataFrame | None
) -> pd.DataFrame | None:
    """freq_samples of a database's (times, MHz), the last sample holding to the end of the
    device's tasks (a database, unlike a timeline, does not say where its counter stops)."""
    if samples is None:
        return None
    end = None
    if device_ops is not None and not device_ops.empty:
        end = float((device_ops["start_us"] + device_ops["duration_us"]).max())
    return freq_samples(*samples, end)


def task_frequency(starts: np.ndarray, ends: np.ndarray, freq: pd.DataFrame) -> np.ndarray:
    """The time-weighted mean frequency over each task's span [start, end); NaN for a task
    outside every sample's span. A task of zero length takes the frequency at its start."""
    s0 = freq["start_us"].to_numpy(float)
    s1 = freq["end_us"].to_numpy(float)
    f = freq["freq_mhz"].to_numpy(float)
    order = np.argsort(s0, kind="stable")
    s0, s1, f = s0[order], s1[order], f[order]
    # cumulative MHz·µs at each sample boundary, to integrate any span in O(log n)
    widths = s1 - s0
    area = np.concatenate(([0.0], np.cumsum(f * widths)))
    covered = np.concatenate(([0.0], np.cumsum(widths)))

    def integral(t: np.ndarray, table: np.ndarray, rate: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(s0, t, side="right") - 1, 0, len(s0) - 1)
        inside = np.clip(t - s0[i], 0.0, widths[i])
        return table[i] + rate[i] * inside

    a, b = np.asarray(starts, dtype="float64"), np.asarray(ends, dtype="float64")
    ones = np.ones_like(f)
    weight = integral(b, covered, ones) - integral(a, covered, ones)
    total = integral(b, area, f) - integral(a, area, f)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / weight
    # zero-length tasks (or tasks in a zero-width last sample): the sample at the start
    at = np.searchsorted(s0, a, side="right") - 1
    point = np.where((at >= 0) & (at < len(f)), f[np.clip(at, 0, len(f) - 1)], np.nan)
    within = (a >= s0[0]) & (a <= max(s1[-1], s0[-1]))
    mean = np.where(weight > 0, mean, np.where(within, point, np.nan))
    return np.where(np.isfinite(a) & np.isfinite(b), mean, np.nan)


def with_rated(freq: pd.DataFrame, rated_mhz: object) -> pd.DataFrame:
    """The samples with the rated frequency a chip-facts file gave (info.json
    `aic_frequency`, a number or numeric text); unchanged when it is not a positive number."""
    try:
        rated = float(rated_mhz)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return freq
    return freq.assign(rated_mhz=rated) if np.isfinite(rated) and rated > 0 else freq
