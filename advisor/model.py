"""The normalized Profile: the contract between readers, metric providers and rules.

Every reader, whatever its input format, produces `Profile` objects whose tables follow
`TABLES`. Rules are written against these names, so a column documented here means the same
thing (and has the same unit) for every framework. Times are microseconds (float64) on one
clock per profile, rebased so that the earliest event of the profile is at 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from advisor.lazy import lazy_module

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from advisor.formats.trace_index import TraceIndex
else:
    np = lazy_module("numpy")
    pd = lazy_module("pandas")


@dataclass(frozen=True)
class Column:
    """One documented column of a normalized table."""

    name: str
    dtype: str  # "float64" | "int64" | "string" | "bool" | "Int64"
    unit: str
    doc: str
    required: bool = False


@dataclass(frozen=True)
class TableSpec:
    """A normalized table: what one row is and which columns it may carry."""

    name: str
    row: str
    columns: tuple[Column, ...]
    scope: str = "profile"
    """Where rules reading the table run: on each profile ("profile"), on the cluster profile
    built across the ranks of a run ("cluster"), or on the compare profile of two runs
    ("compare"). A rule reads tables of one scope only."""

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)

    @cached_property
    def column_names(self) -> tuple[str, ...]:
        """The columns' names, worked out once: every rule built and every rule file's cache
        key reads them for every table."""
        return tuple(c.name for c in self.columns)


def _c(name: str, dtype: str, unit: str, doc: str, required: bool = False) -> Column:
    return Column(name, dtype, unit, doc, required)


US = "µs"
PROFILE, CLUSTER, COMPARE = "profile", "cluster", "compare"
SCOPES = (PROFILE, CLUSTER, COMPARE)
TABLES: dict[str, TableSpec] = {
    t.name: t
    for t in (
        TableSpec(
            "steps",
            "training iteration (a last step the profiler cut off, with no device task while "
            "the steps before it had some and under half their median, is left out when the "
            "profile is read, with a warning: advisor.steady.trailing_fragment)",
            (
                _c("step", "int64", "", "iteration number as the profiler numbers it", True),
                _c("start_us", "float64", US, "iteration start", True),
                _c("end_us", "float64", US, "iteration end", True),
                _c("duration_us", "float64", US, "iteration time (end - start)", True),
                _c("fp_bp_us", "float64", US, "forward+backward time (FP start to BP end)"),
                _c(
                    "grad_refresh_us",
                    "float64",
                    US,
                    "BP end to iteration end (msprof 'Iteration Refresh' / 'Grad Refresh Bound')",
                ),
                _c(
                    "data_aug_bound_us",
                    "float64",
                    US,
                    "gap between the previous iteration end and this FP start "
                    "(msprof 'Data Aug Bound')",
                ),
                _c("reduce_us", "float64", US, "sum of all-reduce durations inside the iteration"),
                _c(
                    "computing_us",
                    "float64",
                    US,
                    "device compute time (union of compute tasks; a CPU run without device "
                    "tasks: of its operators)",
                ),
                _c(
                    "communication_us",
                    "float64",
                    US,
                    "device communication time (union; a CPU run: of its gloo collectives)",
                ),
                _c("comm_not_overlapped_us", "float64", US, "communication not hidden by compute"),
                _c("free_us", "float64", US, "device time with neither compute nor communication"),
                _c("bubble_us", "float64", US, "pipeline-parallel bubble time"),
                _c("model_id", "Int64", "", "graph/model id the iteration belongs to"),
                _c(
                    "warmup",
                    "bool",
                    "",
                    "a leading step slower than twice the median of the steps after it "
                    "(compilation, autotuning, first allocations, pipeline stages starting at "
                    "different times; derived): per-step figures leave it out",
                ),
            ),
        ),
        TableSpec(
            "device_ops",
            "device task or kernel",
            (
                _c("name", "string", "", "task/kernel name (op name)", True),
                _c(
                    "op_type",
                    "string",
                    "",
                    "operator type (e.g. MatMulV2, Cast); from the task name where a torch_npu "
                    "trace has no kernel_details.csv (Conv2D1 -> Conv2D)",
                ),
                _c(
                    "core_type",
                    "string",
                    "",
                    "AI_CORE, AI_VECTOR_CORE, AI_CPU, MIX_AIC, MIX_AIV, COMMUNICATION, GPU, ...",
                    True,
                ),
                _c("start_us", "float64", US, "task start"),
                _c("duration_us", "float64", US, "task duration", True),
                _c("wait_us", "float64", US, "idle time on the device before this task started"),
                _c(
                    "kernel_wait_us",
                    "float64",
                    US,
                    "part of duration_us before the task's kernel started: the wait for its "
                    "inputs (MegEngine static graph: the longest `kern - start` over comp nodes)",
                ),
                _c(
                    "gap_us",
                    "float64",
                    US,
                    "device idle time (all streams together) right before the task started "
                    "(derived); empty for the first task",
                ),
                _c(
                    "comm_wait_us",
                    "float64",
                    US,
                    "the part of wait_us during which a communication task ran (derived): waiting "
                    "for a collective, not for the host",
                ),
                _c("stream", "Int64", "", "stream id"),
                _c("task_id", "Int64", "", "task id within its stream"),
                _c("step", "Int64", "", "iteration the task belongs to"),
                _c(
                    "first_in_step",
                    "bool",
                    "",
                    "first task of its step: msprof charges the gap between iterations (Data Aug "
                    "Bound) to this task's wait_us",
                ),
                _c("input_shapes", "string", "", "input shapes as the profiler writes them"),
                _c("input_dtypes", "string", "", "input data types"),
                _c("output_shapes", "string", "", "output shapes"),
                _c("block_dim", "Int64", "", "cores the task ran on ('Block Dim' / 'Block Num')"),
                _c(
                    "category",
                    "string",
                    "",
                    "compute, communication, memcpy, memset or other",
                    True,
                ),
                _c(
                    "compute_class",
                    "string",
                    "",
                    "finer class (derived): cube, vector, flash_attention, conv, matmul, "
                    "other_compute, aicpu, memcpy, communication, other",
                ),
                _c(
                    "memcpy_kind",
                    "string",
                    "",
                    "HtoD, DtoH, DtoD, PtoP for copies; with host memory pageable or pinned",
                ),
                _c("host_memory", "string", "", "pageable or pinned, for host<->device copies"),
                _c("bytes", "float64", "bytes", "bytes moved (copies, communication)"),
                _c(
                    "flops",
                    "float64",
                    "FLO",
                    "floating-point operations the task performs (a count, not a rate), where the "
                    "profiler computes them (MegEngine opr_footprint 'computation')",
                ),
                _c("op_state", "string", "", "static or dynamic (shape), where recorded"),
                _c("aicore_time_us", "float64", US, "PMU: AI Core busy time"),
                _c("vec_ratio", "float64", "ratio", "PMU: vector unit busy ratio"),
                _c("mac_ratio", "float64", "ratio", "PMU: cube (MAC) unit busy ratio"),
                _c("scalar_ratio", "float64", "ratio", "PMU: scalar unit busy ratio"),
                _c("mte2_ratio", "float64", "ratio", "PMU: MTE2 (GM->local) busy ratio"),
                _c("mte1_ratio", "float64", "ratio", "PMU: MTE1 (L1->L0A/L0B) busy ratio"),
                _c("mte3_ratio", "float64", "ratio", "PMU: MTE3 (local->GM) busy ratio"),
                _c(
                    "fixpipe_ratio",
                    "float64",
                    "ratio",
                    "PMU: FixPipe (L0C->GM/L1, cube results out) busy ratio",
                ),
                _c(
                    "aicore_mhz",
                    "float64",
                    "MHz",
                    "AI Core frequency while the task ran (derived from aicore_freq): the "
                    "time-weighted mean of the counter samples over the task's span",
                ),
                _c(
                    "launch_us",
                    "float64",
                    US,
                    "host time (on the clock of host_ops.start_us) of the call that launched this "
                    "task: the runtime launch/copy call with the same correlation id (Kineto), the "
                    "start of the torch_to_npu flow ending at this task (Ascend PyTorch); missing "
                    "when unknown",
                ),
                _c(
                    "launch_thread",
                    "Int64",
                    "",
                    "host thread of that launching call, in the ids of host_ops.thread: the "
                    "innermost aten host op on this thread whose span holds launch_us launched it",
                ),
                _c(
                    "launch_dur_us",
                    "float64",
                    US,
                    "duration of that launching call on the host (Kineto: the runtime call's dur)",
                ),
                _c(
                    "launch_name",
                    "string",
                    "",
                    "name of that launching call (cudaLaunchKernel, cudaMemcpyAsync, ...)",
                ),
                _c(
                    "launch_delay_us",
                    "float64",
                    US,
                    "time from the end of the launching call to the task's start, 0 when it "
                    "started before the call returned (derived; HTA's launch delay); missing for "
                    "all but the first task of a call that launched several (a CUDA graph "
                    "replay): the call counts as one launch",
                ),
                _c(
                    "launch_work_us",
                    "float64",
                    US,
                    "device time of all the tasks the launching call started (their durations "
                    "summed; the task's own for a call that started one), on the rows that have "
                    "launch_delay_us (derived): what one launch of a CUDA graph bought",
                ),
                _c(
                    "est_occupancy",
                    "float64",
                    "ratio",
                    "estimated achieved occupancy of a GPU kernel: active warps per SM over the "
                    "SM's maximum (0..1; Kineto 'est. achieved occupancy %' / 100)",
                ),
                _c(
                    "blocks_per_sm",
                    "float64",
                    "blocks",
                    "thread blocks of the kernel's grid per SM of the GPU (Kineto 'blocks per "
                    "SM'); below 1 some SMs get no block",
                ),
                _c("warps_per_sm", "float64", "warps", "warps of the grid per SM (Kineto)"),
                _c(
                    "sm_time_us",
                    "float64",
                    US,
                    "the GPU's wall-clock time this kernel accounts for: its duration, shared "
                    "by blocks_per_sm with the kernels (compute or communication) running "
                    "beside it on other streams (derived; missing without blocks_per_sm)",
                ),
                _c(
                    "sm_filled_us",
                    "float64",
                    US,
                    "of sm_time_us, the part the kernels running then filled the SMs: at each "
                    "instant min(1, the sum of their blocks_per_sm), the TensorBoard plugin's "
                    "SM efficiency (derived)",
                ),
                _c(
                    "registers_per_thread",
                    "Int64",
                    "",
                    "registers each thread of the kernel uses (Kineto)",
                ),
                _c(
                    "shared_memory_bytes",
                    "float64",
                    "bytes",
                    "shared memory per thread block (Kineto 'shared memory')",
                ),
                _c("grid_blocks", "Int64", "", "thread blocks in the grid (product of 'grid')"),
                _c("block_threads", "Int64", "", "threads per block (product of 'block')"),
                _c(
                    "tensor_core",
                    "bool",
                    "",
                    "the GPU kernel runs on Tensor Cores (matrix cores), judged by its name "
                    "(derived: the TensorBoard plugin's kernel patterns and newer cuBLAS, CUTLASS, "
                    "Hopper and ROCm MFMA names); false for tasks of other devices",
                ),
            ),
        ),
        TableSpec(
            "host_ops",
            "framework/host operator or API call",
            (
                _c("name", "string", "", "API or operator name", True),
                _c(
                    "kind",
                    "string",
                    "",
                    "aten (framework operator), python, cann_api, runtime, launch (kernel launch), "
                    "sync (stream/device/event synchronisation), compile (operator compilation), "
                    "compile_execute (a call that compiles an operator on a cache miss and runs "
                    "it, "
                    "as aclopCompileAndExecute), "
                    "dataloader, annotation, optimizer, memory, cpu_kernel (an operator executed "
                    "on "
                    "the host CPU, as MindSpore's CPU OP), gc (a Python garbage collection the "
                    "profiler recorded, as torch_npu's GC events)",
                    True,
                ),
                _c("level", "string", "", "API level (AscendCL, Runtime, Node, Model, ...)"),
                _c("start_us", "float64", US, "call start"),
                _c(
                    "duration_us",
                    "float64",
                    US,
                    "call duration (or total time for aggregated rows)",
                    True,
                ),
                _c(
                    "kernel_wait_us",
                    "float64",
                    US,
                    "part of duration_us before the call began dispatching its kernel (MegEngine "
                    "static graph: the longest host `kern - start` over threads)",
                ),
                _c("count", "Int64", "", "number of calls (aggregated sources)"),
                _c("thread", "Int64", "", "host thread id"),
                _c("step", "Int64", "", "iteration the call belongs to"),
                _c(
                    "nested",
                    "bool",
                    "",
                    "the call lies within another call of the same kind on the same thread (the "
                    "frames inside a DataLoader call, a compile inside a compile); a sum of a "
                    "kind's time skips these rows so no interval counts twice",
                ),
                _c(
                    "optimizer_impl",
                    "string",
                    "",
                    "how a PyTorch optimizer step (Optimizer.step#<Class>.step) updated the "
                    "parameters (derived from the operators recorded inside it on its thread): "
                    "fused (an aten::_fused_* operator: fused=True; a torch_npu fused optimizer, "
                    "Optimizer.step#NpuFused*, by its name), foreach (aten::_foreach_* "
                    "multi-tensor operators), for-loop (operators, none of them multi-tensor: "
                    "updates parameter by parameter); missing on other rows and, but for "
                    "torch_npu's, where no operator was recorded inside",
                ),
                _c(
                    "optimizer_ops",
                    "Int64",
                    "",
                    "framework operators recorded inside an optimizer step (derived; a "
                    "wrapper's step holding another optimizer's counts those before it); "
                    "missing on other rows",
                ),
                _c(
                    "device_idle_us",
                    "float64",
                    US,
                    "the device idle time a call costs (derived): for an optimizer record "
                    "(kind optimizer) the part of its time during which the device ran no "
                    "task on any stream; for a synchronising call (kind sync) the device idle "
                    "gap it returned in, from the later of its start and the gap's start to "
                    "the device's next task, each moment charged to one call; missing on "
                    "other rows and where the device recorded no task",
                ),
                _c(
                    "startup",
                    "bool",
                    "",
                    "one-time start-up (derived): a runtime call, kernel launch or CANN API "
                    "call of at least 0.5 s during which the device computed or copied for at "
                    "most 1% of it (device context creation, libraries and kernel modules loaded "
                    "on first use)",
                ),
                _c(
                    "input_shapes",
                    "string",
                    "",
                    "input shapes of an aten operator as the profiler recorded them ('Input "
                    "Dims'), "
                    "as compact JSON text such as [[8, 64], [256, 64], []]; missing when not "
                    "recorded",
                ),
                _c(
                    "call_stack",
                    "string",
                    "",
                    "the Python stack the profiler recorded with the call (torch_npu with_stack: "
                    "'Call stack', PYTORCH_CALLCHAINS), innermost frame first, one per line, "
                    "each as path(line): function",
                ),
            ),
        ),
        TableSpec(
            "op_stacks",
            "host operator (a host_ops row other than Python frames, runtime calls, kernel "
            "launches and CANN API calls) with the innermost frame of the user's code around it, "
            "from the Python stack the profiler recorded (derived from host_ops.call_stack, else "
            "from the Python frames enclosing the operator: Kineto's with_stack "
            "python_function events); absent without recorded stacks",
            (
                _c("host_row", "int64", "", "position of the operator's row in host_ops", True),
                _c("name", "string", "", "operator name"),
                _c("thread", "Int64", "", "host thread id"),
                _c("start_us", "float64", US, "operator start"),
                _c("duration_us", "float64", US, "operator duration"),
                _c(
                    "file",
                    "string",
                    "",
                    "file of the user's frame as the profiler wrote it (Kineto: relative to the "
                    "sys.path entry holding it, e.g. train.py)",
                    True,
                ),
                _c(
                    "line",
                    "Int64",
                    "",
                    "line in that file: the call being run (a recorded call stack), or where a "
                    "Kineto python_function event places the function: its first line, or the "
                    "line it was on when profiling began for one already running then",
                ),
                _c("function", "string", "", "function of the user's frame"),
                _c(
                    "stack",
                    "string",
                    "",
                    "the whole recorded stack, innermost frame first, one per line; missing for "
                    "stacks rebuilt from Python frame events",
                ),
            ),
        ),
        TableSpec(
            "idle_breakdown",
            "step and stream: device idle time split by its cause (derived, after HTA's idle "
            "time breakdown); level 'device' rows count time when no stream ran anything, "
            "level 'stream' rows one stream's idle time as HTA does",
            (
                _c("step", "Int64", "", "iteration of the task that ended the idle interval"),
                _c("level", "string", "", "device (all streams together) or stream", True),
                _c("stream", "Int64", "", "stream id; empty on device rows"),
                _c("idle_us", "float64", US, "idle time between tasks", True),
                _c(
                    "host_wait_us",
                    "float64",
                    US,
                    "idle intervals whose next task was launched only after the device went "
                    "idle: the host did not enqueue work in time (start-up calls left out); on "
                    "device rows, only until the launching call returned where the task then "
                    "waited over 30 µs on the device",
                ),
                _c(
                    "kernel_wait_us",
                    "float64",
                    US,
                    "other idle intervals shorter than the kernel-wait threshold (30 µs, HTA's "
                    "consecutive_kernel_delay): the cost of launching back-to-back tasks",
                ),
                _c(
                    "other_us",
                    "float64",
                    US,
                    "the remaining idle intervals: waits for events, other streams, "
                    "synchronisation (on device rows, a late-launched task's wait after its "
                    "call returned too)",
                ),
                _c(
                    "startup_us",
                    "float64",
                    US,
                    "idle time during one-time start-up calls (host_ops.startup: context "
                    "creation, first loads), taken out of the three classes above, which HTA "
                    "counts as host wait",
                ),
                _c("intervals", "int64", "", "idle intervals counted"),
            ),
        ),
        TableSpec(
            "quiet_gaps",
            "device idle interval of at least 1 ms with what the host did meanwhile (derived); "
            "long gaps with almost no host activity are suspected Python garbage collection",
            (
                _c("step", "Int64", "", "iteration of the task that ended the gap"),
                _c("start_us", "float64", US, "gap start (end of the last task before it)", True),
                _c("duration_us", "float64", US, "gap length", True),
                _c(
                    "host_calls",
                    "int64",
                    "",
                    "host calls (all kinds but python frames and annotations) overlapping the gap",
                ),
                _c(
                    "host_busy_us",
                    "float64",
                    US,
                    "time within the gap covered by those host calls (union)",
                ),
                _c(
                    "gc_us",
                    "float64",
                    US,
                    "time within the gap covered by recorded garbage collection (host_ops kind gc)",
                ),
                _c(
                    "sync_us",
                    "float64",
                    US,
                    "time within the gap the host spent blocked in synchronising calls (host_ops "
                    "kind sync, union): waiting for a device that ran nothing recorded",
                ),
                _c(
                    "sync_call",
                    "string",
                    "",
                    "the synchronising call overlapping the gap most (missing: none)",
                ),
            ),
        ),
        TableSpec(
            "idle_host_ops",
            "framework operator (by name) with the device idle time during its calls: what the "
            "host ran while the device waited (derived; outermost calls only; one-time start-up, "
            "warm-up steps and the host's waits in synchronising calls left out; operators inside "
            "optimizer steps and data loading left out)",
            (
                _c("name", "string", "", "framework operator name (host_ops.name)", True),
                _c("calls", "int64", "", "its outermost calls"),
                _c("duration_us", "float64", US, "host time of those calls"),
                _c(
                    "idle_us",
                    "float64",
                    US,
                    "device idle time (no task on any stream, between the device's first and "
                    "last task, but for what the table leaves out) during those calls",
                    True,
                ),
            ),
        ),
        TableSpec(
            "dynamic_shape_ops",
            "operator (by name) whose input shapes were recorded in two or more steps, with its "
            "time and shapes per step (derived from device_ops, else host_ops: MindInsight's "
            "dynamic shape view)",
            (
                _c("name", "string", "", "operator or kernel name", True),
                _c("op_type", "string", "", "operator type, where recorded"),
                _c("source", "string", "", "device_ops or host_ops: the table the runs came from"),
                _c(
                    "steps", "int64", "", "steps the operator ran in with its shapes recorded", True
                ),
                _c("shapes", "int64", "", "distinct input shapes over all its runs", True),
                _c(
                    "variants",
                    "int64",
                    "",
                    "distinct per-step shape sets (the shapes of all its runs in a step); 1 when "
                    "every step ran the same shapes",
                    True,
                ),
                _c(
                    "changes",
                    "int64",
                    "",
                    "steps whose shape set differs from the operator's previous step",
                ),
                _c(
                    "unmatched_changes",
                    "int64",
                    "",
                    "of those, changes to a shape set none of its settled steps (not right after "
                    "a change) ran: their cost cannot be told from the new shapes' work, and "
                    "excess_us leaves them out",
                ),
                _c("total_us", "float64", US, "time of all its runs in these steps", True),
                _c("min_step_us", "float64", US, "its time in its fastest step"),
                _c("median_step_us", "float64", US, "median of its time per step"),
                _c("max_step_us", "float64", US, "its time in its slowest step"),
                _c(
                    "excess_us",
                    "float64",
                    US,
                    "time the steps right after a shape change took above the operator's "
                    "settled steps (not right after a change) of the same shape set: what the "
                    "new shapes' first step cost beyond their work (recompiling, re-tiling, "
                    "autotuning, first allocations)",
                    True,
                ),
                _c(
                    "shapes_per_step",
                    "string",
                    "",
                    "step: shape set (time) for the first 8 steps and every change, e.g. "
                    "'1: 32,1;32,1 (75.6 µs) | 2: 48,1;48,1 (88.0 µs)'",
                ),
            ),
        ),
        TableSpec(
            "op_stats",
            "operator type (per core type)",
            (
                _c("op_type", "string", "", "operator type", True),
                _c("core_type", "string", "", "core type the operator ran on", True),
                _c("count", "int64", "", "number of executions", True),
                _c("total_us", "float64", US, "total execution time", True),
                _c("avg_us", "float64", US, "mean execution time"),
                _c("min_us", "float64", US, "shortest execution"),
                _c("max_us", "float64", US, "longest execution"),
                _c("ratio", "float64", "ratio", "share of total device op time (0..1)", True),
            ),
        ),
        TableSpec(
            "fusion_candidates",
            "operator sequence one fused operator could replace, per pattern (derived by "
            "plugins/fusion_patterns.py from the catalogue plugins/fusion_patterns.yaml); "
            "kind `scan` rows say which search ran, over how many operators (`ops`)",
            (
                _c(
                    "kind",
                    "string",
                    "",
                    "affinity_api (framework operators a torch_npu / CANN fused API replaces), "
                    "graph_fusion (device op types of an Ascend graph-mode profile a GE fusion "
                    "pass or a removed conversion would merge), kernel_sequence (the kernels one "
                    "framework operator launches, after HTA's frequent kernel sequences), scan",
                    True,
                ),
                _c(
                    "pattern",
                    "string",
                    "",
                    "the catalogued sequence (steps joined by '-', a|b one of, ? optional), or "
                    "'operator: kernel | kernel ...' for a kernel sequence; the search for scan "
                    "rows",
                    True,
                ),
                _c(
                    "fused_api",
                    "string",
                    "",
                    "the fused API or fusion pass to use ('Cast ×1' / 'TransData ×1': one "
                    "conversion instead of several)",
                ),
                _c("source", "string", "", "host_ops or device_ops: where the sequence was found"),
                _c("occurrences", "Int64", "", "times the sequence occurs", True),
                _c("ops", "Int64", "", "operators in its first occurrence (scan: searched)"),
                _c(
                    "total_us",
                    "float64",
                    US,
                    "time of all occurrences (device time of the kernels the operators "
                    "launched, or host time when launches are not linked: see time_basis)",
                    True,
                ),
                _c("time_basis", "string", "", "device or host: what total_us measures"),
                _c(
                    "fused_us",
                    "float64",
                    US,
                    "estimated time of the fused operators: the longest operator of each "
                    "occurrence, summed",
                ),
                _c(
                    "saving_us",
                    "float64",
                    US,
                    "estimated time saved: total_us - fused_us (never negative)",
                    True,
                ),
                _c("avg_op_us", "float64", US, "mean time of one operator of the sequence"),
                _c("first_start_us", "float64", US, "start of the first occurrence"),
                _c("step", "Int64", "", "iteration of the first occurrence"),
                _c("example", "string", "", "operator names of the first occurrence, in order"),
                _c("min_cann", "string", "", "CANN version the fused API is listed from"),
                _c("cann_version", "string", "", "the profile's CANN version, where recorded"),
                _c(
                    "availability",
                    "string",
                    "",
                    "available (the profile's CANN has the API), upgrade (it needs a newer "
                    "CANN) or unknown (the CANN version is not recorded)",
                ),
                _c(
                    "fused_elsewhere",
                    "Int64",
                    "",
                    "graph_fusion rows: fusions of the same pattern the graph compiler applied "
                    "elsewhere in the model (graph_fusions, from fusion_op_*.csv); missing "
                    "without that file",
                ),
            ),
        ),
        TableSpec(
            "step_bounds",
            "training iteration, its time on the critical path by what bounded it (derived; "
            "compute, communication, host, data and idle add up to duration_us)",
            (
                _c("step", "int64", "", "iteration number, as in steps.step", True),
                _c("start_us", "float64", US, "iteration start"),
                _c("end_us", "float64", US, "iteration end"),
                _c("duration_us", "float64", US, "iteration time (end - start)", True),
                _c("compute_us", "float64", US, "the device computes (steps.computing_us)"),
                _c(
                    "communication_us",
                    "float64",
                    US,
                    "communication no computation hides (steps.comm_not_overlapped_us)",
                ),
                _c(
                    "host_us",
                    "float64",
                    US,
                    "the device is idle waiting for the host: the next task was launched after "
                    "the device ran dry, or the host was compiling or launching",
                ),
                _c(
                    "host_leading_us",
                    "float64",
                    US,
                    "the part of host_us before the step's first device task: the host "
                    "prepared the step (its input, Python at the step's start) before "
                    "launching anything",
                ),
                _c(
                    "data_us",
                    "float64",
                    US,
                    "the device is idle while the host is in a data-loader call",
                ),
                _c(
                    "idle_us",
                    "float64",
                    US,
                    "other device idle time, which no recorded host work, data loading or "
                    "communication explains (other streams, ranks or pipeline stages)",
                ),
                _c(
                    "bound",
                    "string",
                    "",
                    "the largest of the five: compute, communication, host, data or idle; missing "
                    "for a step without a device breakdown",
                ),
                _c("bound_share", "float64", "ratio", "that category's share of duration_us"),
                _c(
                    "between_us",
                    "float64",
                    US,
                    "time since the previous step ended, in no step's window (not in the sum)",
                ),
                _c(
                    "between_data_us",
                    "float64",
                    US,
                    "the part of between_us that is data loading: the profiler's data wait "
                    "(steps.data_aug_bound_us), else host data-loader calls",
                ),
                _c(
                    "compute_savable_us",
                    "float64",
                    US,
                    "the part of compute_us faster device work could save: in a step whose "
                    "host waited for the device (synchronising, or launching into a full "
                    "queue), at most that wait, since the host's own work in the step stays; "
                    "all of compute_us in a step without such a wait",
                ),
            ),
        ),
        TableSpec(
            "timeline_lanes",
            "stretch of one lane of the device timeline, for the report's per-step timeline "
            "(derived): a few consecutive steps around the slowest, the gaps between them "
            "included; at each instant the device is in exactly one lane, as in step_bounds",
            (
                _c(
                    "lane",
                    "string",
                    "",
                    "compute (a non-communication task runs), communication (only "
                    "communication runs), data, host or idle (nothing runs: a data-loader "
                    "call, the host holding the device up, or unexplained)",
                    True,
                ),
                _c("step", "Int64", "", "the step the stretch lies in; missing between steps"),
                _c("start_us", "float64", US, "start of the stretch", True),
                _c("end_us", "float64", US, "end of the stretch", True),
                _c(
                    "busy_us",
                    "float64",
                    US,
                    "the lane's time inside the stretch: stretches closer than the chart's "
                    "resolution are joined, so busy_us can be less than end_us - start_us",
                    True,
                ),
            ),
        ),
        TableSpec(
            "comm_ops",
            "communication operation",
            (
                _c(
                    "name",
                    "string",
                    "",
                    "communication op name; for a link src->dst, in global ranks where the "
                    "metadata gives the group's (parallel_group_info), else numbered in the group "
                    "as the profiler writes them",
                    True,
                ),
                _c(
                    "kind",
                    "string",
                    "",
                    "op (one collective or point-to-point operation) or link (a rank-to-rank link "
                    "of "
                    "an op, from a communication matrix); absent means op",
                ),
                _c("op", "string", "", "allreduce, allgather, broadcast, ..."),
                _c(
                    "group",
                    "string",
                    "",
                    "communication group (HCCL names it by a hash of the group's name)",
                ),
                _c(
                    "parallel_group",
                    "string",
                    "",
                    "what the group parallelises (tp, dp, pp, default_group...: torch_npu's and "
                    "MindSpore's parallel_group_info); absent where the metadata does not "
                    "describe the group",
                ),
                _c("start_us", "float64", US, "op start"),
                _c("duration_us", "float64", US, "op duration", True),
                _c("bytes", "float64", "bytes", "payload size"),
                _c("transport", "string", "", "SDMA, RDMA, HCCS, PCIE, LOCAL, ..."),
                _c("bandwidth_gbps", "float64", "GB/s", "achieved bandwidth"),
                _c("wait_us", "float64", US, "time spent waiting for peers"),
                _c("transit_us", "float64", US, "time spent moving data"),
                _c(
                    "sdma_bytes",
                    "float64",
                    "bytes",
                    "bytes the op moved within the node (communication.json SDMA: HCCS, PCIE, "
                    "SIO together)",
                ),
                _c("sdma_transit_us", "float64", US, "time the op's SDMA transfers took"),
                _c("sdma_bandwidth_gbps", "float64", "GB/s", "the op's SDMA bandwidth"),
                _c("rdma_bytes", "float64", "bytes", "bytes the op moved between nodes (RDMA)"),
                _c(
                    "rdma_transit_us",
                    "float64",
                    US,
                    "time the op's RDMA transfers took: seconds on an op whose data is small "
                    "are retransmissions",
                ),
                _c("rdma_bandwidth_gbps", "float64", "GB/s", "the op's RDMA bandwidth"),
                _c(
                    "copy_task_us",
                    "float64",
                    US,
                    "time of the op's SDMA copy tasks (Memcpy, Reduce_Inline) of more than 512 "
                    "bytes between chips, from the HCCL task timeline (a database's "
                    "COMMUNICATION_TASK_INFO): the tasks the byte alignment check judges; "
                    "absent at profiler level 0, which records no such task",
                ),
                _c(
                    "unaligned_us",
                    "float64",
                    US,
                    "time of those copy tasks whose size is not a multiple of 512 bytes",
                ),
                _c("unaligned_tasks", "Int64", "", "number of those unaligned copy tasks"),
                _c(
                    "waited_rank",
                    "Int64",
                    "",
                    "the peer the op's longest wait on another rank waited for: the dst rank "
                    "(numbered in the op's communication group) of its longest Notify_Wait task "
                    "whose dst rank is not its own; absent at profiler level 0 and where the "
                    "tasks name no rank",
                ),
                _c("peer_wait_us", "float64", US, "the time of that Notify_Wait task"),
                _c(
                    "waited_global_rank",
                    "Int64",
                    "",
                    "waited_rank as the job numbers its ranks, where the metadata gives the "
                    "group's global ranks (parallel_group_info)",
                ),
                _c(
                    "compute_overlap_us",
                    "float64",
                    US,
                    "time of the op during which a matrix-multiply task ran on the device "
                    "(derived): the op shared memory bandwidth with it",
                ),
            ),
        ),
        TableSpec(
            "parallel_comm",
            "parallel group a rank's communication operations served (derived from comm_ops."
            "parallel_group: tp, dp, pp, embd... as parallel_group_info names them)",
            (
                _c("parallel_group", "string", "", "what the group parallelises", True),
                _c("ops", "int64", "", "communication operations of the group", True),
                _c("duration_us", "float64", US, "their time", True),
                _c(
                    "share",
                    "float64",
                    "ratio",
                    "of the time of all the rank's communication operations (those of groups "
                    "the metadata does not describe included)",
                    True,
                ),
                _c("main_op", "string", "", "the operation (allreduce, ...) with most of the time"),
            ),
        ),
        TableSpec(
            "queues",
            "queue sample",
            (
                _c("queue", "string", "", "host, device or a pipeline operator name", True),
                _c("step", "Int64", "", "step or batch number"),
                _c("size", "float64", "items", "queue size at the sample", True),
                _c("capacity", "float64", "items", "queue capacity"),
                _c("empty", "bool", "", "size == 0"),
                _c("time_us", "float64", US, "sample time"),
                _c(
                    "wait_us",
                    "float64",
                    US,
                    "time the consumer waited for an item at this sample (MindSpore GetNext "
                    "dequeue wait)",
                ),
            ),
        ),
        TableSpec(
            "pipeline_ops",
            "data-pipeline operator",
            (
                _c("op_id", "int64", "", "operator id", True),
                _c("op_type", "string", "", "operator type (Batch, Map, ...)", True),
                _c("workers", "Int64", "", "num_parallel_workers"),
                _c("queue_usage", "float64", "ratio", "mean output-queue usage (0..1)"),
                _c("parent", "Int64", "", "parent operator id"),
                _c(
                    "children",
                    "Int64",
                    "",
                    "number of child operators feeding it (0 for a dataset source)",
                ),
                _c(
                    "input_queue_usage",
                    "float64",
                    "ratio",
                    "mean usage of its input queues (the children's output queues); missing for "
                    "a source",
                ),
                _c("queue_capacity", "float64", "items", "output-queue capacity"),
                _c(
                    "queue_empty_ratio",
                    "float64",
                    "ratio",
                    "share of output-queue samples that found the queue empty (0..1)",
                ),
                _c(
                    "queue_samples",
                    "Int64",
                    "",
                    "how many times the output queue was sampled (the evidence behind "
                    "queue_usage and queue_empty_ratio)",
                ),
                _c(
                    "cpu_pct",
                    "float64",
                    "%",
                    "mean CPU utilisation of the operator's threads (user + sys) over the CPU "
                    "samples, as MindSpore's minddata analyser sums it; divide by workers for the "
                    "per-worker figure",
                ),
            ),
        ),
        TableSpec(
            "metadata",
            "fact the profile records about its run (keys: advisor/formats/metadata.py)",
            (
                _c(
                    "key",
                    "string",
                    "",
                    "env.<NAME> (environment variable), version.<component> (cann, torch, "
                    "torch_npu, mindspore, driver, cuda_runtime, nccl, ...), device.<fact> "
                    "(name, ai_core_num, aiv_core_num, aicore_freq_mhz: rated, sm_count, "
                    "memory_bytes, ...), distributed.<fact> (backend, rank, world_size), "
                    "profiler.<setting> (record_shapes, with_stack, profiler_level, ...), "
                    "host.<fact>, framework.<fact> (mode: graph where the profile shows it)",
                    True,
                ),
                _c(
                    "value",
                    "string",
                    "",
                    "the value as written; empty for an environment variable listed unset",
                    True,
                ),
                _c("source", "string", "", "the file it came from, relative to the profile"),
            ),
        ),
        TableSpec(
            "env_advice",
            "recorded environment variable the catalogue knows (derived from the metadata "
            "env.* rows and plugins/env_catalogue.yaml)",
            (
                _c("name", "string", "", "environment variable", True),
                _c("value", "string", "", "its value in the profile (empty: unset)", True),
                _c(
                    "slow",
                    "bool",
                    "",
                    "the value is one the catalogue calls slow (where the catalogue asks for it, "
                    "the timeline also shows the cost: see observed)",
                    True,
                ),
                _c("observed", "string", "", "what the profile showed that the setting costs"),
                _c("recommended", "string", "", "the value to use (unset: remove it)", True),
                _c(
                    "area",
                    "string",
                    "",
                    "what the setting slows: launch (host task dispatch), logging, "
                    "communication, memory or cache",
                    True,
                ),
                _c("reason", "string", "", "why the value found is slow (English)"),
                _c("reason_zh", "string", "", "the same in Chinese"),
                _c("source", "string", "", "the file the value came from"),
            ),
        ),
        TableSpec(
            "memory",
            "allocator sample",
            (
                _c("time_us", "float64", US, "sample time", True),
                _c("allocated_bytes", "float64", "bytes", "allocated memory"),
                _c("reserved_bytes", "float64", "bytes", "reserved memory"),
                _c("device", "string", "", "device the sample is for"),
                _c("capacity_bytes", "float64", "bytes", "total memory of that device"),
                _c(
                    "bytes",
                    "float64",
                    "bytes",
                    "the block this sample allocated (positive) or freed (negative), where the "
                    "profiler records each allocation (Kineto [memory] 'Bytes')",
                ),
                _c(
                    "address",
                    "Int64",
                    "",
                    "address of that block: an allocation and its free share it (Kineto 'Addr')",
                ),
                _c("thread", "Int64", "", "thread that allocated or freed the block"),
            ),
        ),
        TableSpec(
            "memory_steps",
            "step of the device's memory curve (derived from the memory samples; the "
            "accelerator's when the profile samples several devices)",
            (
                _c("step", "int64", "", "step number", True),
                _c("device", "string", "", "device the samples are for"),
                _c("samples", "int64", "", "memory samples inside the step", True),
                _c(
                    "allocated_start_bytes",
                    "float64",
                    "bytes",
                    "allocated memory when the step began (the last sample before it)",
                ),
                _c("allocated_peak_bytes", "float64", "bytes", "highest allocated memory in it"),
                _c(
                    "allocated_end_bytes",
                    "float64",
                    "bytes",
                    "allocated memory when it ended (its last sample)",
                ),
                _c("reserved_start_bytes", "float64", "bytes", "reserved memory when it began"),
                _c("reserved_peak_bytes", "float64", "bytes", "highest reserved memory in it"),
                _c("reserved_end_bytes", "float64", "bytes", "reserved memory when it ended"),
                _c("growth_bytes", "float64", "bytes", "allocated end - allocated start"),
                _c(
                    "end_growth_bytes",
                    "float64",
                    "bytes",
                    "allocated end - the previous step's allocated end (missing for the first)",
                ),
            ),
        ),
        TableSpec(
            "op_allocations",
            "memory block a framework operator allocated (operator_memory.csv or the database's "
            "OP_MEMORY of torch_npu / MindSpore; derived from Kineto [memory] events: the operator "
            "on the same thread "
            "whose call holds the allocation, allocator calls such as aten::empty charged to "
            "their caller)",
            (
                _c("name", "string", "", "operator charged with the block", True),
                _c("bytes", "float64", "bytes", "block size", True),
                _c("start_us", "float64", US, "allocation time", True),
                _c(
                    "end_us",
                    "float64",
                    US,
                    "release time; missing: not released while the profiler ran",
                ),
                _c("device", "string", "", "device of the block"),
                _c(
                    "allocated_bytes",
                    "float64",
                    "bytes",
                    "the device's allocated memory right after the allocation",
                ),
            ),
        ),
        TableSpec(
            "op_memory",
            "framework operator (by name and device) and the memory its calls allocated "
            "(derived from op_allocations)",
            (
                _c("name", "string", "", "operator name", True),
                _c("device", "string", "", "device of the blocks"),
                _c("allocations", "int64", "", "blocks allocated", True),
                _c("allocated_bytes", "float64", "bytes", "their total size", True),
                _c("max_bytes", "float64", "bytes", "the largest block"),
                _c(
                    "unreleased_bytes",
                    "float64",
                    "bytes",
                    "size of its blocks still allocated when the profiler stopped",
                ),
                _c(
                    "peak_held_bytes",
                    "float64",
                    "bytes",
                    "size of its blocks allocated at the moment the device's allocated memory "
                    "peaked (its part of the peak)",
                ),
                _c(
                    "peak_bytes",
                    "float64",
                    "bytes",
                    "the device's allocated peak (the largest allocated total after a block)",
                ),
                _c("peak_share", "float64", "", "peak_held_bytes / peak_bytes"),
            ),
        ),
        TableSpec(
            "allocator_state",
            "device of a PyTorch / torch_npu memory snapshot (_dump_snapshot() pickle): the "
            "caching allocator when the snapshot was taken, and the peaks of its recorded "
            "history (walked back from those totals)",
            (
                _c("device", "string", "", "device index", True),
                _c("segments", "int64", "", "segments the allocator holds", True),
                _c("expandable_segments", "int64", "", "of them, expandable segments", True),
                _c("reserved_bytes", "float64", "bytes", "reserved (the segments' size)", True),
                _c("allocated_bytes", "float64", "bytes", "allocated to tensors", True),
                _c("active_bytes", "float64", "bytes", "allocated or awaiting a free"),
                _c("requested_bytes", "float64", "bytes", "what the tensors asked for"),
                _c(
                    "largest_free_block_bytes",
                    "float64",
                    "bytes",
                    "the largest cached block no tensor holds",
                ),
                _c("history_entries", "int64", "", "entries of the recorded history", True),
                _c(
                    "history_from_start",
                    "bool",
                    "",
                    "the history begins with nothing allocated or reserved (it holds the "
                    "allocator's whole life, not the last entries of a full ring buffer)",
                ),
                _c(
                    "peak_allocated_bytes",
                    "float64",
                    "bytes",
                    "highest allocated memory in the history or at the snapshot",
                    True,
                ),
                _c(
                    "peak_reserved_bytes",
                    "float64",
                    "bytes",
                    "highest reserved memory in the history or at the snapshot",
                    True,
                ),
                _c(
                    "reserved_at_allocated_peak_bytes",
                    "float64",
                    "bytes",
                    "reserved memory when allocated memory peaked",
                ),
            ),
        ),
        TableSpec(
            "memory_kinds",
            "kind of tensor in a PyTorch profiler memory timeline export "
            "(export_memory_timeline(); profile_memory, record_shapes and with_stack): what each "
            "kind held at the peak, the first moment the kinds together held the most",
            (
                _c("device", "string", "", "device index ('' when the export does not say)"),
                _c(
                    "kind",
                    "string",
                    "",
                    "parameter, optimizer_state, input, temporary, activation, gradient, "
                    "autograd_detail or unknown (PyTorch's memory profiler's categories)",
                    True,
                ),
                _c("at_peak_bytes", "float64", "bytes", "held at the peak", True),
                _c("peak_share", "float64", "ratio", "at_peak_bytes / the peak (all kinds)", True),
                _c("max_bytes", "float64", "bytes", "the kind's own highest", True),
            ),
        ),
        TableSpec(
            "oom_events",
            "allocation the allocator could not make (out of memory): a memory snapshot's "
            "`oom` history entries, a PyTorch trace's [OutOfMemory] events",
            (
                _c("order", "int64", "", "its place among the profile's errors, first 0", True),
                _c("time_us", "float64", US, "when it happened, where recorded"),
                _c("device", "string", "", "device of the allocator"),
                _c("request_bytes", "float64", "bytes", "the allocation asked for", True),
                _c("allocated_bytes", "float64", "bytes", "allocated memory then"),
                _c("reserved_bytes", "float64", "bytes", "reserved memory then"),
                _c(
                    "device_free_bytes",
                    "float64",
                    "bytes",
                    "memory the device still reported free then (memory snapshots)",
                ),
            ),
        ),
        TableSpec(
            "allocation_sites",
            "place in user code (by device) whose allocations a memory snapshot's history "
            "records: the innermost frame outside installed packages; without a Python frame, "
            "the autograd node or ATen operator that allocated",
            (
                _c("site", "string", "", "'function (file:line)'", True),
                _c("device", "string", "", "device index"),
                _c("allocations", "int64", "", "blocks it allocated in the history", True),
                _c("frees", "int64", "", "of them, freed in the history", True),
                _c(
                    "held_blocks",
                    "int64",
                    "",
                    "blocks it allocated in the history and still held at the snapshot",
                    True,
                ),
                _c("held_bytes", "float64", "bytes", "their size", True),
                _c("held_share", "float64", "", "held_bytes / the device's allocated bytes"),
                _c(
                    "held_points",
                    "int64",
                    "",
                    "separate points of the history at which the held blocks were made (a "
                    "free by the allocator between two of them separates them)",
                    True,
                ),
                _c(
                    "held_span",
                    "float64",
                    "",
                    "share of the history between the first and the last held block",
                    True,
                ),
                _c("largest_held_bytes", "float64", "bytes", "the largest held block"),
                _c(
                    "held_at_peak_bytes",
                    "float64",
                    "bytes",
                    "size of the history's blocks it held when the device's allocated memory "
                    "peaked (allocator_state.peak_allocated_bytes)",
                ),
                _c(
                    "held_at_oom_bytes",
                    "float64",
                    "bytes",
                    "size of the history's blocks it held at the last out-of-memory error "
                    "(missing without one)",
                ),
            ),
        ),
        TableSpec(
            "aicore_freq",
            "AI Core frequency sample ('AI Core Freq' counter of the Ascend timeline, the "
            "AICORE_FREQ table of the profiler and msprof databases): the frequency from this "
            "sample to the next",
            (
                _c("start_us", "float64", US, "sample time: the frequency holds from here", True),
                _c(
                    "end_us",
                    "float64",
                    US,
                    "next sample's time; the last sample holds to the end of the device timeline",
                    True,
                ),
                _c("duration_us", "float64", US, "end - start", True),
                _c("freq_mhz", "float64", "MHz", "AI Core frequency ('MHz' of the counter)", True),
                _c(
                    "rated_mhz",
                    "float64",
                    "MHz",
                    "the chip's rated AI Core frequency: info.json 'aic_frequency' where the "
                    "profile has it, else the highest frequency sampled",
                ),
            ),
        ),
        TableSpec(
            "ranks",
            "rank of a multi-rank run (built across its profiles; means per steady step: "
            "warm-up steps, steps.warmup, left out)",
            (
                _c("rank", "int64", "", "rank (or device) number", True),
                _c(
                    "steps",
                    "int64",
                    "",
                    "number of steady steps profiled on that rank (the means' steps)",
                    True,
                ),
                _c(
                    "warmup_steps",
                    "int64",
                    "",
                    "steps of that rank left out of the means because a rank spent them "
                    "warming up (steps.warmup): every rank is compared over the same steps",
                ),
                _c(
                    "warmup_us",
                    "float64",
                    US,
                    "mean duration of those left-out steps on that rank (0 when none)",
                ),
                _c("duration_us", "float64", US, "mean step time on that rank", True),
                _c("computing_us", "float64", US, "mean device compute time per step"),
                _c("communication_us", "float64", US, "mean device communication time per step"),
                _c(
                    "comm_not_overlapped_us",
                    "float64",
                    US,
                    "mean communication not hidden by compute per step",
                ),
                _c("free_us", "float64", US, "mean device idle time per step"),
                _c(
                    "bubble_us",
                    "float64",
                    US,
                    "mean pipeline-parallel bubble per step (time waiting to receive from the "
                    "previous stage), where the steps record it",
                ),
                _c(
                    "pp_stage",
                    "Int64",
                    "",
                    "pipeline-parallel stage of the rank, where the profiles record it "
                    "(metadata distributed.pp_stage, or Megatron's pipeline_model_parallel_size: "
                    "world_size / pp consecutive ranks per stage)",
                ),
                _c(
                    "stage_label",
                    "string",
                    "",
                    "stage N, or 'rank N (stage not recorded)' where the steps record a pipeline "
                    "bubble but not the stages: each rank then stands for its stage",
                ),
                _c(
                    "waited_rank",
                    "Int64",
                    "",
                    "the peer this rank waited for longest in its collectives (comm_ops."
                    "waited_rank: each collective's longest wait on another rank, summed per "
                    "peer), numbered in its communication group; missing where its HCCL tasks "
                    "name none (profiler level 0, GPU traces)",
                ),
                _c("waited_group", "string", "", "the communication group of that peer"),
                _c(
                    "waited_global_rank",
                    "Int64",
                    "",
                    "that peer as the job numbers its ranks (comm_ops.waited_global_rank), "
                    "where the rank's metadata gives the group's global ranks",
                ),
                _c(
                    "waited_parallel_group",
                    "string",
                    "",
                    "what that group parallelises (comm_ops.parallel_group: tp, dp, pp...)",
                ),
                _c(
                    "job_ranks",
                    "Int64",
                    "",
                    "ranks of the job as far as the profiles tell: the largest world size a "
                    "rank records, or the ranks the communication matrices name together with "
                    "the profiled ones, whichever is more; more than the rows of this table "
                    "when only some ranks were profiled; missing when nothing records it",
                ),
                _c(
                    "pipeline_stages",
                    "int64",
                    "",
                    "pipeline-parallel stages the ranks form: distinct stage_label values, 1 "
                    "without a pipeline (rules comparing all ranks leave differences between "
                    "stages to the stage rules)",
                ),
                _c(
                    "stage_computing_us",
                    "float64",
                    US,
                    "mean device compute time per step of the rank's stage (the mean of its "
                    "ranks); the rank's own where stages are not recorded",
                ),
                _c(
                    "stage_least_computing_us",
                    "float64",
                    US,
                    "least device compute time per step among the ranks of the rank's stage: "
                    "the ranks of one stage compute the same layers, so uneven work is told "
                    "within it; the rank's own where stages are not recorded",
                ),
                _c(
                    "stage_duration_us",
                    "float64",
                    US,
                    "mean step time of the rank's stage (the mean of its ranks' duration_us), "
                    "where stage_label is known",
                ),
                _c(
                    "stage_fastest_us",
                    "float64",
                    US,
                    "shortest step time among the ranks of the rank's stage, where stage_label "
                    "is known: a slow rank is told against its own stage",
                ),
                _c(
                    "duration_z",
                    "float64",
                    "",
                    "robust z-score of duration_us across the ranks (those of the rank's "
                    "pipeline stage where pp_stage is recorded): 0.6745 (x - median) / MAD "
                    "(Iglewicz-Hoaglin; with MAD 0, (x - median) / (1.2533 mean absolute "
                    "deviation); "
                    "0 when all ranks are equal)",
                ),
                _c("computing_z", "float64", "", "robust z-score of computing_us (as duration_z)"),
                _c("free_z", "float64", "", "robust z-score of free_us (as duration_z)"),
                _c(
                    "communication_z",
                    "float64",
                    "",
                    "robust z-score of communication_us (as duration_z); strongly negative for the "
                    "rank the others wait for",
                ),
                _c(
                    "straggler_metric",
                    "string",
                    "",
                    "the column (duration_us, computing_us or free_us) whose robust z-score is "
                    "largest in magnitude on that rank",
                ),
                _c("straggler_z", "float64", "", "that robust z-score"),
                _c(
                    "straggler_delta_us",
                    "float64",
                    US,
                    "that column's value minus its median across the ranks (of its stage, as "
                    "duration_z)",
                ),
            ),
            scope=CLUSTER,
        ),
        TableSpec(
            "links",
            "rank-to-rank link of a multi-rank run (built across its profiles from "
            "the comm_ops link rows of every rank; a rank's copies to itself and "
            "LOCAL same-device copies are not links and are left out)",
            (
                _c(
                    "name",
                    "string",
                    "",
                    "link as the communication matrix names it: src->dst",
                    True,
                ),
                _c("src_rank", "Int64", "", "sending rank (as numbered in the matrix)"),
                _c("dst_rank", "Int64", "", "receiving rank (as numbered in the matrix)"),
                _c("transport", "string", "", "HCCS, PCIE, RDMA, SDMA, SIO, LOCAL, ...", True),
                _c("bytes", "float64", "bytes", "data moved over the link, all its ops together"),
                _c(
                    "duration_us",
                    "float64",
                    US,
                    "transit time over the link, all its ops together",
                    True,
                ),
                _c("bandwidth_gbps", "float64", "GB/s", "bytes / duration_us (1 GB = 1e9 bytes)"),
                _c(
                    "bandwidth_ratio",
                    "float64",
                    "ratio",
                    "bandwidth_gbps / the median bandwidth_gbps of the bandwidth-bound links (mean "
                    "message of at least 1 MiB) of the same transport; empty when that transport "
                    "has none",
                ),
                _c(
                    "message_bytes",
                    "float64",
                    "bytes",
                    "mean bytes per operation on the link (bytes / ops): small messages are "
                    "latency-bound and say nothing about the link's bandwidth",
                ),
                _c(
                    "ops",
                    "int64",
                    "",
                    "link entries of the matrix of one rank reporting it (the "
                    "most of any reporting rank)",
                    True,
                ),
                _c(
                    "reported_by",
                    "string",
                    "",
                    "ranks whose matrices list the link, e.g. 0,1 (bytes and duration_us are the "
                    "mean of their reports)",
                ),
            ),
            scope=CLUSTER,
        ),
        TableSpec(
            "tuning",
            "AOE-tuned operator or subgraph, or one AOE tuning task",
            (
                _c(
                    "kind",
                    "string",
                    "",
                    "op, subgraph, or task (one row per AOE tuning task: its outcome, the model "
                    "times before/after where AOE measured them, and its repository counts)",
                    True,
                ),
                _c(
                    "name",
                    "string",
                    "",
                    "operator name, subgraph repo_key, or task name (tuning_name)",
                    True,
                ),
                _c("op_type", "string", "", "operator type (several joined with ',')"),
                _c("mode", "string", "", "Format, Schedule, Impl, SGAT; OPAT or SGAT for a task"),
                _c("before_us", "float64", US, "time before tuning"),
                _c("after_us", "float64", US, "time after tuning"),
                _c(
                    "improvement_pct",
                    "float64",
                    "%",
                    "improvement reported by AOE: (before / after - 1) x 100",
                ),
                _c("update_mode", "string", "", "add, update, ..."),
                _c(
                    "status",
                    "string",
                    "",
                    "improved, regressed, failed, incomplete; completed for a task that finished "
                    "without model-level times",
                    True,
                ),
                _c("task", "string", "", "AOE task (report key)"),
                _c(
                    "repo_total",
                    "Int64",
                    "",
                    "task rows: tuning strategies tuned (repo_summary total_num)",
                ),
                _c(
                    "repo_unsatisfied",
                    "Int64",
                    "",
                    "task rows: strategies neither in the repository before nor written after "
                    "(repo_summary repo_unsatisfied_num)",
                ),
            ),
        ),
        TableSpec(
            "cpu_usage",
            "host CPU utilisation sample of one scope (whole host, training "
            "process or one data-pipeline operator)",
            (
                _c(
                    "scope",
                    "string",
                    "",
                    "system (the whole host), process (the training process) or pipeline_op (the "
                    "threads of one data-pipeline operator)",
                    True,
                ),
                _c("sample", "Int64", "", "sample number, from 0 in sampling order"),
                _c("op_id", "Int64", "", "pipeline operator id (scope pipeline_op)"),
                _c("op_type", "string", "", "pipeline operator type (scope pipeline_op)"),
                _c("workers", "Int64", "", "num_parallel_workers of the operator"),
                _c("user_pct", "float64", "%", "CPU time in user mode", True),
                _c("sys_pct", "float64", "%", "CPU time in kernel (system) mode"),
                _c("io_pct", "float64", "%", "CPU time waiting for I/O (scope system)"),
                _c("idle_pct", "float64", "%", "idle CPU time (scope system)"),
                _c(
                    "runnable",
                    "float64",
                    "processes",
                    "processes running or ready to run (scope system)",
                ),
                _c(
                    "context_switches",
                    "float64",
                    "switches",
                    "context switches the profiler counted for the sample (scope system)",
                ),
                _c("cpus", "Int64", "", "logical CPUs of the host"),
            ),
        ),
        TableSpec(
            "utilization",
            "whole-run utilisation figure a profiler computed itself",
            (
                _c(
                    "measure",
                    "string",
                    "",
                    "flops_utilization (achieved FLOPS over the device's peak, MindSpore "
                    "flops_summary), flops_per_s",
                    True,
                ),
                _c("value", "float64", "", "the figure, in `unit`", True),
                _c("unit", "string", "", "%, FLOPS ..."),
            ),
        ),
        TableSpec(
            "graph_fusions",
            "one fusion the graph compiler applied (msprof fusion_op_*.csv): the fused operator "
            "and the operators it replaced",
            (
                _c("fusion_op", "string", "", "name of the fused operator", True),
                _c(
                    "original_ops",
                    "string",
                    "",
                    "names of the operators fused into it, as the file lists them",
                    True,
                ),
                _c("op_count", "Int64", "", "number of operators fused"),
                _c("model_id", "Int64", "", "graph/model id"),
                _c("model_name", "string", "", "graph/model name"),
                _c("memory_total_bytes", "float64", "bytes", "memory of the fused operator"),
            ),
        ),
        TableSpec(
            "compare_overall",
            "breakdown metric of two runs side by side (advisor compare; means per step)",
            (
                _c(
                    "metric",
                    "string",
                    "",
                    "cube, vector, conv_forward, conv_backward, flash_attention_forward, "
                    "flash_attention_backward, paged_attention, other_compute (kernel time by "
                    "class), lccl (LCCL communication kernels, kernel_aivec; only when a run "
                    "has some), computing (union of compute tasks), comm_not_overlapped, wait "
                    "(communication waiting for peers), sdma (copies), free (neither computing nor "
                    "communicating), e2e (step time), operators (top-level framework operator "
                    "time), dataloader (host time fetching batches), memory_peak (the largest "
                    "reserved memory of a device, or allocated where none is reserved: from a "
                    "trace's memory samples or a memory snapshot's history)",
                    True,
                ),
                _c("unit", "string", "", "µs, or bytes for memory_peak", True),
                _c("base", "float64", "", "value in the baseline run, per step"),
                _c("comparison", "float64", "", "value in the comparison run, per step"),
                _c(
                    "base_count", "float64", "", "kernels per step in the baseline (kernel classes)"
                ),
                _c("comp_count", "float64", "", "kernels per step in the comparison"),
                _c("diff", "float64", "", "comparison - base"),
                _c("ratio", "float64", "ratio", "comparison / base (missing when base is 0)"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_ops",
            "framework operator of two runs aligned in execution order "
            "(advisor compare: OperatorCompare)",
            (
                _c("order", "int64", "", "position in the aligned sequence", True),
                _c(
                    "name",
                    "string",
                    "",
                    "operator name (the baseline's name of an --op-name-map pair)",
                    True,
                ),
                _c("status", "string", "", "matched, baseline_only or comparison_only", True),
                _c("base_name", "string", "", "operator name in the baseline"),
                _c("base_input_shapes", "string", "", "its input shapes"),
                _c(
                    "base_time_us",
                    "float64",
                    US,
                    "its time: device time of the kernels it launched, or its host time in a run "
                    "without launched kernels",
                ),
                _c("base_device_us", "float64", US, "device time of the kernels it launched"),
                _c("base_host_us", "float64", US, "host (wall) time of the call"),
                _c("base_kernels", "float64", "", "kernels it launched"),
                _c("base_top_kernels", "string", "", "its longest kernels, with their times"),
                _c("comp_name", "string", "", "operator name in the comparison"),
                _c("comp_input_shapes", "string", "", "its input shapes"),
                _c("comp_time_us", "float64", US, "its time (as base_time_us)"),
                _c("comp_device_us", "float64", US, "device time of the kernels it launched"),
                _c("comp_host_us", "float64", US, "host (wall) time of the call"),
                _c("comp_kernels", "float64", "", "kernels it launched"),
                _c("comp_top_kernels", "string", "", "its longest kernels, with their times"),
                _c(
                    "diff_us",
                    "float64",
                    US,
                    "comp_time_us - base_time_us (a missing side is 0)",
                    True,
                ),
                _c("ratio", "float64", "ratio", "comp_time_us / base_time_us"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_op_stats",
            "operator name of two runs (advisor compare: OperatorCompareStatistic; per step)",
            (
                _c("name", "string", "", "operator name", True),
                _c("base_count", "float64", "", "calls per step in the baseline"),
                _c("comp_count", "float64", "", "calls per step in the comparison"),
                _c("base_us", "float64", US, "time per step in the baseline", True),
                _c("comp_us", "float64", US, "time per step in the comparison", True),
                _c("base_kernels", "float64", "", "kernels per step in the baseline"),
                _c("comp_kernels", "float64", "", "kernels per step in the comparison"),
                _c("diff_us", "float64", US, "comp_us - base_us", True),
                _c("ratio", "float64", "ratio", "comp_us / base_us"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_comm",
            "collective type of two runs (advisor compare: CommunicationCompare; per step)",
            (
                _c(
                    "op", "string", "", "allreduce, allgather, ... (the op name when unknown)", True
                ),
                _c("base_count", "float64", "", "operations per step in the baseline"),
                _c("comp_count", "float64", "", "operations per step in the comparison"),
                _c("base_us", "float64", US, "time per step in the baseline", True),
                _c("comp_us", "float64", US, "time per step in the comparison", True),
                _c("base_bytes", "float64", "bytes", "bytes per step in the baseline"),
                _c("comp_bytes", "float64", "bytes", "bytes per step in the comparison"),
                _c("base_wait_us", "float64", US, "wait for peers per step in the baseline"),
                _c("comp_wait_us", "float64", US, "wait for peers per step in the comparison"),
                _c("diff_us", "float64", US, "comp_us - base_us", True),
                _c("ratio", "float64", "ratio", "comp_us / base_us"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_memory",
            "operator name of two runs by memory it allocates "
            "(advisor compare: MemoryCompare; per step)",
            (
                _c("name", "string", "", "operator name", True),
                _c("base_count", "float64", "", "allocations per step in the baseline"),
                _c("comp_count", "float64", "", "allocations per step in the comparison"),
                _c(
                    "base_bytes",
                    "float64",
                    "bytes",
                    "bytes allocated per step in the baseline",
                    True,
                ),
                _c(
                    "comp_bytes",
                    "float64",
                    "bytes",
                    "bytes allocated per step in the comparison",
                    True,
                ),
                _c("diff_bytes", "float64", "bytes", "comp_bytes - base_bytes", True),
                _c("ratio", "float64", "ratio", "comp_bytes / base_bytes"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_allocation_sites",
            "place in the code of two memory snapshots by the memory its blocks held (advisor "
            "compare; allocation_sites of each snapshot's device with the largest peak, the "
            "one compare_overall's memory_peak is), the largest growth at the peak first",
            (
                _c(
                    "site",
                    "string",
                    "",
                    "place in the code (allocation_sites.site); code that moved between the "
                    "two, `function (file:baseline line -> line)`",
                    True,
                ),
                _c(
                    "base_peak_bytes",
                    "float64",
                    "bytes",
                    "held at the peak in the baseline, of the blocks its recorded history "
                    "made (0: none)",
                    True,
                ),
                _c(
                    "comp_peak_bytes",
                    "float64",
                    "bytes",
                    "held at the peak in the comparison",
                    True,
                ),
                _c("diff_bytes", "float64", "bytes", "comp_peak_bytes - base_peak_bytes", True),
                _c("base_held_bytes", "float64", "bytes", "still held at the baseline's snapshot"),
                _c("comp_held_bytes", "float64", "bytes", "still held at the comparison's"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_memory_kinds",
            "kind of tensor of two memory timeline exports by the memory it held (advisor "
            "compare; memory_kinds of each), the largest growth at the peak first",
            (
                _c("kind", "string", "", "memory_kinds.kind", True),
                _c(
                    "base_at_peak_bytes",
                    "float64",
                    "bytes",
                    "held at the baseline's peak (0: none)",
                    True,
                ),
                _c(
                    "comp_at_peak_bytes",
                    "float64",
                    "bytes",
                    "held at the comparison's peak",
                    True,
                ),
                _c(
                    "diff_bytes",
                    "float64",
                    "bytes",
                    "comp_at_peak_bytes - base_at_peak_bytes",
                    True,
                ),
                _c("base_max_bytes", "float64", "bytes", "its own highest in the baseline"),
                _c("comp_max_bytes", "float64", "bytes", "its own highest in the comparison"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_apis",
            "framework API name of two runs (advisor compare: ApiCompare; per step)",
            (
                _c("name", "string", "", "aten::*, Optimizer.step#... or Python function", True),
                _c("kind", "string", "", "host_ops kind: aten, optimizer or python"),
                _c("base_count", "float64", "", "calls per step in the baseline", True),
                _c("base_us", "float64", US, "host time per step in the baseline", True),
                _c(
                    "base_self_us",
                    "float64",
                    US,
                    "host time per step less that of the API calls inside them",
                ),
                _c("base_avg_us", "float64", US, "mean call in the baseline"),
                _c("comp_count", "float64", "", "calls per step in the comparison", True),
                _c("comp_us", "float64", US, "host time per step in the comparison", True),
                _c("comp_self_us", "float64", US, "self time per step in the comparison"),
                _c("comp_avg_us", "float64", US, "mean call in the comparison"),
                _c("diff_us", "float64", US, "comp_us - base_us", True),
                _c("diff_avg_us", "float64", US, "comp_avg_us - base_avg_us"),
                _c("ratio", "float64", "ratio", "comp_us / base_us"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_kernels",
            "kernel type and input shape of two runs (advisor compare: KernelCompare; per step)",
            (
                _c(
                    "kernel",
                    "string",
                    "",
                    "the operator type of the kernel where the profiler names one (MatMulV2), "
                    "else the kernel name; communication tasks are left out",
                    True,
                ),
                _c("input_shapes", "string", "", "its input shapes (N/A: not recorded)", True),
                _c("base_count", "float64", "", "kernels per step in the baseline", True),
                _c("base_us", "float64", US, "device time per step in the baseline", True),
                _c("base_avg_us", "float64", US, "mean kernel in the baseline"),
                _c("base_max_us", "float64", US, "longest kernel in the baseline"),
                _c("base_min_us", "float64", US, "shortest kernel in the baseline"),
                _c("comp_count", "float64", "", "kernels per step in the comparison", True),
                _c("comp_us", "float64", US, "device time per step in the comparison", True),
                _c("comp_avg_us", "float64", US, "mean kernel in the comparison"),
                _c("comp_max_us", "float64", US, "longest kernel in the comparison"),
                _c("comp_min_us", "float64", US, "shortest kernel in the comparison"),
                _c("diff_us", "float64", US, "comp_us - base_us", True),
                _c("diff_avg_us", "float64", US, "comp_avg_us - base_avg_us (kernels in both)"),
                _c("ratio", "float64", "ratio", "comp_us / base_us"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_profiling",
            "profiler option of a run that inflates its times (advisor compare: a run without "
            "any was profiled minimally)",
            (
                _c("side", "string", "", "baseline or comparison", True),
                _c(
                    "option",
                    "string",
                    "",
                    "record_shapes, with_stack, profile_memory, with_modules, with_flops, "
                    "l2_cache, profiler_level (above Level0), aic_metrics (PMU metrics "
                    "collected), cpu_activity (the CPU activity on an NPU)",
                    True,
                ),
                _c(
                    "value",
                    "string",
                    "",
                    "the setting as the profile states it, or 'recorded' when found from the "
                    "data the option records",
                    True,
                ),
                _c("evidence", "string", "", "the file stating it, or what was recorded"),
            ),
            scope=COMPARE,
        ),
        TableSpec(
            "compare_modules",
            "nn.Module (path from the outermost module) of two runs "
            "(advisor compare: ModuleCompare; per step)",
            (
                _c("module", "string", "", "module path, e.g. MLP_0/Linear_1", True),
                _c("depth", "Int64", "", "nesting depth (0: outermost module)"),
                _c("base_count", "float64", "", "calls per step in the baseline"),
                _c("comp_count", "float64", "", "calls per step in the comparison"),
                _c("base_us", "float64", US, "time per step in the baseline", True),
                _c("comp_us", "float64", US, "time per step in the comparison", True),
                _c("diff_us", "float64", US, "comp_us - base_us", True),
                _c("ratio", "float64", "ratio", "comp_us / base_us"),
            ),
            scope=COMPARE,
        ),
    )
}

_NULLABLE_NUMERIC = {"Int64"}


@dataclass
class ReaderWarning:
    """Something a reader could not read, reported to the user instead of a traceback."""

    file: str
    problem: str
    line: int | None = None
    column: str | None = None
    reader: str = ""
    unread: bool = False
    """The whole file was refused (damaged, over a limit): an input could not be read, so the
    run exits 3 though the rest of the profile is analysed."""
    problem_zh: str = ""
    """The problem in Chinese, where its writer gave it: a report in Chinese shows it, and
    `problem` (English) otherwise."""

    def __str__(self) -> str:
        return self.line_in("en")

    def problem_in(self, lang: str) -> str:
        """The problem in `lang` (one of render.messages.LANGS), English when untranslated."""
        return self.problem_zh if lang == "zh" and self.problem_zh else self.problem

    def line_in(self, lang: str) -> str:
        """The line the CLI prints, file:line: problem (column 'x'), the problem in `lang`."""
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
        problem = self.problem_in(lang)
        named = self.column is None or repr(self.column) in problem
        col = "" if named else f" (column {self.column!r})"
        return f"{where}: {problem}{col}"

    def to_dict(self, lang: str = "en") -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "problem": self.problem_in(lang),
            "reader": self.reader,
            "unread": self.unread,
        }


@dataclass
class ProfileMeta:
    """Where a profile came from: framework, format, device, rank, versions, files read."""

    source_format: str
    path: str
    framework: str = "unknown"
    device_kind: str = "unknown"  # NPU, GPU, CPU
    device_name: str = ""
    device_id: str | None = None
    rank: int | None = None
    world_size: int | None = None
    versions: dict[str, str] = field(default_factory=dict)
    files_read: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    collect: dict[str, str] = field(default_factory=dict)
    """How to make the profiler record a "table" or "table.column" this profile lacks (the
    reader's `collect` hints): rules needing data without a hint are ones the format never
    records."""
    collect_zh: dict[str, str] = field(default_factory=dict)
    """The Chinese text of each `collect` hint, by its English text (the reader's
    `collect_zh`); a hint without one is shown in English."""
    trace_index: dict[str, TraceIndex] = field(default_factory=dict, compare=False, repr=False)
    """Where each stretch of time lies in the trace files read, by resolved path: for cutting
    findings' windows without decoding a file whole again (advisor.formats.trace_index)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "source_format": self.source_format,
            "path": self.path,
            "framework": self.framework,
            "device_kind": self.device_kind,
            "device_name": self.device_name,
            "device_id": self.device_id,
            "rank": self.rank,
            "world_size": self.world_size,
            "versions": dict(self.versions),
            "files_read": list(self.files_read),
            "extra": dict(self.extra),
        }


