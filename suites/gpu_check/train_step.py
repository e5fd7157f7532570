"""gpu_check rows for the training-step suite: steps per second and MFU per precision, compile off and on, the
measured AdamW bytes per parameter, and every step's wall time beside the device's busy time.

Both readers take the results of their own step through reports.format.load: `train_step` (on CUDA GPT-2 124M's
baseline and precision cases eager, and bf16 compiled) and `train_step_compiled` (the other precisions
compiled). `precision_grid` gives one row per model, precision and compile setting found (the `baseline` and
`precision` levers), `steps_and_hosts` one row per measured step.
"""

from __future__ import annotations

from pathlib import Path

from suites.gpu_check.rows import Row, number, on_cpu, read_step, size_text, sourced, status_text
from suites.training.recipe import PRECISIONS

GRID_LEVERS = ("baseline", "precision")
BYTES_PER_PARAM_RANGE = (14.0, 20.0)  # the 16-18 bytes rule of mixed-precision AdamW, with room for rounding


def grid(entries: list[dict]) -> dict[tuple[str, str, str], dict]:
    """The grid's entries by (model, precision, compile)."""
    return {(str(e.get("model")), str(e.get("precision")), str(e.get("compile"))): e for e in entries
            if e.get("lever") in GRID_LEVERS}


def grid_gaps(cases: list[dict]) -> list[str]:
    """A selection without any grid case (baseline or precision lever) lacks what the grid reads."""
    return [] if grid(cases) else ["no baseline or precision case"]


def describe(entry: dict) -> tuple[str, bool | None]:
    """The value and verdict of one grid row: steps/s, tokens/s, MFU (formula and counted), loss, compile."""
    median = number(entry, "median_s")
    if entry.get("status") != "ok" or median is None:
        return status_text(entry), None if entry.get("status") == "unsupported" and on_cpu(entry) else False
    parts = [f"{1 / median:.2f} steps/s"]
    if (tokens := number(entry, "tokens_per_s")) is not None:
        parts.append(f"{tokens:,.0f} tokens/s")
    mfu, counted = number(entry, "mfu"), number(entry, "mfu_counted")
    if mfu is not None:
        parts.append(f"MFU {100 * mfu:.1f} %" + (f" (counted {100 * counted:.1f} %)" if counted is not None else ""))
    if (loss := number(entry, "loss_after_n")) is not None:
        steps = number(entry, "n_steps")
        parts.append(f"loss after {steps:.0f} steps {loss:.3f}" if steps is not None else f"loss {loss:.3f}")
    if (compile_s := number(entry, "compile_s")) is not None:
        startup = number(entry, "compile_startup_s")
        recompiles = number(entry, "recompiles")
        parts.append(f"compile {compile_s:.0f} s" + (f" after {startup:.0f} s of compiler start-up" if startup else "")
                     + (f", {recompiles:.0f} recompiles" if recompiles is not None else ""))
    if mfu is None:  # no peak FLOP/s is known on a CPU; on a GPU it should be
        parts.append("no peak FLOP/s known, so no MFU")
        return ", ".join(parts), None if on_cpu(entry) else False
    return ", ".join(parts), 0 < mfu < 1


def memory_row(entry: dict) -> Row | None:
    """The amp_bf16 baseline's measured AdamW bytes per parameter against the 16-18 rule."""
    total = number(entry, "bytes_per_param")
    if total is None:
        return None
    parts = ", ".join(f"{k} {entry[f'bytes_per_param_{k}']:.2f}" for k in ("weights", "grads", "master", "moments")
                      if number(entry, f"bytes_per_param_{k}") is not None)
    peak = number(entry, "step_peak_alloc_bytes")
    low, high = BYTES_PER_PARAM_RANGE
    return Row("train_step memory", f"{entry.get('model')} AdamW amp_bf16 bytes/param", f"{total:.2f} ({parts})"
               + (f"; step peak {size_text(peak)}" if peak is not None else ""), "16-18 rule, 14-20",
               low <= total <= high)


def precision_grid(out: Path, step: str) -> list[Row]:
    """One row per model x precision x compile setting the step ran, then the bf16 baseline's bytes/param."""
    run = read_step(out, step)
    cells = grid(run.cases)
    rows = []
    for (model, precision, compiled), entry in sorted(cells.items(), key=lambda kv: (
            kv[0][0], PRECISIONS.index(kv[0][1]) if kv[0][1] in PRECISIONS else len(PRECISIONS), kv[0][2])):
        value, ok = describe(entry)
        rows.append(Row(f"train_step {model}", f"{precision} compile {compiled}", value, "0 < MFU < 1", ok))
    for (_, precision, compiled), entry in cells.items():
        if (precision, compiled) == ("amp_bf16", "off") and (row := memory_row(entry)):
            rows.append(row)
    return sourced(run, rows or [Row("train_step grid", "cases", "no baseline or precision case recorded", "some",
                                     False)])


def step_row(entry: dict) -> Row:
    """Wall time per step, the enqueue time, the device's busy share and whether the host held the device up."""
    wall, busy = number(entry, "step_wall_s"), number(entry, "device_busy_share")
    enqueue = number(entry, "enqueue_s")
    parts = [f"{wall * 1e3:.1f} ms/step"]
    if enqueue is not None:
        parts.append(f"enqueue {enqueue * 1e3:.1f} ms")
    if busy is not None:
        parts.append(f"device busy {busy:.0%}")
    elif entry.get("device_busy_error"):
        parts.append(f"busy time failed: {str(entry['device_busy_error'])[:80]}")
    host = entry.get("host_bound")
    parts.append({True: "host-bound", False: "not host-bound"}.get(host, "host_bound not recorded"))
    if (compile_s := number(entry, "compile_s")) is not None:
        parts.append(f"compile {compile_s:.0f} s")
    return Row("train_step wall vs busy", str(entry.get("case")), ", ".join(parts), "", None)


def steps_and_hosts(out: Path, step: str) -> list[Row]:
    """Every measured step of the run: wall time per step, the device's busy share and whether it was host-bound."""
    run = read_step(out, step)
    rows = [step_row(e) for e in run.cases if number(e, "step_wall_s") is not None]
    return sourced(run, rows or [Row("train_step wall vs busy", "steps", "no measured step recorded", "some", False)])
