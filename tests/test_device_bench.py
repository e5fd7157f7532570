"""`device_bench`'s declared models: checked at the call, and never a roof for the cases after it."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from suites.core import achievable
from suites.core.cases import Case
from suites.core.measurement import Measurement
from suites.core.runner import CaseResult
from suites.core.stopping import StopRule
from suites.harness.bench_session import BenchSession
from suites.harness.device_bench import DeviceBench, declared

CPU = torch.device("cpu")


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, -4096, "1e9", True, None.__class__])
def test_a_declared_count_that_is_not_one_fails_the_test_in_one_line(value):
    with pytest.raises(pytest.fail.Exception, match=r"^device_bench: bytes=.* is not a count per call") as failed:
        declared("bytes", value)
    assert not failed.value.pytrace  # a usage error: its line, not a traceback into the plugin


def test_declared_counts_pass_as_given():
    assert declared("flops", 2 * 4096**3) == 2 * 4096**3 and isinstance(declared("flops", 2 * 4096**3), int)
    assert declared("bytes", np.float64(3e9)) == 3e9 and type(declared("bytes", np.float64(3e9))) is float
    assert type(declared("flops", np.int64(7))) is int
    assert declared("bytes", 0) == 0 and declared("flops", None) is None


def test_the_fixture_checks_its_counts_before_it_runs_anything():
    """The check comes first: a NaN never reaches the callable, the runner or the figures."""
    called = []
    bench = DeviceBench(shared=None, benchmark=SimpleNamespace(_mode=None), request=None)
    with pytest.raises(pytest.fail.Exception, match="flops=nan"):
        bench(lambda: called.append(1), flops=math.nan)
    assert called == []


def _peaks() -> achievable.Peaks:
    return achievable.Peaks(flops={"float32": achievable.Found(1e12, "1x1x1", "test", 1, 0.0)},
                            bandwidth=achievable.Found(1e11, "triad", "test", 1, 0.0))


def _measured(bytes_: float, suite: str = "device_bench") -> CaseResult:
    case = Case(suite, f"test_mine.py::test_{bytes_:g}", {}, build=lambda d: None, bytes=bytes_)
    return CaseResult(case, "ok", measurement=Measurement([1.0], "cuda_event", 1, "target", StopRule(), 2))


def test_a_device_bench_case_above_its_roof_raises_none():
    """A view op declared as moving 341 GB per call read above the bandwidth roof and raised it for every later
    case of its kind. A declared model is read against the roofs and never raises one."""
    session = BenchSession(CPU, "quick", None, achievable_mode="auto", _achievable=_peaks())
    bogus = session.pct_achievable(_measured(341e9), device_bench=True)
    assert bogus["pct_achievable"] == 100.0 and bogus["above_achievable"] is True
    assert bogus["notes"][-1].startswith("3.41x the achievable device_bench bandwidth roof")
    assert "raises no roof" in bogus["notes"][-1]
    assert session.pct_achievable(_measured(5e10), device_bench=True) == {"pct_achievable": pytest.approx(50.0)}
    assert session.achievable_info()["kinds"] == {}  # nothing raised
    suites_own = session.pct_achievable(_measured(2e11, suite="conv"))  # a suite's case still raises its kind's
    assert suites_own["pct_achievable"] == 100.0 and session.achievable_info()["kinds"]["conv"]


def test_a_case_above_the_datasheet_bandwidth_gets_no_achievable_figure():
    session = BenchSession(CPU, "quick", None, achievable_mode="auto", _achievable=_peaks())
    above = _measured(5e10, suite="conv")
    above.figures = {"gbps": 9000.0, "gbps_above_peak": True}
    assert session.pct_achievable(above) == {}
