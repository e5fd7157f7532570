"""Our timer against triton's do_bench: the verdict in time and in GPU cycles, and the clocks it reads.

Why cycles: our held, spaced samples leave the GPU idle between calls and do_bench's dense loop does not, so under
a power cap the two run at other SM clocks; a compute-bound kernel's time then differs by the clock ratio while
both timers count the same cycles. The clocks here are the figures an H200 gives (1980 MHz boost, a power-capped
dense loop some 5 % lower); what a real GPU does under both loops still needs the GPU (gpu_check's rows).
"""

from __future__ import annotations

import pytest
import torch

from suites.gpu_check.crosscheck import Agreement, Clocked, clocked
from suites.ops import matmul


def test_times_within_the_tolerance_agree_whatever_the_clocks():
    agreed = Agreement(Clocked(1.01e-3, 1980.0), Clocked(1.0e-3, 1900.0), 0.03)
    assert agreed.ok and agreed.ratio == pytest.approx(1.01)
    assert agreed.text("do_bench").startswith("ratio 1.010 (ours 1010.0 us at 1980 MHz, do_bench 1000.0 us at 1900")
    assert "the timers agree" not in agreed.text("do_bench")


def test_a_time_apart_by_the_clock_ratio_agrees_in_cycles_and_says_the_clocks_differed():
    # ours 4 % faster at a 4 % higher clock: the same cycles; a plain 3 % verdict failed this row falsely
    agreed = Agreement(Clocked(0.960e-3, 1980.0), Clocked(1.0e-3, 1900.0), 0.03)
    assert abs(agreed.ratio - 1) > 0.03
    assert agreed.cycles_ratio == pytest.approx(0.96 * 1980 / 1900)
    assert agreed.ok
    text = agreed.text("do_bench")
    assert "in cycles 1.000" in text and "the GPU ran at other clocks" in text


def test_a_difference_the_clocks_do_not_explain_fails():
    same_clock = Agreement(Clocked(0.960e-3, 1980.0), Clocked(1.0e-3, 1980.0), 0.03)
    assert not same_clock.ok and "in cycles 0.960" in same_clock.text("do_bench")
    wrong_way = Agreement(Clocked(0.960e-3, 1900.0), Clocked(1.0e-3, 1980.0), 0.03)  # faster at a lower clock
    assert not wrong_way.ok


def test_without_clocks_the_verdict_is_in_time_and_says_why_the_clocks_are_missing():
    unknown = Agreement(Clocked(0.960e-3, None, "NVML could not be initialised"), Clocked(1.0e-3, 1900.0), 0.03)
    assert unknown.cycles_ratio is None and not unknown.ok
    assert unknown.text("do_bench").endswith("; SM clocks not read (NVML could not be initialised)")
    assert Agreement(Clocked(1.0e-3, None, "x"), Clocked(1.0e-3, None, "x"), 0.03).ok


def test_clocks_read_around_a_real_timing_on_this_machine_say_why_there_are_none():
    case = matmul.make_case(matmul.MatmulShape("square", 64, 64, 64), "float32")
    fn = case.build(torch.device("cpu")).fn
    calls = []

    def timed() -> float:
        calls.append(fn())
        return 1e-4

    got = clocked(torch.device("cpu"), case, timed)
    assert got.seconds == 1e-4 and len(calls) == 1
    assert got.sm_clock_mhz is None and got.clock_reason  # NVML absent here, or a CPU it does not observe
