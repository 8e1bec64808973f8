"""The metadata files of a rank folder: profiler_info_{rank}.json, profiler_metadata.json."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from advisor.formats.numbers import int_or_none
from advisor.model import ProfileMeta

_VERSION_NAMES = {
    "torch_npu_version": "torch_npu",
    "cann_version": "CANN",
    "ms_version": "MindSpore",
    "mindspore_version": "MindSpore",
    "torch_version": "torch",
}
PROFILER_INFO = re.compile(r"^profiler_info(?:_(\d+))?\.json$")


def versions(data: dict[str, Any], depth: int = 0) -> dict[str, str]:
    """`*version*` keys of a metadata file and of its sections (not its environment)."""
    found = {}
    for key, value in data.items():
        if isinstance(value, dict):
            if depth < 1 and key not in ("ENV_VARIABLES", "config"):
                found.update(versions(value, depth + 1))
        elif "version" in str(key).lower() and isinstance(value, (str, int, float)) and str(value):
            found[_VERSION_NAMES.get(str(key), str(key))] = str(value)
    return found


def non_negative_int(value: Any) -> int | None:
    number = int_or_none(value)
    return number if number is not None and number >= 0 else None


def set_framework(meta: ProfileMeta, framework: str) -> None:
    meta.framework = framework
    meta.source_format = "ascend-ms" if framework == "MindSpore" else "ascend-pt"


def read_metadata(
    root: Path,
    output: Path,
    meta: ProfileMeta,
    framework_known: bool,
    load: Callable[[Path], Any],
    mark_read: Callable[[Path], None],
) -> None:
    """Rank, versions, profiler settings and framework of a rank folder from
    `profiler_info_{rank}.json` and `profiler_metadata.json`; the device when one PROF_*
    export names only one."""
    for path in sorted(root.glob("profiler_info*.json")):
        match = PROFILER_INFO.match(path.name)
        if match is None or not path.is_file():
            continue
        info = load(path)
        if not isinstance(info, dict):
            continue
        rank = non_negative_int(info.get("rank_id"))
        if rank is None and match.group(1) is not None:
            rank = int(match.group(1))
        meta.rank = rank if rank is not None else meta.rank
        meta.versions.update(versions(info))
        config = info.get("config")
        experimental = config.get("experimental_config") if isinstance(config, dict) else None
        if isinstance(experimental, dict):
            for key in ("_profiler_level", "_aic_metrics"):
                if experimental.get(key) not in (None, ""):
                    meta.extra[key.strip("_")] = str(experimental[key])
        if not framework_known and (
            "ms_version" in info or "mindspore" in str(info.get("framework", "")).lower()
        ):
            set_framework(meta, "MindSpore")
        mark_read(path)
    path = root / "profiler_metadata.json"
    if path.is_file():
        data = load(path)
        if isinstance(data, dict):
            apply_metadata(meta, data)
            mark_read(path)
    if (
        not framework_known
        and output.is_dir()
        and any(output.glob("ascend_mindspore_profiler*.db"))
    ):
        set_framework(meta, "MindSpore")
    devices = sorted(
        {
            d.name.removeprefix("device_")
            for prof in root.glob("PROF_*")
            for d in prof.glob("device_*")
            if d.is_dir() and d.name.removeprefix("device_").isdigit()
        }
    )
    if len(devices) == 1:
        meta.device_id = devices[0]


def apply_metadata(meta: ProfileMeta, data: dict[str, Any]) -> None:
    """Environment, world size, rank and versions of `profiler_metadata.json`."""
    env = data.get("ENV_VARIABLES")
    if isinstance(env, dict):
        meta.extra["env"] = {str(k): "" if v is None else str(v) for k, v in env.items()}
    distributed = data.get("distributed_args")
    distributed = distributed if isinstance(distributed, dict) else {}
    world = non_negative_int(distributed.get("world_size", data.get("world_size")))
    if world:
        meta.world_size = world
    rank = non_negative_int(distributed.get("rank", data.get("rank_id")))
    if meta.rank is None and rank is not None:
        meta.rank = rank
    for name, version in versions(data).items():
        meta.versions.setdefault(name, version)
