"""reports.compare on real runs of the quick CPU matmul suite, and on copies with one thing changed."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from reports.__main__ import main
from reports.compare import parse_group_thresholds
from reports.comparison import compare
from reports.format import strict_json
from reports.format.errors import InputError
from reports.format.load import load
from reports.gate import NOT_JUDGED, gate_status
from reports.noise import level
from reports.pair_judgement import decide
from reports.verdicts import clock_note
from suites.observers.telemetry import Sample, summarize
from tests.resultfiles import (
    DATA,
    ROUNDS_A,
    ROUNDS_B,
    RUN_A,
    RUN_B,
    converged_case,
    dated,
    measured,
    read,
    scale_entry,
    scaled,
    with_identity,
    write,
)

RUN_1THREAD = DATA / "run_cpu_quick_1thread.json"  # real run on the same CPU with OMP_NUM_THREADS=1


def verdicts(base, cand, **kwargs) -> dict[str, str]:
    return {v.case: v.verdict for v in compare(load([base]), load([cand]), **kwargs).verdicts}


def test_two_runs_of_the_same_suite_are_judged_by_the_spread_of_all_their_cases(capsys):
    """Two single runs of one commit on a busy CPU: each case's run-to-run noise is unknown, but all the cases
    together say how far one case moves between these runs (pooled): nothing is slower, and a move within that
    spread is judged `unsure`. The spread of all the cases does not vouch for a case that did not converge, nor for
    one too thin to judge: a move of those towards slower keeps the gate from passing."""
    result = compare(load([RUN_A]), load([RUN_B]))
    assert result.verdicts and not result.regressed
    assert {v.source for v in result.verdicts} == {"pooled"} and result.shift.cases == len(result.verdicts)
    judged = [v for v in result.verdicts if v.verdict == "unsure" and "not converged" not in v.note and not v.thin]
    assert judged and all(v.note.startswith("within this case's run-to-run noise") for v in judged)
    assert result.unjudged and all(v.ratio > 1.05 for v in result.unjudged)
    assert {r for v in result.unjudged for r in v.not_judged.split(", ")} <= {"too thin", "candidate not converged",
                                                                             "baseline not converged"}
    assert main(["compare", str(RUN_A), str(RUN_B), "--fail-on-regression", "--wide"]) == NOT_JUDGED == 3
    out = capsys.readouterr().out
    assert f"run-to-run noise: measured ({len(result.verdicts)} from pooled)" in out
    assert "whole run: same, +0.2 %" in out and "gate failed" not in out


def test_without_rounds_or_enough_shared_cases_the_noise_is_assumed_and_cannot_pass_the_gate(tmp_path, capsys):
    """Five cases: too few to pool. Every case that moved beyond the threshold towards slower did so within a
    noise nobody measured: the gate cannot judge it (exit 3), it does not pass it."""
    few = read(RUN_A)
    few["benchmarks"] = measured(few)[:5]
    other = read(RUN_B)
    other["benchmarks"] = [e for e in measured(other)
                           if e["extra_info"]["case"] in {f["extra_info"]["case"] for f in few["benchmarks"]}]
    base, cand = write(few, tmp_path / "a.json"), write(other, tmp_path / "b.json")
    result = compare(load([base]), load([cand]))
    assert result.shift is None and {v.source for v in result.verdicts} == {"assumed"}
    assert all(not v.not_judged for v in result.verdicts if v.ratio <= 1.05)  # no move towards slower: judged
    assert main(["compare", str(base), str(cand), "--wide"]) == 0
    out = capsys.readouterr().out
    assert ("run-to-run noise: unknown for every case (no rounds, fewer than 8 cases shared, fewer than 2 baseline "
            "runs)") in out
    assert "assumed to move 10 % between runs, so only a change beyond +41.5 % can be called slower" in out


def test_one_case_scaled_by_1_5_is_slower_and_fails_ci(tmp_path, capsys):
    data = read(RUN_A)
    case = converged_case(data)
    candidate = write(scaled(data, case, 1.5), tmp_path / "candidate.json")
    found = verdicts(RUN_A, candidate)
    assert found[case] == "slower"
    assert [c for c, v in found.items() if v == "slower"] == [case]
    assert main(["compare", str(RUN_A), str(candidate), "--fail-on-regression", "--markdown"]) == 1
    out = capsys.readouterr().out
    assert "REGRESSION: 1 case(s) slower, 0 timed before and failing now" in out and "| verdict" in out and case in out
    assert main(["compare", str(RUN_A), str(candidate)]) == 0  # reported, but CI fails only when asked


def test_faster_case(tmp_path):
    data = read(RUN_A)
    case = converged_case(data)
    assert verdicts(RUN_A, write(scaled(data, case, 1 / 1.5), tmp_path / "c.json"))[case] == "faster"


def test_a_slowdown_below_the_threshold_is_same(tmp_path):
    data = read(RUN_A)
    case = converged_case(data)
    candidate = write(scaled(data, case, 1.5), tmp_path / "c.json")
    assert verdicts(RUN_A, candidate, group_thresholds={"matmul": 60})[case] == "same"
    assert verdicts(RUN_A, candidate, threshold_pct=60)[case] == "same"
    assert main(["compare", str(RUN_A), str(candidate), "--fail-on-regression", "--threshold-group",
                 "matmul=60"]) == 0


def test_not_converged_or_throttled_is_unsure_never_slower(tmp_path):
    data = read(RUN_A)
    case = converged_case(data)
    unconverged = scaled(data, case, 2.0)
    next(e for e in measured(unconverged) if e["extra_info"]["case"] == case)["extra_info"]["converged"] = False
    throttled = scaled(data, case, 2.0)
    entry = next(e for e in measured(throttled) if e["extra_info"]["case"] == case)
    entry["extra_info"]["telemetry"] = {"throttled": True, "throttle_reasons": ["hw_thermal_slowdown"]}
    for name, candidate in (("unconverged", unconverged), ("throttled", throttled)):
        result = compare(load([RUN_A]), load([write(candidate, tmp_path / f"{name}.json")]))
        verdict = next(v for v in result.verdicts if v.case == case)
        assert verdict.verdict == "unsure" and name.replace("un", "not ") in verdict.note
        assert not result.regressed  # but a 2x change nobody could judge is no pass either
        assert verdict.not_judged == f"candidate {name.replace('un', 'not ')}" and gate_status(result) == NOT_JUDGED


def test_without_raw_samples_the_medians_are_judged_against_the_pooled_noise(tmp_path):
    """pytest-benchmark files without `data`: each run's median is its level, judged by the spread of all cases."""
    data = read(RUN_A)
    case = converged_case(data)
    slow = scaled(data, case, 2.0)
    for entry in measured(slow):
        del entry["stats"]["data"]
    result = compare(load([RUN_A]), load([write(slow, tmp_path / "nodata.json")]))
    verdict = next(v for v in result.verdicts if v.case == case)
    assert verdict.verdict == "slower" and verdict.source == "pooled"
    assert len({round(v.noise_pct, 9) for v in result.verdicts}) == 1  # no rounds: every case by the cases' spread
    assert "slower" not in {v.verdict for v in result.verdicts if v.case != case}