@dataclass(frozen=True)
class RunInfo:
    """What every report of one run says about the run: the config file in effect and the
    team rules that replaced shipped ones, so a reader of the report knows what shaped it."""

    config: str | None = None
    rule_overrides: tuple[str, ...] = ()


def _present_value(value: Any) -> bool:
    """Whether one cell holds a value (a container, such as a list of shapes, does)."""
    return not pd.api.types.is_scalar(value) or not pd.isna(value)


@dataclass
class Profile:
    """Normalized tables plus meta and warnings; a table is absent when the source lacks it."""

    meta: ProfileMeta
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    warnings: list[ReaderWarning] = field(default_factory=list)
    providers_run: set[str] = field(default_factory=set)

    @property
    def label(self) -> str:
        """Short human name: the device or rank this profile is for."""
        if self.meta.rank is not None:
            return f"rank {self.meta.rank}"
        if self.meta.device_id is not None:
            return f"device {self.meta.device_id}"
        return Path(self.meta.path).name

    def has(self, table: str, column: str | None = None) -> bool:
        """True when the table exists and, if named, the column holds at least one value."""
        df = self.tables.get(table)
        if df is None:
            return False
        if column is None:
            return True
        if column not in df.columns:
            return False
        at = df.columns.get_loc(column)
        if isinstance(at, int) and len(df) and _present_value(df.iat[0, at]):
            return True  # the usual case, told without building the column (7x cheaper)
        return int(df[column].count()) > 0  # count: 2x notna().any()

    def warn_whole(self, problem: str, *, zh: str = "") -> None:
        """Record a problem of the profile as a whole, not of one of its files: named by its
        file, or by its folder (warn() puts the folder first)."""
        source = Path(self.meta.path)
        self.warn(source.name if source.is_file() else ".", problem, zh=zh)

    def warn(
        self,
        file: str | Path,
        problem: str,
        *,
        line: int | None = None,
        column: str | None = None,
        reader: str = "",
        unread: bool = False,
        zh: str = "",
    ) -> None:
        """Record a problem; a file path relative to the profile is made whole for the user.
        `unread`: the problem cost the whole file (see ReaderWarning.unread); `zh`: the
        problem in Chinese, for reports in Chinese."""
        path = Path(file)
        if not path.is_absolute() and not str(file).startswith("<"):
            base = Path(self.meta.path)
            path = (base if base.is_dir() else base.parent) / path
        self.warnings.append(ReaderWarning(str(path), problem, line, column, reader, unread, zh))


