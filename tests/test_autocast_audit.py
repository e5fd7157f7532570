"""The autocast audit: a real training step recorded op by op. Fails if a matmul ran in float32 under autocast or
a softmax in 16-bit; and it must catch both when they happen."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from suites.core.runner import execute
from suites.harness.bench_session import SMOKE
from suites.training import autocast_audit, numerics
from suites.training.autocast_audit import Auditor, DtypeRecorder, OpSummary, is_matmul, summarize, violations
from suites.training.model_spec import ModelSpec
from suites.training.recipe import make_optimizer, make_step
from tests.runs import call_in_process
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.usefixtures("one_thread")

DEVICES = [torch.device("cpu")] + ([torch.device("cuda")] if torch.cuda.is_available() else [])
MODELS = [ModelSpec("gpt", "tiny"), ModelSpec("cnn", "tiny")]


@pytest.mark.parametrize("device", DEVICES, ids=str)
@pytest.mark.parametrize("dtype", list(autocast_audit.AUTOCAST_DTYPES))
@pytest.mark.parametrize("spec", MODELS, ids=lambda s: s.name)
def test_autocast_runs_matmuls_in_16_bit_and_softmax_in_float32(spec, dtype, device):
    if autocast_audit.autocast_support(dtype, device):
        pytest.skip(autocast_audit.autocast_support(dtype, device))
    audit = Auditor(spec, dtype, device).audit()
    assert not audit.hard, [str(v) for v in audit.hard]
    wanted = str(autocast_audit.AUTOCAST_DTYPES[dtype])
    matmuls = [r for r in audit.summary if is_matmul(r.op)]
    assert {r.phase for r in matmuls} == {"forward", "backward"}
    assert all(r.ran_in == [wanted] for r in matmuls)
    losses = [r for r in audit.summary if r.op == "nll_loss_forward"]
    assert [r.ran_in for r in losses] == [["torch.float32"]]
    assert any(r.phase == "step" and r.op.startswith("_foreach") for r in audit.summary)


def test_the_audit_catches_a_float32_matmul_and_a_16_bit_softmax():
    """Without autocast the GPT's matmuls run in float32; a softmax on bfloat16 input runs in bfloat16."""
    spec = ModelSpec("gpt", "tiny")
    model = spec.build(torch.device("cpu"))
    step = make_step(model, make_optimizer(model), "fp32")
    recorder = DtypeRecorder(model)
    with recorder:
        step(*spec.batch(2, torch.device("cpu")))
    recorder.remove_hooks()
    hard = [v for v in violations(summarize(recorder.calls)) if v.hard]
    assert {v.op for v in hard} >= {"addmm", "mm"}

    class Softmax16(torch.nn.Module):
        def forward(self, x):
            return F.softmax(x.bfloat16(), dim=-1)

    net = Softmax16()
    recorder = DtypeRecorder(net)
    with recorder:
        net(torch.randn(4, 8))
    recorder.remove_hooks()
    found = violations(summarize(recorder.calls))
    assert [(v.op, v.ran_in, v.hard) for v in found] == [("_softmax", "torch.bfloat16", True)]


def test_rule_flags_reductions_only_in_the_forward():
    rows = [OpSummary("forward", "sum", 1, ["torch.bfloat16"], [], []),
            OpSummary("backward", "sum", 8, ["torch.bfloat16"], [], []),
            OpSummary("forward", "native_layer_norm", 2, ["torch.float32"], [], []),
            OpSummary("backward", "convolution_backward", 3, ["torch.float32"], [], [])]
    found = violations(rows)
    assert [(v.phase, v.op, v.hard) for v in found] == [("forward", "sum", False),
                                                         ("backward", "convolution_backward", True)]


def test_cnn_mean_is_flagged_in_the_case(recwarn):
    """Autocast leaves the CNN's global average pool (a mean) in bfloat16: flagged and printed, not a failure."""
    case = next(c for c in numerics.cases("quick") if c.id == "numerics/autocast_audit/cnn-tiny/bfloat16")
    result = execute(case, torch.device("cpu"), SMOKE)
    assert result.status == "ok", result.reason
    assert any("mean" in v for v in result.figures["violations"])
    assert any(issubclass(w.category, numerics.AutocastAuditWarning) for w in recwarn)
    assert {row["op"] for row in result.figures["ops"]} >= {"convolution", "convolution_backward"}


def test_cli_prints_the_table_and_rejects_bad_input():
    ok = call_in_process(autocast_audit.main, "--model", "gpt-tiny")
    assert ok.returncode == 0 and "| forward  | addmm" in ok.stdout and "no violations" in ok.stdout
    bad = call_in_process(autocast_audit.main, "--model", "gpt-huge")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown GPT preset" in bad.stderr