def test_added_and_removed_cases_are_listed(tmp_path, capsys):
    data = read(RUN_A)
    removed = measured(data).pop(0)["extra_info"]["case"]
    extra = dict(measured(data)[0], extra_info=dict(measured(data)[0]["extra_info"], case="matmul/new/case"))
    measured(data).append(extra)
    result = compare(load([RUN_A]), load([write(data, tmp_path / "c.json")]))
    assert result.removed == [removed] and result.added == ["matmul/new/case"]
    main(["compare", str(RUN_A), str(tmp_path / "c.json")])
    out = capsys.readouterr().out
    assert f"Removed (1):\n  {removed}" in out and "Added (1):\n  matmul/new/case" in out


def test_a_long_list_of_removed_cases_names_ten_one_per_line_and_counts_the_rest_by_group(capsys):
    """A quick run against a main job: 75 cases removed were one line of 75 names."""
    main(["compare", str(DATA / "busy" / "main_cpu_quick_busy.json"), str(RUN_A)])
    out = capsys.readouterr().out
    listed = out[out.index("Removed ("):].splitlines()
    removed = int(listed[0].removeprefix("Removed (").split(")")[0])
    assert removed > 10 and len(listed) == 12 and all(line.startswith("  ") for line in listed[1:])
    counted = listed[-1].split("(")[1].split(")")[0]
    assert sum(int(part.split()[-1]) for part in counted.split(", ")) == removed - 10
    main(["compare", str(DATA / "busy" / "main_cpu_quick_busy.json"), str(RUN_A), "--markdown"])
    markdown = capsys.readouterr().out
    assert markdown.count("\n- `") >= removed and f"<summary>Removed ({removed}):</summary>" in markdown


