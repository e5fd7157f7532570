"""The training-step advisor on real sweeps taken on this busy machine (tests/data/busy_gate, README.md there):
it ranks only cases whose step time it can trust, says which it left out and why, and calls a setting
"diverges" only against fp32's losses at the same steps."""

from __future__ import annotations

import dataclasses
import math

import pytest

from suites.training import advise_rules, advise_sweep
from tests.resultfiles import DATA

BUSY = DATA / "busy_gate"


def sweep_rows(name: str) -> list[advise_rules.SweepCase]:
    """The rows advise ranked: the sweep, with the doubted cases replaced by their second measurement."""
    rows = advise_rules.read_rows(BUSY / name / "sweep.json")
    advise_rules.add_parity(rows)
    again = BUSY / name / "remeasure.json"
    rows = advise_rules.merge(rows, advise_rules.read_rows(again), None) if again.exists() else rows
    advise_rules.add_parity(rows)
    return rows


def by_lever(rows: list[advise_rules.SweepCase]) -> dict[str, advise_rules.SweepCase]:
    return {r.lever: r for r in rows if r.measured}


def test_a_sweep_contended_throughout_ranks_nothing_and_says_so():
    """examples/conv_model.py beside two `yes` neighbours: every case contended (85-100 % of its samples) and
    unconverged, twice. The first sweep's quartiles still lay apart (fused 'helps: 29.17x' before)."""
    first = advise_rules.read_rows(BUSY / "advise_conv_busy" / "sweep.json")
    assert all(r.distrust.startswith("host contention") for r in first if r.measured)
    rows = sweep_rows("advise_conv_busy")
    cases = by_lever(rows)
    base = cases["baseline"]
    assert all(r.remeasured and r.distrust for r in cases.values())  # measured twice, trusted neither time
    assert not any(advise_rules.helps(r, base) or advise_rules.hurts(r, base) for r in cases.values())
    assert advise_rules.verdict(cases["optimizer"], base, None).startswith("not judged: ")
    text, status = advise_rules.report(rows, None)
    assert status == advise_rules.NOT_JUDGED == 3
    assert "Nothing ranked: the baseline's step time cannot be trusted (host contention (share 100%), not " \
        "converged, measured twice)" in text
    assert "Left out of the ranking, their step times not trusted: precision/fp32 (host contention" in text
    assert "Recommended" not in text and "helps" not in text


def test_a_favoured_sweep_ranks_the_cases_it_trusts_and_leaves_out_the_rest():
    """The same model with the sweep's session at autogroup nice -19: the baseline, unconverged at first, was
    trusted when measured again; three cases still saw contention and are left out, named."""
    rows = sweep_rows("advise_conv_favoured")
    cases = by_lever(rows)
    base = cases["baseline"]
    assert base.remeasured == "not converged" and not base.distrust
    left = {r.lever for r in cases.values() if r.distrust}
    assert left == {"precision", "memory_format", "accum"} and cases["precision"].label == "amp_fp16"
    assert advise_rules.helps(cases["optimizer"], base)
    channels_last = cases["memory_format"]  # its quartiles lay below the baseline's in the first sweep
    assert channels_last.distrust.startswith("host contention") and not advise_rules.helps(channels_last, base)
    assert advise_rules.combination(rows, None).memory_format == "contiguous"
    best = advise_rules.recommend(rows, None)
    assert best is cases["optimizer"]
    text, status = advise_rules.report(rows, None)
    assert status == 0 and text.endswith("loss within 0.3% of fp32's movement of fp32's.")
    assert "Left out of the ranking, their step times not trusted: precision/amp_fp16 (host contention" in text
    assert "baseline/amp_bf16-eager (first: not converged; second: trusted)" in text


