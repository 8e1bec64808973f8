"""What an event is: its family by `cat` (current and 2021 legacy names), the host_ops kind of
a host call, the category and copy kind of a device op, collective names and element sizes."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from advisor.kernel_names import kernel_op_type

KERNEL, MEMCPY, MEMSET, OPERATOR, PYTHON, RUNTIME, SYNC, ANNOTATION, OTHER = range(9)
CATEGORIES = {
    "kernel": KERNEL,
    "gpu_memcpy": MEMCPY,
    "memcpy": MEMCPY,
    "gpu_memset": MEMSET,
    "memset": MEMSET,
    "cpu_op": OPERATOR,
    "operator": OPERATOR,
    "python_function": PYTHON,
    "python": PYTHON,
    "cuda_runtime": RUNTIME,
    "cuda_driver": RUNTIME,
    "runtime": RUNTIME,
    "mtia_runtime": RUNTIME,
    "glow_runtime": RUNTIME,
    "xpu_runtime": RUNTIME,
    "xpu_driver": RUNTIME,
    "privateuse1_runtime": RUNTIME,
    "privateuse1_driver": RUNTIME,
    "cuda_sync": SYNC,
    "xpu_sync": SYNC,
    "user_annotation": ANNOTATION,
}


STEP_NAME = re.compile(r"ProfilerStep#(\d+)")
_LAUNCH = re.compile(r"^(?:cuda|cu|hip)\w*Launch")  # cudaLaunchKernel, hipExtModuleLaunchKernel,
#                                                     cudaGraphLaunch, cuLaunchKernelEx...
_SYNC = re.compile(
    r"^(?:cuda|cu|hip)\w*Synchronize$"  # device / stream / event / context synchronisation
    r"|^(?:cuda|hip)Memcpy(?:2D|3D|Peer|ToSymbol|FromSymbol)?$"  # blocking copies
    r"|^cuMemcpy(?:[A-Z]to[A-Z]|Peer|2D|3D)?$"
    # ROCm PyTorch does blocking (non_blocking=False) copies with hipMemcpyWithStream, which
    # returns once the copy is done.
    r"|^hipMemcpyWithStream$"
)
# Communication kernels: NCCL / RCCL, and the collectives of torch's SymmetricMemory
# (`multimem_all_reduce_kernel`, `one_shot_all_reduce_kernel`, ...) that vLLM and SGLang run
# for tensor-parallel all-reduce instead of NCCL: without them that time counts as compute.
_SYMM_MEM = r"(?:multimem|one_shot|two_shot)_(all_reduce|all_gather|reduce_scatter)"
# ... and DeepEP's expert-parallel all-to-all of MoE models (deep_ep::intranode::dispatch,
# deep_ep::internode_ll::combine, notify_dispatch...; dpsk::ep:: in DeepSeek's own traces),
# which sends each token to its experts' ranks and back
_EXPERT_ALL_TO_ALL = r"(?:deep_ep|dpsk::ep)::(?:intra|inter)node(?:_ll)?::"
_NCCL = re.compile(
    r"^nccl|ncclKernel|ncclDevKernel|rccl|" + _SYMM_MEM + "|" + _EXPERT_ALL_TO_ALL, re.IGNORECASE
)
NCCL_OP = re.compile(
    r"nccl(?:Dev)?Kernel_(?!Generic\b)([A-Za-z]+)|" + _SYMM_MEM + "|(" + _EXPERT_ALL_TO_ALL + ")"
)
"""The collective in a communication kernel's name: group 1 (NCCL), group 2 (SymmetricMemory),
group 3 (DeepEP: an all-to-all). NCCL >= 2.19's `ncclDevKernel_Generic` runs any collective,
so its name names none."""
_MEMCPY_KIND = re.compile(r"Memcpy\s+([A-Za-z]to[A-Za-z])\b")
_COPY_ENDS = re.compile(r"\(\s*(\w+)\s*->\s*(\w+)\s*\)")


# Collective names, normalised (lowercase, no underscores) and matched by prefix, in order.
_COLLECTIVES = (
    "allreduce",
    "allgather",
    "reducescatter",
    "alltoall",
    "broadcast",
    "sendrecv",
    "send",
    "recv",
    "reduce",
    "gather",
    "scatter",
    "barrier",
)

# Element sizes by c10 ScalarType name (`dtype` of NCCL kernels) and by C++ type name
# (`Input type` of record_function events).
_DTYPE_BYTES = {
    "float": 4,
    "half": 2,
    "bfloat16": 2,
    "double": 8,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "short": 2,
    "int16": 2,
    "byte": 1,
    "uint8": 1,
    "char": 1,
    "int8": 1,
    "bool": 1,
    "complexhalf": 4,
    "complexfloat": 8,
    "complexdouble": 16,
    "qint8": 1,
    "quint8": 1,
    "qint32": 4,
    "quint4x2": 1,
    "quint2x4": 1,
    "uint16": 2,
    "uint32": 4,
    "uint64": 8,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "float8_e8m0fnu": 1,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "long int": 8,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "c10::complex<c10::half>": 4,
    "c10::float8_e4m3fn": 1,
    "c10::float8_e5m2": 1,
}

FACTS_KEPT = 8192
"""Distinct kernel, copy and memset names whose facts a process keeps (a few MB at most)."""

# c10::DeviceType numbers used by `[memory]` events.
DEVICE_TYPES = {
    0: "cpu",
    1: "cuda",
    6: "hip",
    12: "xpu",
    13: "mps",
    19: "mtia",
    20: "privateuseone",
}
GPU_DEVICE_TYPES = {1, 6}


@lru_cache(maxsize=FACTS_KEPT)
def device_op_facts(name: str, family: int) -> tuple[str, str, str | None, str | None]:
    """(op_type, category, memcpy_kind, host_memory) of a kernel, copy or memset name.

    Kept per process: a walk names each kernel once, but a large trace is walked in parts
    (and many ranks one after another), and each part met the same few hundred kernels
    again, at a quarter of a millisecond each (a fifth of a 4 MiB part's walk)."""
    if family == KERNEL:
        category = "communication" if _NCCL.search(name) else "compute"
        return kernel_op_type(name), category, None, None
    op_type = name.split("(", 1)[0].strip() or name
    if family == MEMSET:
        return op_type, "memset", None, None
    kind = _MEMCPY_KIND.search(name)
    host = None
    ends = _COPY_ENDS.search(name)
    if ends:
        sides = {ends.group(1).lower(), ends.group(2).lower()}
        host = "pageable" if "pageable" in sides else "pinned" if "pinned" in sides else None
    return op_type, "memcpy", kind.group(1) if kind else None, host


def collective(text: Any) -> str | None:
    if not isinstance(text, str) or not text.strip():
        return None
    flat = text.strip().lower().replace("_", "").replace(" ", "")
    return next((c for c in _COLLECTIVES if flat.startswith(c)), flat)


def named_collective(text: Any) -> str | None:
    """collective(text) where that is one of the collectives known by name, else None
    (`batch_isend_irecv` and the like name no single one)."""
    op = collective(text)
    return op if op in _COLLECTIVES else None


def dtype_bytes(dtype: Any) -> int | None:
    return _DTYPE_BYTES.get(dtype.strip().lower()) if isinstance(dtype, str) else None


def host_kind(family: int, name: str) -> str | None:
    """host_ops.kind of a host event (None: not a host op, e.g. a ProfilerStep)."""
    if family in (OPERATOR, ANNOTATION):
        if name.startswith("ProfilerStep#"):
            return None
        if name.startswith("Optimizer."):
            return "optimizer"
        if family == OPERATOR:
            return "dataloader" if name.startswith("enumerate(DataLoader)") else "aten"
        return "dataloader" if "DataLoader" in name else "annotation"
    if family == PYTHON:
        return "python"
    if family == SYNC:
        # CUPTI's synchronisation records: Event/Stream/Context Sync block the host until the
        # device gets there; a Stream Wait Event (cudaStreamWaitEvent) only makes a stream wait
        # on another's event and returns at once, so the host is not held.
        return "runtime" if name == "Stream Wait Event" else "sync"
    if _LAUNCH.match(name):
        return "launch"
    if _SYNC.match(name):
        return "sync"
    return "runtime"