def test_different_devices_are_refused_unless_allowed(capsys):
    assert load([RUN_1THREAD])["device"].iloc[0] != load([RUN_A])["device"].iloc[0]
    assert main(["compare", str(RUN_A), str(RUN_1THREAD)]) == 2
    err = capsys.readouterr().err
    assert "--allow-different-devices" in err and len(err.strip().splitlines()) == 1
    assert main(["compare", str(RUN_A), str(RUN_1THREAD), "--allow-different-devices"]) in (0, 1)
    assert "differences are the hardware's" in capsys.readouterr().err


def test_a_directory_of_several_runs_is_not_one_candidate(tmp_path):
    shutil.copy(RUN_A, tmp_path / "a.json")
    shutil.copy(RUN_B, tmp_path / "b.json")
    with pytest.raises(InputError, match="candidate: expected one result file"):
        compare(load([RUN_B]), load([tmp_path]))


def _history(tmp_path, runs: list[dict]) -> None:
    for i, data in enumerate(runs):
        write(dated(data, f"2026-11-{i + 1:02d}T03:00:00+00:00", f"{i:08x}".ljust(40, "0")),
              tmp_path / "runs" / f"run{i}.json")


def test_a_history_directory_baseline_is_the_nights_of_the_candidates_machine(tmp_path, capsys):
    a, b = read(ROUNDS_A), read(ROUNDS_B)
    other = with_identity(a, machine="GPU-other-box")
    _history(tmp_path, [a, b, a, b, other])  # the newest run is another machine's: never part of the baseline
    candidate = write(dated(b, "2026-11-06T03:00:00+00:00", "f" * 40), tmp_path / "c.json")
    result = compare(load([tmp_path / "runs"]), load([candidate]))
    assert result.baseline.startswith("4 runs of machine 'AMD EPYC (2 threads)'") and "run3.json" in result.baseline
    assert {v.source for v in result.verdicts} == {"history"} and all("nights" in v.basis for v in result.verdicts)
    assert result.identity_changes == []
    assert compare(load([tmp_path / "runs"]), load([candidate]), last=3).baseline.startswith("3 runs of machine")
    assert main(["compare", str(tmp_path / "runs"), str(candidate), "--fail-on-regression"]) in (0, 3)
    assert "baseline: 4 runs of machine" in capsys.readouterr().out
    only_other = tmp_path / "other"
    write(other, only_other / "run.json")
    write(other, only_other / "run2.json")
    alone = compare(load([only_other]), load([ROUNDS_B]))  # a new machine: not judged, and not a usage error
    assert "no run of the candidate's machine 'AMD EPYC (2 threads)'" in alone.new_machine
    assert gate_status(alone) == NOT_JUDGED and not alone.verdicts
    assert main(["compare", str(ROUNDS_A), str(ROUNDS_B), "--last", "0"]) == 2


def test_a_torch_upgrade_and_another_box_are_named_in_the_header(tmp_path, capsys):
    upgraded = with_identity(read(ROUNDS_B), torch="2.14.1+cpu", machine="AMD EPYC (2 threads) on box 2")
    candidate = write(upgraded, tmp_path / "c.json")
    result = compare(load([ROUNDS_A]), load([candidate]))
    assert "torch 2.13.0+cpu -> 2.14.1+cpu" in result.identity_changes
    assert "machine AMD EPYC (2 threads) -> AMD EPYC (2 threads) on box 2" in result.identity_changes
    assert main(["compare", str(ROUNDS_A), str(candidate), "--markdown"]) == 0
    assert "**identity differs: machine" in capsys.readouterr().out
    assert compare(load([ROUNDS_A]), load([ROUNDS_B])).identity_changes == []