def test_a_rising_fp32_loss_is_no_divergence_of_accumulation():
    """tests/user_models.py's noise_model: labels that are noise, so fp32's own loss rose over the 8 seeded steps
    (1.386 -> 1.413). Before, that left 1 % of the first loss as the scale, and accumulation's 0.0067 gap at the
    last step was 'diverges: 48.5 %'; step by step against how far fp32's loss moved, it is 2.5 %."""
    rows = sweep_rows("advise_noise_busy")
    cases = {(r.lever, r.label): r for r in rows if r.measured}
    fp32, accum = cases[("precision", "fp32")], cases[("accum", "4")]
    assert len(fp32.losses) == fp32.n_steps == 8 and fp32.losses[-1] > fp32.losses[0]
    assert accum.parity_rel == pytest.approx(0.025, abs=0.005)
    assert advise_rules.rejection(accum, None) is None
    assert all(advise_rules.rejection(r, None) is None for r in cases.values())  # none diverges
    assert any(n.startswith("fp32's own loss rose over the 8 seeded steps (1.386 -> 1.413)")
               for n in advise_rules.trust_notes(rows, None))


def test_a_setting_that_leaves_fp32s_trajectory_diverges_at_the_step_it_does():
    """The busy conv sweep's fp32 learned (2.90 -> 2.12 over 8 steps). Derived rows: a setting that learns
    nothing (its loss held at its first, as fp16 gradients that underflow do) and one whose loss is NaN from
    step 4 on: both diverge, at the step named."""
    rows = sweep_rows("advise_conv_busy")
    fused = next(r for r in rows if r.lever == "optimizer")
    stuck = dataclasses.replace(fused, losses=(fused.losses[0],) * len(fused.losses), loss_after_n=fused.losses[0])
    lost = dataclasses.replace(fused, losses=(*fused.losses[:3], *[math.nan] * (len(fused.losses) - 3)))
    for derived, step in ((stuck, len(fused.losses)), (lost, 4)):
        found = [derived if r is fused else r for r in rows]
        advise_rules.add_parity(found)
        assert derived.parity_step == step and advise_rules.rejection(derived, None).startswith("diverges")
    assert advise_rules.rejection(stuck, None).startswith("diverges: at seeded step 8 its loss is 100.1% of fp32's")
    assert advise_rules.rejection(lost, None) == "diverges: its loss is not finite at seeded step 4"


def test_rows_of_files_without_every_steps_loss_are_compared_at_the_ends():
    """tests/data/advise_conv_cpu_quick was written before `seeded_losses`: its first and last losses are the
    trajectory, at steps 1 and n_steps (8)."""
    rows = advise_rules.read_rows(DATA / "advise_conv_cpu_quick" / "sweep.json")
    advise_rules.add_parity(rows)
    accum = next(r for r in rows if r.lever == "accum")
    assert accum.losses is None and accum.parity_step == 8
    assert advise_rules.rejection(accum, None).startswith("diverges: at seeded step 8")


@pytest.mark.slow
def test_the_second_measurement_runs_exactly_the_doubted_cases(tmp_path, monkeypatch):
    """A real sweep of a small model; two of its cases taken as doubted (as a busy host leaves them) and the
    third as trusted: the second pytest run measures those two and nothing else, and their rows replace the
    first ones, saying why."""
    monkeypatch.chdir(DATA.parents[1])  # the model is named from the repository, as a user names theirs
    # the sweep's runs step on one intra-op thread (tests/single_thread.py): a two-layer MLP's steps, seconds of
    # unconverged samples on two threads beside other work on the host's cores, converge in 0.1 s on one
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    sweep = advise_sweep.Sweep(tmp_path, "tests.user_models:dict_model", "tests.user_models:dict_batch", None, "mlp",
                               "cpu", "quick")
    sweep.write()
    rows = advise_rules.read_rows(sweep.run("sweep.json", select="baseline or precision/fp32 or sync"))
    assert {r.lever for r in rows if r.measured} == {"baseline", "precision", "sync"}
    doubted = [dataclasses.replace(r, distrust="host contention (share 100%)" if r.lever in ("baseline", "sync")
                                   else "") for r in rows]  # the others as if trusted, whatever this host did
    merged = advise_sweep.remeasure(sweep, doubted, None)
    again = advise_rules.read_rows(tmp_path / "remeasure.json")
    assert sorted((r.lever, r.label) for r in again) == [("baseline", "amp_bf16-eager"), ("sync", "item")]
    second = {r.lever: r for r in merged if r.remeasured}
    assert set(second) == {"baseline", "sync"} and all(r.remeasured.startswith("host contention") for r in
                                                        second.values())
    assert second["baseline"].median_s == next(r for r in again if r.lever == "baseline").median_s
