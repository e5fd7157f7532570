"""Your model, every lever: the training-step cases of suites.training.train_step for a model of the user's own.

The user gives a factory of the model, a factory of one batch and, when the model's output is not a loss, a loss
function. A dict batch is passed to the model as keyword arguments, a tuple or list as positional arguments, a
tensor as the one argument. The loss is the model's output when that is a scalar, else its `loss` (a dict's key,
a dataclass's or Hugging Face ModelOutput's field), else the one scalar tensor of a tuple output, else
`loss_fn(output, batch)`. The step, the levers, the seeded run, MFU from FlopCounterMode, memory and bytes per
parameter are train_step's own (`Trainee` and `workload`); this module only adapts the model and its batch.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from torch.utils._pytree import tree_leaves, tree_map

from suites.core.cases import Case, Unsupported, Workload
from suites.core.profiles import Profile
from suites.core.runner import first_line, is_oom
from suites.training.recipe import PEAK_DTYPE
from suites.training.train_step import (
    PROFILES,
    SEED,
    SUITE,
    Levers,
    StepSizes,
    Trainee,
    cycle,
    optimizer_for,
    refusal,
    support,
    workload,
)

Batch = torch.Tensor | tuple | list | dict
LossFn = Callable[[object, Batch], torch.Tensor]

ACCUM = 4  # micro-batches of the gradient-accumulation case: the batch's first dimension must divide by it

# (lever, label, settings): the baseline is the built-in suite's (amp_bf16, eager, foreach AdamW); each lever is
# varied alone from it; `all_on` turns on the levers that cost no memory and change no numerics.
VARIANTS: list[tuple[str, str, Levers]] = [
    ("baseline", "amp_bf16-eager", Levers()),
    *[("precision", p, Levers(precision=p)) for p in ("fp32", "tf32", "amp_fp16")],
    ("compile", "compiled", Levers(compile=True)),
    ("optimizer", "fused", Levers(optimizer="fused")),
    ("checkpoint", "blocks", Levers(checkpoint=True)),
    ("memory_format", "channels_last", Levers(memory_format="channels_last")),
    ("accum", str(ACCUM), Levers(accum=ACCUM)),
    ("sync", "item", Levers(sync=True)),
    ("all_on", "amp_bf16-compiled-fused", Levers(compile=True, optimizer="fused")),
]


class ModelError(Exception):
    """The user's model, batch or loss cannot be trained as given; the message is one line saying why."""


@contextlib.contextmanager
def returns(what: str) -> Iterator[None]:
    """Run the user's code, which must return: a `sys.exit()` in it (a script's habit) would end advise with the code
    it gives, 0 included, and no advice. It is a ModelError instead, naming what called it."""
    try:
        yield
    except SystemExit as exc:
        raise ModelError(f"{what} called sys.exit({exc.code!r}): it must return, not end the process") from None