def _quietest(path) -> tuple[str, float]:
    """The case of a rounds run with the least spread between its rounds, and that spread (log units)."""
    frame = load([path])
    spread = {row["case"]: float(np.std(np.log(row["round_medians_s"]), ddof=1))
              for _, row in frame[frame["median_s"].notna()].iterrows()}
    case = min(spread, key=spread.get)
    return case, spread[case]


def test_with_rounds_a_slowdown_far_beyond_the_case_noise_is_slower(tmp_path):
    case, spread = _quietest(ROUNDS_A)
    factor = float(np.exp(20 * max(spread, 0.01))) * 1.06
    candidate = write(scaled(read(ROUNDS_A), case, factor), tmp_path / "c.json")
    found = {v.case: v for v in compare(load([ROUNDS_A]), load([candidate])).verdicts}
    assert found[case].verdict == "slower" and "rounds" in found[case].basis
    assert found[case].ratio == pytest.approx(factor)
    assert {v.verdict for c, v in found.items() if c != case} == {"same"}  # a file against itself


def test_with_rounds_a_change_within_the_case_noise_is_unsure_with_the_reason(tmp_path):
    """Rounds that disagree by far more than the threshold: a change above the threshold is not a verdict."""
    data = read(ROUNDS_A)
    entry = measured(data)[0]
    case = entry["extra_info"]["case"]
    base_level = float(entry["stats"]["median"])  # the rounds about the run's own median: a consistent file
    entry["extra_info"]["round_medians_s"] = [base_level * f for f in (0.8, 1.0, 1.25)]  # +-25 % between rounds
    base = write(data, tmp_path / "base.json")
    candidate = write(scaled(data, case, 1.12), tmp_path / "c.json")
    verdict = next(v for v in compare(load([base]), load([candidate])).verdicts if v.case == case)
    assert verdict.verdict == "unsure" and verdict.ratio == pytest.approx(1.12)
    assert verdict.note.startswith("within this case's run-to-run noise") and verdict.noise_pct > 12


def test_with_rounds_the_level_is_the_median_of_round_medians_and_the_run_shift_is_taken_out():
    result = compare(load([ROUNDS_A]), load([ROUNDS_B]))
    frame_a, frame_b = load([ROUNDS_A]).set_index("case"), load([ROUNDS_B]).set_index("case")
    ratios = {v.case: level(frame_b.loc[v.case]) / level(frame_a.loc[v.case]) for v in result.verdicts}
    assert result.shift.ratio == pytest.approx(float(np.exp(np.median(np.log(list(ratios.values()))))))
    for v in result.verdicts:
        assert v.baseline_s == pytest.approx(level(frame_a.loc[v.case]))
        assert v.ratio == pytest.approx(ratios[v.case] / result.shift.ratio)


def test_with_rounds_an_unconverged_round_is_judged_by_the_rounds_not_refused(tmp_path):
    data = read(ROUNDS_A)
    for entry in measured(data):
        entry["extra_info"]["converged"] = False
    result = compare(load([ROUNDS_A]), load([write(data, tmp_path / "c.json")]))
    assert {v.verdict for v in result.verdicts} == {"same"}


@pytest.mark.parametrize("item", ["attention", "=5", "attention=x", "attention=-1"])
def test_bad_group_threshold(item, capsys):
    with pytest.raises(InputError):
        parse_group_thresholds([item])
    assert main(["compare", str(RUN_A), str(RUN_B), "--threshold-group", item]) == 2


def test_two_single_runs_are_not_judged_by_their_samples():
    """Medians 20 % apart with tight samples: one run's samples say nothing of the next run, so the change is
    within the assumed run-to-run noise, unsure, and the note says the noise was assumed."""
    frame = load([RUN_A])
    base = frame[frame["case"] == converged_case(read(RUN_A))].iloc[0].copy()
    cand = base.copy()
    cand["samples_s"] = [x * 1.2 for x in base["samples_s"]]
    cand["median_s"] = base["median_s"] * 1.2
    verdict = decide(base, cand, 5.0)
    assert verdict.verdict == "unsure" and verdict.source == "assumed"
    assert verdict.note == "within the assumed run-to-run noise (10 % per run)"


