"""Reader for the old-layout MindSpore profiler folder (`<output>/profiler/`, MindSpore <= 2.2).

Every file name ends in the device/rank number `N`; a folder holding files of several numbers
gives one Profile per number. Files read (formats.md §3.1-3.2):

- `step_trace_raw_{N}_detail_time.csv` -> steps. Times are Ascend system counts (10 ns); the
  last row is MindSpore's average row (`step_num` `-` or `0`), never a step. MindSpore's step
  runs from the previous step's end and includes the wait for data (`iteration_interval`);
  as in msprof, a step here starts at its FP start, and the wait is its data_aug_bound_us.
  The `stream_{s}_parallel_{k}` duration columns are the all-reduces of the step -> reduce_us;
  each collective's `<name>_start_point` / `<name>_end_point` (`stream_{s}_parallel_{k}` or
  `stream_{s}_{k}_AllReduce-op{N}`) -> communication_us, and its part after bp_point, which no
  computation hides -> comm_not_overlapped_us.
- `hccl_raw_{N}.csv` (profile_communication=True) -> comm_ops: per step and collective an op
  row (transit and wait time, bytes between ranks) and its link rows (src->dst, transport,
  time, bytes); MindSpore writes ms and KB of 1000 bytes.
- `device_queue_profiling_{N}.txt` (sink mode), else `dataset_iterator_profiling_{N}.txt`:
  lines `type extra batch value [timestamp]`; type 1 is the host queue (capacity `extra`,
  size `value`) at batch `batch` -> queues rows `host`. Type 0 lines are stage times.
- `minddata_aicpu_{N}.txt`: `GetNext_dequeue_wait start end size` (µs) -> queues rows
  `device`, numbered in file order, with the dequeue wait.
- `minddata_pipeline_raw_{N}.csv` -> pipeline_ops, with each operator's input-queue usage
  (its children's output queues) and how often its own output queue was empty.
- `output_timeline_data_{N}.txt` (AI Core tasks, ms) and `aicpu_intermediate_{N}.csv` (AI CPU
  kernels, µs) -> device_ops, with op type, shapes and block dim from `framework_raw_{N}.csv`.
  Without a timeline, `aicore_intermediate_{N}_detail.csv` gives one row per operator (its
  total time, no start) and `aicore_intermediate_{N}_type.csv` gives op_stats.
- `flops_{N}.txt` -> device_ops.flops by operator name: `FLOPs` (old header) or the sum of the
  cube and vector `MFLOPs` columns, in millions. `flops_summary_{N}.json` (model FLOPs, FLOPS
  and FLOPS utilisation against the AI Core peak) -> `meta.extra["flops_summary"]`.
- `minddata_cpu_utilization_{N}.json` -> cpu_usage: one row per sample for the host
  (`device_info`), the training process (`process_info`) and each pipeline operator
  (`op_info`, op_id -1 is MindSpore's extra entry and is skipped as its analyser does); each
  operator's mean user + sys utilisation -> pipeline_ops.cpu_pct.

- GPU runs (module `gpu`, device_kind GPU): `gpu_timeline_display_{N}.json` -> device_ops (the
  CUDA kernels, core GPU), host_ops (the operators, as MindSpore times them on the host) and
  steps; without it `gpu_activity_data_{N}.csv` (kernel totals), `gpu_op_detail_info_{N}.csv`
  (operator totals) and `gpu_op_type_info_{N}.csv` (op_stats). `dynamic_shape_info_{N}.json`
  (module `dynamic_shape`) gives each operator's and kernel's step and input shapes.

All absolute times (steps, GetNext samples, tasks) are on the device clock and are rebased to
the earliest of them; CPU samples are numbered, not timed (their clock is the host's). Not
read: flops_scope, memory, the Ascend timeline JSON and cluster files.

Modules: `names` tells the files apart; `rank` reads one rank source by source and rebases its
clock, through the helpers of `context`; `steps`, `hccl`, `queues`, `device_ops`, `flops`,
`cpu`, `memory`, `gpu` and `dynamic_shape` read one source each (minddata_pipeline_raw is read by
advisor.formats.minddata, which the new layout shares).
"""

from __future__ import annotations

from pathlib import Path

from advisor.errors import UnreadableInput
from advisor.hookspecs import hookimpl
from advisor.model import Profile

from .names import DETECTING, READER, kind_of


class MindSporeLegacyReader:
    """Reads a MindSpore `profiler/` folder of the old layout (one Profile per rank)."""

    name = READER
    formats = ("MindSpore profiler folder, old layout (profiler/)",)
    collect = {
        "memory": "Profiler(profile_memory=True)",
        "comm_ops": "Profiler(profile_communication=True)",
    }
    """How to make the MindSpore profiler record what a rule lacks (see Reader.collect)."""

    def detect(self, path: Path) -> bool:
        """A folder holding step trace, data-queue, pipeline or AI Core files (names only)."""
        path = Path(path)
        if not path.is_dir():
            return False
        for child in path.iterdir():
            kind = kind_of(child.name)
            if kind is not None and kind[0] in DETECTING:
                return True
        return False

    def read(self, path: Path) -> list[Profile]:
        from .context import Rank  # the readers load when there is something to read
        from .rank import read_rank

        path = Path(path)
        ranks: dict[int, dict[str, Path]] = {}
        for child in sorted(path.iterdir()):
            kind = kind_of(child.name)
            if kind is not None and child.is_file():
                ranks.setdefault(kind[1], {})[kind[0]] = child
        readers = [Rank(path, rank, ranks[rank]) for rank in sorted(ranks)]
        profiles = [p for reader in readers if (p := read_rank(reader))]
        # a rank with nothing readable is left out, but the user still hears why
        lost = [
            w
            for reader in readers
            if all(reader.profile is not p for p in profiles)
            for w in reader.profile.warnings
        ]
        if not profiles:
            raise UnreadableInput(
                path,
                "no readable MindSpore profiler data (step trace, data "
                "queues, pipeline, AI Core or GPU operator files)"
                + (f"; {lost[0]}" if lost else ""),
            )
        profiles[0].warnings += lost
        return profiles


@hookimpl
def advisor_readers() -> list[MindSporeLegacyReader]:
    return [MindSporeLegacyReader()]
