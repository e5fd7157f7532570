"""The recipe's step, the memory budget, and the train_step cases, on the CPU."""

import pytest
import torch

from suites.core.cases import Unsupported
from suites.core.runner import execute
from suites.core.stopping import StopRule
from suites.training import memory_budget, param_bytes, recipe, train_step
from suites.training.data import token_batch, token_batches
from suites.training.models import GPT, GPTConfig
from suites.training.recipe import MasterWeightsAdamW, make_optimizer, make_scaler, make_step, train
from tests.runs import run_bench_in_process
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny models: 7 s on one thread, 10 s on two (a busy core)

CPU = torch.device("cpu")
RULE = StopRule(min_samples=2, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=1.0, warmup_s=0.0)
TINY = GPTConfig.preset("tiny")


def _model(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(TINY)


def _flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().float().flatten() for p in model.parameters()])


def test_scaler_is_enabled_only_for_float16():
    assert [make_scaler(p, CPU).is_enabled() for p in recipe.PRECISIONS] == [False, False, True, False]


@pytest.mark.parametrize(("precision", "kind"), [("fp32", "foreach"), ("amp_bf16", "fused"), ("amp_fp16", "fused")])
def test_training_lowers_the_loss(precision, kind):
    model = _model()
    step = make_step(model, make_optimizer(model, kind, lr=3e-3), precision)
    run = train(step, token_batches(1000, 4, 64, steps=6))
    assert run.skipped_steps == 0
    assert run.losses[-1] < run.losses[0] - 0.05


def test_accumulation_gives_the_same_update_at_the_same_global_batch():
    x, y = token_batch(1000, 8, 64)
    after = []
    for accum in (1, 4):
        model = _model()
        make_step(model, make_optimizer(model, lr=1e-3), "fp32", accum=accum)(x, y)
        after.append(_flat(model))
    torch.testing.assert_close(after[0], after[1], rtol=1e-4, atol=1e-6)


def test_gradients_are_clipped_to_the_threshold():
    model = _model()
    x, y = token_batch(1000, 8, 64)
    model(x, y)[1].backward()
    assert torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]) > 0.5  # clipping has work to do
    step = make_step(model, make_optimizer(model), "fp32")
    assert step.clip == 1.0  # the recipe's threshold
    step.clip = 0.1
    step(x, y)
    assert torch.nn.utils.get_total_norm([p.grad for p in model.parameters()]) <= 0.1 + 1e-6


def test_sync_reads_the_loss_on_the_host():
    model = _model()
    step = make_step(model, make_optimizer(model), "fp32", sync=True)
    loss = step(*token_batch(1000, 8, 64))
    assert step.last_loss == pytest.approx(loss.item())


def test_an_overflowing_float16_step_is_skipped_and_counted():
    """A loss scale of 2^64 overflows float16 gradients: the scaler skips the step (weights unchanged)."""
    model = _model()
    before = _flat(model)
    step = make_step(model, make_optimizer(model), "amp_fp16", scaler=torch.amp.GradScaler("cpu", init_scale=2.0**64))
    run = train(step, token_batches(1000, 8, 64, steps=1))
    assert run.skipped_steps == 1
    assert step.scaler.get_scale() == 2.0**63
    torch.testing.assert_close(_flat(model), before)


def test_master_weights_keep_updates_that_bfloat16_weights_lose():
    """A bf16 weight of 1.0 does not move by lr 1e-4 steps (its spacing is 2^-7); the fp32 master does."""
    weight = torch.nn.Parameter(torch.ones(4, dtype=torch.bfloat16))
    optimizer = MasterWeightsAdamW([weight], lr=1e-4, weight_decay=0.0)
    for _ in range(100):
        weight.grad = torch.ones_like(weight)
        optimizer.step()
    master = optimizer.state[weight]["master"]
    assert master.dtype == torch.float32
    assert master[0].item() == pytest.approx(1.0 - 100 * 1e-4, rel=1e-3)
    assert weight[0].item() == pytest.approx(master[0].item(), abs=2**-7)


@pytest.mark.parametrize("master_weights", [False, True])
def test_measured_bytes_per_param_of_adamw_mixed_precision(master_weights):
    budget = memory_budget.measure_budget("tiny", master_weights, CPU)
    per = budget.per_param()
    book = param_bytes.analytic(master_weights)
    assert 14 <= per["total"] <= 20  # the 16-18 rule, measured
    for part in ("weights", "grads", "master", "moments"):
        assert per[part] == pytest.approx(book[part], abs=0.01), part


def test_checkpointing_shrinks_the_saved_activations():
    x, y = token_batch(1000, 8, 64)
    saved = []
    for checkpoint in (False, True):
        model = GPT(TINY, checkpoint=checkpoint)
        saved.append(param_bytes.saved_activation_bytes(lambda m=model: m(x, y)[1]))
    assert 0 < saved[1] < 0.7 * saved[0]


