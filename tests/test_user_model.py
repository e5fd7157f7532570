"""A user's own model through the training-step levers: batches and outputs of every kind, and each failure."""

import dataclasses
from pathlib import Path

import pytest
import torch

from suites.core.runner import execute
from suites.harness.bench_session import SMOKE
from suites.training import advise, advise_rules
from suites.training.recipe import split_batch
from suites.training.user_model import ModelError, UserModel, enable_checkpointing, load
from tests import user_models
from tests.runs import run_bench_in_process, run_reports_in_process
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)

pytestmark = pytest.mark.usefixtures("one_thread")  # beside the other worker's torch: 15 s on two threads, 10 s on one

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


def _run(user: UserModel, lever_label: str):
    case = next(c for c in user.cases("quick") if c.id.endswith(lever_label))
    return execute(case, CPU, SMOKE)


@pytest.mark.parametrize("user", [
    UserModel(user_models.dict_model, user_models.dict_batch),  # kwargs in, dict with `loss` out
    UserModel(user_models.tuple_model, user_models.tuple_batch),  # positional in, (logits, loss) out
    UserModel(user_models.logits_model, user_models.tensor_batch, user_models.logits_loss),  # needs a loss_fn
], ids=["dict-loss", "tuple", "loss_fn"])
def test_each_kind_of_model_trains_through_the_step(user):
    result = _run(user, "precision/fp32")
    info = result.figures
    assert result.status == "ok", result.reason
    assert info["loss_after_n"] < info["loss_first"]  # the seeded steps trained it
    assert info["n_params"] == sum(p.numel() for p in user.model().parameters())
    assert info["flops_counted"] > 0 and info["samples_per_s"] > 0 and info["peak_mem_bytes"] > 0
    # fp32 weights and gradients, two AdamW moments (AdamW's step counters are the small `other` part)
    assert [info[f"bytes_per_param_{part}"] for part in ("weights", "grads", "moments")] == [4, 4, 8]


def test_levers_keep_the_loss_of_the_plain_step():
    """Accumulation over micro-batches of a dict batch and checkpointed blocks train as the plain step does."""
    user = UserModel(user_models.dict_model, user_models.dict_batch)
    losses = {label: _run(user, label).figures["loss_after_n"] for label in ("baseline/amp_bf16-eager",
                                                                                "accum/4", "checkpoint/blocks")}
    assert losses["accum/4"] == pytest.approx(losses["baseline/amp_bf16-eager"], rel=1e-2)
    assert losses["checkpoint/blocks"] == pytest.approx(losses["baseline/amp_bf16-eager"], rel=1e-3)


def test_split_batch_splits_every_tensor_and_repeats_the_rest():
    batch = ({"x": torch.arange(8).reshape(4, 2), "flag": True, "scale": torch.tensor(2.0)},)
    parts = split_batch(batch, 2)
    assert [p[0]["x"].tolist() for p in parts] == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]
    assert all(p[0]["flag"] is True and p[0]["scale"].item() == 2.0 for p in parts)


def test_levers_a_model_lacks_are_skipped_with_the_reason():
    user = UserModel(user_models.dict_model, user_models.dict_batch)
    channels_last = _run(user, "memory_format/channels_last")
    assert channels_last.status == "unsupported" and "no 2-D convolutions" in channels_last.reason
    with pytest.raises(Exception, match="no repeated blocks"):
        enable_checkpointing(torch.nn.Linear(2, 2))
    conv = _run(UserModel(user_models.tuple_model, user_models.tuple_batch), "memory_format/channels_last")
    assert conv.status == "ok", conv.reason


def test_a_model_that_does_not_fit_is_a_recorded_oom():
    user = UserModel(user_models.too_big_model, user_models.tensor_batch)
    user.probe(CPU)  # not a usage error: the sweep records it
    result = _run(user, "baseline/amp_bf16-eager")
    assert result.status == "oom" and result.figures["requested_bytes"] == 2**50


@pytest.mark.parametrize(("args", "message"), [
    (["no_such_module:make"], "cannot import no_such_module (ModuleNotFoundError"),
    (["tests.user_models"], "expected MODULE:NAME"),
    (["tests.user_models:nothing"], "tests.user_models has no 'nothing'"),
    (["tests.user_models:not_a_model", "--batch", "tests.user_models:tensor_batch"],
     "the model factory returned a str, not a torch.nn.Module"),
    (["tests.user_models:logits_model", "--batch", "tests.user_models:tensor_batch"],
     "the model's output (a tensor of shape (64, 4)) gives no loss"),
    (["tests.user_models:dict_model", "--batch", "tests.user_models:meta_batch"],
     "the batch is on meta, the run on cpu"),
    (["tests.user_models:dict_model", "--batch", "tests.user_models:dict_batch", "--device", "cuda:7"],
     "--device cuda:7"),
    # user code that calls sys.exit ends nothing: advise exited 0 with no advice
    (["tests.user_models:exiting_model", "--batch", "tests.user_models:tensor_batch"],
     "the model factory called sys.exit(0): it must return, not end the process"),
    (["tests.user_models:logits_model", "--batch", "tests.user_models:exiting_batch"],
     "the batch factory called sys.exit('no data here')"),
    (["tests.user_models:logits_model", "--batch", "tests.user_models:tensor_batch", "--loss",
      "tests.user_models:exiting_loss"], "the model's forward or its loss function called sys.exit(None)"),
    (["exits_on_import:make"], "model 'exits_on_import:make': importing exits_on_import called sys.exit(0)"),
])
def test_usage_errors_are_one_line_and_exit_2(args, message, capsys, tmp_path, monkeypatch):
    (tmp_path / "exits_on_import.py").write_text("import sys\nsys.exit(0)\n")  # named from the working directory
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    argv = [*args, "--out", str(out), *([] if "--device" in args else ["--device", "cpu"])]
    assert advise.main(argv) == advise.USAGE
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()  # nothing was run


