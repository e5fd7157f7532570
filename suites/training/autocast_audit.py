"""What autocast actually ran: the dtype of every aten operation of one training step, against the recipe's rule.

A `TorchDispatchMode` sits below autograd and autocast, so it sees each operation after autocast has cast its
inputs, in the forward, in the backward (`torch._C._current_graph_task_id()` is set while the autograd engine
runs) and in the optimizer step. An operation "ran in" the dtype of its first floating-point output (the result
a kernel computes; a multi-output op such as SDPA returns its log-sum-exp in float32 beside a 16-bit result),
or of its first floating-point input when it returns none (the in-place `_foreach_` updates).

The recipe's rule, as the issue states it: matrix multiplications and convolutions (and the fused attention
kernels built on them) run in 16-bit, forward and backward; softmax, layer norm, reductions such as sum and the
loss run in float32 in the forward, where autocast decides (the backward mirrors the forward's dtypes, and a
reduction of 16-bit gradients there is not autocast's choice). Every breach is flagged; a matmul in float32 or a
softmax in 16-bit fails the audit (suites/training/numerics.py makes it a case).
`python -m suites.training.autocast_audit` prints the table.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from dataclasses import dataclass

import torch
from tabulate import tabulate
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from suites.core import devices
from suites.core.cases import Unsupported
from suites.core.profiles import Profile
from suites.training import model_spec
from suites.training.model_spec import ModelSpec
from suites.training.recipe import make_optimizer, make_step

AUTOCAST_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}
PRECISION = {"float16": "amp_fp16", "bfloat16": "amp_bf16"}
SIXTEEN_BIT = {"torch.float16", "torch.bfloat16"}

MATMUL_OPS = {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "convolution", "_convolution",
              "convolution_backward", "cudnn_convolution", "mkldnn_convolution", "conv2d"}
MATMUL_PREFIXES = ("_scaled_dot_product", "_flash_attention", "_efficient_attention", "_cudnn_attention")
SOFTMAX_OPS = {"_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax"}
FLOAT32_OPS = SOFTMAX_OPS | {
    "native_layer_norm", "layer_norm",
    "sum", "mean", "prod", "cumsum", "norm", "linalg_vector_norm", "var", "var_mean", "std", "logsumexp",
    "nll_loss_forward", "nll_loss2d_forward", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
    "binary_cross_entropy", "binary_cross_entropy_with_logits",
}


def is_matmul(op: str) -> bool:
    """A matrix multiplication, convolution or fused attention kernel (forward or backward)."""
    return op in MATMUL_OPS or op.startswith(MATMUL_PREFIXES)


@dataclass(frozen=True)
class OpCall:
    """One aten call as the recorder saw it."""

    phase: str  # forward, backward, step
    op: str
    ran_in: str | None
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass
class OpSummary:
    """One operation of one phase: how often it ran and in which dtypes."""

    phase: str
    op: str
    count: int
    ran_in: list[str]
    inputs: list[str]
    outputs: list[str]


def _float_dtypes(tree: object) -> list[str]:
    return [str(t.dtype) for t in tree_leaves(tree) if isinstance(t, torch.Tensor) and t.is_floating_point()]


class DtypeRecorder(TorchDispatchMode):
    """Records every aten computation (views and aliases left out) with its phase and dtypes."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.calls: list[OpCall] = []
        self._in_forward = False
        self._hooks = [model.register_forward_pre_hook(lambda *_: self._set_forward(True)),
                       model.register_forward_hook(lambda *_: self._set_forward(False))]

    def _set_forward(self, value: bool) -> None:
        self._in_forward = value

    def remove_hooks(self) -> None:
        for hook in self._hooks:
            hook.remove()

    def _phase(self) -> str:
        if torch._C._current_graph_task_id() >= 0:
            return "backward"
        return "forward" if self._in_forward else "step"

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func.namespace == "aten" and not func.is_view:
            inputs, outputs = _float_dtypes((args, kwargs)), _float_dtypes(out)
            ran_in = (outputs or inputs or [None])[0]
            self.calls.append(OpCall(self._phase(), func.overloadpacket.__name__, ran_in, tuple(sorted(set(inputs))),
                                     tuple(sorted(set(outputs)))))
        return out


def summarize(calls: list[OpCall]) -> list[OpSummary]:
    """One row per (phase, op) in order of first appearance, with the union of the dtypes seen."""
    rows: dict[tuple[str, str], OpSummary] = {}
    for call in calls:
        row = rows.setdefault((call.phase, call.op), OpSummary(call.phase, call.op, 0, [], [], []))
        row.count += 1
        for seen, new in ((row.ran_in, [call.ran_in] if call.ran_in else []), (row.inputs, call.inputs),
                          (row.outputs, call.outputs)):
            seen.extend(d for d in new if d not in seen)
    return list(rows.values())