def conform(table: str, df: pd.DataFrame, spec: TableSpec | None = None) -> pd.DataFrame:
    """Cast a reader's frame to the documented dtypes; drop undocumented columns.

    Readers build frames from heterogeneous sources; casting here, once, means every rule sees
    the same dtypes whatever the reader. Columns that are entirely missing stay missing, so a
    rule requiring them is reported "not applicable" rather than evaluated on NaN. `spec` is
    the table's specification when it is not a built-in one (a plugin's table).
    """
    spec = spec or TABLES[table]
    # the dtypes as a dict: looking each column up in df.dtypes (a Series) costs ~10 us
    labels = df.columns.tolist()
    dtypes = dict(zip(labels, df.dtypes.tolist()))
    documented = [col for col in spec.columns if col.name in dtypes]
    df = df.reset_index(drop=True)  # align columns by position, whatever the reader's index
    names = [col.name for col in documented]
    if all(_is_cast(dtypes[col.name], col.dtype) for col in documented):
        # most tables, derived ones above all: reset_index made a new frame; its columns
        # are taken only when it holds others or in another order, by position (a list of
        # labels costs 5x as much: pandas matches it as an Index against the columns first)
        out = df if labels == names else df.take([labels.index(n) for n in names], axis=1)
    else:
        columns = {col.name: _cast(df[col.name], col.dtype).array for col in documented}
        out = pd.DataFrame(columns, index=pd.RangeIndex(len(df)))
    # labels as a NumPy object Index: pandas 3 makes them arrow-backed strings, and every
    # df[column] then reads its label through pyarrow (10.6 against 6.6 µs; rules and
    # providers read columns hundreds of times per profile: 2.3% of a tiny rank's work)
    out.columns = pd.Index(names, dtype=object)
    return out


