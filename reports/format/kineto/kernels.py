"""Sort GPU kernels into classes by name, the only evidence a trace gives of what a kernel did.

The classes answer the first questions about a profile: how much time went to matrix multiplies, and did they run
on tensor cores (`gemm_tensor_core`) or on the ordinary FMA units (`gemm_simt`); how much to attention,
convolution, memory-bound elementwise and reduction work, and communication. `KERNEL_CLASSES` is an ordered table,
first match wins; each pattern is searched case-insensitively, first in the kernel's base name (its identifier
without `void `, namespaces' anonymous parts, template arguments and parameters), then in the full name, because
C++ names carry their kind in the identifier (`at::native::reduce_kernel<...>`) while some libraries carry it in a
template argument (`cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_...>`).

Decisions worth knowing:
- A gemm counts as tensor-core when its name shows a tensor-core instruction or library family: cuBLAS
  `h884`/`s1688`/`s16816`-style tiles, `xmma` without `ffma`, `nvjet` (cuBLASLt on Hopper and Blackwell,
  wgmma/tcgen05 kernels), CUTLASS `tensorop`/`wmma`, `gmma`/`wgmma`/`tcgen05`/`umma`, 16/8-bit and tf32 type
  tags, `sm90`/`sm100`-family gemms; on AMD, Tensile `Cijk_..._MI16x16x1` and composable-kernel `xdl` (matrix
  cores). SIMT markers win over these: `simt`, `sgemm`/`dgemm`/`cgemm`/`zgemm`, `gemv`, `gemmSN`, `gemmk1`,
  `ffma`, and an xmma gemm whose math types are `f32f32` (IEEE fp32 on the FMA units:
  `sm80_xmma_gemm_f32f32_f32f32_f32`, also where a profiler cuts off its `_ffma` suffix, and the same under an
  `sm90` prefix; the tensor-core tf32 one reads `f32f32_tf32f32`). A gemm whose name says neither (a Triton
  template `triton_tem_fused_mm_0`, a custom `gemm_kernel`) counts as SIMT, so `tensor_core_share` is a lower bound.
- `splitKreduce_kernel` (cuBLAS split-K) is a reduction: it adds partial gemm results with no matrix instruction,
  and counting it as gemm would force a tensor-core/SIMT label it does not have.
- Implicit-gemm convolutions (`sm80_xmma_fprop_implicit_gemm_*`, `cutlass_tensorop_s1688fprop`) are convolution,
  on tensor cores or not; normalization, softmax and pooling are reductions; layout transforms, copies, fills,
  activations and optimizer `multi_tensor_apply` are elementwise.
- `memcpy` and `memset` come from the event category, not the name (see trace_events.GPU_CATEGORIES).
"""

from __future__ import annotations

import re
from functools import cache

COMMUNICATION = "communication"
GEMM_TENSOR_CORE = "gemm_tensor_core"
GEMM_SIMT = "gemm_simt"
OTHER = "other"

_GEMM = r"(gemm|gemv|matmul|Cijk_|nvjet|triton_tem_fused_(b?mm|addmm))"
# cuBLAS/CASK xmma kernels are named smXX_xmma_gemm_<A,B types>_<math types>_<C type>_...: the math pair says what
# ran (`f32f32` FFMA, `tf32f32`/`bf16f32`/`f16f32`/`e4m3f32`/`i8i32` tensor-core MMA), whatever the arch prefix.
_XMMA_FP32_MATH = r"xmma_(sparse_)?gemm_[a-z0-9]+_f32f32_"

KERNEL_CLASSES: list[tuple[str, re.Pattern[str]]] = [
    (class_name, re.compile(pattern, re.IGNORECASE))
    for class_name, pattern in [
        (COMMUNICATION, r"nccl|rccl|hccl"),
        # TorchInductor says what it generated: poi(ntwise), red(uction), per(sistent reduction).
        ("elementwise", r"^triton_poi_"),
        ("reduction", r"^triton_(red|per)_"),
        ("attention", r"flash_?(attn|fwd|bwd|attention)|flash::|fmha|sdpa|attention|mha_(fwd|bwd)|_attn_"),
        (
            "convolution",
            r"conv(?!ert)|fprop|dgrad|wgrad|winograd|scudnn|implicit_gemm|cask_cudnn|fft2d_|im2col|col2im",
        ),
        ("reduction", r"splitkreduce"),
        (GEMM_SIMT, r"simt|[sdcz]gemm|gemv|gemmSN|gemmk1|ffma|^Cijk_(?!.*_MI\d+x\d+)|" + _XMMA_FP32_MATH),
        (
            GEMM_TENSOR_CORE,
            r"nvjet|xmma_gemm|tensorop|wmma|[hsi]\d{3,5}gemm|hmma|imma|gmma|tcgen05|umma|_MI\d+x\d+x\d+|xdl|mfma"
            r"|(bf16|f16|fp16|tf32|e4m3|e5m2|fp8|int8|sm9\d|sm1\d\d)\w*gemm|gemm\w*(bf16|f16|fp16|tf32|e4m3|e5m2|fp8)",
        ),
        (GEMM_SIMT, _GEMM),
        ("reduction", r"reduce|reduction|norm(?!al)|moments|bn_(fw|bw)|softmax|pool|argmax|argmin|cum(sum|prod)|scan"),
        (
            "elementwise",
            r"elementwise|pointwise|vectorized|unrolled|copy|fill|epilogue|dropout|multi_tensor_apply|transpose"
            r"|nchwtonhwc|nhwctonchw|scale|index|gather|scatter|embedding|relu|gelu|silu|sigmoid|tanh|activation",
        ),
    ]
]

CLASS_NAMES = (
    GEMM_TENSOR_CORE,
    GEMM_SIMT,
    "attention",
    "convolution",
    "elementwise",
    "reduction",
    COMMUNICATION,
    "memcpy",
    "memset",
    OTHER,
)

# Only this much of a name is searched: real kernel names (deep C++ templates) stay under it, and some patterns
# (`fp16\w*gemm`) backtrack in time quadratic in the length searched.
MAX_NAME_CHARS = 2048

# What C++ kernel names carry that says nothing about the kernel.
NAME_NOISE = re.compile(r"^void |\(anonymous namespace\)::")


def base_name(name: str) -> str:
    """A kernel's identifier without return type, anonymous namespaces, template arguments or parameters."""
    name = NAME_NOISE.sub("", name)
    cut = min((i for i in (name.find("<"), name.find("(")) if i >= 0), default=len(name))
    return name[:cut]


@cache
def classify_kernel(name: str) -> str:
    """The class of a `kernel` event from its name (one of CLASS_NAMES, never memcpy or memset)."""
    name = name[:MAX_NAME_CHARS]
    for text in (base_name(name), name):
        for class_name, pattern in KERNEL_CLASSES:
            if pattern.search(text):
                return class_name
    return OTHER
