"""The suites' CUDA calls checked against torch's own shape, dtype and layout rules, without a GPU.

`FakeTensorMode` runs an op's meta function on fake tensors: a tensor made on "cuda" inside the mode is a fake
CUDA tensor even on a CPU build, and `torch._scaled_mm`'s meta function enforces what cuBLASLt does (float8
operands, A row-major and B column-major, K and N multiples of 16, float32 scales of a shape that names the
scaling), so the float8 gemm the matmul suite and the achievable search time is checked here as the GPU would
check it. The inputs are drawn on the (fake) device, the search's way: a fake CPU tensor cannot be copied to a
fake CUDA one on a CPU build; the call checked is the same.

What a CPU build cannot check this way, and still needs a GPU: which SDPA backend takes a case (torch's backend
rules are compiled only into CUDA builds; here F.scaled_dot_product_attention decomposes to math whatever
sdpa_kernel forces), and the memory format cuDNN gives a convolution's output (here the conv's fake output is
always contiguous).
"""

from __future__ import annotations

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

from suites.core import achievable, gemm, profiles
from suites.core.cases import Unsupported
from suites.ops import matmul

CUDA = torch.device("cuda")


def fp8_shapes() -> list[tuple[int, int, int]]:
    """Every shape the matmul suite times in float8, both profiles, and the K=33 of a shape rule's edge."""
    return sorted({(s.m, s.n, s.k) for shapes in matmul.SHAPES.values() for s in shapes} | {(64, 48, 33)})


@pytest.mark.parametrize("shape", fp8_shapes(), ids=lambda s: "x".join(map(str, s)))
def test_the_float8_gemm_is_built_or_refused_as_torch_scaled_mm_rules_say(shape):
    m, n, k = shape
    with FakeTensorMode():
        if k % 16 == 0 and n % 16 == 0:
            out = gemm._fp8(m, n, k, CUDA, seeded=False).fn()
            assert (out.shape, out.dtype, out.device.type) == ((m, n), torch.bfloat16, "cuda")
        else:  # recorded by the suite as unsupported with torch's reason (2.6 spells it "divisble"), not an error
            with pytest.raises(Unsupported, match=rf"^torch\._scaled_mm rejects {m}x{n}x{k}: .*divisi?ble by 16"):
                gemm._fp8(m, n, k, CUDA, seeded=False)


class Calls(TorchDispatchMode):
    """Records the aten calls made under it, each with its arguments by name: what the gemm asks of the kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, dict]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        names = [argument.name for argument in func._schema.arguments]
        self.calls.append((str(func), dict(zip(names, args, strict=False)) | dict(kwargs or {})))
        return func(*args, **(kwargs or {}))


def test_the_float8_gemm_asks_for_accurate_accumulation_as_its_cases_record():
    with FakeTensorMode():
        product = gemm._fp8(256, 256, 256, CUDA, seeded=False)
        with Calls() as seen:
            product.fn()
    scaled = [kwargs for name, kwargs in seen.calls if name.startswith("aten._scaled_mm")]
    # the dispatcher drops an argument equal to its default: absent is False here
    assert len(scaled) == 1 and scaled[0].get("use_fast_accum", False) is False
    assert matmul.accumulation_info("float8_e4m3fn") == {"fast_accum": False}  # what the case's extra_info says
    assert matmul.accumulation_info("bfloat16") == {}


def test_a_row_major_b_or_float64_scales_are_refused_as_on_the_gpu():
    """The rules the suite's layout and scales satisfy are real checks here: break either and torch refuses."""
    with FakeTensorMode():
        a = torch.randn(64, 32, device=CUDA).to(torch.float8_e4m3fn)
        b_rows = torch.randn(32, 48, device=CUDA).to(torch.float8_e4m3fn)
        b_cols = torch.randn(48, 32, device=CUDA).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device=CUDA)
        with pytest.raises(RuntimeError, match=r"col_major|column.major"):
            torch._scaled_mm(a, b_rows, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        with pytest.raises(RuntimeError, match=r"float|fp32"):
            torch._scaled_mm(a, b_cols, scale_a=one.double(), scale_b=one, out_dtype=torch.bfloat16)
        assert torch._scaled_mm(a, b_cols, scale_a=one, scale_b=one, out_dtype=torch.bfloat16).shape == (64, 48)


class ShapeClock:
    """Half a second per shape measured."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("profile", ["quick", "full"])
def test_the_float8_search_on_cuda_tries_only_shapes_torch_accepts(profile):
    """The CUDA plans' grid and refinement steps are multiples of 16: every float8 shape the search tries must be
    one _scaled_mm takes, or the search silently loses points (a refused shape counts as 0 FLOP/s)."""
    plan = profiles.search_plan("cuda", profile)
    clock, refused, tried = ShapeClock(), [], []

    def rate(shape):  # the real float8 gemm on fake CUDA tensors, and a hill of rates for the search to climb
        clock.now += 0.5
        tried.append(shape)
        try:
            with FakeTensorMode():
                gemm._fp8(*shape, CUDA, seeded=False).fn()
        except Unsupported as exc:
            refused.append(str(exc))
            raise
        return 1e15 / (1 + sum(abs(s - b) for s, b in zip(shape, (4000, 7000, 5000), strict=True)) / 1024)

    found = achievable.search_gemm("float8_e4m3fn", torch.device("cpu"), plan, clock, rate)
    assert len(tried) > len(plan.sizes) and found.value > 0  # the grid and some refinement ran
    assert refused == []
