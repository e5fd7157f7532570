"""The numerics checks: format figures verified by rounding, lost updates, the loss scaler, gradient underflow,
activation overflow and parity, run for real on the CPU (each claim can fail)."""

from __future__ import annotations

import math

import pytest
import torch

from suites.core.runner import execute
from suites.harness.bench_session import SMOKE
from suites.training import numerics
from suites.training.numerics import (
    accumulate,
    format_figures,
    model_gradients,
    overflow_figures,
    parity_figures,
    parity_run,
    scaler_steps,
    underflow_figures,
)
from tests.runs import run_bench_in_process, run_reports_in_process
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.usefixtures("one_thread")

CPU = torch.device("cpu")


@pytest.mark.parametrize("name", list(numerics.FORMATS))
def test_every_format_claim_holds(name):
    figures = format_figures(name, CPU)
    assert all(figures["checks"].values()), figures["checks"]
    assert figures["searched_eps"] == figures["eps"]
    assert figures["searched_smallest_subnormal"] == figures["smallest_subnormal"]


@pytest.mark.parametrize(("name", "fmax", "tiny", "sub", "eps", "overflow"), [
    ("float32", 3.4028234663852886e38, 2.0**-126, 2.0**-149, 2.0**-23, {"inf"}),
    ("float16", 65504.0, 2.0**-14, 2.0**-24, 2.0**-10, {"inf"}),
    ("bfloat16", 3.3895313892515355e38, 2.0**-126, 2.0**-133, 2.0**-7, {"inf"}),
    ("float8_e4m3fn", 448.0, 2.0**-6, 2.0**-9, 2.0**-3, {"nan", "saturates"}),
    ("float8_e5m2", 57344.0, 2.0**-14, 2.0**-16, 2.0**-2, {"inf"}),
])
def test_format_figures_match_the_formats(name, fmax, tiny, sub, eps, overflow):
    figures = format_figures(name, CPU)
    assert (figures["max"], figures["smallest_normal"], figures["smallest_subnormal"], figures["eps"]) == \
           (fmax, tiny, sub, eps)
    assert figures["overflow"] in overflow


def test_a_false_claim_fails_the_format_case(monkeypatch):
    """Give float16 bfloat16's epsilon: 1 + eps/2 no longer rounds to 1 in the claim's terms, and the case fails."""
    real = torch.finfo

    class WrongEps:
        def __init__(self, dtype):
            self._info = real(dtype)

        def __getattr__(self, name):
            return 2.0**-7 if name == "eps" else getattr(self._info, name)

    monkeypatch.setattr(numerics.torch, "finfo", WrongEps)
    assert not all(format_figures("float16", CPU)["checks"].values())
    case = next(c for c in numerics.cases("quick") if c.id == "numerics/format/float16")
    result = execute(case, CPU, SMOKE)
    assert result.status == "error" and "CheckFailed" in result.reason


def test_16_bit_weights_lose_every_small_update_and_the_master_keeps_them():
    for dtype in (torch.float16, torch.bfloat16):
        weight, _ = accumulate(dtype, False, CPU)
        assert weight == 1.0
        copy, master = accumulate(dtype, True, CPU)
        assert master == pytest.approx(1.1, rel=1e-4)  # 1000 float32 roundings of at most 2^-24 each
        assert copy == pytest.approx(1.1, rel=torch.finfo(dtype).eps)


def test_lost_update_cases_report_the_fraction_lost():
    infos = {c.id: execute(c, CPU, SMOKE).figures for c in numerics.cases("quick") if "lost_updates" in c.id}
    assert infos["numerics/lost_updates/bfloat16"]["lost_fraction"] == 1.0
    assert infos["numerics/lost_updates/float16"]["lost_fraction"] == 1.0
    assert abs(infos["numerics/lost_updates/bfloat16+fp32_master"]["lost_fraction"]) < 1e-3


def test_loss_scaler_skips_the_inf_step_halves_then_grows():
    steps = scaler_steps(CPU, growth_interval=3)
    assert steps[0].injected_inf and steps[0].skipped
    assert steps[0].scale_after == steps[0].scale_before / 2 == 2.0**15
    assert not any(s.skipped for s in steps[1:])
    assert [s.scale_after for s in steps[1:]] == [2.0**15, 2.0**15, 2.0**16]


