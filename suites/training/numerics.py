"""The numerics suite: checks that make the mixed-precision recipe's reasons visible, on CPU and GPU alike.

Each check is a case whose figures are in `extra_info` and whose timed work (`Workload.fn`) is the check itself:
- `format`: max, smallest normal, smallest subnormal and epsilon of float32, float16, bfloat16 and the two float8
  formats, from `torch.finfo` and verified by rounding probe values into the format (2 x max overflows, half the
  smallest subnormal rounds to zero, 1 + eps/2 rounds to 1, ...); a failed claim fails the case.
- `grad_underflow`: the fraction of a real GPT step's gradients that float16 flushes to zero, unscaled and at
  the loss scaler's 2^16; `activation_overflow`: large activations cast and squared in float16 vs bfloat16.
- `lost_updates`: a weight of 1.0 updated by 1e-4 for 1000 steps, stored in 16 bits or with an FP32 master copy.
- `loss_scaler`: torch.amp.GradScaler with an injected inf gradient: the skipped step, the halved scale, the growth.
- `parity`: the GPT trained from one seed in amp_bf16 and amp_fp16 against the same training in fp32 (the
  reference, trained once); a held-out loss after training off fp32's by more than PARITY_TOLERANCE of the
  progress fp32 made on it fails the case.
- `autocast_audit` (suites/training/autocast_audit.py): the dtype every aten operation of a training step ran in,
  checked against the recipe's rule; a breach is flagged in extra_info and printed, a matmul in float32 or a
  softmax in 16-bit fails the case.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

from suites.core.cases import Case, Workload
from suites.core.profiles import Profile
from suites.training import autocast_audit
from suites.training.model_spec import ModelSpec
from suites.training.recipe import make_optimizer, make_step, train

SUITE = "numerics"

FORMATS: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
}
NO_INF = {"float8_e4m3fn"}  # the "fn" format has NaN but no infinity: overflow is NaN or saturation

LOSS_SCALE = 2.0**16  # GradScaler's default initial scale
PARITY_TOLERANCE = 0.05  # |loss - loss_fp32| / (loss_before - loss_fp32) on the held-out batch


class CheckFailed(Exception):
    """A claim a numerics case checks did not hold; the runner records the case as an error with this message."""


@dataclass(frozen=True)
class Model:
    """The GPT a profile's model-based checks use: which one, its batch, and how many steps parity trains."""

    spec: ModelSpec
    batch: int
    parity_steps: int
    lr: float  # high enough that the parity steps move the loss well beyond the precisions' differences


# quick: a 2-core CPU without bfloat16 instructions (~80 ms per amp_bf16 step); full: seconds on a GPU.
MODELS = {Profile.QUICK: Model(ModelSpec("gpt", "tiny"), batch=2, parity_steps=5, lr=3e-3),
          Profile.FULL: Model(ModelSpec("gpt", "small"), batch=16, parity_steps=50, lr=1e-3)}


def _round_trip(values: list[float], dtype: torch.dtype, device: torch.device) -> list[float]:
    """Each float64 value rounded into `dtype` (one rounding, the cast's) and read back exactly."""
    return torch.tensor(values, dtype=torch.float64, device=device).to(dtype).double().tolist()


def _overflow_kind(value: float, fmax: float) -> str:
    if math.isinf(value):
        return "inf"
    if math.isnan(value):
        return "nan"
    return "saturates" if value == fmax else f"finite {value:g}"


