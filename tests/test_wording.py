"""The words templates take from the profile (advisor.engine.wording): every report language
has each of them, and they follow the run's kind and the GPU trace's runtime."""

from __future__ import annotations

import pytest

from advisor.engine.rules import LANGUAGES, TEMPLATE_NAMES
from advisor.engine.wording import WORD_NAMES, words


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("runtime", ["CUDA", "ROCm", "CUDA/ROCm", None])
@pytest.mark.parametrize("training", [True, False, None])
def test_every_language_has_every_word(lang, runtime, training):
    given = words(lang, training, runtime)
    assert tuple(given) == WORD_NAMES
    assert all(isinstance(word, str) and word for word in given.values())
    assert set(WORD_NAMES) <= TEMPLATE_NAMES  # rule checks accept them


def test_an_inference_run_is_named_so_and_an_unknown_one_keeps_training():
    assert words("en", False, None)["run_kind"] == "inference"
    assert words("en", None, None)["run_kind"] == "training"
    assert words("zh", False, None)["run_kind"] == "推理"
    assert words("zh", True, None)["run_kind"] == "训练"


def test_vendor_names_follow_the_runtime_and_name_both_where_it_is_unknown():
    rocm = words("zh", True, "ROCm")
    assert (rocm["matrix_units"], rocm["kernel_profiler"], rocm["dnn_library"]) == (
        "Matrix Core",
        "rocprof-compute",
        "MIOpen",
    )
    cuda = words("en", True, "CUDA")
    assert (cuda["matrix_units"], cuda["kernel_profiler"], cuda["dnn_library"]) == (
        "Tensor Cores",
        "Nsight Compute",
        "cuDNN",
    )
    both = words("en", True, "CUDA/ROCm")  # a trace with both runtimes' calls
    assert both["kernel_profiler"] == "Nsight Compute (rocprof-compute on AMD GPUs)"
    assert words("zh", True, None)["matrix_units"] == "Tensor Core（AMD GPU 上为 Matrix Core）"