def test_scaling_rescues_underflowing_gradients():
    tiny_grads = torch.full((1000,), 1e-8) * torch.rand(1000).add(0.5)
    figures = underflow_figures(tiny_grads)
    assert figures["zero_frac_fp16"] == 1.0 and figures["zero_frac_fp16_scaled"] == 0.0
    assert figures["zero_frac_bf16"] == 0.0


def test_real_gpt_gradients_underflow_less_when_scaled():
    figures = underflow_figures(model_gradients(numerics.MODELS["quick"], CPU))
    assert figures["nonzero_grads"] > 10_000
    assert figures["zero_frac_fp16_scaled"] <= figures["zero_frac_fp16"]
    assert figures["zero_frac_bf16"] == 0.0 and figures["overflow_frac_fp16_scaled"] < 1e-3


def test_large_activations_overflow_float16_not_bfloat16():
    x = torch.randn(4096, generator=torch.Generator().manual_seed(0))
    half, bf16 = overflow_figures(x, torch.float16), overflow_figures(x, torch.bfloat16)
    scale = half["scales"].index(1e5)
    assert half["cast_inf_frac"][scale] > 0.5 and half["square_inf_frac"][half["scales"].index(1e3)] > 0.5
    assert half["cast_inf_frac"][half["scales"].index(1e1)] == 0.0
    assert max(bf16["cast_inf_frac"] + bf16["square_inf_frac"]) == 0.0


def test_parity_figures():
    reference = numerics.ParityRun(3.0, 2.0, (3.1, 2.2), 0)
    good = parity_figures(numerics.ParityRun(3.0, 2.01, (3.1, 2.2), 1), reference)
    assert good["parity_rel"] == pytest.approx(0.01) and good["scaler_skipped_steps"] == 1
    no_progress = numerics.ParityRun(3.0, 3.0, (3.0,), 0)
    assert parity_figures(reference, no_progress)["parity_rel"] == math.inf


@pytest.mark.parametrize("precision", ["amp_bf16", "amp_fp16"])
def test_mixed_precision_training_tracks_fp32(precision):
    model = numerics.MODELS["quick"]
    figures = parity_figures(parity_run(model, precision, CPU), numerics._fp32_run(model, CPU))
    assert figures["parity_rel"] <= numerics.PARITY_TOLERANCE
    assert figures["loss"] < figures["loss_initial"]  # it trained


def test_parity_failure_is_recorded(monkeypatch):
    monkeypatch.setattr(numerics, "PARITY_TOLERANCE", -1.0)
    case = next(c for c in numerics.cases("quick") if c.id.endswith("parity/gpt-tiny/amp_bf16"))
    result = execute(case, CPU, SMOKE)
    assert result.status == "error" and "fp32's progress" in result.reason


def test_every_case_has_a_stable_unique_id():
    for profile in ("quick", "full"):
        ids = [c.id for c in numerics.cases(profile)]
        assert len(ids) == len(set(ids)) and all(i.startswith("numerics/") for i in ids)


@pytest.mark.slow
def test_quick_run_end_to_end_json_and_table(tmp_path):
    """bench -> JSON -> table for every numerics case of the quick profile on this CPU: each is recorded, with the
    checks it made, and the table shows the suite."""
    out = tmp_path / "numerics.json"
    bench = run_bench_in_process("bench/test_numerics.py", "--bench-profile", "quick", json_path=out)
    assert bench.returncode == 0, bench.tail(2000)
    recorded = {b["extra_info"]["case"]: b["extra_info"] for b in bench.json["benchmarks"]}
    assert set(recorded) == {case.id for case in numerics.cases("quick")}
    assert all(info["status"] == "ok" for info in recorded.values())
    half = recorded["numerics/format/float16"]
    assert half["eps"] == 2**-10 and half["max"] == 65504 and all(half["checks"].values())
    table = run_reports_in_process("table", str(out))
    assert table.returncode == 0 and "## numerics on" in table.stdout
