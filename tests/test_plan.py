"""`python -m suites plan`: a CPU box plans the full sweep for a GPU, every suite listed with what its estimate
rests on, and a measured estimate where the last run of the device identity timed the case."""

import json

from suites.__main__ import main
from suites.plan import SUITES


def test_a_cpu_box_plans_the_full_sweep_for_a_gpu(capsys):
    assert main(["plan", "--device", "cuda"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("plan for H200 SXM (cuda, no GPU here: reasoned), profile full (the default on cuda)")
    rows = {line.split()[0]: line for line in out[3:-1]}
    assert set(rows) == {name for name, _, _ in SUITES}
    assert all("reasoned" in row for row in rows.values())
    assert out[-1].startswith("total: 1133 cases, about ") and out[-1].endswith(" min")


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