def comm_operations(comm: pd.DataFrame) -> pd.DataFrame:
    """The rows of a comm_ops table that are operations, not communication-matrix links
    (`kind` absent or not "link", as the contract reads it)."""
    return comm[(comm["kind"] != "link").fillna(True)] if "kind" in comm else comm


def conform_records(
    table: str,
    rows: Sequence[Mapping[str, Any]],
    columns: Sequence[str],
    spec: TableSpec | None = None,
) -> pd.DataFrame:
    """`conform(table, pd.DataFrame(rows, columns=columns))` for a provider's rows (dicts; a
    key a row lacks is missing there), each documented column built in its dtype at once
    where its values are plain ones (text, whole numbers, floats, None or pd.NA), else cast
    as `conform` casts. A provider's few rows in 18 columns of mixed objects cost ~2 ms of
    casts (every tiny rank derives fusion_candidates); built typed, a fraction of that."""
    spec = spec or TABLES[table]
    documented = [col for col in spec.columns if col.name in columns]
    arrays = {}
    for col in documented:
        values = [row.get(col.name) for row in rows]
        typed = _typed(values, col.dtype)
        arrays[col.name] = typed if typed is not None else _cast(pd.Series(values), col.dtype).array
    out = pd.DataFrame(arrays, index=pd.RangeIndex(len(rows)))
    out.columns = pd.Index([col.name for col in documented], dtype=object)
    return out