def load(spec: str, what: str) -> Callable:
    """`package.module:attribute` -> the attribute; every way it can fail is a ModelError naming `what`."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ModelError(f"{what} {spec!r}: expected MODULE:NAME, e.g. my_model:make_model")
    try:
        with returns(f"{what} {spec!r}: importing {module_name}"):
            module = importlib.import_module(module_name)
    except ModelError:
        raise
    except Exception as exc:  # any error of the user's module while importing it is a usage error
        raise ModelError(f"{what} {spec!r}: cannot import {module_name} ({first_line(exc)})") from None
    found = module
    for part in attr.split("."):
        if not hasattr(found, part):
            raise ModelError(f"{what} {spec!r}: {module_name} has no {attr!r}")
        found = getattr(found, part)
    if not callable(found):
        raise ModelError(f"{what} {spec!r}: {attr} is a {type(found).__name__}, not a factory to call")
    return found


def call_model(model: nn.Module, batch: Batch) -> object:
    """A dict is keyword arguments, a tuple or list positional arguments, a tensor the one argument."""
    if isinstance(batch, dict):
        return model(**batch)
    if isinstance(batch, tuple | list):
        return model(*batch)
    return model(batch)


def _describe(output: object) -> str:
    if isinstance(output, torch.Tensor):
        return f"a tensor of shape {tuple(output.shape)}"
    if isinstance(output, Mapping):
        return f"a {type(output).__name__} with keys {', '.join(map(str, output)) or 'none'}"
    if isinstance(output, tuple | list):
        return f"a {type(output).__name__} of {len(output)}"
    return f"a {type(output).__name__}"


def output_loss(output: object) -> torch.Tensor:
    """The loss a model's output carries: a scalar output, a `loss` key or field, or a tuple's one scalar."""
    if isinstance(output, torch.Tensor) and output.dim() == 0:
        return output
    if isinstance(output, Mapping) and "loss" in output:
        loss = output["loss"]
    elif not isinstance(output, torch.Tensor | Mapping | tuple | list) and hasattr(output, "loss"):
        loss = output.loss
    elif isinstance(output, tuple | list) and len(
            scalars := [o for o in output if isinstance(o, torch.Tensor) and o.dim() == 0]) == 1:
        loss = scalars[0]
    else:
        raise ModelError(f"the model's output ({_describe(output)}) gives no loss: return a scalar loss, a dict or "
                         "dataclass with `loss`, or give a loss function (--loss MODULE:FN, loss_fn=)")
    if loss is None:
        raise ModelError("the model's output has loss=None: does the batch hold the labels (e.g. `labels`)?")
    return loss


def _checked_loss(loss: object) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1 or not loss.is_floating_point():
        raise ModelError(f"the loss is {_describe(loss)}, not one floating-point value")
    if not loss.requires_grad:
        raise ModelError("the loss does not depend on any parameter (requires_grad is False): nothing to train")
    return loss.reshape(())


def _tensors(batch: Batch) -> list[torch.Tensor]:
    return [t for t in tree_leaves(batch) if isinstance(t, torch.Tensor)]


def _on(tensor: torch.Tensor, device: torch.device) -> bool:
    return tensor.device.type == device.type and (device.index is None or tensor.device.index == device.index)


def repeated_blocks(model: nn.Module) -> list[nn.Module]:
    """The children of the model's largest nn.ModuleList or nn.Sequential of two or more modules (by parameters):
    the blocks activation checkpointing recomputes one at a time."""
    containers = [m for m in model.modules() if isinstance(m, nn.ModuleList | nn.Sequential) and len(m) >= 2]
    if not containers:
        return []
    largest = max(containers, key=lambda m: sum(p.numel() for p in m.parameters()))
    return list(largest)


def enable_checkpointing(model: nn.Module) -> None:
    """Recompute activations in backward: Hugging Face's own switch where the model has one (named
    `activation_checkpointing_enable` since transformers 5, `gradient_checkpointing_enable` before), else torch's
    non-reentrant checkpoint wrapper around each repeated block; Unsupported when the model has neither."""
    if getattr(model, "supports_gradient_checkpointing", False):
        if hasattr(model, "activation_checkpointing_enable"):
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            return
        if hasattr(model, "gradient_checkpointing_enable"):
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            return
    blocks = {id(b) for b in repeated_blocks(model)}
    if not blocks:
        raise Unsupported("no repeated blocks (an nn.ModuleList or nn.Sequential of two or more) to checkpoint")
    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: id(m) in blocks)


def has_convolutions(model: nn.Module) -> bool:
    return any(isinstance(m, nn.Conv2d) for m in model.modules())


def _channels_last(batch: Batch) -> Batch:
    return tree_map(lambda t: t.contiguous(memory_format=torch.channels_last)
                    if isinstance(t, torch.Tensor) and t.dim() == 4 else t, batch)


def _samples_and_tokens(batch: Batch) -> tuple[int, int | None]:
    """Samples: the first dimension of the batch's first tensor; tokens: the size of `input_ids` when present."""
    first = next(t for t in _tensors(batch) if t.dim())
    tokens = batch.get("input_ids") if isinstance(batch, dict) else None
    return first.shape[0], tokens.numel() if isinstance(tokens, torch.Tensor) else None