def test_load_names_what_failed():
    with pytest.raises(ModelError, match=r"^loss function 'x:y': cannot import x"):
        load("x:y", "loss function")


# --------------------------------------------------------------------------------------------------------------
# The recommendation, read from a real sweep of examples/conv_model.py (python -m suites advise, CPU, quick profile,
# on this shared 2-core machine under load, the example then at width 32, depth 4, batch 16 of 32x32 images)



def test_with_every_quartile_overlapping_the_baseline_it_recommends_the_baseline(advise_rows):
    """This loaded machine's run: no lever's step times cleared the baseline's interquartile range."""
    base = next(r for r in advise_rows if r.lever == "baseline")
    assert not any(advise_rules.helps(r, base) for r in advise_rows if r.measured)
    assert advise_rules.recommend(advise_rows, budget=None) is base


def test_a_case_made_faster_beyond_the_noise_is_recommended(advise_rows):
    """The same run with the fused-optimizer case's step times divided by 10 and it and the baseline taken as
    converged (in the run none converged, which alone keeps a case from the ranking: tests/test_advise_trust.py):
    it helps, and it is chosen."""
    fused = next(r for r in advise_rows if r.lever == "optimizer")
    faster = [dataclasses.replace(r, median_s=r.median_s / 10, q1_s=r.q1_s / 10, q3_s=r.q3_s / 10, distrust="")
              if r is fused else dataclasses.replace(r, distrust="") if r.lever == "baseline" else r
              for r in advise_rows]
    base = next(r for r in faster if r.lever == "baseline")
    best = advise_rules.recommend(faster, budget=None)
    assert best.lever == "optimizer"
    assert advise_rules.verdict(best, base, None) == f"helps: {base.median_s / (fused.median_s / 10):.2f}x"
    assert advise_rules.combination(faster, None).optimizer == "fused"


def test_every_lever_has_a_verdict_and_rejections_say_why(advise_rows):
    base = next(r for r in advise_rows if r.lever == "baseline")
    verdicts = {(r.lever, r.label): advise_rules.verdict(r, base, None) for r in advise_rows}
    assert verdicts[("precision", "tf32")].startswith("unsupported here: tf32")
    fp32 = next(r for r in advise_rows if r.label == "fp32")
    assert fp32.parity_rel == 0.0
    for r in advise_rows:
        if r.parity_rel is not None and r.parity_rel > advise_rules.PARITY_TOLERANCE:
            assert verdicts[(r.lever, r.label)].startswith("diverges")
    table = advise_rules.table(advise_rows, None)
    assert all(r.label in table for r in advise_rows)


def test_a_budget_below_every_case_recommends_nothing_and_says_so(advise_rows):
    assert advise_rules.recommend(advise_rows, budget=1) is None
    assert advise_rules.rejection(advise_rows[0], budget=1).startswith("over the memory budget")


def test_the_combination_holds_only_levers_that_helped(advise_rows):
    base = next(r for r in advise_rows if r.lever == "baseline")
    chosen = advise_rules.combination(advise_rows, None)
    for lever, field in advise_rules.LEVER_FIELD.items():
        case = next((r for r in advise_rows if r.lever == lever and r.measured), None)
        if getattr(chosen, field) != getattr(base.levers, field):
            assert case is not None and advise_rules.helps(case, base)


# --------------------------------------------------------------------------------------------------------------
# In pytest: a bench file of a few lines, outside this repository, run as the built-in suites are

BENCH = '''from suites.harness import pytest_plugin
from suites.training.user_model import UserModel
from tests.user_models import dict_batch, dict_model
MODEL = UserModel(dict_model, dict_batch, name="mlp")


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, MODEL.cases)


def test_levers(case, run_case):
    run_case(case)
'''


@pytest.mark.slow
def test_a_users_bench_file_runs_under_pytest_and_reports_read_it(tmp_path):
    (tmp_path / "bench_mine.py").write_text(BENCH)
    out = tmp_path / "run.json"
    # no -p: the plugin comes from the installed entry point
    proc = run_bench_in_process("bench_mine.py", "-k", "baseline or fp32 or channels_last", json_path=out,
                                cwd=tmp_path)
    assert proc.returncode == 0, proc.tail()
    data = proc.json
    assert {b["extra_info"]["case"] for b in data["benchmarks"]} == {
        "train_step/mlp/baseline/amp_bf16-eager", "train_step/mlp/precision/fp32"}
    assert all(b["group"] == "train_step" and b["stats"]["rounds"] > 0 for b in data["benchmarks"])
    assert [n["extra_info"]["status"] for n in data["not_measured"]] == ["unsupported"]
    table = run_reports_in_process("table", str(out))
    assert table.returncode == 0 and "mlp" in table.stdout, table.stderr


def test_a_transformers_model_from_a_config_trains():
    transformers = pytest.importorskip("transformers", reason="transformers is the optional extra `hf`")
    config = transformers.GPT2Config(vocab_size=64, n_positions=16, n_embd=32, n_layer=2, n_head=2)

    def batch(device):
        ids = torch.randint(64, (4, 16), device=device)
        return {"input_ids": ids, "labels": ids}

    user = UserModel(lambda: transformers.GPT2LMHeadModel(config), batch, name="gpt2")
    result = _run(user, "checkpoint/blocks")  # Hugging Face's own gradient checkpointing
    assert result.status == "ok", result.reason
    assert result.figures["tokens_per_step"] == 64 and result.figures["loss_after_n"] > 0
