"""Words a message template takes from the profile, in the report's language: whether the run
trains or infers, and the names of the GPU vendor's matrix units, kernel profiler and DNN
library. Rules write `{{ run_kind }} loop` once instead of repeating the same conditional
expression in every suggestion and language, and a new vendor or language is added here."""

from __future__ import annotations

from advisor.workload import WORKLOAD_WORDS

_VENDOR_WORDS: dict[str, dict[str | None, dict[str, str]]] = {
    "en": {
        "CUDA": {"matrix_units": "Tensor Cores", "kernel_profiler": "Nsight Compute"},
        "ROCm": {"matrix_units": "Matrix Cores", "kernel_profiler": "rocprof-compute"},
        None: {
            "matrix_units": "Tensor Cores (Matrix Cores on AMD GPUs)",
            "kernel_profiler": "Nsight Compute (rocprof-compute on AMD GPUs)",
        },
    },
    "zh": {
        "CUDA": {"matrix_units": "Tensor Core", "kernel_profiler": "Nsight Compute"},
        "ROCm": {"matrix_units": "Matrix Core", "kernel_profiler": "rocprof-compute"},
        None: {
            "matrix_units": "Tensor Core（AMD GPU 上为 Matrix Core）",
            "kernel_profiler": "Nsight Compute（AMD GPU 上用 rocprof-compute）",
        },
    },
}
"""Per language and GPU runtime (meta.extra `gpu_runtime`): the vendor's names. A trace that
names neither runtime, or both ("CUDA/ROCm"), gets the CUDA name with the AMD one beside it."""

WORD_NAMES = ("run_kind", "matrix_units", "kernel_profiler", "dnn_library")
"""The template names `words` sets (advisor.engine.rules.TEMPLATE_NAMES holds them)."""


def words(lang: str, training: bool | None, gpu_runtime: str | None) -> dict[str, str]:
    """The words for a profile that trains (`training` true or none) or infers (false), on
    `gpu_runtime`, in `lang`."""
    by_runtime = _VENDOR_WORDS[lang]
    vendor = by_runtime.get(gpu_runtime, by_runtime[None])
    return {
        # a run that may train (the profile cannot tell) is spoken of as training
        "run_kind": WORKLOAD_WORDS["inference" if training is False else "training"][lang],
        **vendor,
        "dnn_library": "MIOpen" if gpu_runtime == "ROCm" else "cuDNN",
    }