def test_a_case_that_now_fails_is_a_regression_listed_with_its_status(tmp_path, capsys):
    data = read(RUN_A)
    entry = measured(data).pop(0)
    case = entry["extra_info"]["case"]
    info = dict(entry["extra_info"], status="oom", reason="OutOfMemoryError: CUDA out of memory")
    data["not_measured"].append({k: entry[k] for k in ("group", "name", "fullname", "params")} | {"extra_info": info})
    candidate = write(data, tmp_path / "c.json")
    result = compare(load([RUN_A]), load([candidate]))
    assert result.broken == [f"{case} (now oom: OutOfMemoryError: CUDA out of memory)"]
    assert result.removed == [] and result.regressed
    assert main(["compare", str(RUN_A), str(candidate), "--fail-on-regression"]) == 1
    assert "1 timed before and failing now" in capsys.readouterr().out


def test_the_json_is_the_whole_comparison(tmp_path):
    out = tmp_path / "verdicts.json"
    data = read(RUN_A)
    case = converged_case(data)
    removed = measured(data).pop(0)["extra_info"]["case"]
    candidate = write(scaled(data, case, 1.5), tmp_path / "c.json")
    assert main(["compare", str(RUN_A), str(candidate), "--json", str(out), "--fail-on-regression"]) == 1
    found = json.loads(out.read_text())
    assert found["schema_version"] == 2 and found["gate"]["enabled"] is True and found["gate"]["passed"] is False
    assert found["gate"]["status"] == "failed" and found["gate"]["exit_code"] == 1
    assert found["gate"]["failures"][0].startswith("1 case(s) slower")
    assert found["counts"]["slower"] == 1 and found["removed"] == [removed]
    assert found["noise"]["sources"] == {"pooled": len(found["verdicts"])} and found["noise"]["assumed_pct"] == 10
    assert found["shift"]["status"] == "same" and found["new_machine"] == "" and found["accepted"] == ""
    assert {v["case"] for v in found["verdicts"]} == set(verdicts(RUN_A, candidate))
    assert next(v for v in found["verdicts"] if v["case"] == case)["verdict"] == "slower"
    assert main(["compare", str(RUN_A), str(RUN_B), "--json", str(out)]) == 0  # the gate off: it exits 0 ...
    found = json.loads(out.read_text())
    gate = found["gate"]  # ... and the document still says what the gate would have answered
    assert gate["enabled"] is False and gate["passed"] is False and gate["status"] == "not judged"
    assert gate["exit_code"] == 3 and gate["failures"] == [] and gate["not_gated"] == []
    unjudged = [v for v in found["verdicts"] if v["not_judged"]]
    assert unjudged and gate["not_judged"][0].startswith(f"{len(unjudged)} change(s) beyond the threshold")
    assert {v["status"] for v in found["verdicts"]} == {""}  # a pair: no night of a history


def test_runs_with_a_million_samples_compare_in_bounded_time_and_memory(tmp_path):
    """Other projects' files can carry huge raw `data` arrays; two single runs are judged by their medians."""
    data = read(DATA / "pb5_other_project.json")
    rng = np.random.default_rng(0)
    base, cand = json.loads(json.dumps(data)), json.loads(json.dumps(data))
    scale_entry(cand["benchmarks"][0], 1.6)  # every statistic, so that they agree with each other
    base["benchmarks"][0]["stats"]["data"] = list(1e-3 * (1 + 0.01 * rng.standard_normal(1_000_000)))
    cand["benchmarks"][0]["stats"]["data"] = list(1.6e-3 * (1 + 0.01 * rng.standard_normal(1_000_000)))
    result = compare(load([write(base, tmp_path / "a.json")]), load([write(cand, tmp_path / "b.json")]))
    (verdict,) = result.verdicts
    assert verdict.verdict == "slower" and verdict.ratio == pytest.approx(1.6) and verdict.source == "assumed"


