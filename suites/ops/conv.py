"""The conv suite: 2-D convolutions of real networks over dtypes, memory formats and passes, checked in float64.

Layers: ResNet-50's 7x7 stem (3 input channels, which no tensor core tile fits), the 3x3 and 1x1 layers of its
bottlenecks at 56, 28, 14 and 7, a VGG-16 3x3, and ResNet's stage-1 3x3 with 63, 65 and 72 channels against its
64 (the `align` axis). `memory_format` is `contiguous` (NCHW) or `channels_last` (NHWC, what cuDNN's tensor-core
kernels want). FLOPs: 2 x N x Cout x (Cin/groups) x kH x kW x Hout x Wout forward; the backward computes the input
gradient and the weight gradient, each as many FLOPs again, so fwd_bwd is 3x forward (every input requires grad,
the stem's image too, so a case is one layer as it runs inside a network). `shape` is NxCinxHxW-CoutkKsS.
cuDNN autotuning (`cudnn.benchmark`) is on for the cases, as in a tuned training job.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

import torch
import torch.nn.functional as F

from suites.core import reuse
from suites.core.cases import Case, Unsupported, Workload, align_class
from suites.core.memory import cpu_memory_info
from suites.core.precision import DTYPES, TOLERANCE, tf32_unsupported
from suites.core.profiles import Profile
from suites.ops.passes import PASSES, float64_leaves, run_pass, seeded_inputs, worst_error

SUITE = "conv"
CONV_DTYPES = ("float32", "tf32", "float16", "bfloat16")
# The full profile sweeps every layer in these; float16 only at FLOAT16_LAYERS. On every GPU since Ampere cuDNN runs
# float16 and bfloat16 convolutions with the same implicit-gemm kernels at the same tensor-core rate, and the
# alignment rule is the same 16 bytes, so on Hopper float16 repeats bfloat16 layer by layer; one layer keeps it in
# full, where a family on which they differ (before Ampere, bfloat16 has no tensor cores) shows it, and
# `exhaustive` sweeps it.
FULL_SWEEP_DTYPES = ("float32", "tf32", "bfloat16")
FLOAT16_LAYERS = ("resnet50-s1-3x3",)
FORMATS = {"contiguous": torch.contiguous_format, "channels_last": torch.channels_last}
# float32 may run as FFT or Winograd in cuDNN, whose rounding exceeds a direct sum's; 1e-4 still fails TF32 (~1e-3).
CONV_TOLERANCE = TOLERANCE | {"float32": 1e-4}


@dataclass(frozen=True)
class ConvLayer:
    """A square convolution without bias (ResNet and VGG put a norm or nothing after it)."""

    name: str
    n: int
    cin: int
    cout: int
    size: int
    kernel: int
    stride: int = 1
    padding: int = 0

    @property
    def out_size(self) -> int:
        return (self.size + 2 * self.padding - self.kernel) // self.stride + 1

    @property
    def shapes(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        """Input, weight and output shapes."""
        return ((self.n, self.cin, self.size, self.size), (self.cout, self.cin, self.kernel, self.kernel),
                (self.n, self.cout, self.out_size, self.out_size))

    @property
    def text(self) -> str:
        return f"{self.n}x{self.cin}x{self.size}x{self.size}-{self.cout}k{self.kernel}s{self.stride}"

    def forward_flops(self) -> int:
        return 2 * self.n * self.cout * self.cin * self.kernel**2 * self.out_size**2


def pass_factor(pass_: str) -> int:
    """FLOPs (and bytes) of a pass in units of the forward: the backward is two convolutions of the same size."""
    return 3 if pass_ == "fwd_bwd" else 1


def resnet50(n: int, image: int) -> list[ConvLayer]:
    """The stem and, per stage, the bottleneck's 1x1 reduce, 3x3 and 1x1 expand at the stage's resolution."""
    layers = [ConvLayer("resnet50-stem", n, 3, 64, image, 7, 2, 3)]
    for stage, width in enumerate((64, 128, 256, 512), start=1):
        size = image // 2 ** (stage + 1)
        layers += [ConvLayer(f"resnet50-s{stage}-1x1-reduce", n, 4 * width, width, size, 1),
                   ConvLayer(f"resnet50-s{stage}-3x3", n, width, width, size, 3, 1, 1),
                   ConvLayer(f"resnet50-s{stage}-1x1-expand", n, width, 4 * width, size, 1)]
    return layers


def misaligned(n: int, size: int, channels: tuple[int, ...]) -> list[ConvLayer]:
    """ResNet's stage-1 3x3 with channel counts off the multiple of 64 (63, 65) or of 8 only (72)."""
    return [ConvLayer("misaligned-3x3", n, c, c, size, 3, 1, 1) for c in channels]