def test_memory_budget_cli_prints_the_table_and_rejects_bad_input(capsys):
    assert memory_budget.main(["--model", "tiny"]) == 0
    out = capsys.readouterr().out
    assert "bf16 weights + fp32 master" in out and "16-18" in out
    assert memory_budget.main(["--model", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown GPT preset") and "\n" not in err


def test_every_lever_is_a_case_with_unique_ids():
    cases = train_step.cases("quick")
    assert len({c.id for c in cases}) == len(cases)
    values: dict[str, set[str]] = {}
    for case in cases:
        for key, value in case.params.items():
            values.setdefault(key, set()).add(value)
    assert values["precision"] == set(recipe.PRECISIONS)
    expected = {"compile": {"off", "on"}, "optimizer": {"foreach", "fused"}, "checkpoint": {"off", "block"},
                "accum": {"1", "4"}, "sync": {"none", "item"}, "memory_format": {"contiguous", "channels_last"},
                "num_workers": {"resident", "0", "2"}, "pin_memory": {"off", "on"}, "vocab": {"1000", "1024"}}
    for key, both in expected.items():
        assert both <= values[key], key
    grid = {(c.params["precision"], c.params["compile"]) for c in cases if c.params["lever"] in ("baseline",
                                                                                                 "precision")
            and c.params["model"] == "gpt-tiny" and "vocab" in c.params}
    assert len(grid) == 8  # the must-show grid: four precisions, compile off and on


@pytest.mark.parametrize("label", ["precision/tf32-eager", "data/workers2-pinned", "precision/fp32-compiled"])
def test_cpu_unsupported_cases_say_why(label):
    case = next(c for c in train_step.cases("quick") if c.id.endswith(label))
    with pytest.raises(Unsupported, match=r"tf32|pin_memory|compiles only"):
        case.build(CPU)


def test_a_gpt_case_measures_a_step_and_reports_its_figures():
    case = next(c for c in train_step.cases("quick") if c.id == "train_step/gpt-tiny/baseline/amp_bf16-eager")
    result = execute(case, CPU, RULE)
    info = result.figures
    assert result.status == "ok", result.reason
    assert info["loss_after_n"] < info["loss_first"]
    assert info["n_steps"] == train_step.PROFILES["quick"].steps
    losses = info["seeded_losses"]  # every step's loss, which the advisor compares with fp32's step by step
    assert len(losses) == info["n_steps"] and losses[0] == info["loss_first"] and losses[-1] == info["loss_after_n"]
    assert 14 <= info["bytes_per_param"] <= 20
    assert info["tokens_per_s"] == pytest.approx(8 * 64 * info["samples_per_s"] / 8)
    assert info["flops_formula"] == case.flops and 0.5 < info["flops_ratio"] <= 1.0
    assert info["tflops"] > 0 and "mfu" not in info  # no honest CPU peak: MFU is left out
    assert info["peak_mem_bytes"] > info["saved_activation_bytes"] > 0  # a step needs more than what it saves
    assert info["scaler_skipped_steps"] == 0


def test_the_same_seed_gives_the_same_loss_after_n_steps():
    case = next(c for c in train_step.cases("quick") if c.id == "train_step/gpt-tiny/optimizer/fused")
    losses = [case.build(CPU).figures["loss_after_n"] for _ in range(2)]
    assert losses[0] == losses[1]


def test_a_cnn_case_with_dataloader_workers_runs():
    case = next(c for c in train_step.cases("quick") if c.id == "train_step/resnet-tiny/data/workers2")
    result = execute(case, CPU, RULE)
    assert result.status == "ok", result.reason
    assert result.figures["samples_per_s"] > 0 and result.figures["flops_counted"] > 0


@pytest.mark.slow
def test_bench_file_writes_the_fields_to_the_json(tmp_path):
    out = tmp_path / "ts.json"
    proc = run_bench_in_process("bench/test_train_step.py", "--bench-profile", "quick", "-k", "baseline or tf32-eager",
                                json_path=out)
    assert proc.returncode == 0, proc.tail(2000)
    data = proc.json
    measured = {b["params"]["lever"] + "/" + b["params"]["model"]: b for b in data["benchmarks"]}
    gpt = next(b for b in data["benchmarks"] if "vocab" in b["params"])
    assert gpt["group"] == "train_step" and gpt["extra_info"]["status"] == "ok"
    for field in ("loss_after_n", "bytes_per_param", "tokens_per_s", "samples_per_s", "flops_counted", "timer"):
        assert field in gpt["extra_info"], field
    assert set(measured) == {"baseline/gpt-tiny", "baseline/resnet-tiny"}  # the GPT and the CNN baselines
    assert any(e["params"]["precision"] == "tf32" for e in data["not_measured"])