def _typed(values: list[Any], dtype: str) -> Any:
    """`values` as an array of `dtype` when each is a plain value that `_cast` would convert
    to itself (None and pd.NA missing); None when one is not (then `_cast` decides)."""
    na = pd.NA
    if dtype == "string":
        if all(v.__class__ is str or v is None or v is na for v in values):
            return pd.array(values, dtype="string")
    elif dtype == "float64":
        if all(v.__class__ is float or v is None for v in values):
            return np.array(values, dtype="float64")
    elif dtype == "Int64" and all(v.__class__ is int or v is None or v is na for v in values):
        return pd.array(values, dtype="Int64")
    return None


def _cast(series: pd.Series, dtype: str) -> pd.Series:
    """One column as its documented dtype; values that are not of it become missing."""
    if _is_cast(series.dtype, dtype):
        return series
    if dtype == "float64":
        return pd.to_numeric(series, errors="coerce").astype("float64")
    if dtype in ("int64", *_NULLABLE_NUMERIC):
        numbers = pd.to_numeric(series, errors="coerce")
        if numbers.dtype.kind == "i":
            series = numbers.astype("Int64")
        else:  # floats, huge ints: rounded, missing beyond int64's range (NumPy: 36 us, not 240)
            values = np.round(numbers.to_numpy("float64", na_value=np.nan))
            with np.errstate(invalid="ignore"):
                missing = ~(np.abs(values) < 2.0**63)
            whole = np.where(missing, 0.0, values).astype(np.int64)
            series = pd.Series(
                pd.arrays.IntegerArray(whole, missing), index=series.index, name=series.name
            )
        if dtype == "int64" and not series.isna().any():
            series = series.astype("int64")
        return series
    if dtype == "bool":
        return series.astype("bool")
    return series.astype("string")


