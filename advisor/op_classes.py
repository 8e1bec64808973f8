"""Name patterns operators and kernels are classed by: the library operations (attention,
convolution and matrix multiplication, from Ascend operator types (msprof-analyze's compare
categories, compare_config.ini) and GPU kernel names) and the kernels of CANN's
single-operator API. In one place, so that the readers, the compute classes and the fusion
patterns (a kernel sequence holding two library operations is no chain one fused kernel
replaces) judge a name alike."""

from __future__ import annotations

import re

ACLNN_PREFIX = "aclnn"
"""How the kernels of CANN's single-operator API (aclnn) begin, which torch_npu runs operator by
operator: `aclnnMm_TransData_TransData` (API, kernel, op type). No GE graph holds them."""

ATTENTION = re.compile(
    r"flash_?attention|fusion_?attention|flashattn|flash2attn|"
    r"efficient_attention|xformers_flash|fusedinferattention|fmha|"
    # FlashAttention's own CUDA kernels: flash_fwd_kernel / flash_bwd_* (FA2, also as
    # pytorch_flash::), flash::compute_attn_ws (FA3); without these their cutlass template
    # arguments made them matrix multiplications
    r"flash_fwd|flash_bwd|flash::|compute_attn|"
    # cuDNN's attention (PyTorch's cuDNN SDPA backend): cudnn_generated_fort_native_sdpa_
    # sm90_flash_fprop_wgmma_* / _bprop_*, which "fprop" made convolutions
    r"_sdpa_",
    re.I,
)
CONVOLUTION = re.compile(
    # conv but in convert, conversion (cuDNN's attention backward runs convert_dq_to_16bits)
    r"conv(?!er)|fprop|dgrad|wgrad|igemm_(?:fwd|bwd|wrw)|"  # + MIOpen's igemm
    # cuDNN's convolution kernels of older GPUs: implicit GEMM ({s,h}cudnn_*, as in
    # ampere_scudnn_128x64_relu_*), Winograd and FFT (fft2d_r2c_*, fft2d_c2r_*)
    r"[sh]cudnn|winograd|fft2d_",
    re.I,
)
MATMUL = re.compile(
    # "gemm" but in fbgemm_gpu's namespace, whose embedding, permute and quantisation kernels
    # multiply no matrices (its GEMMs say gemm or cutlass again)
    r"matmul|(?<!fb)gemm|gemv|cutlass|cublas|\bmm\b|addmm|bmm|"
    # GEMM kernels whose names say none of these: cuBLASLt's nvjet_* (recent cuBLAS on Hopper and
    # Blackwell), Tensile's Cijk_* (rocBLAS, hipBLASLt) and Inductor's Triton mm templates
    r"nvjet|\bCijk_|triton_tem_fused_mm",
    re.I,
)


def library_operation(name: str) -> bool:
    """Whether `name` is a library's whole attention, convolution or matrix multiplication."""
    return any(p.search(name) for p in (ATTENTION, CONVOLUTION, MATMUL))