# quick: ResNet's stage-1 3x3 with 64 and 63 channels for one image at a quarter of its side, so that a 2-core CPU
# runs every dtype, format and pass in seconds (CPU float16 convolutions run at about a GFLOP/s); full: a batch of
# 32 ImageNet images, what one GPU of a data-parallel job sees.
LAYERS: dict[Profile, list[ConvLayer]] = {
    Profile.QUICK: [ConvLayer("resnet50-s1-3x3", 1, 64, 64, 14, 3, 1, 1), *misaligned(1, 14, (63,))],
    Profile.FULL: [*resnet50(32, 224), ConvLayer("vgg16-conv3", 32, 256, 256, 56, 3, 1, 1),
                   *misaligned(32, 56, (63, 65, 72))],
}


@contextmanager
def cudnn_autotune() -> Iterator[None]:
    """cuDNN times its algorithms on the first call of a shape and keeps the fastest (`cudnn.benchmark`, which the
    performance guides tell users to turn on; what channels-last and odd channel counts cost depends on it)."""
    saved = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = True
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = saved


SEED = 0


def _build(layer: ConvLayer, dtype: str, memory_format: str, pass_: str, device: torch.device) -> Workload:
    if dtype == "tf32" and (reason := tf32_unsupported(device)):
        raise Unsupported(reason)
    group = reference_group(layer, dtype, pass_)
    grads = pass_ == "fwd_bwd"
    x_shape, w_shape, out_shape = layer.shapes
    drawn = seeded_inputs([x_shape, w_shape, out_shape] if grads else [x_shape, w_shape], SEED, device,
                          DTYPES[dtype])
    x, w, *rest = (t.contiguous(memory_format=FORMATS[memory_format]) for t in drawn)
    x, w = x.requires_grad_(grads), w.requires_grad_(grads)
    grad_out = rest[0] if grads else None
    forward = partial(F.conv2d, stride=layer.stride, padding=layer.padding)

    def run() -> list[torch.Tensor]:
        with cudnn_autotune():
            return run_pass(forward, (x, w), grad_out)

    def reference() -> list[torch.Tensor]:
        """In float64 on contiguous copies: one reference for both memory formats, whose inputs hold the same
        values."""
        leaves = [t.contiguous() for t in float64_leaves((x, w), False)]
        return run_pass(forward, [t.requires_grad_(grads) for t in leaves],
                        grad_out.double().contiguous() if grads else None)

    def error_rel() -> float:
        return worst_error(run(), reuse.SHELF.get(group, reference))

    if device.type == "cuda":
        run()  # the algorithm search, with its trial workspaces, before the runner's memory baseline
    return Workload(fn=run, error_rel=error_rel, figures=cpu_memory_info(run, device))


def reference_group(layer: ConvLayer, dtype: str, pass_: str) -> tuple:
    """What a layer's two memory formats share: the same input values in one dtype, hence one float64 reference."""
    return (SUITE, layer, dtype, pass_, SEED)


def make_case(layer: ConvLayer, dtype: str, memory_format: str, pass_: str) -> Case:
    """One conv case; its id is stable across runs and machines (nightly history keys on it)."""
    elements = sum(torch.Size(shape).numel() for shape in layer.shapes)
    return Case(
        suite=SUITE,
        id=f"{SUITE}/{layer.name}/{layer.text}/{dtype}/{memory_format}/{pass_}",
        params={"dtype": dtype, "layer": layer.name, "shape": layer.text, "memory_format": memory_format,
                "pass": pass_, "align": align_class(layer.cin, layer.cout)},
        build=partial(_build, layer, dtype, memory_format, pass_),
        flops=layer.forward_flops() * pass_factor(pass_),
        bytes=elements * DTYPES[dtype].itemsize * pass_factor(pass_),
        peak_dtype=dtype,
        tolerance=CONV_TOLERANCE[dtype],
        tf32=dtype == "tf32",
        reuse_group=reference_group(layer, dtype, pass_),
    )


def cases(profile: str) -> list[Case]:
    """Every conv case of a profile (the plugin filters by --bench-dtypes): each layer in every dtype, except in
    full, where float16 is at FLOAT16_LAYERS only; a layer's two memory formats follow each other, sharing their
    reference (reference_group)."""
    def dtypes(layer: ConvLayer) -> tuple[str, ...]:
        if profile == Profile.FULL and layer.name not in FLOAT16_LAYERS:
            return FULL_SWEEP_DTYPES
        return CONV_DTYPES

    return [make_case(layer, dtype, fmt, pass_) for layer in LAYERS[Profile(profile).sizes]
            for dtype in dtypes(layer) for pass_ in PASSES for fmt in FORMATS]
