"""The two passes a layer suite times (forward alone; forward and backward) and their check against float64.

`fwd` runs on inputs that do not require grad, as inference does: nothing is saved for a backward pass. `fwd_bwd`
makes the inputs leaves that require grad and takes the gradient of every input for a fixed random grad_output
through `torch.autograd.grad`, so nothing accumulates in `.grad` from call to call. The float64 check compares the
output and, for `fwd_bwd`, every gradient: the case's error is the worst of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from suites.core import reuse
from suites.core.precision import relative_error

PASSES = ("fwd", "fwd_bwd")


def seeded_inputs(shapes: Sequence[Sequence[int]], seed: int, device: torch.device,
                  dtype: torch.dtype) -> list[torch.Tensor]:
    """Standard-normal values drawn on the CPU from a generator seeded `seed`, one tensor per shape in order, so
    every device sees the same inputs; the draws are kept for the next case with the same shapes
    (suites/core/reuse.py), each case gets its own copy on its device. On the meta device (FLOP counting, no data)
    only the shapes and dtype."""
    if device.type == "meta":
        return [torch.empty(tuple(shape), dtype=dtype, device=device) for shape in shapes]
    return [t.to(device=device, dtype=dtype, copy=True) for t in reuse.standard_normals(shapes, seed)]


def run_pass(forward: Callable[..., torch.Tensor], inputs: Sequence[torch.Tensor],
             grad_out: torch.Tensor | None) -> list[torch.Tensor]:
    """[forward(*inputs)], followed by the gradient of every input when `grad_out` is given (the fwd_bwd pass)."""
    out = forward(*inputs)
    if grad_out is None:
        return [out]
    return [out, *torch.autograd.grad(out, tuple(inputs), grad_out)]


def float64_leaves(tensors: Sequence[torch.Tensor], requires_grad: bool) -> list[torch.Tensor]:
    """Float64 copies of the inputs, as new leaves, for the reference pass."""
    return [t.detach().double().requires_grad_(requires_grad) for t in tensors]


def worst_error(outputs: Sequence[torch.Tensor], references: Sequence[torch.Tensor]) -> float:
    """The largest relative error of the output and the gradients against their float64 references."""
    return max(relative_error(out.detach(), ref.detach()) for out, ref in zip(outputs, references, strict=True))
