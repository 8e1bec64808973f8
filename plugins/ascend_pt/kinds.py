"""What a host call or device task is: host_ops.kind of framework events and CANN API calls,
the op type a device task's name gives."""

from __future__ import annotations

import re

from advisor import op_classes

_SYNC_APIS = ("aclrtSynchronizeStream", "aclrtSynchronizeDevice", "aclrtSynchronizeEvent")
_FORMAT_CONVERSION = re.compile(r"trans_([A-Z][A-Za-z0-9]*)_\d+")
_VERSIONED_OP = re.compile(r"([A-Z][A-Za-z0-9]*?V\d)\d*")
_INDEXED_OP = re.compile(r"([A-Z][A-Za-z0-9]*[A-Za-z])\d*")


def framework_kind(name: str, cat: str) -> str:
    """host_ops.kind of a framework-side event (the trace's Python/CPU process)."""
    lower, cat = name.lower(), cat.lower()
    if cat in ("enqueue", "dequeue"):
        return "runtime"  # torch_npu's task queue: Enqueue, Dequeue@aclnnXxx
    if cat in ("user_annotation", "gpu_user_annotation", "mstx", "ms_tx"):
        return "annotation"
    if cat == "gc":
        return "gc"  # a Python garbage collection (gc_detect_threshold)
    if cat == "python_function":
        # Python frames of torch/utils/data/dataloader.py run inside the DataLoader call:
        # they are its call stack, not more data loading
        return "python"
    if "dataloader" in lower:
        return "dataloader"
    if lower.startswith("optimizer.") or "optimizer.step" in lower:
        return "optimizer"
    return "aten"


def cann_kind(api: str) -> str:
    """host_ops.kind of a CANN API call (`AscendCL@<api>`, `Node@launch`, ...)."""
    if api.startswith("aclopCompileAndExecute"):
        return "compile_execute"  # compiles on a cache miss, then runs: not all compile time
    if api.startswith(("aclopCompile", "opCompile")):
        return "compile"
    if api.startswith(_SYNC_APIS):
        return "sync"
    if "launch" in api.lower():
        return "launch"
    return "cann_api"


def op_type_from_task(name: str) -> str | None:
    """The op type a device task's name gives where no kernel_details.csv names it: an aclnn
    task `aclnnMm_TransData_TransData` -> `TransData` (API, kernel, op type, maybe a lower-case
    variant suffix: `..._FlashAttentionScore_varlen`); a graph-mode task the op type and its
    index (`Conv2D1`, `GatherV282` -> `GatherV2`: one version digit, then the index), a
    format conversion `trans_Cast_7` -> `Cast`, an atomic clean `ReduceSum7_MemSet` ->
    `MemSet`; None for anything else (hcom_*, MEMCPY_ASYNC). On the genuine kernel_details.csv
    files of tests/fixtures it agrees with their Type for 243 of the 280 names it types; the
    others get the framework's name of the CANN variant that ran (`ReduceSum` for
    `ReduceSumD`, `LayerNorm` for `LayerNormV3`; test_ascend_pt_reader.py)."""
    if name.startswith(op_classes.ACLNN_PREFIX):
        parts = [part for part in name.split("_") if part]
        while len(parts) > 3 and not parts[-1][:1].isupper():
            parts.pop()
        return parts[-1] if len(parts) >= 3 and parts[-1][:1].isupper() else None
    if name.endswith("_MemSet") or name.startswith("atomic_memset"):
        return "MemSet"
    for pattern in (_FORMAT_CONVERSION, _VERSIONED_OP, _INDEXED_OP):
        match = pattern.fullmatch(name)
        if match:
            return match.group(1)
    return None
