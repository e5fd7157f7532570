"""The profile a run gets when --bench-profile is not given: full on a CUDA device, quick elsewhere, said on the
run's first line and recorded in machine_info."""

import re

import pytest
import torch

from suites.harness.options import choose_profile
from tests.runs import run_bench_in_process, run_pytest_in_process


def never() -> str:
    raise AssertionError("a named device must not ask torch which device `auto` is")


@pytest.mark.parametrize(("device", "expected"), [("cuda", "full"), ("cuda:1", "full"), ("cpu", "quick")])
def test_a_named_device_gets_its_default(device, expected):
    choice = choose_profile(None, device, never)
    assert (choice.name, choice.source) == (expected, f"default on {device.split(':')[0]}")


@pytest.mark.parametrize(("found", "expected"), [("cuda", "full"), ("cpu", "quick")])
def test_auto_gets_the_default_of_the_device_it_finds(found, expected):
    assert choose_profile(None, "auto", lambda: found).name == expected


def test_a_given_profile_wins_and_says_so():
    choice = choose_profile("quick", "cuda", never)
    assert (choice.name, choice.source) == ("quick", "--bench-profile")
    assert choice.line == "profile quick (--bench-profile)"
    assert "--bench-profile quick for the short sweep" in choose_profile(None, "cuda", never).line


def collected(output: str) -> int:
    return sum("::" in line for line in output.splitlines())


def test_the_plain_command_collects_the_full_sweep_where_cuda_is_there(monkeypatch):
    """What `pytest bench/ --benchmark-only` collects on a CUDA box (--collect-only initialises no device): the
    full profile's 284 attention cases, against the quick profile's 27 on a CPU."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    on_cuda = run_pytest_in_process("bench/test_attention.py", "--collect-only")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    on_cpu = run_pytest_in_process("bench/test_attention.py", "--collect-only")
    assert (collected(on_cuda.stdout), collected(on_cpu.stdout)) == (284, 27), on_cuda.tail()


def test_a_run_says_and_records_its_profile(tmp_path):
    run = run_bench_in_process("bench/test_matmul.py", "-k", "square and 256x256x256 and float32",
                               json_path=tmp_path / "run.json")
    assert run.returncode == 0, run.tail()
    assert "bench: profile quick (the default on cpu; --bench-profile full for the real sweep); 1 cases" in run.stdout
    # then what the run is expected to cost, and on what the estimate rests
    assert re.search(r"^bench: about \d+ s for 1 cases on this device \(cpu\); estimates: [01] measured \(.*\), "
                     r"[01] reasoned \(suites/core/estimate.py\)", run.stdout, re.MULTILINE), run.stdout
    info = run.json["machine_info"]
    assert (info["bench_profile"], info["bench_profile_source"]) == ("quick", "default on cpu")


def test_a_smoke_run_states_its_profile_but_no_estimate():
    """With benchmarks disabled each case runs once, untimed: no estimate of a sampled run is said."""
    run = run_pytest_in_process("bench/test_matmul.py", "--benchmark-disable", "--bench-device", "cpu", "-k",
                                "square and 256x256x256 and float32")
    assert run.returncode == 0, run.tail()
    assert "bench: profile quick" in run.stdout and "bench: about" not in run.stdout, run.stdout