def _with_telemetry(data: dict, case: str, clock_mhz: float, mask: int) -> dict:
    """The case's entry carries the summary `suites.observers.telemetry` makes of samples at this clock and mask."""
    samples = [Sample(t_s=i * 0.02, power_w=700.0, sm_clock_mhz=clock_mhz, reasons=mask) for i in range(10)]
    entry = next(e for e in measured(data) if e["extra_info"]["case"] == case)
    entry["extra_info"]["telemetry"] = summarize(samples, None)
    return data


def test_a_case_at_the_power_cap_keeps_its_verdict_and_a_clock_change_is_named(tmp_path):
    data = read(RUN_A)
    case = converged_case(data)
    base = write(_with_telemetry(read(RUN_A), case, 1980, 0x4), tmp_path / "base.json")
    slower = _with_telemetry(scaled(data, case, 1.5), case, 1410, 0x4)  # sw_power_cap alone
    verdict = next(v for v in compare(load([base]), load([write(slower, tmp_path / "c.json")])).verdicts
                   if v.case == case)
    assert verdict.verdict == "slower"
    assert "SM clock 1980 -> 1410 MHz (-28.8 %)" in verdict.note
    hot = _with_telemetry(scaled(read(RUN_A), case, 1.5), case, 1410, 0x4 | 0x40)  # and hw_thermal_slowdown
    verdict = next(v for v in compare(load([base]), load([write(hot, tmp_path / "hot.json")])).verdicts
                   if v.case == case)
    assert verdict.verdict == "unsure" and "candidate throttled" in verdict.note


def test_correctness_experiments_run_once_get_no_verdict(tmp_path):
    data = read(RUN_A)
    case = converged_case(data)
    next(e for e in measured(data) if e["extra_info"]["case"] == case)["extra_info"]["stop_reason"] = "once"
    base, cand = write(data, tmp_path / "a.json"), write(scaled(data, case, 3.0), tmp_path / "b.json")
    result = compare(load([base]), load([cand]))
    assert case not in {v.case for v in result.verdicts} and not result.regressed


def test_an_incomplete_candidate_is_not_a_pass_and_its_missing_cases_are_not_removed(tmp_path, capsys):
    data = read(RUN_B)
    cut = [b["extra_info"]["case"] for b in measured(data)[5:]]
    del measured(data)[5:]
    data.update(incomplete=True, incomplete_reason="stopped by SIGTERM; 5 of 21 selected cases finished")
    candidate = write(data, tmp_path / "cut.json")
    result = compare(load([RUN_A]), load([candidate]))
    assert result.removed == [] and result.unmeasured == sorted(cut) and result.incomplete.startswith("stopped by")
    assert main(["compare", str(RUN_A), str(candidate), "--fail-on-regression"]) == 1
    out = capsys.readouterr().out
    assert "INCOMPLETE candidate: stopped by SIGTERM" in out and f"Not measured (run incomplete) ({len(cut)})" in out
    assert "gate failed: the candidate run is incomplete" in out
    assert main(["compare", str(RUN_A), str(candidate)]) == 0  # reported; CI fails only when asked


def test_nothing_compared_does_not_pass_the_gate(tmp_path, capsys):
    data = read(RUN_B)
    for entry in measured(data):
        entry["extra_info"]["case"] += "/renamed"
    candidate = write(data, tmp_path / "renamed.json")
    assert main(["compare", str(RUN_A), str(candidate), "--fail-on-regression"]) == 1
    assert "gate failed: no case was timed in both runs" in capsys.readouterr().out


@pytest.mark.parametrize("option", [["--threshold", "nan"], ["--threshold", "inf"], ["--threshold", "-1"],
                                    ["--alpha", "nan"], ["--alpha", "5"], ["--alpha", "0"],
                                    ["--threshold-group", "matmul=nan"], ["--threshold-group", "matmul=inf"]])
def test_options_that_would_open_the_gate_are_usage_errors(option, tmp_path, capsys):
    data = read(RUN_A)
    candidate = write(scaled(data, converged_case(data), 2.0), tmp_path / "slow.json")
    try:
        code = main(["compare", str(RUN_A), str(candidate), "--fail-on-regression", *option])
    except SystemExit as exc:  # argparse's usage error
        code = exc.code
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "error:" in captured.err and "Traceback" not in captured.err
    assert option[1] in captured.err.strip().splitlines()[-1]


