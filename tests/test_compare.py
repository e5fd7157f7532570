"""reports.compare on real runs of the quick CPU matmul suite, and on copies with one thing changed."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from reports.__main__ import main
from reports.compare import compare, decide, parse_group_thresholds
from reports.errors import InputError
from reports.load import load
from suites.observers.telemetry import Sample, summarize
from tests.resultfiles import DATA, RUN_A, RUN_B, converged_case, measured, read, scaled, write

RUN_1THREAD = DATA / "run_cpu_quick_1thread.json"  # real run on the same CPU with OMP_NUM_THREADS=1


def verdicts(base, cand, **kwargs) -> dict[str, str]:
    return {v.case: v.verdict for v in compare(load([base]), load([cand]), **kwargs).verdicts}


def test_two_runs_of_the_same_suite_have_no_slower_case():
    found = verdicts(RUN_A, RUN_B)
    assert found and "slower" not in found.values()
    assert main(["compare", str(RUN_A), str(RUN_B), "--fail-on-regression"]) == 0


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
        assert not result.regressed


def test_no_raw_samples_is_unsure(tmp_path):
    data = scaled(read(RUN_A), converged_case(read(RUN_A)), 2.0)
    for entry in measured(data):
        del entry["stats"]["data"]
    result = compare(load([RUN_A]), load([write(data, tmp_path / "nodata.json")]))
    assert {v.verdict for v in result.verdicts} == {"unsure"}


def test_added_and_removed_cases_are_listed(tmp_path, capsys):
    data = read(RUN_A)
    removed = measured(data).pop(0)["extra_info"]["case"]
    extra = dict(measured(data)[0], extra_info=dict(measured(data)[0]["extra_info"], case="matmul/new/case"))
    measured(data).append(extra)
    result = compare(load([RUN_A]), load([write(data, tmp_path / "c.json")]))
    assert result.removed == [removed] and result.added == ["matmul/new/case"]
    main(["compare", str(RUN_A), str(tmp_path / "c.json")])
    out = capsys.readouterr().out
    assert f"Removed (1): {removed}" in out and "Added (1): matmul/new/case" in out


def test_different_devices_are_refused_unless_allowed(capsys):
    assert load([RUN_1THREAD])["device"].iloc[0] != load([RUN_A])["device"].iloc[0]
    assert main(["compare", str(RUN_A), str(RUN_1THREAD)]) == 2
    err = capsys.readouterr().err
    assert "--allow-different-devices" in err and len(err.strip().splitlines()) == 1
    assert main(["compare", str(RUN_A), str(RUN_1THREAD), "--allow-different-devices"]) in (0, 1)
    assert "differences are the hardware's" in capsys.readouterr().err


def test_a_directory_of_several_runs_is_not_one_baseline(tmp_path):
    shutil.copy(RUN_A, tmp_path / "a.json")
    shutil.copy(RUN_B, tmp_path / "b.json")
    with pytest.raises(InputError, match="expected one result file"):
        compare(load([tmp_path]), load([RUN_B]))


@pytest.mark.parametrize("item", ["attention", "=5", "attention=x", "attention=-1"])
def test_bad_group_threshold(item, capsys):
    with pytest.raises(InputError):
        parse_group_thresholds([item])
    assert main(["compare", str(RUN_A), str(RUN_B), "--threshold-group", item]) == 2


def test_decide_uses_the_samples_not_only_the_medians():
    """Medians 10 % apart but samples overlapping heavily: not significant, so unsure rather than slower."""
    frame = load([RUN_A])
    base = frame[frame["case"] == converged_case(read(RUN_A))].iloc[0].copy()
    cand = base.copy()
    samples = sorted(base["samples_s"])
    cand["samples_s"] = [*samples[1:], samples[-1] * 3]
    cand["median_s"] = base["median_s"] * 1.10
    verdict = decide(base, cand, 5.0)
    assert verdict.p_value > 0.01 and verdict.verdict == "unsure"


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


def test_verdicts_as_json(tmp_path):
    out = tmp_path / "verdicts.json"
    assert main(["compare", str(RUN_A), str(RUN_B), "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    assert {r["case"] for r in rows} == set(verdicts(RUN_A, RUN_B))
    assert all(r["verdict"] in ("slower", "faster", "same", "unsure") for r in rows)


def test_runs_with_a_million_samples_compare_in_bounded_time_and_memory(tmp_path):
    """Other projects' files can carry huge raw `data` arrays; the verdict still comes from the samples."""
    data = read(DATA / "pb5_other_project.json")
    rng = np.random.default_rng(0)
    base, cand = json.loads(json.dumps(data)), json.loads(json.dumps(data))
    base["benchmarks"][0]["stats"]["data"] = list(1e-3 * (1 + 0.01 * rng.standard_normal(1_000_000)))
    cand["benchmarks"][0]["stats"]["data"] = list(1.2e-3 * (1 + 0.01 * rng.standard_normal(1_000_000)))
    cand["benchmarks"][0]["stats"]["median"] = data["benchmarks"][0]["stats"]["median"] * 1.2
    result = compare(load([write(base, tmp_path / "a.json")]), load([write(cand, tmp_path / "b.json")]))
    (verdict,) = result.verdicts
    assert verdict.verdict == "slower" and 1.15 < verdict.ci_low < verdict.ci_high < 1.25


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
