"""The metadata files of a rank folder: profiler_info_{rank}.json, profiler_metadata.json."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from advisor.formats.comm_groups import ParallelGroup, parallel_groups
from advisor.formats.metadata import MetadataRows, add_cann_info
from advisor.formats.numbers import int_or_none
from advisor.model import ProfileMeta

_VERSION_NAMES = {
    "torch_npu_version": "torch_npu",
    "cann_version": "CANN",
    "ms_version": "MindSpore",
    "mindspore_version": "MindSpore",
    "torch_version": "torch",
}
_VERSION_KEYS = {
    "torch_npu": "version.torch_npu",
    "CANN": "version.cann",
    "MindSpore": "version.mindspore",
    "torch": "version.torch",
}
"""`metadata` keys of the versions `versions()` finds (others: version.<their key>)."""
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
    rows: MetadataRows,
) -> dict[str, ParallelGroup]:
    """Rank, versions, profiler settings and framework of a rank folder from
    `profiler_info_{rank}.json` and `profiler_metadata.json`; the device when one PROF_*
    export names only one. `rows` gets them as the `metadata` table, with the chip facts of
    the export's `info.json.N`. Returns the communication groups profiler_metadata.json
    describes."""
    groups: dict[str, ParallelGroup] = {}
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
        _info_rows(rows, info, path.name)
        config = info.get("config")
        experimental = config.get("experimental_config") if isinstance(config, dict) else None
        if isinstance(experimental, dict):
            for key in ("_profiler_level", "_aic_metrics"):
                if experimental.get(key) not in (None, ""):
                    meta.extra[key.strip("_")] = str(experimental[key])
        common = config.get("common_config") if isinstance(config, dict) else None
        if isinstance(common, dict) and isinstance(common.get("profile_memory"), bool):
            meta.extra["profile_memory"] = common["profile_memory"]
        if not framework_known and (
            "ms_version" in info or "mindspore" in str(info.get("framework", "")).lower()
        ):
            set_framework(meta, "MindSpore")
        mark_read(path)
    path = root / "profiler_metadata.json"
    if path.is_file():
        data = load(path)
        if isinstance(data, dict):
            groups = apply_metadata(meta, data)
            _metadata_rows(rows, data, path.name)
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
    _device_info_rows(root, meta.device_id, rows, load, mark_read)
    return groups


def apply_metadata(meta: ProfileMeta, data: dict[str, Any]) -> dict[str, ParallelGroup]:
    """Environment, world size, rank and versions of `profiler_metadata.json`; returns its
    communication groups (`parallel_group_info`)."""
    env = data.get("ENV_VARIABLES")
    if isinstance(env, dict):
        meta.extra["env"] = {str(k): "" if v is None else str(v) for k, v in env.items()}
    distributed = data.get("distributed_args")
    distributed = distributed if isinstance(distributed, dict) else {}
    world = non_negative_int(distributed.get("world_size", data.get("world_size")))
    world = world or world_group_size(data)
    if world:
        meta.world_size = world
    rank = non_negative_int(distributed.get("rank", data.get("rank_id")))
    if meta.rank is None and rank is not None:
        meta.rank = rank
    for name, version in versions(data).items():
        meta.versions.setdefault(name, version)
    return parallel_groups(data.get("parallel_group_info"))


def _info_rows(rows: MetadataRows, info: dict[str, Any], source: str) -> None:
    """Versions, rank and profiler settings of `profiler_info_{rank}.json`."""
    for name, version in versions(info).items():
        rows.add(_VERSION_KEYS.get(name, f"version.{name}"), version, source)
    rows.add("distributed.rank", info.get("rank_id"), source)
    config = info.get("config")
    config = config if isinstance(config, dict) else {}
    for section in ("common_config", "experimental_config"):
        settings = config.get(section)
        if isinstance(settings, dict):
            for key, value in settings.items():
                rows.add(f"profiler.{str(key).strip('_')}", value, source)


def _metadata_rows(rows: MetadataRows, data: dict[str, Any], source: str) -> None:
    """Environment, versions and distributed arguments of `profiler_metadata.json`."""
    env = data.get("ENV_VARIABLES")
    if isinstance(env, dict):
        rows.add_env(env, source)
    for name, version in versions(data).items():
        rows.add(_VERSION_KEYS.get(name, f"version.{name}"), version, source)
    distributed = data.get("distributed_args")
    if isinstance(distributed, dict):
        for key, value in distributed.items():
            rows.add(f"distributed.{key}", value, source)
    rows.add("distributed.world_size", data.get("world_size"), source)
    rows.add("distributed.world_size", world_group_size(data), source)  # where nothing else says
    rows.add("distributed.rank", data.get("rank_id"), source)


_WORLD_GROUPS = ("default_group", "hccl_world_group")
"""The names torch_npu and MindSpore give the group of every rank in parallel_group_info."""


def world_group_size(data: dict[str, Any]) -> int | None:
    """The number of ranks of the world group in `parallel_group_info` (newer torch_npu and
    MindSpore write every communication group with its `global_ranks`, Megatron's arguments or
    not), None without it."""
    groups = data.get("parallel_group_info")
    if not isinstance(groups, dict):
        return None
    sizes = [
        len(group["global_ranks"])
        for group in groups.values()
        if isinstance(group, dict)
        and group.get("group_name") in _WORLD_GROUPS
        and isinstance(group.get("global_ranks"), list)
    ]
    return max(sizes, default=None) or None


def _device_info_rows(
    root: Path,
    device_id: str | None,
    rows: MetadataRows,
    load: Callable[[Path], Any],
    mark_read: Callable[[Path], None],
) -> None:
    """Chip facts of the CANN export's `PROF_*/device_N/info.json.N` (the rank's device)."""
    if device_id is None:
        return
    for path in sorted(root.glob(f"PROF_*/device_{device_id}/info.json.{device_id}")):
        info = load(path)
        if isinstance(info, dict):
            add_cann_info(rows, info, device_id, path.relative_to(root).as_posix())
            mark_read(path)
            return
