"""One read of one `PROF_*` folder: its merged summaries, device folders and info.json,
then one normalized Profile per device, rebased on its earliest time."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.errors import UnreadableInput
from advisor.formats.aicore_freq import with_rated
from advisor.formats.cann_exports import Superseded, parse_export_name, select_exports
from advisor.formats.cann_tasks import with_wait
from advisor.formats.files import files_with_suffix, load_json
from advisor.formats.timebase import drop_far_times, far_warning, robust_origin, table_times
from advisor.formats.warn import WarnFn
from advisor.lazy import lazy_module
from advisor.model import Profile, ProfileMeta, conform

from .framework import UNKNOWN, framework_of
from .info import apply_info, info_metadata
from .layout import MERGED_DIR, device_dirs, newest_database
from .summaries import CSV_TABLES, in_read_order, read_csv_table, split_devices

if TYPE_CHECKING:
    import pandas as pd

    from .timeline import Timeline
else:
    pd = lazy_module("pandas")

READER = "msprof"
EXPORT_HINT = "run `msprof --export=on --output=<path>` first"
TIME_COLUMNS = {
    "steps": ("start_us", "end_us"),
    "device_ops": ("start_us",),
    "host_ops": ("start_us",),
    "comm_ops": ("start_us",),
    "queues": ("time_us",),
    "aicore_freq": ("start_us", "end_us"),
}


@dataclass
class _Device:
    """What has been read so far for one device."""

    profile: Profile
    parts: dict[str, list[pd.DataFrame]] = field(default_factory=dict)
    kinds: set[str] = field(default_factory=set)  # summary file types read

    def add(self, table: str, frame: pd.DataFrame, files: Iterable[str]) -> None:
        if frame.empty:
            return
        self.parts.setdefault(table, []).append(frame)
        read = self.profile.meta.files_read
        read += [rel for rel in files if rel not in read]


@dataclass(frozen=True)
class _Note:
    """A warning not yet attached to a profile (merged files belong to every device)."""

    file: str
    problem: str
    line: int | None = None
    column: str | None = None
    unread: bool = False


class ExportReader:
    """One `read()` of one PROF folder."""

    def __init__(self, root: Path, database: Path | None = None) -> None:
        """`database`: an msprof_*.db the user named on its own: only it is read."""
        self.root = root
        self.database = database
        self.devices: dict[str, _Device] = {}
        self.shared: list[_Note] = []  # problems of merged files, reported on every device
        self.raw_only: list[str] = []  # devices with undecoded data and no export
        self.exports_found = False

    # -- orchestration ------------------------------------------------------------------------

    def read(self) -> list[Profile]:
        if not self.root.is_dir():
            raise UnreadableInput(self.root, "not a directory")
        if self.database is None:
            self._read_merged()
            for folder in device_dirs(self.root):
                self._read_device_dir(folder)
            self._read_merged_timeline()
        self._read_database()
        return self._finish()

    def _finish(self) -> list[Profile]:
        if not any(dev.parts for dev in self.devices.values()):
            raise UnreadableInput(self.root, self._nothing_read())
        for device_id in self.raw_only:
            self._device(device_id).profile.warn(
                f"device_{device_id}/data",
                f"only undecoded raw data found; {EXPORT_HINT}",
                reader=READER,
            )
        profiles = []
        for device_id in sorted(self.devices, key=_device_sort_key):
            dev = self.devices[device_id]
            for note in self.shared:
                dev.profile.warn(
                    note.file,
                    note.problem,
                    line=note.line,
                    column=note.column,
                    reader=READER,
                    unread=note.unread,
                )
            profiles.append(build_profile(dev))
        return profiles

    def _nothing_read(self) -> str:
        """Why no device gave a table: only raw data, the problems of the files found, export
        CSVs of kinds advisor does not read, or no export at all."""
        if self.raw_only and not self.exports_found:
            return f"only undecoded raw data found; {EXPORT_HINT}"
        problems = "; ".join(f"{n.file}: {n.problem}" for n in self._all_notes()[:3])
        if problems:
            return f"no readable msprof export ({problems})"
        unread = self._unread_csvs()
        if unread:
            more = " ..." if len(unread) > 3 else ""
            verb = "holds" if len(unread) == 1 else "hold"
            return (
                f"no msprof export advisor reads: {', '.join(unread[:3])}{more} {verb} no table "
                f"it reads (it reads {', '.join(sorted(CSV_TABLES))}); collect with msprof "
                "--task-time=on and export with --export=on"
            )
        looked = (
            f"msprof_*.db, {MERGED_DIR}/*.csv, device_*/summary/*.csv and device_*/timeline/*.json"
        )
        return f"no msprof export found (looked for {looked})"

    def _all_notes(self) -> list[_Note]:
        notes = list(self.shared)
        for dev in self.devices.values():
            notes += [_Note(w.file, w.problem) for w in dev.profile.warnings]
        return notes

    def _device(self, device_id: str) -> _Device:
        if device_id not in self.devices:
            meta = ProfileMeta(
                source_format="msprof-summary",
                path=str(self.root),
                framework=UNKNOWN,
                device_kind="NPU",
                device_id=device_id,
            )
            dev = _Device(Profile(meta))
            self.devices[device_id] = dev
            self._read_info(dev)
        return self.devices[device_id]

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # -- msprof --type=db ---------------------------------------------------------------------

    def _read_database(self) -> None:
        """msprof_{timestamp}.db when no summary or timeline gave the devices' tasks: when
        both exist the CSVs are read, as pyarrow parses op_summary about three times faster
        than sqlite3 hands the same tasks to Python (108,000 tasks with PMU counters: 0.22 s
        against 0.67 s; tests/fixtures/ascend_db/README.md). The step_trace and op_statistic
        CSVs, which the database has no table for, are read either way. The host's API totals
        go to every device, as api_statistic's host rows do."""
        path = self.database or newest_database(self.root)
        if path is None or any("device_ops" in dev.parts for dev in self.devices.values()):
            return
        from .db import read_database  # sqlite3 and the database reader: only for a .db

        rel = self._rel(path)
        database = read_database(path, rel, self._shared_warn)
        self.exports_found |= bool(database.device_ops)
        for device_id, ops in database.device_ops.items():
            dev = self._device(device_id)
            dev.profile.meta.extra["source"] = "db"
            dev.add("device_ops", ops, [rel])
            comm = database.comm_ops.get(device_id)
            if comm is not None and "comm_ops" not in dev.parts:
                dev.add("comm_ops", comm, [rel])
            freq = database.aicore_freq.get(device_id)
            if freq is not None and "aicore_freq" not in dev.parts:
                dev.add("aicore_freq", freq, [rel])
            if database.host_api is not None and "host_ops" not in dev.parts:
                dev.add("host_ops", database.host_api, [rel])

    # -- CANN 8.x merged summaries -------------------------------------------------------------

    def _read_merged(self) -> None:
        """Merged CSVs: every row carries its device in `Device_id` (`host` for host rows)."""
        csvs = files_with_suffix(self.root / MERGED_DIR, ".csv")
        chosen, superseded = select_exports(csvs, bare=CSV_TABLES)  # op_summary.csv renamed too
        self.exports_found |= bool(chosen)
        for old in superseded:
            self._shared_warn(old.ignored[0].relative_to(self.root), self._superseded(old))
        host_parts: list[tuple[str, pd.DataFrame, str]] = []
        for kind, files in in_read_order(chosen):
            for path in files:
                rel = self._rel(path)
                frame = read_csv_table(kind, path, rel, self._shared_warn)
                if frame is None:
                    continue
                for device_id, rows in split_devices(frame, rel, self._shared_warn):
                    if device_id == "host":
                        host_parts.append((CSV_TABLES[kind].table, rows, rel))
                    else:
                        self._add_csv_rows(self._device(device_id), kind, rows, rel)
        self._share_host_rows(host_parts)

    def _unread_csvs(self) -> list[str]:
        """The export CSVs of kinds advisor does not read (ai_core_utilization_*.csv...),
        relative to the folder: a folder of only those is refused naming them."""
        folders = [self.root / MERGED_DIR, *(d / "summary" for d in device_dirs(self.root))]
        return [self._rel(p) for f in folders for p in files_with_suffix(f, ".csv")]

    def _share_host_rows(self, host_parts: list[tuple[str, pd.DataFrame, str]]) -> None:
        """Host API statistics (`Device_id` = host) belong to the process driving every device.

        Host rows of other tables have no device to go to and are left out.
        """
        for table, rows, rel in host_parts:
            if table != "host_ops":
                continue
            for dev in self.devices.values():
                dev.add(table, rows, [rel])

    def _shared_warn(
        self,
        file: str | Path,
        problem: str,
        *,
        line: int | None = None,
        column: str | None = None,
        unread: bool = False,
    ) -> None:
        self.shared.append(_Note(str(file), problem, line, column, unread))

    # -- per-device folders --------------------------------------------------------------------

    def _read_device_dir(self, folder: Path) -> None:
        device_id = folder.name.removeprefix("device_")
        if self._device_has_tables(device_id):
            return  # the merged summaries already cover this device
        summaries = files_with_suffix(folder / "summary", ".csv")
        timelines = files_with_suffix(folder / "timeline", ".json")
        self.exports_found |= bool(summaries or timelines)
        if summaries:
            self._read_summary_dir(self._device(device_id), summaries)
        if timelines and not self._device_has_tables(device_id):
            self._read_timeline_dir(self._device(device_id), timelines)
        if not summaries and not timelines and _has_files(folder / "data"):
            self.raw_only.append(device_id)

    def _device_has_tables(self, device_id: str) -> bool:
        return device_id in self.devices and bool(self.devices[device_id].parts)

    def _read_summary_dir(self, dev: _Device, files: list[Path]) -> None:
        """6.3-7.x per-device CSVs; the device comes from the folder name."""
        chosen, superseded = select_exports(files)
        warn = _profile_warn(dev.profile)
        for old in superseded:
            warn(self._rel(old.ignored[0]), self._superseded(old))
        for kind, paths in in_read_order(chosen):
            for path in paths:
                rel = self._rel(path)
                frame = read_csv_table(kind, path, rel, warn)
                if frame is not None:
                    self._add_csv_rows(dev, kind, frame, rel)

    def _add_csv_rows(self, dev: _Device, kind: str, rows: pd.DataFrame, rel: str) -> None:
        if kind == "task_time" and "op_summary" in dev.kinds:
            return  # op_summary already lists the same tasks, with more columns
        dev.kinds.add(kind)
        dev.add(CSV_TABLES[kind].table, rows, [rel])

    def _read_merged_timeline(self) -> None:
        """`mindstudio_profiler_output/msprof_{ts}.json` and `step_trace_{ts}.json` (CANN 8's
        merged timeline, written with or without the summary CSVs): the tables the CSVs did
        not give, when they lack the device tasks or the steps. The merged files hold every
        device of the export in one trace without naming the device, so they are read for an
        export of one device only; with several, one line says so and the per-device
        timelines (device_*/timeline) are the source."""
        files = files_with_suffix(self.root / MERGED_DIR, ".json")
        if not any(parse_export_name(p) for p in files):
            return
        devices = sorted(
            {*self.devices, *(d.name.removeprefix("device_") for d in device_dirs(self.root))}
        )
        if len(devices) > 1:
            if not all(self._device_has_tables(d) for d in devices):
                self._shared_warn(
                    MERGED_DIR,
                    f"its timeline JSONs hold {len(devices)} devices without naming them: not "
                    "read (export per device, or read device_*/timeline)",
                )
            return
        self.exports_found = True
        dev = self._device(devices[0] if devices else "0")
        if {"steps", "device_ops"} <= set(dev.parts):
            return  # the CSVs gave the tasks and steps: no need to parse a trace of 100 MB+
        if not devices:
            dev.profile.warn(
                MERGED_DIR, "no device_* folder names the device: read as device 0", reader=READER
            )
        self._read_timeline_dir(dev, files)

    def _read_timeline_dir(self, dev: _Device, files: list[Path]) -> None:
        """Timeline JSONs (a raw export's device_*/timeline, or the merged ones), for the
        tables no summary CSV of the device gave."""
        from .timeline import SLICE_TABLES, timeline_tables  # the columns: only for timelines

        if "device_ops" not in dev.parts:  # the tasks come from the timeline
            dev.profile.meta.source_format = "msprof-timeline"
        chosen, superseded = select_exports(files)
        warn = _profile_warn(dev.profile)
        for old in superseded:
            warn(self._rel(old.ignored[0]), self._superseded(old))
        cut: set[str] = set()

        def load(kind: str) -> Timeline | None:
            timeline = self._load_trace(chosen.get(kind, []), warn)
            if timeline is not None and timeline.cut:
                cut.add(kind)
            return timeline

        had = set(dev.parts)
        tables = timeline_tables(load)
        for table, (frame, kind) in tables.items():
            if table not in had:
                dev.add(table, frame, [self._rel(path) for path in chosen.get(kind, [])])
        for kind in sorted(cut & SLICE_TABLES.keys()):  # a cut file's table from msprof_*.json
            table = SLICE_TABLES[kind]
            if table not in had and table in tables and tables[table][1] == "msprof":
                whole = ", ".join(self._rel(path) for path in chosen["msprof"])
                for path in chosen[kind]:
                    warn(self._rel(path), f"its {table} are taken from {whole}, which is complete")

    def _load_trace(self, files: list[Path], warn: WarnFn) -> Timeline | None:
        """The columns of a timeline's slices, folded batch by batch; None when no slice was
        readable."""
        from advisor.formats.trace_columns import fold_trace, merge_columns

        from .timeline import Timeline

        parts, cut = [], False
        for path in files:
            rel = self._rel(path)
            try:
                folded = fold_trace(path, warn, rel, msprof_timeline=True)
            except UnreadableInput as exc:
                warn(rel, exc.problem, unread=True)
                continue
            if folded.columns.skipped:
                warn(rel, f"{folded.columns.skipped} entries are not event objects; skipped")
            elif not folded.columns.entries:
                warn(rel, "no trace events")
            parts.append(folded.columns)
            cut = cut or folded.truncated
        return Timeline(merge_columns(parts), cut=cut) if parts else None

    def _superseded(self, old: Superseded) -> str:
        ignored = ", ".join(self._rel(p) for p in old.ignored)
        kept = ", ".join(self._rel(p) for p in old.kept)
        return f"older export of {old.type} ignored ({ignored}); read the newest ({kept})"

    # -- info.json ----------------------------------------------------------------------------

    def _read_info(self, dev: _Device) -> None:
        """Chip facts (AI Core count, frequencies) rules need, from `info.json.N`."""
        device_id = dev.profile.meta.device_id
        folder = self.root / f"device_{device_id}"
        path = next(
            (p for p in (folder / f"info.json.{device_id}", folder / "info.json") if p.is_file()),
            None,
        )
        if path is None:
            return
        try:
            info = load_json(path)
        except UnreadableInput as exc:
            dev.profile.warn(self._rel(path), exc.problem, reader=READER, unread=True)
            return
        if not isinstance(info, dict) or not isinstance(info.get("DeviceInfo"), list):
            dev.profile.warn(
                self._rel(path),
                "no DeviceInfo list (not an msprof info.json?): chip facts unknown",
                reader=READER,
            )
        if isinstance(info, dict):
            apply_info(dev.profile.meta, info, device_id)
            self._read_metadata(dev, info, path)

    def _read_metadata(self, dev: _Device, info: dict[str, Any], path: Path) -> None:
        """The `metadata` table from info.json.N and the device's sample.json, if any."""
        sample_path, sample = path.parent / "sample.json", None
        if sample_path.is_file():
            try:
                sample = load_json(sample_path)
            except UnreadableInput as exc:
                dev.profile.warn(self._rel(sample_path), exc.problem, reader=READER)
        frame = info_metadata(
            info, dev.profile.meta.device_id, self._rel(path), sample, self._rel(sample_path)
        )
        if frame is not None:
            files = [self._rel(path)] + ([self._rel(sample_path)] if sample is not None else [])
            dev.add("metadata", frame, files)