def _is_cast(actual: Any, dtype: str) -> bool:
    """Whether `_cast` would return a column of dtype `actual` as it is (exactly `dtype`).
    A dtype equals the name of exactly these four (float64, int64, bool in NumPy, pandas'
    Int64) as its text does; comparing is 30x cheaper than the text for NumPy's, and every
    table of every profile is checked column by column."""
    if dtype == "string":
        return bool(actual == pd.StringDtype())
    return dtype in ("float64", "int64", "Int64", "bool") and bool(actual == dtype)


def _has_dtype(actual: Any, dtype: str) -> bool:
    """Whether a column of dtype `actual` is already what `_cast` would make of it."""
    if dtype == "string":
        return isinstance(actual, pd.StringDtype)
    if dtype == "int64":
        return str(actual) in ("int64", "Int64")
    return str(actual) == dtype


def hold_to_contract(
    profile: Profile, source: str, tables: Mapping[str, TableSpec] | None = None
) -> None:
    """Make a reader's tables follow the contract, warning about what had to change.

    The core calls this on every profile a reader returns, built-in or third-party, so a
    plugin's mistake (times as text, a missing required column, a table nobody documented)
    becomes a warning naming `source` (the reader and its plugin) instead of a crash in a rule
    far from its cause. Frames already conformed pass untouched, at no copying cost.
    """
    tables = TABLES if tables is None else tables
    for name in list(profile.tables):
        frame, spec = profile.tables[name], tables.get(name)
        problem = _table_problem(name, frame, spec)
        if problem or spec is None:
            del profile.tables[name]
            profile.warn(f"<{source}>", f"{problem}; the table is left out", reader=source)
            continue
        extra = [c for c in frame.columns if c not in spec.column_names]
        if extra:
            profile.warn(
                f"<{source}>",
                f"{name}: undocumented column {extra[0]!r}"
                f"{f' (and {len(extra) - 1} more)' if len(extra) > 1 else ''} "
                "left out",
                reader=source,
            )
        dtypes = dict(zip(frame.columns.tolist(), frame.dtypes.tolist()))
        if (
            not extra
            and isinstance(frame.index, pd.RangeIndex)
            and frame.index.start == 0
            and all(_has_dtype(dtypes[c.name], c.dtype) for c in spec.columns if c.name in dtypes)
        ):
            continue
        conformed = conform(name, frame, spec)
        for column in conformed.columns:
            lost = int(
                (frame[column].reset_index(drop=True).notna() & conformed[column].isna()).sum()
            )
            if lost:
                dtype = next(c.dtype for c in spec.columns if c.name == column)
                profile.warn(
                    f"<{source}>",
                    f"{name}.{column}: {lost} of {len(frame)} values "
                    f"are not {dtype} and are left out",
                    column=column,
                    reader=source,
                )
        profile.tables[name] = conformed


