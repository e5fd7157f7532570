"""Bytes per parameter of AdamW training, measured from the real tensors after a step, beside the analytic budget.

The rule quoted for mixed-precision AdamW is 16-18 bytes per parameter. Where it comes from depends on the
layout. With torch.autocast the parameters stay float32: the float32 weights ARE the master copy (autocast only
casts them to 16 bits on the fly, inside the forward), so the budget is 4 (weights) + 4 (float32 gradients) +
4 + 4 (AdamW's two moments) = 16, and no separate master copy exists. The "classic" layout (Megatron, apex O2)
keeps 16-bit weights in the model and a float32 master copy in the optimizer: 2 (weights) + 2 (gradients) + 4
(master) + 4 + 4 (moments) = 16, +2 to 4 where a float32 gradient buffer is kept, hence 16-18 (or 20).
Activations come on top and scale with batch and sequence; they are reported separately as the tensors autograd
saves for backward (`saved_activation_bytes`), which is device-independent, and the allocator's peak on CUDA.

`python -m suites.training.memory_budget --model tiny` measures a real model and prints the table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch import nn

RULE_BYTES_PER_PARAM = (16, 18)
PARTS = ("weights", "grads", "master", "moments", "other")


@dataclass(frozen=True)
class MemoryBudget:
    """Bytes held by each part of the training state, counted once per storage (tied weights count once)."""

    n_params: int
    weights: int
    grads: int
    master: int
    moments: int
    other: int  # optimizer step counters and any other state tensors

    @property
    def total(self) -> int:
        return self.weights + self.grads + self.master + self.moments + self.other

    def per_param(self) -> dict[str, float]:
        """Bytes per parameter of each part and `total`."""
        parts = {name: getattr(self, name) / self.n_params for name in PARTS}
        return parts | {"total": self.total / self.n_params}

    def figures(self) -> dict[str, float]:
        """The stable fields (docs/results.md): `bytes_per_param` and one `bytes_per_param_<part>` per part."""
        per = self.per_param()
        return {"bytes_per_param": per["total"]} | {f"bytes_per_param_{name}": per[name] for name in PARTS}


def _unique_bytes(tensors: Iterable[torch.Tensor]) -> int:
    seen: set[tuple[str, int]] = set()
    total = 0
    for t in tensors:
        if hasattr(t, "to_local"):  # a DTensor (FSDP2): this rank holds only its local shard
            t = t.to_local()
        key = (str(t.device), t.untyped_storage().data_ptr())
        if key not in seen:
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


def _state_tensors(optimizer: torch.optim.Optimizer) -> dict[str, list[torch.Tensor]]:
    """The optimizer's state tensors by part: AdamW's exp_avg/exp_avg_sq are the moments, `master` the copy."""
    parts: dict[str, list[torch.Tensor]] = {"master": [], "moments": [], "other": []}
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                part = "moments" if key in ("exp_avg", "exp_avg_sq") else "master" if key == "master" else "other"
                parts[part].append(value)
    return parts


def measure(model: nn.Module, optimizer: torch.optim.Optimizer) -> MemoryBudget:
    """Count the real tensors after a step (before the next zero_grad): parameters, their gradients, and every
    tensor in the optimizer's state. An optimizer that keeps its state elsewhere (`MasterWeightsAdamW`) exposes
    it through `state` as well."""
    params = list(model.parameters())
    state = _state_tensors(optimizer)
    return MemoryBudget(
        n_params=sum(p.numel() for p in {id(p): p for p in params}.values()),
        weights=_unique_bytes(params),
        grads=_unique_bytes(p.grad for p in params if p.grad is not None),
        master=_unique_bytes(state["master"]),
        moments=_unique_bytes(state["moments"]),
        other=_unique_bytes(state["other"]),
    )


def analytic(master_weights: bool) -> dict[str, float]:
    """The textbook bytes per parameter of AdamW mixed precision for the two layouts (see the module docstring)."""
    if master_weights:
        parts = {"weights": 2, "grads": 2, "master": 4, "moments": 8, "other": 0}
    else:
        parts = {"weights": 4, "grads": 4, "master": 0, "moments": 8, "other": 0}
    return parts | {"total": sum(parts.values())}


def saved_activation_bytes(forward: Callable[[], object]) -> int:
    """Bytes of the tensors autograd keeps for backward during `forward()` (activations, not parameters):
    what stays alive between forward and backward and what activation checkpointing shrinks."""
    saved: list[torch.Tensor] = []
    param_ptrs: set[int] = set()

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = forward()
    for t in saved:
        if isinstance(t, nn.Parameter):
            param_ptrs.add(t.untyped_storage().data_ptr())
    del out
    return _unique_bytes(t for t in saved if t.untyped_storage().data_ptr() not in param_ptrs)


def table(rows: dict[str, MemoryBudget], layouts: dict[str, bool]) -> list[dict]:
    """One row per layout: measured bytes/param per part, the analytic figure in brackets, and the rule."""
    out = []
    for name, budget in rows.items():
        per, book = budget.per_param(), analytic(layouts[name])
        row = {"layout": name, "params": budget.n_params}
        row |= {part: f"{per[part]:.2f} ({book[part]:g})" for part in (*PARTS, "total")}
        row["rule"] = "{}-{}".format(*RULE_BYTES_PER_PARAM)
        out.append(row)
    return out
