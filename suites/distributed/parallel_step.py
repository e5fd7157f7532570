"""The training step on several ranks: DDP and FSDP2 levers against the same step on one rank alone.

Every rank trains the GPT of the profile on its own batches of the profile's size (weak scaling: N ranks see N
batches per step). The reference is the `local` case: the recipe's step with no wrapper, run on every rank at
once with nothing shared, which is what one process alone does on its own GPU. From it:

- `scaling_efficiency` = throughput of N ranks / (N x one rank's) = local step time / distributed step time,
  both the slowest rank's median (present only when the run measured the local case before);
- `bytes_per_param` = bytes of weights, gradients and optimizer state that this rank holds, counted from the
  real tensors (the local shards of FSDP's DTensors, DDP's gradient buckets) over the model's parameter count:
  16 for AdamW with float32 weights on one rank, 16 + 4 under DDP (the buckets beside the gradients, unless the
  gradients are views into them), 16 / N under FSDP.

DDP's levers: the bucket size of its gradient all-reduce, gradients as views into the buckets (no copy, 4 bytes
per parameter less), and `no_sync` on all but the last micro-batch of an accumulated step (one all-reduce per
step instead of one per micro-batch). FSDP2's (`fully_shard` per block, then the root): the param and reduce
dtypes of its MixedPrecisionPolicy (with bfloat16 params it casts the weights itself, so those steps run without
autocast) and resharding after forward (less memory, one more all-gather in backward).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel

from suites.core.cases import Case, Unsupported, Workload
from suites.core.profiles import Profile
from suites.distributed import group
from suites.training import param_bytes
from suites.training.data import token_batches
from suites.training.models import GPT, GPTConfig
from suites.training.recipe import PEAK_DTYPE, make_optimizer, make_step
from suites.training.train_step import PROFILES, StepSizes

SUITE = "train_step"
SEED = 0


@dataclass(frozen=True)
class Setup:
    """One distributed variant. DDP: bucket size in MiB, gradients as bucket views, no_sync while accumulating.
    FSDP: the mixed-precision policy's param and reduce dtypes, and resharding after forward."""

    strategy: str  # local, ddp, fsdp
    accum: int = 1
    bucket_mb: float = 25.0  # DDP's default
    bucket_view: bool = False
    no_sync: bool = False
    param_dtype: str = "float32"
    reduce_dtype: str = "float32"
    reshard: bool = True

    @property
    def precision(self) -> str:
        """Autocast to bfloat16 as the single-process baseline does, except where FSDP casts the weights."""
        return "fp32" if self.strategy == "fsdp" and self.param_dtype != "float32" else "amp_bf16"


# Small buckets for the quick profile's tiny GPT (0.3 MiB of gradients), DDP's 1 MiB first bucket for GPT-2.
SMALL_BUCKET_MB = {Profile.QUICK: 0.05, Profile.FULL: 1.0}


def setups(profile: str) -> list[tuple[str, str, Setup]]:
    """(lever, label, setup): the local reference, DDP's and FSDP's baselines, and one lever at a time."""
    small = SMALL_BUCKET_MB[Profile(profile).sizes]
    return [
        ("baseline", "local", Setup("local")),
        ("baseline", "local-accum4", Setup("local", accum=4)),
        ("baseline", "ddp", Setup("ddp")),
        ("bucket_mb", f"ddp-bucket{small:g}mb", Setup("ddp", bucket_mb=small)),
        ("bucket_view", "ddp-bucket-view", Setup("ddp", bucket_view=True)),
        ("accum", "ddp-accum4", Setup("ddp", accum=4)),
        ("no_sync", "ddp-accum4-no_sync", Setup("ddp", accum=4, no_sync=True)),
        ("baseline", "fsdp", Setup("fsdp")),
        ("param_dtype", "fsdp-bf16params", Setup("fsdp", param_dtype="bfloat16")),
        ("reduce_dtype", "fsdp-bf16params-bf16reduce", Setup("fsdp", param_dtype="bfloat16", reduce_dtype="bfloat16")),
        ("reshard", "fsdp-no-reshard", Setup("fsdp", reshard=False)),
    ]


# Slowest-rank median step time of the local reference, by (model, accum), for the scaling efficiency.
_LOCAL_STEP_S: dict[tuple[str, int], float] = {}


def fsdp_unsupported(device: torch.device) -> str | None:
    """Why FSDP2 cannot run here, or None. It orders its collectives by events recorded on the device's streams;
    on the CPU those are torch.cpu.Stream's, which have no record_event in torch 2.6 (FSDP2 then fails inside the
    step with an AttributeError); 2.11 and 2.13 have it. Asked of the installed torch, not of its version."""
    if device.type == "cpu" and not hasattr(torch.cpu.Stream, "record_event"):
        return f"FSDP2 on the CPU needs torch.cpu.Stream.record_event, which torch {torch.__version__} lacks"
    return None