def _table_problem(name: str, frame: Any, spec: TableSpec | None) -> str | None:
    """Why a reader's table cannot be used at all, or None."""
    if spec is None:
        return f"unknown table {name!r}"
    if not isinstance(frame, pd.DataFrame):
        return f"table {name!r} is a {type(frame).__name__}, not a DataFrame"
    twice = frame.columns[frame.columns.duplicated()]
    if len(twice):
        return f"table {name!r} has two columns named {twice[0]!r}"
    missing = [c.name for c in spec.columns if c.required and c.name not in frame.columns]
    return f"table {name!r} lacks its required column {missing[0]!r}" if missing else None


def contract_problems(profile: Profile, tables: Mapping[str, TableSpec] | None = None) -> list[str]:
    """What breaks the table contract: unknown tables or columns, missing required columns.

    Readers (built-in and third-party) can assert this is empty in their tests; a plugin
    that registers tables passes them too (`PluginHost().tables()`).
    """
    tables = TABLES if tables is None else tables
    problems = []
    for name, frame in profile.tables.items():
        spec = tables.get(name)
        if spec is None:
            problems.append(f"unknown table {name!r}")
            continue
        problems += [
            f"{name}: unknown column {c!r}" for c in frame.columns if c not in spec.column_names
        ]
        problems += [
            f"{name}: missing required column {c.name!r}"
            for c in spec.columns
            if c.required and c.name not in frame.columns
        ]
    return problems