def format_figures(name: str, device: torch.device) -> dict:
    """finfo's figures for a format, what probes rounded into it show, and the claims checked (all must hold)."""
    dtype = FORMATS[name]
    fi = torch.finfo(dtype)
    fmax, tiny, eps = fi.max, fi.smallest_normal, fi.eps
    sub = tiny * eps  # the subnormal spacing: finfo has no smallest_subnormal
    probes = {"max": fmax, "2max": 2 * fmax, "max_next": fmax * (1 + eps), "tiny": tiny,
              "tiny_step": tiny * (1 + eps), "half_tiny_step": tiny / 2 * (1 + eps), "sub": sub, "half_sub": sub / 2,
              "one_eps": 1 + eps, "one_half_eps": 1 + eps / 2}
    powers = [2.0**-k for k in range(160)]  # 1 down to 2^-159, below every format's smallest subnormal
    steps = [2.0**-k for k in range(1, 40)]
    got = _round_trip([*probes.values(), *powers, *(1 + s for s in steps)], dtype, device)
    r = dict(zip(probes, got, strict=False))
    rounded_powers, rounded_steps = got[len(probes):len(probes) + len(powers)], got[len(probes) + len(powers):]
    overflow = _overflow_kind(r["2max"], fmax)
    checks = {
        "max_round_trips": r["max"] == fmax,
        "2max_overflows": overflow in (("nan", "saturates") if name in NO_INF else ("inf",)),
        "above_max_overflows": not (math.isfinite(r["max_next"]) and r["max_next"] > fmax),
        "smallest_normal_keeps_precision": r["tiny"] == tiny and r["tiny_step"] == tiny * (1 + eps),
        "below_smallest_normal_loses_precision": r["half_tiny_step"] != tiny / 2 * (1 + eps),
        "smallest_subnormal_round_trips": r["sub"] == sub,
        "half_smallest_subnormal_is_zero": r["half_sub"] == 0.0,
        "one_plus_eps_differs": r["one_eps"] != 1.0,
        "one_plus_half_eps_is_one": r["one_half_eps"] == 1.0,
    }
    searched_sub = min(v for v in rounded_powers if v > 0)
    searched_eps = min(s for s, v in zip(steps, rounded_steps, strict=True) if v != 1.0)
    checks["searched_smallest_subnormal_matches"] = searched_sub == sub
    checks["searched_eps_matches"] = searched_eps == eps
    return {"max": fmax, "smallest_normal": tiny, "smallest_subnormal": sub, "eps": eps, "bits": fi.bits,
            "overflow": overflow, "searched_smallest_subnormal": searched_sub, "searched_eps": searched_eps,
            "checks": checks}


def _require(checks: dict[str, bool], what: str) -> None:
    failed = [name for name, ok in checks.items() if not ok]
    if failed:
        raise CheckFailed(f"{what}: {', '.join(failed)} did not hold")


def _build_format(name: str, device: torch.device) -> Workload:
    def check() -> dict:
        figures = format_figures(name, device)
        _require(figures["checks"], name)
        return figures

    return Workload(fn=check, figures=check())


def model_gradients(model: Model, device: torch.device) -> torch.Tensor:
    """Every parameter gradient of one float32 forward and backward of the GPT (before clipping), flattened."""
    gpt = model.spec.build(device)
    _, loss = gpt(*model.spec.batch(model.batch, device))
    loss.backward()
    return torch.cat([p.grad.flatten() for p in gpt.parameters()])


def underflow_figures(grads: torch.Tensor, scale: float = LOSS_SCALE) -> dict:
    """Of the gradients that are not zero in float32, the fractions float16 flushes to zero (unscaled and scaled),
    keeps only as subnormals, and overflows when scaled; bfloat16 unscaled for contrast."""
    g = grads[grads != 0].float()
    tiny16 = torch.finfo(torch.float16).smallest_normal

    def fraction(mask: torch.Tensor) -> float:
        return float(mask.float().mean())

    scaled = (g * scale).half()
    return {"nonzero_grads": g.numel(), "loss_scale": scale,
            "zero_frac_fp16": fraction(g.half() == 0), "zero_frac_fp16_scaled": fraction(scaled == 0),
            "subnormal_frac_fp16": fraction((g.abs() < tiny16) & (g.half() != 0)),
            "overflow_frac_fp16_scaled": fraction(scaled.isinf()), "zero_frac_bf16": fraction(g.bfloat16() == 0),
            "grad_abs_median": float(g.abs().median()), "grad_abs_min": float(g.abs().min())}


def _build_grad_underflow(model: Model, device: torch.device) -> Workload:
    grads = model_gradients(model, device)
    return Workload(fn=lambda: underflow_figures(grads), figures=underflow_figures(grads))


ACTIVATION_SCALES = (1e1, 1e2, 1e3, 1e4, 1e5, 1e6)


def overflow_figures(activations: torch.Tensor, dtype: torch.dtype) -> dict:
    """Per activation scale: the fraction of values that overflow when cast to `dtype`, and when squared in it
    (the x^2 of a layer norm's variance)."""
    cast = [(activations * s).to(dtype) for s in ACTIVATION_SCALES]
    return {"scales": list(ACTIVATION_SCALES),
            "cast_inf_frac": [float(x.isinf().float().mean()) for x in cast],
            "square_inf_frac": [float((x * x).isinf().float().mean()) for x in cast]}


def _build_activation_overflow(dtype: str, device: torch.device) -> Workload:
    activations = torch.randn(1 << 16, generator=torch.Generator().manual_seed(0)).to(device)
    return Workload(fn=lambda: overflow_figures(activations, FORMATS[dtype]),
                    figures=overflow_figures(activations, FORMATS[dtype]))