@dataclass(frozen=True)
class UserModel:
    """A model of the user's own put through the training-step levers.

    `model()` returns the nn.Module (built on the CPU; it is moved to the device); `batch(device)` (or
    `batch()`) returns one batch on that device, random from the global seed, which is set before each call;
    `loss_fn(output, batch)` is needed only when the output carries no loss. `combinations` are further
    (label, Levers) cases measured beside the one-lever sweep (python -m suites advise adds its recommendation).
    """

    model: Callable[[], nn.Module]
    batch: Callable[..., Batch]
    loss_fn: LossFn | None = None
    name: str = ""
    combinations: tuple[tuple[str, Levers], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.name:
            object.__setattr__(self, "name", getattr(self.model, "__name__", "model"))

    def loss_of(self, model: nn.Module, batch: Batch) -> torch.Tensor:
        """The loss of one (micro-)batch: train_step's `loss_of` for this model."""
        with returns("the model's forward or its loss function"):
            output = call_model(model, batch)
            return _checked_loss(self.loss_fn(output, batch) if self.loss_fn else output_loss(output))

    def build_model(self, device: torch.device) -> nn.Module:
        """The model from the suite's seed, in training mode, on the device."""
        torch.manual_seed(SEED)
        with returns("the model factory"):
            model = self.model()
        if not isinstance(model, nn.Module):
            raise ModelError(f"the model factory returned {_describe(model)}, not a torch.nn.Module")
        return model.train().to(device)

    def make_batch(self, device: torch.device, seed: int = SEED) -> Batch:
        """One batch from `seed`, checked to hold tensors on the device; a Mapping becomes a plain dict."""
        torch.manual_seed(seed)
        takes_device = bool(inspect.signature(self.batch).parameters)
        with returns("the batch factory"):
            batch = self.batch(device) if takes_device else self.batch()
        if isinstance(batch, Mapping):
            batch = dict(batch)
        if not isinstance(batch, torch.Tensor | tuple | list | dict):
            raise ModelError(f"the batch factory returned {_describe(batch)}; expected a tensor, a tuple or a dict")
        tensors = _tensors(batch)
        if not any(t.dim() for t in tensors):
            raise ModelError("the batch holds no tensor with a batch dimension")
        if (wrong := next((t for t in tensors if not _on(t, device)), None)) is not None:
            raise ModelError(f"the batch is on {wrong.device}, the run on {device}: make the batch factory put it "
                             "on the device it is given")
        return batch

    def probe(self, device: torch.device) -> None:
        """One float32 forward of the seeded batch: raises ModelError when the model, batch or loss is unusable.
        Running out of memory is not a usage error: the sweep records such cases as `oom`."""
        try:
            model = self.build_model(device)
            self.loss_of(model, self.make_batch(device))
        except (ModelError, Unsupported):
            raise
        except Exception as exc:  # the user's code failed: say where, in one line
            if is_oom(exc):
                return
            raise ModelError(f"the model's forward on its batch failed: {first_line(exc)}") from None

    def cases(self, profile: str) -> list[Case]:
        """The one-lever sweep of a profile (`quick`, `full`), then the `combinations`."""
        prof = PROFILES[Profile(profile).sizes]
        variants = [*VARIANTS, *(("combination", label, levers) for label, levers in self.combinations)]
        return [self._case(prof, *variant) for variant in variants]

    def _case(self, profile: StepSizes, lever: str, label: str, levers: Levers) -> Case:
        params = {"model": self.name, "lever": lever, "precision": levers.precision,
                  "dtype": PEAK_DTYPE[levers.precision], "compile": "on" if levers.compile else "off",
                  "optimizer": levers.optimizer, "checkpoint": "blocks" if levers.checkpoint else "off",
                  "accum": str(levers.accum), "sync": "item" if levers.sync else "none",
                  "memory_format": levers.memory_format}
        return Case(suite=SUITE, id=f"{SUITE}/{self.name}/{lever}/{label}", params=params,
                    build=functools.partial(self._build, profile, lever, levers),
                    refused_on=functools.partial(refusal, levers, lever, profile),
                    peak_dtype=PEAK_DTYPE[levers.precision], tf32=levers.precision == "tf32", kind="step")

    def _build(self, profile: StepSizes, lever: str, levers: Levers, device: torch.device) -> Workload:
        if reason := support(levers, lever, profile, device):  # the built-in cases' rules (tf32, compile on a CPU)
            raise Unsupported(reason)
        model = self.build_model(device)
        batches = [self.make_batch(device, SEED + i) for i in range(profile.steps)]
        if levers.checkpoint:
            enable_checkpointing(model)
        if levers.memory_format == "channels_last":
            if not has_convolutions(model):
                raise Unsupported("no 2-D convolutions to make channels-last")
            model = model.to(memory_format=torch.channels_last)
            batches = [_channels_last(b) for b in batches]
        samples, tokens = _samples_and_tokens(batches[0])
        if samples % levers.accum:
            raise Unsupported(f"a batch of {samples} samples does not split into {levers.accum} micro-batches")
        trainee = Trainee(model, optimizer_for(model, levers, profile.lr), [(b,) for b in batches],
                          cycle([(b,) for b in batches]), samples, tokens, None, loss_of=self.loss_of)
        return workload(trainee, levers, device)