def wrap(model: nn.Module, setup: Setup, device: torch.device) -> nn.Module:
    """The model under the setup's strategy (the local reference is the model itself)."""
    if setup.strategy == "ddp":
        return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                       bucket_cap_mb=setup.bucket_mb, gradient_as_bucket_view=setup.bucket_view)
    if setup.strategy == "fsdp":
        if reason := fsdp_unsupported(device):
            raise Unsupported(reason)
        dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16}
        policy = MixedPrecisionPolicy(param_dtype=dtypes[setup.param_dtype], reduce_dtype=dtypes[setup.reduce_dtype])
        for block in model.blocks:
            fully_shard(block, mp_policy=policy, reshard_after_forward=setup.reshard)
        return fully_shard(model, mp_policy=policy, reshard_after_forward=setup.reshard)
    return model


def ddp_bucket_bytes(model: nn.Module) -> int:
    """Bytes of DDP's gradient buckets, from its own logging data (the reducer's bucket sizes)."""
    sizes = model._get_ddp_logging_data().get("bucket_sizes", "")
    return sum(int(s) for s in str(sizes).split(",") if s.strip())


def memory_per_rank(model: nn.Module, optimizer: torch.optim.Optimizer, setup: Setup, n_params: int) -> dict:
    """Bytes per parameter this rank holds after a step, from its tensors (FSDP: the local shards)."""
    budget = param_bytes.measure(model, optimizer)
    info = budget.figures()
    if setup.strategy == "ddp" and not setup.bucket_view:  # the buckets are a second copy of the gradients
        buckets = ddp_bucket_bytes(model)
        info["bytes_per_param_buckets"] = buckets / n_params
        info["bytes_per_param"] += buckets / n_params
    return info


def _rates(key: tuple[str, int], setup: Setup, tokens: int, n: int) -> Callable[[float, float | None], dict]:
    """Throughput of all ranks and of one from the slowest rank's median step; the scaling efficiency."""

    def rates(median_s: float, _peak: float | None) -> dict:
        out = {"step_wall_s": median_s, "tokens_per_s": n * tokens / median_s,
               "tokens_per_s_per_rank": tokens / median_s}
        if setup.strategy == "local":
            _LOCAL_STEP_S[key] = median_s
        elif key in _LOCAL_STEP_S:
            out["scaling_efficiency"] = _LOCAL_STEP_S[key] / median_s
        return out

    return rates


def _build(profile: StepSizes, setup: Setup) -> Callable[[torch.device], Workload]:
    def build(device: torch.device) -> Workload:
        rank, n = group.require()
        config = GPTConfig.preset(profile.gpt, padded=True)
        torch.manual_seed(SEED)  # the same initial weights on every rank, as DDP requires
        model = GPT(config).to(device)
        n_params = model.n_params()
        wrapped = wrap(model, setup, device)
        optimizer = make_optimizer(wrapped, lr=profile.lr)
        step = make_step(wrapped, optimizer, setup.precision, device=device, accum=setup.accum)
        if setup.no_sync:
            step.no_sync = wrapped.no_sync
        raw_vocab = GPTConfig.preset(profile.gpt).vocab_size
        batches = token_batches(raw_vocab, profile.gpt_batch, config.block_size, 2, SEED + 1000 * rank, device)
        step(*batches[0])
        info = {"strategy": setup.strategy, "n_params": n_params, "tokens_per_step_per_rank":
                profile.gpt_batch * config.block_size, "world_size": n}
        info |= memory_per_rank(wrapped, optimizer, setup, n_params)
        turn = itertools.cycle(batches)
        return Workload(fn=lambda: step(*next(turn)), figures=info,
                        rates=_rates((config.name, setup.accum), setup, profile.gpt_batch * config.block_size, n))

    return build


def _on_off(flag: bool) -> str:
    return "on" if flag else "off"


def params(model: str, lever: str, setup: Setup) -> dict[str, str]:
    """The case's axes; a strategy's levers only where they apply (absent, not a placeholder, elsewhere)."""
    out = {"model": model, "lever": lever, "strategy": setup.strategy, "precision": setup.precision,
           "dtype": PEAK_DTYPE[setup.precision], "accum": str(setup.accum)}
    if setup.strategy == "ddp":
        out |= {"bucket_mb": f"{setup.bucket_mb:g}", "bucket_view": _on_off(setup.bucket_view),
                "no_sync": _on_off(setup.no_sync)}
    if setup.strategy == "fsdp":
        out |= {"param_dtype": setup.param_dtype, "reduce_dtype": setup.reduce_dtype, "reshard": _on_off(setup.reshard)}
    return out


def cases(profile: str) -> list[Case]:
    """The local reference first (the distributed cases' scaling efficiency divides by it), then DDP and FSDP."""
    prof = PROFILES[Profile(profile).sizes]
    model = GPTConfig.preset(prof.gpt).name
    return [Case(suite=SUITE, id=f"{SUITE}/{model}/distributed/{label}", params=params(model, lever, setup),
                 build=_build(prof, setup), peak_dtype=PEAK_DTYPE[setup.precision], kind="step")
            for lever, label, setup in setups(profile)]