LOST_UPDATE = {"start": 1.0, "update": 1e-4, "steps": 1000}


def accumulate(dtype: torch.dtype, master: bool, device: torch.device, start: float = LOST_UPDATE["start"],
               update: float = LOST_UPDATE["update"], steps: int = LOST_UPDATE["steps"]) -> tuple[float, float]:
    """(weight in `dtype`, master) after `steps` additions of `update`: to the weight itself, or to a float32
    master copy that the 16-bit weight is re-cast from after each step (master = the weight when not `master`)."""
    weight = torch.full((1,), start, dtype=dtype, device=device)
    copy = weight.float() if master else weight
    for _ in range(steps):
        copy.add_(update)
        if master:
            weight.copy_(copy)
    return float(weight), float(copy)


def _build_lost_updates(dtype: str, master: bool, device: torch.device) -> Workload:
    expected = LOST_UPDATE["start"] + LOST_UPDATE["steps"] * LOST_UPDATE["update"]  # 1.1, in float64

    def run() -> dict:
        weight, kept = accumulate(FORMATS[dtype], master, device, **LOST_UPDATE)
        applied = (kept - LOST_UPDATE["start"]) / (expected - LOST_UPDATE["start"])
        return {"final_weight": weight, "final_master": kept if master else None, "expected": expected,
                "lost_fraction": 1 - applied, **LOST_UPDATE}

    return Workload(fn=run, figures=run())


@dataclass
class ScalerStep:
    """One step of the dynamic loss scaler: the scale before and after, and whether the update was skipped."""

    step: int
    injected_inf: bool
    scale_before: float
    scale_after: float
    skipped: bool


GROWTH_INTERVAL = 3  # clean steps before the scaler doubles its scale (GradScaler's default is 2000)


def scaler_steps(device: torch.device, growth_interval: int = GROWTH_INTERVAL, inject_at: int = 0) -> list[ScalerStep]:
    """A GradScaler run on a linear model with an inf gradient injected at step `inject_at`: that step must be
    skipped and the scale halved; `growth_interval` clean steps later the scale doubles."""
    gen = torch.Generator().manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(16, generator=gen).to(device))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scaler = torch.amp.GradScaler(device.type, init_scale=LOSS_SCALE, growth_factor=2.0, backoff_factor=0.5,
                                  growth_interval=growth_interval)
    records = []
    for step in range(inject_at + growth_interval + 1):
        optimizer.zero_grad(set_to_none=True)
        loss = (weight * torch.randn(16, generator=gen).to(device)).sum()
        scaler.scale(loss).backward()
        if step == inject_at:
            weight.grad[0] = math.inf
        before, scale = weight.detach().clone(), scaler.get_scale()
        scaler.step(optimizer)
        scaler.update()
        records.append(ScalerStep(step, step == inject_at, scale, scaler.get_scale(),
                                  bool(torch.equal(before, weight.detach()))))
    return records


def _build_loss_scaler(device: torch.device) -> Workload:
    def run() -> dict:
        steps = scaler_steps(device)
        return {"growth_interval": GROWTH_INTERVAL, "steps": [asdict(s) for s in steps],
                "scale_history": [steps[0].scale_before] + [s.scale_after for s in steps],
                "skipped_steps": [s.step for s in steps if s.skipped]}

    return Workload(fn=run, figures=run())


EVAL_SEED = 10_000  # the held-out batch every parity run is evaluated on


@dataclass(frozen=True)
class ParityRun:
    """A parity training run: the float32 loss of a held-out batch before and after, the training losses, and
    the steps the loss scaler skipped."""

    eval_before: float
    eval_after: float
    train_losses: tuple[float, ...]
    skipped_steps: int