def test_verdicts_json_into_a_missing_folder_is_one_line_before_the_report(tmp_path, capsys):
    assert main(["compare", str(RUN_A), str(RUN_B), "--json", str(tmp_path / "no" / "v.json")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "--json" in captured.err


def _entry(data: dict, case: str) -> dict:
    return next(e for e in measured(data) if e["extra_info"]["case"] == case)


def test_a_one_sample_candidate_three_times_slower_is_too_thin_and_not_judged(tmp_path, capsys):
    data = read(RUN_A)
    case = converged_case(data)
    thin = scaled(data, case, 3.0)
    stats = _entry(thin, case)["stats"]
    one = stats["data"][0]  # one sample: every statistic is that sample (else they contradict and it is invalid)
    stats.update(data=[one], rounds=1, median=one, mean=one, min=one, max=one, q1=one, q3=one, iqr=0.0, stddev=0.0)
    candidate = write(thin, tmp_path / "thin.json")
    verdict = next(v for v in compare(load([RUN_A]), load([candidate])).verdicts if v.case == case)
    assert verdict.verdict == "unsure" and verdict.thin and verdict.looks == "slower"
    assert verdict.note.startswith("too thin to judge (candidate 1 sample; at least 3 needed)")
    assert verdict.not_judged == "too thin"  # the numbers alone say slower: the assumed noise is not why
    assert main(["compare", str(RUN_A), str(candidate), "--fail-on-regression"]) == NOT_JUDGED
    out = capsys.readouterr().out
    assert f"could not be judged: {case} +" in out and "(too thin)" in out and "--bench-rounds 3" in out
    same = scaled(data, case, 1.03)  # thin too, but no move beyond the threshold: nothing to judge
    stats = _entry(same, case)["stats"]
    stats.update(data=stats["data"][:1], rounds=1)
    result = compare(load([RUN_A]), load([write(same, tmp_path / "same.json")]))
    assert not next(v for v in result.verdicts if v.case == case).not_judged


def test_a_one_sample_candidate_in_another_projects_file_without_raw_samples_is_too_thin(tmp_path):
    """pb4_other_project.json (another project's pytest-benchmark 4 file, tests/test_load.py) keeps no raw samples:
    only pytest-benchmark's `rounds` says how many there were, an integer in every row, which the frame holds as
    numpy integers. A candidate of one sample, three times slower, rests on too little to judge."""
    data = read(DATA / "pb4_other_project.json")
    entry = data["benchmarks"][0]
    assert "data" not in entry["stats"]
    one = entry["stats"]["median"] * 3
    entry["stats"].update(rounds=1, median=one, mean=one, min=one, max=one, q1=one, q3=one, iqr=0.0, stddev=0.0,
                          ld15iqr=one, hd15iqr=one, ops=1 / one, total=one)
    candidate = load([write(data, tmp_path / "thin.json")])
    assert candidate["rounds"].dtype.kind == "i"
    verdict = next(v for v in compare(load([DATA / "pb4_other_project.json"]), candidate).verdicts
                   if v.case.endswith(entry["name"]))
    assert verdict.verdict == "unsure" and verdict.thin and verdict.not_judged == "too thin"
    assert verdict.note.startswith("too thin to judge (candidate 1 sample; at least 3 needed)")


def test_a_clock_change_is_named_whatever_the_type_of_number_the_frame_holds():
    """A column of integer clocks in every row gives numpy integers; they are clocks as Python's numbers are."""
    for base, cand in [(1980, 1410), (np.int64(1980), np.int64(1410)), (1980.0, np.float32(1410))]:
        assert clock_note({"sm_clock_mhz": base}, {"sm_clock_mhz": cand}) == "SM clock 1980 -> 1410 MHz (-28.8 %)"
    for missing in [None, True, "1410", float("nan")]:
        assert clock_note({"sm_clock_mhz": 1980}, {"sm_clock_mhz": missing}) == ""


@pytest.mark.parametrize("bad", [float("inf"), -0.001, 0.0, "1 ms"], ids=["inf", "negative", "zero", "text"])
def test_a_round_median_that_is_not_a_time_is_invalid_named_and_fails_the_gate(bad, tmp_path, capsys):
    data = read(ROUNDS_B)
    case = measured(data)[0]["extra_info"]["case"]
    measured(data)[0]["extra_info"]["round_medians_s"][1] = bad
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(data))  # Python's json writes inf as a bare Infinity, as older runs did
    strict = tmp_path / "strict.json"
    strict.write_text(strict_json.dumps(data))  # this project's writer: null, and the value under `nonfinite`
    for candidate in (bare, strict):
        result = compare(load([ROUNDS_A]), load([candidate]))
        assert case not in {v.case for v in result.verdicts}
        assert result.invalid == [f"{case} (now invalid: extra_info.round_medians_s=a list of 3 (expected a "
                                  "non-empty list of times in seconds)): candidate has no valid time"]
    assert main(["compare", str(ROUNDS_A), str(strict), "--fail-on-regression"]) == 1
    out = capsys.readouterr().out
    assert "gate failed: 1 case(s) hold values that cannot be times" in out and "inf s" not in out


def test_contention_on_the_slower_side_explains_the_change_and_it_is_not_judged(tmp_path, capsys):
    data = read(RUN_A)
    case = converged_case(data)
    busy = scaled(data, case, 2.0)
    _entry(busy, case)["extra_info"].update(contended=True, contention={"share": 0.4})
    candidate = write(busy, tmp_path / "busy.json")
    verdict = next(v for v in compare(load([RUN_A]), load([candidate])).verdicts if v.case == case)
    assert verdict.verdict == "unsure" and verdict.contended and verdict.looks == "slower"
    assert verdict.note == "candidate contended (share 40%): contention explains the change"
    assert verdict.not_judged == "candidate host contention"
    assert main(["compare", str(RUN_A), str(candidate), "--fail-on-regression", "--json",
                 str(tmp_path / "v.json")]) == NOT_JUDGED
    assert "re-run where nothing else takes the host's CPUs" in capsys.readouterr().out
    gate = json.loads((tmp_path / "v.json").read_text())["gate"]
    assert gate["status"] == "not judged" and gate["not_gated"] == []
    assert gate["not_judged"][0].endswith(f"{case} +100.0 % (candidate host contention)")
    slow_base = scaled(data, case, 2.0)  # contention in a slower baseline explains a faster candidate: reported,
    _entry(slow_base, case)["extra_info"].update(contended=True)  # and no regression can hide in a faster case
    result = compare(load([write(slow_base, tmp_path / "slow_base.json")]), load([RUN_A]))
    verdict = next(v for v in result.verdicts if v.case == case)
    assert verdict.verdict == "unsure" and verdict.looks == "faster" and not verdict.not_judged
    assert result.explained == [verdict]
    quiet_base = read(RUN_A)  # contention in the baseline cannot explain a slower candidate
    _entry(quiet_base, case)["extra_info"].update(contended=True)
    verdict = next(v for v in compare(load([write(quiet_base, tmp_path / "base.json")]),
                                      load([write(scaled(data, case, 2.0), tmp_path / "slow.json")])).verdicts
                   if v.case == case)
    assert verdict.verdict == "slower" and verdict.note == "baseline contended"


@pytest.mark.parametrize("share", [1.5, -0.2, "40%"])
def test_a_contention_share_that_is_no_share_is_not_printed_as_one(share, tmp_path):
    """The note reads the share as the marks do (trust.contention_share): a value outside [0, 1] or not a number
    is no share of samples, so the note says `contended` without one (it printed 1.5 as "150%")."""
    data = read(RUN_A)
    case = converged_case(data)
    busy = scaled(data, case, 2.0)
    _entry(busy, case)["extra_info"].update(contended=True, contention={"share": share})
    candidate = write(busy, tmp_path / "busy.json")
    verdict = next(v for v in compare(load([RUN_A]), load([candidate])).verdicts if v.case == case)
    assert verdict.note.startswith("candidate contended: ") and "%" not in verdict.note