@dataclass(frozen=True)
class Violation:
    """An operation that ran outside the rule, and the rule it broke."""

    phase: str
    op: str
    ran_in: str
    rule: str
    hard: bool  # a matmul in float32 or a softmax in 16-bit: the audit fails

    def __str__(self) -> str:
        return f"{self.phase} {self.op} ran in {self.ran_in.removeprefix('torch.')}; {self.rule}"


def violations(summary: list[OpSummary]) -> list[Violation]:
    """Every breach of the recipe's rule in the summary (see the module docstring for the rule)."""
    found = []
    for row in summary:
        for dtype in row.ran_in:
            if is_matmul(row.op) and row.phase in ("forward", "backward") and dtype not in SIXTEEN_BIT:
                found.append(Violation(row.phase, row.op, dtype, "matmuls and convolutions run in 16-bit", True))
            if row.op in FLOAT32_OPS and row.phase == "forward" and dtype != "torch.float32":
                found.append(Violation(row.phase, row.op, dtype, "softmax, layer norm, reductions and the loss run "
                                       "in float32", row.op in SOFTMAX_OPS))
    return found


MODELS = {Profile.QUICK: (ModelSpec("gpt", "tiny"), ModelSpec("cnn", "tiny")),
          Profile.FULL: (ModelSpec("gpt", "gpt2-124m"), ModelSpec("cnn", "resnet50"))}
BATCH = 2


def autocast_support(dtype: str, device: torch.device) -> str | None:
    """None when autocast on this device casts a matmul to `dtype`, else why not (torch disables it with a
    warning where the device type does not support the dtype)."""
    a = torch.randn(8, 8, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast(device.type, dtype=AUTOCAST_DTYPES[dtype]):
            got = (a @ a).dtype
    if got != AUTOCAST_DTYPES[dtype]:
        return f"torch {torch.__version__} autocast on {device.type} does not run matmuls in {dtype}"
    return None


@dataclass
class Audit:
    """The per-operation summary of one step and the rule's breaches in it."""

    summary: list[OpSummary]
    violations: list[Violation]

    @property
    def hard(self) -> list[Violation]:
        return [v for v in self.violations if v.hard]


class Auditor:
    """A model, its optimizer and a batch, stepped once unrecorded (which creates the optimizer state) so that
    each `audit()` records a step like every later one of a training run."""

    def __init__(self, spec: ModelSpec, dtype: str, device: torch.device, batch: int = BATCH) -> None:
        reason = autocast_support(dtype, device)
        if reason:
            raise Unsupported(reason)
        self.model = spec.build(device)
        self.step = make_step(self.model, make_optimizer(self.model), PRECISION[dtype], device=device)
        self.inputs, self.targets = spec.batch(batch, device)
        self.step(self.inputs, self.targets)

    def audit(self) -> Audit:
        recorder = DtypeRecorder(self.model)
        try:
            with recorder:
                self.step(self.inputs, self.targets)
        finally:
            recorder.remove_hooks()
        summary = summarize(recorder.calls)
        return Audit(summary, violations(summary))


def table(audit: Audit, fmt: str = "github") -> str:
    """The per-operation summary as a text table, with a `flag` column on the rows that breach the rule."""
    flagged = {(v.phase, v.op) for v in audit.violations}

    def short(dtypes: list[str]) -> str:
        return ", ".join(d.removeprefix("torch.") for d in dtypes)

    rows = [{"phase": r.phase, "op": r.op, "count": r.count, "ran in": short(r.ran_in), "inputs": short(r.inputs),
             "flag": "VIOLATION" if (r.phase, r.op) in flagged else ""} for r in audit.summary]
    return tabulate(rows, headers="keys", tablefmt=fmt)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suites.training.autocast_audit",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto (default: cuda when available), cpu, cuda or cuda:N")
    parser.add_argument("--dtype", default="bfloat16", choices=list(AUTOCAST_DTYPES))
    parser.add_argument("--model", default="gpt-tiny", help="gpt-tiny, cnn-tiny, gpt-small, gpt2-124m, resnet50")
    args = parser.parse_args(argv)
    try:
        audit = Auditor(model_spec.parse(args.model), args.dtype, devices.resolve(args.device)).audit()
    except (ValueError, Unsupported) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(table(audit))
    print("\nviolations:" if audit.violations else "\nno violations of the rule")
    for v in audit.violations:
        print(f"- {v}{' (fails the audit)' if v.hard else ''}")
    return 1 if audit.hard else 0


if __name__ == "__main__":
    sys.exit(main())
