"""gpu_check rows of the batch search: the largest batch of GPT-2 124M at seq 1024 for fp32, amp_bf16 and amp_bf16 with
activation checkpointing, read from `batch_size.json` (gpu_check's pytest run `batch_size`).

The recipe's memory lever in samples: bfloat16 activations must let a larger batch fit than fp32, and
checkpointing a larger one still; a row fails when its search found nothing or the order does not hold.
"""

from __future__ import annotations

import json
from pathlib import Path

from suites.checks.gpu_check import Row

MODEL = "gpt2-124m"
SEARCHES = (("fp32", "off"), ("amp_bf16", "off"), ("amp_bf16", "block"))


def _found(path: Path, model: str) -> dict[tuple[str, str], dict]:
    entries = json.loads(path.read_text()).get("benchmarks", [])
    return {(e["params"]["precision"], e["params"]["checkpoint"]): e["extra_info"] for e in entries
            if e.get("params", {}).get("lever") == "max_batch" and e["params"].get("model") == model}


def largest_batches(out: Path, model: str = MODEL) -> list[Row]:
    """One row per search, in the order the recipe's levers should raise the largest batch."""
    path = out / "batch_size.json"
    if not path.exists():
        return [Row("largest batch", "batch_size.json not written", "run left out or failed", "", None)]
    found = _found(path, model)
    rows, previous = [], 0
    for precision, checkpoint in SEARCHES:
        info = found.get((precision, checkpoint))
        check = f"largest batch {model} {precision} checkpoint {checkpoint}"
        if info is None:
            rows.append(Row(check, "max_batch", "not measured", "a search result", False))
            continue
        largest = info["max_batch"]
        value = f"{largest} (peak {info['step_peak_bytes'] / 2**30:.1f} GiB, {info.get('tokens_per_s', 0):,.0f} tok/s)"
        rows.append(Row(check, "max_batch", value, f"> {previous}" if previous else ">= 1", largest > previous))
        previous = largest
    return rows
