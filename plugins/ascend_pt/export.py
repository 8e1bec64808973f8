"""The CANN export beside a rank folder without usable ASCEND_PROFILER_OUTPUT.

It is read by the installed reader that claims it (msprof's), through the plugin host, never
by importing another plugin: with ADVISOR_BLOCK_PLUGINS=msprof none of its code runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from advisor.errors import UnreadableInput
from advisor.hookspecs import Reader
from advisor.lazy import lazy_module
from advisor.model import Profile, conform
from advisor.plugin_manager import PluginHost

from .layout import READER

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy_module("pandas")


def exports_beside(path: Path, root: Path, what: str, folder: Profile) -> list[Profile]:
    """The profiles of the CANN exports (`PROF_*`) beside a rank folder whose output is
    unusable (`what`), with the metadata and warnings of the folder's profile; UnreadableInput
    when none is read."""
    exports = sorted(p for p in root.glob("PROF_*") if p.is_dir())
    if not exports:
        raise UnreadableInput(path, what)
    profiles: list[Profile] = []
    errors = []
    readers = _export_readers()
    for export in exports:
        reader = next((r for r in readers if _claims(r, export)), None)
        if reader is None:
            errors.append(
                f"{export.name}: no installed reader claims it (is the msprof plugin blocked?)"
            )
            continue
        try:
            profiles += reader.read(export)
        except UnreadableInput as exc:
            errors.append(f"{export.name}: {exc.problem}")
    if not profiles:
        raise UnreadableInput(path, f"{what}; {'; '.join(errors)}")
    meta = folder.meta
    for profile in profiles:
        profile.meta.framework = meta.framework
        profile.meta.rank = meta.rank if meta.rank is not None else profile.meta.rank
        profile.meta.world_size = meta.world_size
        profile.meta.versions = {**meta.versions, **profile.meta.versions}
        profile.meta.extra = {**meta.extra, **profile.meta.extra}
        profile.warnings[:0] = folder.warnings
        _merge_metadata(profile, folder.tables.get("metadata"))
        profile.warn(
            path,
            f"{what}; read the CANN export {Path(profile.meta.path).name} instead",
            reader=READER,
        )
    return profiles


def _merge_metadata(profile: Profile, folder_rows: pd.DataFrame | None) -> None:
    """The rank folder's metadata (environment, versions) with the export's (chip facts);
    a key both give keeps the folder's value."""
    if folder_rows is None:
        return
    own = profile.tables.get("metadata")
    if own is not None:
        own = own[~own["key"].isin(folder_rows["key"])]
    merged = pd.concat([folder_rows, own], ignore_index=True)
    profile.tables["metadata"] = conform("metadata", merged.sort_values("key", ignore_index=True))


def _export_readers() -> list[Reader]:
    """The other installed readers, one of which reads a CANN export (msprof's, unless
    ADVISOR_BLOCK_PLUGINS blocks it): their code runs through the plugin host, never imported
    from here."""
    return [
        reader for _, reader in PluginHost().readers() if getattr(reader, "name", None) != READER
    ]


def _claims(reader: Reader, path: Path) -> bool:
    try:
        return bool(reader.detect(path))
    except Exception:  # another plugin's reader: its failure is not this folder's
        return False
