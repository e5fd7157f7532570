"""The GPU check's second step: does the measurement core measure what it claims, on this machine?

- A host-bound op (one tiny add, a few microseconds of host per launch and less of device): with the stream held
  until the host has enqueued a sample, its device time must come out well below its enqueue time and the case
  must say `host_bound`; a fixed short spin would instead report the host's time as device time.
- A large bf16 gemm is device-bound, and its sampling stops on its own (`target` or `plateau`), not at the timeout.
- Our median against torch.utils.benchmark's `Timer.blocked_autorange` on the same matmul, and (CUDA) against
  triton.testing.do_bench with the L2 flushed as do_bench flushes it, each with the SM clock it ran at: our
  spaced samples and do_bench's dense loop may run at other clocks under the power cap, so the row also compares
  cycles (suites.gpu_check.crosscheck.Agreement) and says which clocks it saw.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from suites.core.profiles import Profile, rules
from suites.core.timing import measure
from suites.gpu_check.crosscheck import Agreement, ours_vs_do_bench, ours_vs_torch_benchmark
from suites.gpu_check.rows import Row
from suites.ops import matmul

# Without the hold, the GPU waits for the host between kernels and device time comes out equal to the enqueue time;
# with it, device time is the kernels' own (a few microseconds against a host's 4-10 per launch).
HOST_BOUND_DEVICE_SHARE = 0.8
CUDA_GEMM = matmul.MatmulShape("square", 4096, 4096, 4096)
CPU_GEMM = matmul.MatmulShape("square", 256, 256, 256)
DO_BENCH_TOLERANCE = 0.03


def host_bound_rows(device: torch.device) -> list[Row]:
    """The hold keeps a slow host out of device time: a tiny add is host-bound, a big gemm is not."""
    x = torch.randn(256, device=device)
    full = rules(Profile.FULL).stop
    tiny = measure(lambda: torch.add(x, 1.0), device, full)
    held = (f"device {tiny.median_s * 1e6:.2f} us, enqueue {tiny.enqueue_s * 1e6:.2f} us per call, "
            f"{tiny.calls_per_sample} calls per sample, hold {tiny.hold_s * 1e6:.0f} us, "
            f"{tiny.dropped_samples} samples dropped and retaken")
    gemm = matmul.make_case(CUDA_GEMM, "bfloat16").build(device).fn
    big = measure(gemm, device, full)
    return [
        Row("timing hold", "tiny add: device time below enqueue time, host_bound", held,
            f"device < {HOST_BOUND_DEVICE_SHARE:g} x enqueue, host_bound",
            bool(tiny.host_bound) and tiny.median_s < HOST_BOUND_DEVICE_SHARE * tiny.enqueue_s),
        Row("timing hold", "bf16 4096^3 gemm: device-bound, stops on its own",
            f"{big.median_s * 1e3:.3f} ms, enqueue {big.enqueue_s * 1e6:.1f} us, rel_iqr {big.rel_iqr:.4f}, "
            f"stop {big.stop_reason}, {len(big.samples_s)} samples", "not host_bound, stop target or plateau",
            big.host_bound is False and big.converged),
    ]


def timing_checks(out: Path, device: torch.device) -> Iterator[Row]:
    """Each row as soon as it is measured, so that a later part failing (triton missing) keeps the earlier ones."""
    cuda = device.type == "cuda"
    case = matmul.make_case(CUDA_GEMM if cuda else CPU_GEMM, "bfloat16" if cuda else "float32")
    if cuda:
        yield from host_bound_rows(device)
    theirs = ours_vs_torch_benchmark(case, device, rule=rules(Profile.FULL if cuda else Profile.QUICK).stop)
    yield Row("timing vs torch.utils.benchmark", case.id,
              f"ratio {theirs['ratio']:.3f} (ours {theirs['ours_s'] * 1e6:.1f} us, "
              f"theirs {theirs['torch_utils_benchmark_s'] * 1e6:.1f} us)", "within 5 %" if cuda else "",
              abs(theirs["ratio"] - 1) <= 0.05 if cuda else None)
    if cuda:
        cold = ours_vs_do_bench(case, device)
        agreed = Agreement(cold["ours_cold"], cold["do_bench"], DO_BENCH_TOLERANCE)
        yield Row("timing vs triton do_bench", f"{case.id} (L2 flushed)",
                  f"{agreed.text('do_bench')}; {cold['tflops']:.0f} TFLOP/s",
                  f"within {DO_BENCH_TOLERANCE:.0%} in time, or in cycles where the clocks differ", agreed.ok)
