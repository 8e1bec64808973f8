"""`info.json.N`: the chip facts (AI Core count, frequencies) rules need."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advisor.formats.metadata import MetadataRows, add_cann_info
from advisor.lazy import lazy_module
from advisor.model import ProfileMeta

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


def apply_info(meta: ProfileMeta, info: dict[str, Any], device_id: str | None) -> None:
    devices = info.get("DeviceInfo")
    devices = devices if isinstance(devices, list) else []
    entry = next(
        (d for d in devices if isinstance(d, dict) and str(d.get("id")) == device_id),
        devices[0] if devices and isinstance(devices[0], dict) else {},
    )
    for key in (
        "ai_core_num",
        "aiv_num",
        "ai_cpu_core_num",
        "aic_frequency",
        "aiv_frequency",
        "hwts_frequency",
    ):
        if key in entry:
            meta.extra[key] = _number_or_text(entry[key])
    for key, name in (("platform_version", "platform"), ("version", "info_json")):
        if info.get(key) not in (None, ""):
            meta.versions[name] = str(info[key])
    rank = info.get("rank_id")
    if isinstance(rank, int) and rank >= 0:
        meta.rank = rank


def _number_or_text(value: Any) -> Any:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return value
    return int(number) if number.is_integer() else number


def info_metadata(
    info: dict[str, Any], device_id: str | None, source: str, sample: Any, sample_source: str
) -> pd.DataFrame | None:
    """The `metadata` rows of `info.json.N` (chip, host) and of `sample.json` (the
    collection settings, as `profiler.<setting>`)."""
    rows = MetadataRows()
    add_cann_info(rows, info, device_id, source)
    if isinstance(sample, dict):
        for key, value in sample.items():
            rows.add(f"profiler.{key}", value, sample_source)
    return rows.frame()
