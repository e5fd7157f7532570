"""gpu_check rows for the attention suite: flash against naive attention, and flash against triton's do_bench.

`flash_vs_naive` reads `attention.json` (gpu_check's `attention` step: on CUDA bfloat16, head dim 128, at 4k
tokens (batch 4) and 16k tokens (batch 1), causal or not, fwd and fwd_bwd) through reports.format.load and pairs every
flash case with the naive case of the same dtype, shape, mask and pass (by their params, as the suite made
them): one row per pair with the speed-up and the peak-memory ratio of flash over naive. A naive case out of
memory is a pass that says how much it asked for; a flash case not measured (unsupported here) fails with its
reason. `flash_do_bench` times the flash forward at 4k tokens with triton.testing.do_bench and compares TFLOP/s.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import torch

from suites.core.cases import Case
from suites.gpu_check.crosscheck import Agreement, ours_vs_do_bench
from suites.gpu_check.rows import Row, number, on_cpu, read_step, size_text, sourced, status_text
from suites.ops import attention

PAIR_KEYS = ("dtype", "shape", "causal", "pass")  # what a flash case and its naive partner share
DO_BENCH_TOLERANCE = 0.05
DO_BENCH_PARAMS = {"impl": "flash", "dtype": "bfloat16", "shape": "4x16x4096x128", "causal": "false", "pass": "fwd"}


def _key(entry: dict) -> tuple:
    return tuple(str(entry.get(k)) for k in PAIR_KEYS)


def pairs(entries: list[dict]) -> dict[tuple, dict[str, dict]]:
    """Flash and naive entries by what they share: {(dtype, shape, causal, pass): {"flash": .., "naive": ..}}."""
    found: dict[tuple, dict[str, dict]] = {}
    for entry in entries:
        if entry.get("impl") in ("flash", "naive"):
            found.setdefault(_key(entry), {})[entry["impl"]] = entry
    return found


def pair_gaps(cases: list[dict]) -> list[str]:
    """Flash or naive cases of a selection without their partner, or no pair at all."""
    found = pairs(cases)
    gaps = [f"{' '.join(key)}: no {impl} case" for key, pair in found.items() for impl in ("flash", "naive")
            if impl not in pair]
    return gaps if found else ["no flash and naive cases"]


def _figures(entry: dict) -> str:
    median, tflops, peak = number(entry, "median_s"), number(entry, "tflops"), number(entry, "peak_mem_bytes")
    return ", ".join(part for part in (f"{median * 1e3:.3g} ms" if median else "",
                                       f"{tflops:.3g} TFLOP/s" if tflops else "",
                                       size_text(peak) if peak is not None else "") if part)


def compare(flash: dict | None, naive: dict | None) -> tuple[str, bool | None]:
    """The value and verdict of one row: naive's time and peak memory over flash's (on a CPU a figure only:
    flash attention is a GPU kernel's claim)."""
    if flash is None or naive is None:
        return f"{'flash' if flash is None else 'naive'} case missing from the results", False
    if flash.get("status") != "ok" or number(flash, "median_s") is None:
        return f"flash {status_text(flash)}", False
    if naive.get("status") == "oom":
        asked = number(naive, "requested_bytes")
        needed = f" (asked for {size_text(asked)} more)" if asked else ""
        return f"naive out of memory{needed}; flash {_figures(flash)}", True
    if naive.get("status") != "ok" or number(naive, "median_s") is None:
        return f"naive {status_text(naive)}", False
    speedup = naive["median_s"] / flash["median_s"]
    text = f"speed-up {speedup:.2f}x"
    flash_mem, naive_mem = number(flash, "peak_mem_bytes"), number(naive, "peak_mem_bytes")
    memory = naive_mem / flash_mem if flash_mem and naive_mem is not None else None
    text += f", naive's peak memory {memory:.1f}x flash's" if memory is not None else ", peak memory not recorded"
    ok = None if on_cpu(flash) else speedup > 1 and (memory is None or memory > 1)
    return f"{text}; flash {_figures(flash)}; naive {_figures(naive)}", ok


def flash_vs_naive(out: Path, step: str) -> list[Row]:
    """One row per shape, mask and pass: flash's speed-up and memory saving over naive attention."""
    run = read_step(out, step)
    rows = []
    for key, pair in sorted(pairs(run.cases).items()):
        value, ok = compare(pair.get("flash"), pair.get("naive"))
        dtype, shape, causal, pass_ = key
        rows.append(Row("attention flash vs naive", f"{dtype} {shape} {'causal' if causal == 'true' else 'noncausal'} "
                        f"{pass_}", value, "faster and smaller", ok))
    return sourced(run, rows or [Row("attention flash vs naive", "pairs", "no flash and naive cases recorded",
                                     "a pair", False)])


def do_bench_case() -> Case:
    """The suite's flash forward at 4k tokens (bf16, batch 4, head dim 128, no mask)."""
    return next(c for c in attention.cases("full") if all(c.params.get(k) == v for k, v in DO_BENCH_PARAMS.items()))


def flash_do_bench(out: Path, device: torch.device) -> Iterator[Row]:
    """The flash forward's TFLOP/s from our core (L2 flushed, as do_bench does) against triton.testing.do_bench,
    compared in time and, where the SM clocks differed, in cycles (suites.gpu_check.crosscheck.Agreement)."""
    case = do_bench_case()
    r = ours_vs_do_bench(case, device)
    agreed = Agreement(r["ours_cold"], r["do_bench"], DO_BENCH_TOLERANCE)
    theirs = case.flops / r["do_bench"].seconds / 1e12
    hot = case.flops / r["ours_hot_s"] / 1e12
    yield Row("attention flash fwd vs do_bench", case.id,
              f"ours {r['tflops']:.0f} TFLOP/s cold ({hot:.0f} hot), do_bench {theirs:.0f}; {agreed.text('do_bench')}",
              f"within {DO_BENCH_TOLERANCE:.0%} in time, or in cycles where the clocks differ", agreed.ok)
