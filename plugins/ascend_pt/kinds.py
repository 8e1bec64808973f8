"""What a host call or device task is: host_ops.kind of framework events and CANN API calls,
the op type of an aclnn task."""

from __future__ import annotations

_SYNC_APIS = ("aclrtSynchronizeStream", "aclrtSynchronizeDevice", "aclrtSynchronizeEvent")


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
    """`aclnnMm_TransData_TransData` -> `TransData` (aclnn API, kernel, op type)."""
    parts = name.split("_")
    return parts[-1] if name.startswith("aclnn") and len(parts) >= 3 and parts[-1] else None