def _device_sort_key(device_id: str) -> tuple[int, str]:
    return (int(device_id), "") if device_id.isdigit() else (1 << 30, device_id)


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(p.is_file() for p in folder.iterdir())


def _profile_warn(profile: Profile) -> WarnFn:
    def warn(
        file: str | Path,
        problem: str,
        *,
        line: int | None = None,
        column: str | None = None,
        unread: bool = False,
    ) -> None:
        profile.warn(file, problem, line=line, column=column, reader=READER, unread=unread)

    return warn


def build_profile(dev: _Device) -> Profile:
    """Concatenate the parts, fill derived columns, rebase time, cast to the contract."""
    profile = dev.profile
    tables = {name: pd.concat(parts, ignore_index=True) for name, parts in dev.parts.items()}
    origin = None
    times = table_times(tables, TIME_COLUMNS)
    if times.size:  # one broken far-off time must not become the origin
        origin, centre = robust_origin(times)
        far = drop_far_times(tables, TIME_COLUMNS, centre)
        if far:
            profile.warn(Path(profile.meta.path).name, far_warning(far, 0.0), reader=READER)
    if "device_ops" in tables:
        tables["device_ops"] = with_wait(tables["device_ops"])
    if "aicore_freq" in tables:  # the rated frequency info.json gave, when it did
        tables["aicore_freq"] = with_rated(
            tables["aicore_freq"], profile.meta.extra.get("aic_frequency")
        )
    if origin is not None:
        profile.meta.extra["time_origin_us"] = origin
        for name, columns in TIME_COLUMNS.items():
            if name in tables:
                tables[name] = tables[name].assign(
                    **{c: tables[name][c] - origin for c in columns if c in tables[name]}
                )
    profile.tables = {name: conform(name, frame) for name, frame in tables.items()}
    profile.meta.framework = framework_of(profile.tables.get("device_ops"))
    return profile
