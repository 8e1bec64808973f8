"""The `metadata` table: what a profile records about its run, as key, value and file.

Rules that judge a setting (an environment variable, a library version, the chip's core count)
read one table whatever the format, so every reader writes its facts under the same keys:

- `env.<NAME>`: an environment variable as the profiler recorded it (empty when it was unset
  but listed);
- `version.<component>`: `version.cann`, `version.torch`, `version.torch_npu`,
  `version.mindspore`, `version.driver`, `version.cuda_runtime`, `version.nccl`, ...;
- `device.<fact>`: `device.name`, `device.ai_core_num`, `device.aiv_core_num`,
  `device.aicore_freq_mhz` (rated), `device.aiv_freq_mhz`, `device.ai_cpu_core_num`,
  `device.sm_count`, `device.memory_bytes`, `device.compute_capability`;
- `distributed.<fact>`: `distributed.backend`, `distributed.rank`, `distributed.world_size`,
  `distributed.pg_count`;
- `profiler.<setting>`: how the profile was taken (`profiler.record_shapes`,
  `profiler.with_stack`, `profiler.profiler_level`, `profiler.aic_metrics`, ...);
- `host.<fact>`: the host (`host.cpu_count`, `host.os`, `host.name`);
- `framework.<fact>`: how the framework ran (`framework.mode`: `graph` where the profile shows
  graph mode, as a MindSpore step trace does; `framework.execution`: `eager`, `compiled`
  (torch.compile's code ran) or `graphs` (CUDA graphs were replayed), where a PyTorch trace
  shows it).

Values are text, as written (numbers as the file writes them, booleans as true/false).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


def text(value: Any) -> str | None:
    """A scalar as table text; None for containers and missing values."""
    if value is None or isinstance(value, (dict, list, tuple)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def rows_recording(table: pd.DataFrame, key: str) -> list[int]:
    """Positions of the rows of a `metadata` table that record `key`, in row order. Found in
    the keys as a list: the table holds a few dozen rows, where a pandas mask and selection
    cost more than the data (a quarter of a millisecond per key, on every rank)."""
    return [i for i, recorded in enumerate(table["key"].tolist()) if recorded == key]


class MetadataRows:
    """Facts gathered while a reader reads; the first file to state a key keeps it."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[str, str]] = {}

    def add(self, key: str, value: Any, source: str, *, empty_ok: bool = False) -> None:
        """One fact; an empty value counts only where it means something (an unset env)."""
        value = text(value)
        if value is None or (value == "" and not empty_ok) or key in self._rows:
            return
        self._rows[key] = (value, source)

    def add_env(self, env: Mapping[Any, Any], source: str) -> None:
        """An environment listing: every variable, unset ones (None or "") as empty text."""
        for name, value in env.items():
            self.add(f"env.{name}", "" if value is None else value, source, empty_ok=True)

    def __contains__(self, key: str) -> bool:
        return key in self._rows

    def __len__(self) -> int:
        return len(self._rows)

    def frame(self) -> pd.DataFrame | None:
        """The `metadata` table (sorted by key), or None when nothing was recorded."""
        if not self._rows:
            return None
        keys = sorted(self._rows)
        return pd.DataFrame(
            {  # the contract's string dtype: conform keeps what is already cast
                "key": pd.array(keys, dtype="string"),
                "value": pd.array([self._rows[k][0] for k in keys], dtype="string"),
                "source": pd.array([self._rows[k][1] for k in keys], dtype="string"),
            }
        )


_CANN_DEVICE_FACTS = {
    "ai_core_num": "device.ai_core_num",
    "aiv_num": "device.aiv_core_num",
    "ai_cpu_core_num": "device.ai_cpu_core_num",
    "aic_frequency": "device.aicore_freq_mhz",
    "aiv_frequency": "device.aiv_freq_mhz",
    "hwts_frequency": "device.hwts_freq_mhz",
}
"""`DeviceInfo` fields of a CANN `info.json.N` (frequencies in MHz, as rated)."""


def add_cann_info(
    rows: MetadataRows, info: Mapping[str, Any], device_id: str | None, source: str
) -> None:
    """Chip and host facts of a CANN export's `info.json.N`: the `DeviceInfo` entry of
    `device_id` (else the first), the platform, the host."""
    devices = info.get("DeviceInfo")
    devices = devices if isinstance(devices, list) else []
    entry = next(
        (d for d in devices if isinstance(d, dict) and str(d.get("id")) == device_id),
        devices[0] if devices and isinstance(devices[0], dict) else {},
    )
    for field, key in _CANN_DEVICE_FACTS.items():
        rows.add(key, entry.get(field), source)
    rows.add("device.platform_version", info.get("platform_version"), source)
    rows.add("version.driver", info.get("drvVersion"), source)  # as written (newer exports)
    rows.add("distributed.rank", info.get("rank_id"), source)
    rows.add("host.name", info.get("hostname"), source)
    rows.add("host.os", info.get("OS"), source)
    rows.add("host.cpu_count", info.get("cpuNums"), source)
    memory = info.get("memoryTotal")  # kB, as /proc/meminfo writes it
    if isinstance(memory, (int, float)) and not isinstance(memory, bool) and memory > 0:
        rows.add("host.memory_bytes", int(memory) * 1024, source)
