"""gpu_check rows for the attention suite: flash against naive attention, and flash against triton's do_bench.

`flash_vs_naive` reads `attention.json`, written by gpu_check's pytest run `attention` (bfloat16, head dim 128,
flash and naive, at 4k tokens (batch 4) and 16k tokens (batch 1), causal or not, fwd and fwd_bwd), and gives the
speed-up and the peak-memory ratio of flash over naive; a naive case that ran out of memory is shown as such.
`flash_do_bench` times the flash forward at 4k tokens with triton.testing.do_bench and compares TFLOP/s.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from suites.checks.crosscheck import ours_vs_do_bench
from suites.checks.gpu_check import Row
from suites.ops import attention
from suites.ops.passes import PASSES

SHAPES = ("4x16x4096x128", "1x16x16384x128")
DO_BENCH_CASE = "attention/flash/bfloat16/4x16x4096x128/noncausal/fwd"
GIB = 2**30


def _entries(path: Path) -> dict[str, dict]:
    data = json.loads(path.read_text())
    return {e["extra_info"]["case"]: e for e in data["benchmarks"] + data.get("not_measured", [])}


def _figures(entry: dict) -> str:
    info = entry["extra_info"]
    return (f"{entry['stats']['median'] * 1e3:.3g} ms, {info.get('tflops', float('nan')):.0f} TFLOP/s, "
            f"{info.get('peak_mem_bytes', float('nan')) / GIB:.2f} GiB")


def compare(flash: dict | None, naive: dict | None) -> tuple[str, bool]:
    """The value and verdict of one row: naive's time and peak memory over flash's."""
    if flash is None or naive is None:
        return "case missing from attention.json", False
    if flash["extra_info"]["status"] != "ok":
        return f"flash {flash['extra_info']['status']}: {flash['extra_info'].get('reason')}", False
    if naive["extra_info"]["status"] == "oom":
        asked = naive["extra_info"].get("requested_bytes")
        needed = f" (asked for {asked / GIB:.1f} GiB more)" if asked else ""
        return f"naive out of memory{needed}; flash {_figures(flash)}", True
    if naive["extra_info"]["status"] != "ok":
        return f"naive {naive['extra_info']['status']}: {naive['extra_info'].get('reason')}", False
    speedup = naive["stats"]["median"] / flash["stats"]["median"]
    memory = naive["extra_info"]["peak_mem_bytes"] / flash["extra_info"]["peak_mem_bytes"]
    return (f"speed-up {speedup:.2f}x, memory {memory:.1f}x less; flash {_figures(flash)}; naive {_figures(naive)}",
            speedup > 1 and memory > 1)


def flash_vs_naive(out: Path) -> list[Row]:
    """One row per shape, mask and pass: flash's speed-up and memory saving over naive attention."""
    path = out / "attention.json"
    if not path.exists():
        return [Row("attention flash vs naive", "attention.json not written", "run left out or failed", "", None)]
    entries = _entries(path)
    rows = []
    for shape in SHAPES:
        for mask in ("noncausal", "causal"):
            for pass_ in PASSES:
                ids = [f"attention/{impl}/bfloat16/{shape}/{mask}/{pass_}" for impl in ("flash", "naive")]
                value, ok = compare(*(entries.get(i) for i in ids))
                rows.append(Row("attention flash vs naive", f"{shape} {mask} {pass_}", value,
                                "faster and smaller", ok))
    return rows


def flash_do_bench(out: Path, device: torch.device) -> list[Row]:
    """The flash forward's TFLOP/s from our core (L2 flushed, as do_bench does) against triton.testing.do_bench."""
    case = next(c for c in attention.cases("full") if c.id == DO_BENCH_CASE)
    r = ours_vs_do_bench(case, device)
    theirs = case.flops / r["do_bench_s"] / 1e12
    hot = case.flops / r["ours_hot_s"] / 1e12
    return [Row("attention flash fwd vs do_bench", case.params["shape"],
                f"ours {r['tflops']:.0f} TFLOP/s cold ({hot:.0f} hot), do_bench {theirs:.0f}; ratio {r['ratio']:.3f}",
                "within 5 %", abs(r["ratio"] - 1) <= 0.05)]