def _eval_loss(model: torch.nn.Module, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
    with torch.no_grad():
        return float(model(*batch)[1])


def parity_run(model: Model, precision: str, device: torch.device) -> ParityRun:
    """`model.parity_steps` recipe steps from the spec's seed, each on a batch of its own; the held-out batch
    is evaluated in float32 (no autocast), so only the training's precision differs between runs."""
    gpt = model.spec.build(device)
    held_out = model.spec.batch(model.batch, device, EVAL_SEED)
    before = _eval_loss(gpt, held_out)
    step = make_step(gpt, make_optimizer(gpt, lr=model.lr), precision, device=device)
    run = train(step, [model.spec.batch(model.batch, device, seed) for seed in range(model.parity_steps)])
    return ParityRun(before, _eval_loss(gpt, held_out), tuple(run.losses), run.skipped_steps)


@functools.cache
def _fp32_run(model: Model, device: torch.device) -> ParityRun:
    """The fp32 reference every parity case compares with, trained once per run and device."""
    return parity_run(model, "fp32", device)


def parity_figures(run: ParityRun, reference: ParityRun) -> dict:
    """Held-out loss after training against fp32's, relative to the progress fp32 made on it."""
    progress = reference.eval_before - reference.eval_after
    gap = abs(run.eval_after - reference.eval_after)
    return {"loss": run.eval_after, "loss_fp32": reference.eval_after, "loss_initial": reference.eval_before,
            "train_loss_last": run.train_losses[-1], "steps": len(run.train_losses),
            "scaler_skipped_steps": run.skipped_steps, "loss_rel_diff": gap / abs(reference.eval_after),
            "parity_rel": gap / progress if progress > 0 else math.inf, "parity_tolerance": PARITY_TOLERANCE}


def _build_parity(model: Model, precision: str, device: torch.device) -> Workload:
    reference = _fp32_run(model, device)

    def run() -> dict:
        figures = parity_figures(parity_run(model, precision, device), reference)
        if not figures["parity_rel"] <= PARITY_TOLERANCE:
            raise CheckFailed(f"{precision}: held-out loss {figures['loss']:.5g} vs fp32's {figures['loss_fp32']:.5g} "
                              f"is {figures['parity_rel']:.1%} of fp32's progress (tolerance {PARITY_TOLERANCE:.0%})")
        return figures

    return Workload(fn=run, figures=run())


class AutocastAuditWarning(UserWarning):
    """An operation ran outside the recipe's autocast rule; pytest prints it in its warnings summary."""


def _audit_figures(auditor: autocast_audit.Auditor, model: str, dtype: str) -> dict:
    """The audit's table and flags for extra_info; every flag is printed, a hard one fails the case."""
    audit = auditor.audit()
    for violation in audit.violations:
        warnings.warn(f"autocast {dtype} {model}: {violation}", AutocastAuditWarning, stacklevel=2)
    if audit.hard:
        raise CheckFailed(f"autocast {dtype} {model}: " + "; ".join(map(str, audit.hard)))
    return {"ops": [asdict(row) for row in audit.summary], "violations": [str(v) for v in audit.violations],
            "violation_count": len(audit.violations)}


def _build_audit(spec: ModelSpec, dtype: str, device: torch.device) -> Workload:
    auditor = autocast_audit.Auditor(spec, dtype, device)
    return Workload(fn=lambda: _audit_figures(auditor, spec.name, dtype),
                    figures=_audit_figures(auditor, spec.name, dtype))


def _case(check: str, variant: str, params: dict[str, str], build: Callable[[torch.device], Workload]) -> Case:
    return Case(suite=SUITE, id=f"{SUITE}/{check}/{variant}", params={"check": check, **params}, build=build,
                kind="check")


def cases(profile: str) -> list[Case]:
    """Every numerics case of a profile; the model-based checks use MODELS[profile]."""
    model = MODELS[Profile(profile).sizes]
    found = [_case("format", name, {"dtype": name}, functools.partial(_build_format, name)) for name in FORMATS]
    found.append(_case("grad_underflow", model.spec.name, {"model": model.spec.name, "dtype": "float16"},
                       functools.partial(_build_grad_underflow, model)))
    found += [_case("activation_overflow", dtype, {"dtype": dtype},
                    functools.partial(_build_activation_overflow, dtype)) for dtype in ("float16", "bfloat16")]
    for dtype, master in (("float16", False), ("bfloat16", False), ("float16", True), ("bfloat16", True)):
        variant = f"{dtype}+fp32_master" if master else dtype
        found.append(_case("lost_updates", variant, {"dtype": dtype, "master": "float32" if master else "none"},
                           functools.partial(_build_lost_updates, dtype, master)))
    found.append(_case("loss_scaler", "inject_inf", {}, _build_loss_scaler))
    # fp32 is the reference each parity case trains once (its figures are in both cases' extra_info)
    found += [_case("parity", f"{model.spec.name}/{precision}", {"model": model.spec.name, "precision": precision},
                    functools.partial(_build_parity, model, precision)) for precision in ("amp_bf16", "amp_fp16")]
    found += [_case("autocast_audit", f"{spec.name}/{dtype}", {"model": spec.name, "dtype": dtype},
                    functools.partial(_build_audit, spec, dtype))
              for spec in autocast_audit.MODELS[Profile(profile).sizes] for dtype in autocast_audit.AUTOCAST_DTYPES]
    return found
