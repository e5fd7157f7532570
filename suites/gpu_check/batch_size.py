"""gpu_check rows of the batch search: the largest batch per precision and checkpointing, read from the
`batch_size` step's results (on CUDA GPT-2 124M at seq 1024 within an 8 GiB budget: fp32, amp_bf16, and
amp_bf16 with activation checkpointing) through reports.format.load.

The recipe's memory lever in samples: bfloat16 activations must let a larger batch fit than fp32, and
checkpointing a larger one still; a row fails when its search found nothing or the order does not hold.
"""

from __future__ import annotations

from pathlib import Path

from suites.gpu_check.rows import Row, number, read_step, size_text, sourced, status_text

# (precision, checkpoint) in the order the recipe's levers should raise the largest batch
SEARCHES = (("fp32", "off"), ("amp_bf16", "off"), ("amp_bf16", "block"))


def searches(entries: list[dict]) -> dict[str, dict[tuple[str, str], dict]]:
    """The largest-batch searches of each model by (precision, checkpoint)."""
    found: dict[str, dict[tuple[str, str], dict]] = {}
    for entry in entries:
        if entry.get("lever") == "max_batch":
            found.setdefault(str(entry.get("model")), {})[(entry.get("precision"), entry.get("checkpoint"))] = entry
    return found


def search_gaps(cases: list[dict]) -> list[str]:
    """Models of a selection without one of the three searches, or no search at all."""
    found = searches(cases)
    gaps = [f"{model}: no {' checkpoint '.join(s)} search" for model, have in found.items() for s in SEARCHES
            if s not in have]
    return gaps if found else ["no max_batch case"]


def search_value(entry: dict) -> tuple[str, int | None]:
    """The text of one search's row and the batch it found (None: the search gave none)."""
    largest = number(entry, "max_batch")
    if largest is None:
        return status_text(entry), None
    peak, tokens = number(entry, "step_peak_bytes"), number(entry, "tokens_per_s")
    budget = number(entry, "mem_budget_bytes")
    details = [f"peak {size_text(peak)}" if peak is not None else "",
               f"within {size_text(budget)}" if budget is not None else "",
               f"{tokens:,.0f} tok/s" if tokens is not None else "",
               "" if entry.get("max_batch_exact", True) else "not exact (tries ran out)",
               "the search's cap" if entry.get("search_capped") else ""]
    timed = number(entry, "timed_batch")  # when the batch found did not fit again, the one that was timed
    if timed is not None and timed != largest:
        details.append(f"timed at {timed:.0f}: {str(entry.get('timed_batch_reason', 'no reason recorded'))[:100]}")
    if entry.get("status") != "ok":
        details.append(f"step at that batch: {status_text(entry)}")
    return f"{int(largest)} ({', '.join(d for d in details if d)})", int(largest)


def largest_batches(out: Path, step: str) -> list[Row]:
    """Per model, one row per search, in the order the recipe's levers should raise the largest batch."""
    run = read_step(out, step)
    rows = []
    for model, have in sorted(searches(run.cases).items()):
        previous = 0
        for precision, checkpoint in SEARCHES:
            check = f"largest batch {model} {precision} checkpoint {checkpoint}"
            entry = have.get((precision, checkpoint))
            if entry is None:
                rows.append(Row(check, "max_batch", "not in the results", "a search result", False))
                continue
            value, largest = search_value(entry)
            target = f"> {previous}" if previous else ">= 1"
            rows.append(Row(check, "max_batch", value, target, largest is not None and largest > previous))
            previous = largest or previous
    return sourced(run, rows or [Row("largest batch", "searches", "no max_batch case recorded", "some", False)])
