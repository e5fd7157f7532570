"""`python -m suites plan`: a CPU box plans the full sweep for a GPU, every suite listed with what its estimate
rests on, and a measured estimate where the last run of the device identity timed the case."""

import json
from pathlib import Path

import pytest
import torch

from suites.__main__ import main
from suites.core import estimate, planning
from suites.core.cases import Unsupported
from suites.core.profiles import rules
from suites.plan import SUITES, collect

DATA = Path(__file__).parent / "data"


def plan_rows(out: list[str]) -> dict[str, str]:
    return {line[:24].strip(): line for line in out[3:-1]}


def test_a_cpu_box_plans_the_full_sweep_for_a_gpu_within_the_issues_30_minutes(capsys):
    assert main(["plan", "--device", "cuda"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("plan for H200 SXM (cuda, no GPU here: reasoned), profile full (the default on cuda)")
    rows = plan_rows(out)
    assert set(rows) == {name for name, _, _ in SUITES} | {planning.SEARCH}
    assert all("reasoned" in row for row in rows.values())
    # the first run of a machine makes the short achievable search: 5 dtypes x 10 s + 3 s of bandwidth
    assert float(rows[planning.SEARCH].split()[3]) == pytest.approx(53 / 60, abs=0.05)
    assert out[-1].startswith("total: 748 cases, about ") and int(out[-1].split()[-2]) <= 30


def test_the_exhaustive_profile_plans_every_case(capsys):
    assert main(["plan", "--device", "cuda", "--bench-profile", "exhaustive"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("total: 1133 cases, about ")


def test_a_cached_achievable_search_costs_the_plan_nothing(tmp_path):
    target = planning.vendor_gpu("H200 SXM")
    assert planning.search_line(target, tmp_path / "x.json").seconds == 0.0
    assert planning.search_line(target, None).seconds == 53.0


def test_the_reasoned_largest_batch_is_within_2x_of_the_one_measured_on_this_cpu():
    """The quick profile's searches on a 2-core CPU within 16 MiB (tests/data/batch_size_cpu_quick.json): the plan's
    model of their memory (activations, logits, the resident model) gives the answers' order, not 4096."""
    found = json.loads((DATA / "batch_size_cpu_quick.json").read_text())["benchmarks"]
    measured = {b["extra_info"]["case"]: b["extra_info"]["max_batch"] for b in found if "max_batch" in b["extra_info"]}
    cpu = estimate.Target("cpu", "cpu", {"float32": 1e11}, 5e10, 1e10, 8 * 2**30)
    cases = {c.id: c for c in collect("quick")["batch_size"]}
    reasoned = {case: estimate.assumed_max_batch(cases[case], cpu) for case in measured}
    assert len(reasoned) == 4 and all(0.5 <= reasoned[c] / measured[c] <= 2 for c in measured), (reasoned, measured)


def test_the_plan_of_a_selection_counts_each_input_shape_and_reference_once():
    """The attention cases of one input shape draw it once; the implementations of one point and dtype share one
    float64 reference: the second of two identical cases costs less than the first."""
    attention = collect("full")["attention"]
    host = estimate.HostCosts(1e-8, 0.02)
    target = planning.vendor_gpu("H200 SXM")
    first, second = planning.case_seconds([attention[0], attention[1]], rules("full").stop, target, {}, host)
    assert attention[0].reuse_group == attention[1].reuse_group and second < first


def test_a_step_its_device_type_refuses_is_planned_as_refused_not_as_a_compile():
    """The quick profile on a CPU compiles only the all-on GPT case and pins no memory: the other compiled and
    pinned steps are refused as they start (the build raises before it builds), so the CPU's plan counts them at
    the refusal's cost, where a GPU's plan gives each compiled case its compile."""
    steps = collect("quick")["train_step"]
    refused = [c for c in steps if c.refused_on("cpu")]
    assert {c.id.split("/", 2)[2] for c in refused} == {
        "precision/fp32-compiled", "precision/tf32-compiled", "precision/amp_fp16-compiled",
        "precision/amp_bf16-compiled", "data/workers2-pinned", "all_on/channels_last-compiled-fused-workers2-pinned"}
    for case in refused:
        with pytest.raises(Unsupported) as exc:
            case.build(torch.device("cpu"))
        assert case.refused_on("cpu") in str(exc.value) or "tf32" in case.id, case.id
    host = estimate.HostCosts(1e-8, 0.02)
    cpu = planning.case_seconds(refused, rules("quick").stop, estimate.Target("cpu", "cpu", {"float32": 1e11}, 5e10,
                                                                             1e10, 8 * 2**30), {}, host)
    assert all(s == pytest.approx(estimate.UNSUPPORTED_S + host.pytest_s_per_case) for s in cpu), cpu
    compiled = [c for c in steps if c.params["compile"] == "on" and not c.refused_on("cuda")]
    gpu = planning.case_seconds(compiled, rules("quick").stop, planning.vendor_gpu("H200 SXM"), {}, host)
    assert len(compiled) == 6 and all(s > estimate.COMPILE_S for s in gpu)


def test_a_case_timed_in_the_last_run_is_measured(tmp_path, capsys):
    results = tmp_path / "run.json"
    results.write_text(json.dumps({"benchmarks": [], "not_measured": [
        {"extra_info": {"case": f"numerics/format/{d}", "case_s": 60.0}}
        for d in ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")]}))
    assert main(["plan", "--device", "cpu", "--bench-profile", "quick", "--results", str(results)]) == 0
    numerics = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("numerics"))
    assert "5 measured, the rest reasoned" in numerics and float(numerics.split()[2]) >= 5.0


def test_bad_input_is_one_line(capsys):
    try:
        main(["plan", "--device", "tpu"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "--device 'tpu'" in capsys.readouterr().err


def test_the_plan_knows_every_bench_file():
    """A suite added under bench/ and not to the plan's table would be missing from every plan and estimate."""
    bench = Path(__file__).resolve().parents[1] / "bench"
    assert {file for _, file, _ in SUITES} == {f"bench/{p.name}" for p in bench.glob("test_*.py")}
