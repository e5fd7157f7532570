"""What `python -m suites advise` decides from a sweep's results: which lever helps, which setting to recommend,
and what it cannot judge. Pure rules over the sweep's rows (`SweepCase`, read from its results files by
`read_rows`); running the sweep is suites/training/advise_sweep.py's, the command line suites/training/advise.py's.

From the measured cases it picks the levers that each made the step faster beyond the noise (`helps`), and
recommends the fastest measured setting that fits the memory budget and whose loss over the seeded steps stays
finite and close to fp32's (`recommend`).

It ranks only cases whose step time it can trust. A case measured under host contention (its timer includes
the host: reports/change.py `host_disturbed`), one that did not converge or ran throttled (`trust.doubts`)
is measured once more (`doubted`, then `merge` of the second rows); if it still cannot be trusted it is left out
of the ranking, and the report says which and why. A busy host moves whole windows of the sweep, which no
quartile of one case shows: from a sweep on this project's loaded 2-core CPU whose every case was contended and
unconverged, the rule before said fused AdamW "helps: 29.17x" (tests/data/busy_gate). When the baseline itself
cannot be trusted nothing is ranked (exit `NOT_JUDGED`, 3, as compare's gate). A setting "diverges" only against
fp32's trajectory: its loss at each seeded step against fp32's at the same step (the same batch), measured in
how far fp32's own loss moved over the steps, so a batch that teaches the model nothing (fp32's loss rising) does
not turn rounding into divergence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
from tabulate import tabulate

from reports.format import load, trust
from suites.training.train_step import Levers

PARITY_TOLERANCE = 0.10  # largest |loss_i - fp32's loss_i| over the seeded steps / how far fp32's loss moved
MIN_GAIN = 0.03  # a lever helps when it is this much faster and its step times' IQR lies below the baseline's
LEVER_FIELD = {"compile": "compile", "optimizer": "optimizer", "memory_format": "memory_format"}  # combined
MEMORY_LEVERS = ("checkpoint", "accum")  # trade time for memory: chosen only when nothing else fits the budget
# exit statuses of a report (`report`); NOT_JUDGED as compare's gate: re-run on a quiet machine
FAILED, NOT_JUDGED = 1, 3


@dataclass
class SweepCase:
    """One case of the sweep as the JSON holds it."""

    lever: str
    label: str
    levers: Levers
    status: str
    reason: str | None = None
    median_s: float | None = None
    q1_s: float | None = None
    q3_s: float | None = None
    peak_mem_bytes: int | None = None
    loss_first: float | None = None
    loss_after_n: float | None = None
    losses: tuple[float, ...] | None = None  # every seeded step's loss (`seeded_losses`; older files: none)
    n_steps: int | None = None
    parity_rel: float | None = None  # the largest gap to fp32's loss at the same step / how far fp32's moved
    parity_step: int | None = None  # the step (from 1) of that gap
    distrust: str = ""  # why its step time cannot rank it (host contention, not converged, throttled), or ''
    remeasured: str = ""  # why the first measurement was not trusted, when this row is the second one

    @property
    def measured(self) -> bool:
        return self.status == "ok" and self.median_s is not None


def levers_of(params: dict) -> Levers:
    """The settings of a case from its params (the inverse of user_model's params)."""
    return Levers(precision=params["precision"], compile=params["compile"] == "on", optimizer=params["optimizer"],
                  checkpoint=params["checkpoint"] != "off", accum=int(params["accum"]), sync=params["sync"] != "none",
                  memory_format=params["memory_format"])


FIELDS = ("case", "lever", "status", "reason", "median_s", "q1_s", "q3_s", "peak_mem_bytes", "loss_first",
          "loss_after_n", "seeded_losses", "n_steps")


def _present(value: object) -> object:
    """A frame cell as a Python value: None where the case has no such field (pandas' NaN)."""
    if isinstance(value, list | tuple | np.ndarray):
        return tuple(float(x) if x is not None else math.nan for x in value)
    return None if pd.isna(value) else value


def distrust(record: dict) -> str:
    """Why a case's step time cannot rank it, or '': host contention where its timer includes the host
    (reports/change.py, `host_disturbed`), and the doubts compare has of one run's figure (`doubts`: not
    converged, throttled). The one rule of the reports, read from the same fields."""
    reasons = []
    if trust.host_disturbed(record):
        detail = record.get("contention")
        share = detail.get("share") if isinstance(detail, dict) else None
        reasons.append(f"host contention (share {share:.0%})" if isinstance(share, int | float) else "host contention")
    return ", ".join(reasons + trust.doubts(record, noise_measured=False))


def _row(record: dict) -> SweepCase:
    get = {key: _present(record.get(key)) for key in FIELDS}.get
    label = str(get("case") or "").rsplit("/", 1)[-1]
    return SweepCase(get("lever"), label, levers_of(record), get("status") or "error", get("reason"), get("median_s"),
               get("q1_s"), get("q3_s"), get("peak_mem_bytes"), get("loss_first"), get("loss_after_n"),
               get("seeded_losses"), get("n_steps"), distrust=distrust(record) if get("status") == "ok" else "")


def read_rows(path: Path) -> list[SweepCase]:
    """Measured and not-measured cases of a results file written by the sweep, read by the reports' loader (the
    project's one checked reader of results files)."""
    return [_row(record) for record in load.load([path]).to_dict("records")]


def trajectory(row: SweepCase) -> tuple[np.ndarray, list[int]] | None:
    """The losses of a case's seeded steps and their step numbers (from 1): every step's where the file has them,
    else the first and the last (files written before `seeded_losses`)."""
    if row.losses:
        return np.asarray(row.losses, dtype=float), list(range(1, len(row.losses) + 1))
    if row.loss_first is None or row.loss_after_n is None:
        return None
    return np.asarray([row.loss_first, row.loss_after_n], dtype=float), [1, int(row.n_steps or 2)]


def fp32_row(rows: list[SweepCase]) -> SweepCase | None:
    return next((r for r in rows if r.lever == "precision" and r.label == "fp32" and r.loss_after_n is not None),
                None)


def movement(losses: np.ndarray) -> float:
    """How far a loss moved from its first step in either direction over the seeded steps, at least 1 % of the
    first loss: the scale of a gap to fp32. A falling loss moves by its progress; a rising one (a batch that
    teaches the model nothing in a few steps) by its rise, not by nothing, so rounding stays small beside it."""
    return max(float(np.max(np.abs(losses - losses[0]))), 0.01 * abs(float(losses[0])), 1e-12)


def add_parity(rows: list[SweepCase]) -> None:
    """Each case's losses against fp32's at the same seeded steps (the same batches): the largest gap, in units
    of how far fp32's own loss moved, and the step where it lies."""
    fp32 = fp32_row(rows)
    reference = trajectory(fp32) if fp32 else None
    if reference is None:
        return
    for r in rows:
        found = trajectory(r)
        if found is None:
            continue
        (losses, steps), (ref, _) = found, reference
        if len(losses) != len(ref):  # a file with every step's loss beside one with only the ends
            losses, ref, steps = losses[[0, -1]], ref[[0, -1]], [steps[0], steps[-1]]
        if not np.all(np.isfinite(ref)):
            r.parity_rel, r.parity_step = math.nan, None
            continue
        gaps = np.abs(losses - ref)
        if not np.all(np.isfinite(gaps)):  # a loss that is not finite at some step: as far off as can be
            at = int(np.argmax(~np.isfinite(gaps)))
            r.parity_rel, r.parity_step = math.inf, steps[at]
            continue
        at = int(np.argmax(gaps))
        r.parity_rel, r.parity_step = float(gaps[at]) / movement(ref), steps[at]


def rejection(row: SweepCase, budget: int | None) -> str | None:
    """Why a case cannot be recommended whatever its speed, or None."""
    if row.status == "unsupported":
        reason = row.reason or ""
        return ("fails to compile: " if reason.startswith("torch.compile failed") else "unsupported here: ") + reason
    if row.status == "oom":
        return f"does not fit (out of memory): {row.reason}"
    if row.status != "ok":
        return f"fails: {row.reason}"
    if budget is not None and row.peak_mem_bytes is not None and row.peak_mem_bytes > budget:
        return f"over the memory budget ({_bytes(row.peak_mem_bytes)} > {_bytes(budget)})"
    if not _finite(row.loss_first) or not _finite(row.loss_after_n):
        return ("no finite loss: the seeded steps ended with a loss of "
                f"{'NaN or inf' if row.loss_after_n is None else row.loss_after_n} (first {row.loss_first})")
    if row.parity_rel is not None and math.isnan(row.parity_rel):
        return "the loss cannot be compared with fp32's: fp32's own loss is not finite"
    if row.parity_rel is not None and math.isinf(row.parity_rel):
        return f"diverges: its loss is not finite at seeded step {row.parity_step}"
    if row.parity_rel is not None and row.parity_rel > PARITY_TOLERANCE:
        return (f"diverges: at seeded step {row.parity_step} its loss is {row.parity_rel:.1%} of fp32's movement "
                f"away from fp32's at that step (tolerance {PARITY_TOLERANCE:.0%})")
    return None


def _finite(value: float | None) -> bool:
    """Every measured step case records its losses; one that reads as missing was not finite (a results file
    cannot hold NaN or inf as a number), and a setting whose loss is not finite is no setting to recommend."""
    return value is not None and math.isfinite(value)


def speedup(row: SweepCase, base: SweepCase) -> float:
    return base.median_s / row.median_s


def trusted(row: SweepCase) -> bool:
    return row.measured and not row.distrust


def helps(row: SweepCase, base: SweepCase) -> bool:
    """Faster than the baseline beyond the noise: both step times trusted (`distrust`), by MIN_GAIN, and every
    step time of its interquartile range below the baseline's (a shared machine moves single steps a lot; the
    quartiles of both must not overlap). The reports define `faster` in reports/change.py, which says why this
    advisor keeps a rule of its own."""
    return trusted(row) and trusted(base) and speedup(row, base) > 1 + MIN_GAIN and row.q3_s < base.q1_s


def hurts(row: SweepCase, base: SweepCase) -> bool:
    """Slower than the baseline beyond the noise (the mirror of `helps`)."""
    return trusted(row) and trusted(base) and speedup(row, base) < 1 - MIN_GAIN and row.q1_s > base.q3_s


def verdict(row: SweepCase, base: SweepCase | None, budget: int | None) -> str:
    """One lever's effect in words: why it is rejected, or how its speed compares with the baseline's."""
    if reason := rejection(row, budget):
        return reason
    if row.lever == "baseline" or base is None or not base.measured:
        return "reference" if row.lever == "baseline" else "measured (no baseline to compare with)"
    ratio = speedup(row, base)
    if doubt := row.distrust or (base.distrust and f"the baseline's {base.distrust}"):
        if row.lever in MEMORY_LEVERS:
            return (f"{ratio:.2f}x speed, not judged ({doubt}), for {_bytes(row.peak_mem_bytes)} peak (baseline "
                    f"{_bytes(base.peak_mem_bytes)})")
        return f"not judged: {ratio:.2f}x, {doubt}"
    if row.lever == "sync":
        return (f"a loss.item() every step costs {1 / ratio - 1:.0%} step time: log less often" if hurts(row, base)
                else "no clear cost of a loss.item() every step here")
    if row.lever in MEMORY_LEVERS:
        return f"{ratio:.2f}x speed for {_bytes(row.peak_mem_bytes)} peak (baseline {_bytes(base.peak_mem_bytes)})"
    if helps(row, base):
        return f"helps: {ratio:.2f}x"
    if hurts(row, base):
        return f"slower here: {ratio:.2f}x"
    return f"no clear effect: {ratio:.2f}x, the step times' quartiles overlap the baseline's"


def combination(rows: list[SweepCase], budget: int | None) -> Levers:
    """The fastest acceptable precision (the baseline's unless another is faster beyond the noise), plus each
    other speed lever that helped alone; a memory lever only when the baseline does not fit the budget."""
    base = next(r for r in rows if r.lever == "baseline")
    ok = [r for r in rows if r.measured and rejection(r, budget) is None]
    fastest = min((r for r in ok if r.lever in ("baseline", "precision") and trusted(r)), key=lambda r: r.median_s,
                  default=base)
    keep = base in ok and (fastest is base or not helps(fastest, base))
    chosen = base.levers if keep else replace(base.levers, precision=fastest.levers.precision)
    for r in ok:
        if r.lever in LEVER_FIELD and base.measured and helps(r, base):
            chosen = replace(chosen, **{LEVER_FIELD[r.lever]: getattr(r.levers, LEVER_FIELD[r.lever])})
    if not base.measured or (budget is not None and (base.peak_mem_bytes or 0) > budget):
        saver = min((r for r in ok if r.lever in MEMORY_LEVERS), key=lambda r: r.peak_mem_bytes or 0, default=None)
        if saver is not None:
            chosen = replace(chosen, checkpoint=saver.levers.checkpoint, accum=saver.levers.accum)
    return chosen


def label(levers: Levers) -> str:
    """`fp32-compiled-fused-channels_last`: the settings that differ from an eager foreach contiguous step."""
    parts = [levers.precision, "compiled" if levers.compile else "eager"]
    parts += [p for p, on in (("fused", levers.optimizer == "fused"), ("checkpoint", levers.checkpoint),
                              (f"accum{levers.accum}", levers.accum > 1),
                              ("channels_last", levers.memory_format == "channels_last")) if on]
    return "-".join(parts)


def recommend(rows: list[SweepCase], budget: int | None) -> SweepCase | None:
    """The fastest measured acceptable setting among the baseline and those faster than it beyond the noise
    (`helps`), so that the recommendation agrees with the verdicts; None when nothing is acceptable. A step that
    syncs every step is no setting to choose, and a memory lever is one only when no setting without it fits."""
    ok = [r for r in rows if r.measured and r.lever != "sync" and rejection(r, budget) is None]
    candidates = [r for r in ok if r.lever not in MEMORY_LEVERS] or ok
    if not candidates:
        return None
    base = next((r for r in candidates if r.lever == "baseline"), None)
    reference = base or min([r for r in candidates if trusted(r)] or candidates, key=lambda r: r.median_s)
    return min([reference, *(r for r in candidates if helps(r, reference))], key=lambda r: r.median_s)


def _bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def table(rows: list[SweepCase], budget: int | None) -> str:
    base = next((r for r in rows if r.lever == "baseline"), None)
    lines = [{"lever": r.lever, "setting": r.label,
              "step": f"{r.median_s * 1e3:.1f} ms" if r.measured else r.status,
              "speed vs baseline": f"{speedup(r, base):.2f}x" if r.measured and base and base.measured else "-",
              "peak memory": _bytes(r.peak_mem_bytes),
              "loss vs fp32": "-" if r.parity_rel is None else f"{r.parity_rel:.1%}",
              "verdict": verdict(r, base, budget)} for r in rows]
    return tabulate(lines, headers="keys", tablefmt="github")


def doubted(rows: list[SweepCase], budget: int | None) -> list[SweepCase]:
    """The measured cases that could be recommended but whose step time cannot be trusted."""
    return [r for r in rows if r.measured and r.distrust and rejection(r, budget) is None]


def merge(rows: list[SweepCase], again: list[SweepCase], budget: int | None) -> list[SweepCase]:
    """The sweep's rows with each doubted case replaced by its measured second row, which keeps why the first
    was doubted; a case whose second run measured nothing keeps its first row."""
    first = {(r.lever, r.label): r.distrust for r in doubted(rows, budget)}
    second = {(r.lever, r.label): r for r in again if r.measured}
    return [replace(second[key], remeasured=first[key]) if (key := (r.lever, r.label)) in first and key in second
            else r for r in rows]


def unranked(rows: list[SweepCase], budget: int | None) -> str | None:
    """Why nothing can be ranked: the baseline, which every lever is compared with, has a step time that cannot
    be trusted (even measured twice); None when it can (or when there is no acceptable baseline)."""
    base = next((r for r in rows if r.lever == "baseline"), None)
    if base is None or base not in doubted(rows, budget):
        return None
    return (f"Nothing ranked: the baseline's step time cannot be trusted ({base.distrust}"
            f"{', measured twice' if base.remeasured else ''}), so no lever can be compared with it. Rerun where "
            "nothing else takes the machine's CPUs.")


def trust_notes(rows: list[SweepCase], budget: int | None) -> list[str]:
    """What the ranking left out and why, and which cases were measured twice (docs/your_model.md)."""
    notes = []
    if twice := [r for r in rows if r.remeasured]:
        notes.append("Measured twice, the first step time not trusted: " + "; ".join(
            f"{r.lever}/{r.label} (first: {r.remeasured}; second: {r.distrust or 'trusted'})" for r in twice) + ".")
    if left := [r for r in doubted(rows, budget) if r.lever != "baseline"]:
        notes.append("Left out of the ranking, their step times not trusted: " + "; ".join(
            f"{r.lever}/{r.label} ({r.distrust})" for r in left) + ". Rerun where nothing else takes the machine's "
            "CPUs to rank them.")
    if (fp32 := fp32_row(rows)) is not None and (found := trajectory(fp32)) and found[0][-1] > found[0][0]:
        (losses, steps) = found
        notes.append(f"fp32's own loss rose over the {steps[-1]} seeded steps ({losses[0]:.4g} -> "
                     f"{losses[-1]:.4g}): its batches teach the model little in that many "
                     "steps. Each setting is compared with fp32 at the same steps, against how far fp32's loss "
                     "moved; give batches with structure for a sharper check.")
    return notes


def advice(rows: list[SweepCase], budget: int | None) -> str | None:
    """The recommendation in one sentence (None when no setting qualifies)."""
    best, base = recommend(rows, budget), next(r for r in rows if r.lever == "baseline")
    if best is None:
        return None
    if best is base:
        return (f"Recommended: keep {label(best.levers)} (the baseline, {best.median_s * 1e3:.1f} ms per step): "
                "no lever made the step faster beyond the noise here.")
    versus = f", {speedup(best, base):.2f}x the baseline's speed" if base.measured else ""
    if reason := rejection(base, budget):
        versus += f" (the baseline is rejected: {reason.split(':')[0]})"
    parity = "" if best.parity_rel is None else f", loss within {best.parity_rel:.1%} of fp32's movement of fp32's"
    return (f"Recommended: {label(best.levers)} ({best.lever} case): {best.median_s * 1e3:.1f} ms per step{versus}, "
            f"peak memory {_bytes(best.peak_mem_bytes)}{parity}.")


def report(rows: list[SweepCase], budget: int | None) -> tuple[str, int]:
    """The table, what the ranking left out, the recommendation, and the exit status: 0 with a recommendation,
    NOT_JUDGED when the baseline's time cannot be trusted (nothing ranked), FAILED when no setting qualifies."""
    blocked = unranked(rows, budget)
    sentence = blocked or advice(rows, budget)
    parts = [table(rows, budget), *trust_notes(rows, budget),
             sentence or "No setting ran within the budget and close to fp32; see the verdicts above."]
    return "\n\n".join(parts), NOT_JUDGED if blocked else 0 if sentence else FAILED
