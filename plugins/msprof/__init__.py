"""Reader for CANN msprof exports (`PROF_*` folders): one Profile per device.

Sources, in priority order for each device:

1. CANN 8.x merged summaries, `mindstudio_profiler_output/*.csv` (rows split by `Device_id`),
2. 6.3-7.x per-device summaries, `device_N/summary/*.csv`,
3. raw-export timelines, `device_N/timeline/{step_trace,task_time,hccl,msprof}_*.json`, with
   `msprof_*.json` used only for the tables the specific files do not give (or gave cut
   short); each folded batch by batch into columns (advisor.formats.trace_columns), never
   held as dicts,
4. `msprof --type=db`'s `msprof_{timestamp}.db` (tasks and API calls; the CSVs read faster,
   so it is read only when none of the above gave the tasks; `meta.extra["source"]` is `db`).

Summary CSVs read: op_summary (else task_time), step_trace, op_statistic, api_statistic, and the
data queues of TensorFlow/data-sink runs (formats.md §4.3): `aicpu_mi` (the device queue GetNext
reads: size per read, read time as the wait) and `dp` (the host's cached buffer of prepared
batches) -> queues rows `device` and `host`, numbered per device in file order.

All times are microseconds. Each profile is rebased to its earliest timestamp by a float64
subtraction after parsing: float64 keeps ~1e-5 µs at the ~1e11 µs of msprof's monotonic clock
and 0.25 µs at the ~1.7e15 µs of wall-clock (epoch) stamps in CANN 8.x CSVs. Durations always
come from their own columns, so only start times can move, by at most 0.125 µs. The original
origin is kept in `meta.extra["time_origin_us"]`.

Modules: `export` walks one PROF folder and builds each device's profile, `summaries` reads the
summary CSVs, `timeline` the raw-export timelines, `db` the database, `info` the chip facts of
info.json.
"""

from __future__ import annotations

from pathlib import Path

from advisor.formats.cann_pmu import PMU_COLUMNS
from advisor.hookspecs import hookimpl
from advisor.model import Profile

from .layout import DB_FILE, MERGED_DIR, device_dirs

_STEPS = 'training_trace "on" in the profiling options (step_trace)'
_TASKS = 'task_trace "on" in the profiling options (op_summary / task_time)'
_PMU = 'aic_metrics "PipeUtilization" in the profiling options'
_DISTRIBUTED = "profile the distributed job (HCCL data: hccl_* files)"


class MsprofReader:
    """Reads a `PROF_*` folder written by msprof (CANN 6.3 to 8.x)."""

    name = "msprof"
    formats = ("CANN msprof export (PROF_XXX)",)
    collect = {
        "steps": _STEPS,
        **dict.fromkeys(("device_ops", "device_ops.start_us"), _TASKS),
        **dict.fromkeys((f"device_ops.{c}" for c in PMU_COLUMNS), _PMU),
        "comm_ops": _DISTRIBUTED,
    }
    """How to make msprof record what a rule lacks (see Reader.collect)."""
    collect_zh = {
        _STEPS: '在采集选项中设置 training_trace "on"（step_trace）',
        _TASKS: '在采集选项中设置 task_trace "on"（op_summary / task_time）',
        _PMU: '在采集选项中设置 aic_metrics "PipeUtilization"',
        _DISTRIBUTED: "采集分布式作业（HCCL 数据：hccl_* 文件）",
    }

    def detect(self, path: Path) -> bool:
        """A PROF folder by name or by its export sub-folders, or an msprof_*.db named on its
        own; directory listings only."""
        path = Path(path)
        if not path.is_dir():
            return DB_FILE.match(path.name) is not None
        if path.name.startswith("PROF_") or (path / MERGED_DIR).is_dir():
            return True
        return any(
            sub.is_dir()
            for device in device_dirs(path)
            for sub in (device / "summary", device / "timeline", device / "data")
        )

    def read(self, path: Path) -> list[Profile]:
        from .export import ExportReader  # the readers load when there is something to read

        path = Path(path)
        if path.is_dir():
            return ExportReader(path).read()
        return ExportReader(path.parent, database=path).read()


@hookimpl
def advisor_readers() -> list[MsprofReader]:
    return [MsprofReader()]
