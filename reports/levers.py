"""What each lever of the mixed-precision recipe is worth on the machine that produced the results.

A lever's effect is measured, never assumed: cases that differ only in the lever's axis (e.g. `dtype` float32
vs bfloat16, everything else equal) are paired, and the ratio of their figures is summarized as a geometric
mean with its range over the pairs. A lever without such pairs in the results is reported as not measured.
The specs name the stable params of docs/results.md and of each suite (matmul, conv, attention, train_step).

Every figure carries its uncertainty, so that noise is not read as an effect (a conv pair on a loaded CPU once
gave "channels-last 59x"): the 95 % interval of the geometric mean comes from the noise of each pair's two cases
(a case's run-to-run noise from its rounds, else the noise reports/change.py assumes for a run without rounds,
`ASSUMED_NOISE_PCT`) and from the spread of the pairs around their mean; the range says how far apart the pairs
(shapes, models) lie. A pair whose case
did not converge (without rounds), ran throttled or under host contention is doubtful: the effect is taken over
the other pairs, and where every pair is doubtful it is marked `uncertain` with why. Timing effects get the
verdict of reports/change.py (`faster`, `slower`, `same` or `unsure`, the variant against the baseline), the
same rule as `compare`; an `unsure` one, or one whose interval spans more than `WIDE_FACTOR`, is marked
`uncertain`. Memory and bytes per parameter are exact counts: their figures have no noise interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from reports import change, noise
from reports.format import trust

OFF = {"off", "none", "no", "false", "0", "eager", "disabled"}
# Params that name the experiment rather than a setting (train_step's `lever`: "baseline", "precision", ...):
# the twin of a case differs in it, so it never keys a pair.
NOT_AXES = {"lever"}
# Experiments whose cases are not like for like: a largest-batch search times each case at its own batch size.
UNPAIRED_LEVERS = {"max_batch"}
TIMED = ("speedup", "throughput")  # kinds whose figure comes from a time, and so carries its noise
WIDE_FACTOR = 4.0  # an interval whose high end is more than this times its low end says too little to state


@dataclass(frozen=True)
class Spec:
    """One comparison: in `group`, cases with `axis` = variant against the same cases with `axis` = baseline.

    `figure` is the column compared; `kind` says how the ratio reads: `speedup` (baseline time / variant
    time), `throughput` (variant / baseline TFLOP/s), `memory` (variant / baseline bytes) or `state` (variant /
    baseline bytes per parameter). `ignore` lists
    axes that change together with this one (an odd shape has another `shape` string than its aligned twin).
    A baseline or variant of None means the axis's off-like value (off, none, false) or its other value.
    `layers` keeps only rows whose `layer` matches this regex (conv: the 3x3 layers, aligned or not).
    """

    lever: str
    group: str
    axis: str
    baseline: str | None
    variant: str | None
    figure: str = "median_s"
    kind: str = "speedup"
    ignore: tuple[str, ...] = ()
    layers: str | None = None


@dataclass
class Effect:
    """The measured effect of one Spec on one device, or why there is none."""

    lever: str
    comparison: str
    ratio: float | None  # geometric mean over pairs, in the Spec's `kind` reading
    low: float | None  # range over the pairs
    high: float | None
    pairs: int

    unit: str = "x"
    over: str = "pairs"
    ci_low: float | None = None  # 95 % interval of `ratio` (timed kinds)
    ci_high: float | None = None
    verdict: str = ""  # reports/change.py's, the variant against the baseline (timed kinds)
    doubt: str = ""  # why the figure is uncertain, or which pairs were left out

    @property
    def uncertain(self) -> bool:
        """The figure says too little to be stated as an effect: every pair doubtful, a verdict that cannot
        tell, or an interval wider than WIDE_FACTOR."""
        if not self.pairs:
            return False
        wide = self.ci_low is not None and not (self.ci_low > 0 and self.ci_high / self.ci_low <= WIDE_FACTOR)
        return self.doubt.startswith("every") or self.verdict == "unsure" or wide

    @property
    def figure(self) -> str:
        """`2.90x faster`, `uncertain: 1.32x`, or `not measured`."""
        if not self.pairs:
            return "not measured"
        text = f"{self.ratio:.3g}{self.unit}"
        return f"uncertain: {text}" if self.uncertain else f"{text} {self.verdict}".rstrip()

    @property
    def interval(self) -> str:
        return "" if self.ci_low is None else f"{self.ci_low:.3g}-{self.ci_high:.3g}{self.unit}"

    @property
    def spread(self) -> str:
        if self.pairs < 2:
            return f"{self.pairs} {self.over.rstrip('s')}" if self.pairs else ""
        return f"{self.low:.3g}-{self.high:.3g}{self.unit} over {self.pairs} {self.over}"

    @property
    def text(self) -> str:
        """The effect in one line: figure, interval, range and doubt."""
        if not self.pairs:
            return "not measured"
        parts = [f"95 % CI {self.interval}"] if self.interval else []
        parts += [p for p in (f"range {self.spread}" if self.pairs > 1 else self.spread, self.doubt) if p]
        return f"{self.figure} ({'; '.join(parts)})"


DTYPES = ("tf32", "float16", "bfloat16", "float8_e4m3fn")
SPECS: tuple[Spec, ...] = (
    *(Spec("dtype speed-up", "matmul", "dtype", "float32", d) for d in DTYPES),
    *(Spec("dtype speed-up", "conv", "dtype", "float32", d) for d in DTYPES[:3]),
    *(Spec("dtype speed-up", "train_step", "precision", "fp32", p, ignore=("dtype",))
      for p in ("tf32", "amp_fp16", "amp_bf16")),
    Spec("alignment penalty", "matmul", "align", "64", "odd", "tflops", "throughput", ("shape",)),
    Spec("alignment penalty", "matmul", "align", "8", "odd", "tflops", "throughput", ("shape",)),
    Spec("alignment penalty", "conv", "align", "64", "odd", "tflops", "throughput", ("shape", "layer"), "3x3"),
    Spec("torch.compile", "train_step", "compile", None, None),
    Spec("flash vs naive attention", "attention", "impl", "naive", "flash"),
    *(Spec("cold L2 (flushed before every call)", group, "cold", "false", "true") for group in ("matmul", "attention")),
    *(Spec("CUDA graph replay", group, "graph", "false", "true") for group in ("matmul", "attention")),
    Spec("flash vs naive attention", "attention", "impl", "naive", "flash", "peak_mem_bytes", "memory"),
    Spec("channels-last", "conv", "memory_format", "contiguous", "channels_last"),
    Spec("channels-last", "train_step", "memory_format", "contiguous", "channels_last"),
    Spec("activation checkpointing", "train_step", "checkpoint", None, None, "peak_mem_bytes", "memory"),
    Spec("activation checkpointing", "train_step", "checkpoint", None, None),
    Spec("fused optimizer", "train_step", "optimizer", "foreach", "fused"),
    Spec("host sync per step", "train_step", "sync", "none", "item"),
    Spec("DDP bucket size", "train_step", "bucket_mb", "25", None),
    Spec("DDP gradient as bucket view", "train_step", "bucket_view", "off", "on"),
    Spec("DDP gradient as bucket view", "train_step", "bucket_view", "off", "on", "bytes_per_param", "state"),
    Spec("DDP no_sync while accumulating", "train_step", "no_sync", "off", "on"),
    Spec("FSDP param dtype", "train_step", "param_dtype", "float32", "bfloat16", ignore=("precision", "dtype")),
    Spec("FSDP reduce dtype", "train_step", "reduce_dtype", "float32", "bfloat16"),
    Spec("FSDP reshard after forward", "train_step", "reshard", "on", "off"),
)
# The suites whose cases pair into levers: results without a case of any of them (another project's) hold no lever.
GROUPS = tuple(dict.fromkeys(spec.group for spec in SPECS))


def holds_lever_cases(rows: pd.DataFrame) -> bool:
    """Whether the rows hold a case of a suite the levers pair (GROUPS): only then is a lever not measured news."""
    return "group" in rows and bool(rows["group"].isin(GROUPS).any())


# Training-step strategies that hold the state of several ranks (their bytes per parameter are per rank).
DISTRIBUTED = ("ddp", "fsdp")
READING = {"speedup": "speed-up (baseline time / time)", "throughput": "TFLOP/s ratio (variant / baseline)",
           "memory": "peak memory ratio (variant / baseline)",
           "state": "bytes per parameter ratio (variant / baseline)"}


def _param_names(rows: pd.DataFrame) -> list[str]:
    names: dict[str, None] = {}
    for text in rows.get("param_names", pd.Series(dtype=str)).dropna().unique():
        names.update(dict.fromkeys(n for n in str(text).split(",") if n))
    return [n for n in names if n in rows]


def _resolve(values: list, baseline: str | None, variant: str | None) -> tuple | None:
    """The (baseline, variant) values of the axis, with None meaning off-like / the other one; None if absent."""
    text = {str(v): v for v in values}
    if baseline is None:
        offs = [v for k, v in text.items() if k.lower() in OFF]
        if len(offs) != 1:
            return None
        baseline = str(offs[0])
    if variant is None:
        others = [k for k in text if k != baseline]
        if len(others) != 1:
            return None
        variant = others[0]
    if baseline not in text or variant not in text:
        return None
    return text[baseline], text[variant]


def case_noise(row: pd.Series) -> float:
    """A case's run-to-run noise as a log standard deviation: the spread of its round medians when it has rounds
    (never below compare's floor), else the noise reports/change.py assumes for a run without rounds."""
    rounds = noise.round_medians(row)
    if len(rounds) > 1:
        return max(float(np.std(np.log(rounds), ddof=1)), math.log1p(noise.DEFAULT_NOISE_FLOOR_PCT / 100))
    return math.log1p(change.ASSUMED_NOISE_PCT / 100)


def case_doubt(row: pd.Series) -> tuple[str, ...]:
    """Why a case's time cannot be trusted as it stands (reports/change.py, `doubts`, plus host contention where
    the case's timer holds the host); empty when it can."""
    reasons = trust.doubts(row, noise_measured=len(noise.round_medians(row)) > 1)
    return tuple(reasons + (["contended"] if trust.host_disturbed(row) else []))


# The columns `prepared` adds: each case's level, noise and doubt, which every spec of its group reads.
CASE_COLUMNS = ("case_level", "case_noise", "case_doubt")


def prepared(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows a lever can pair (measured `ok`, not a search that times each case at its own batch size), each
    with its level (the median of its round medians, reports/noise.py, where it has a time), noise and doubt
    (CASE_COLUMNS): worked out once per case, not once per spec (33 of them)."""
    rows = rows[rows["status"] == "ok"] if "status" in rows else rows.iloc[:0]
    if "lever" in rows:
        rows = rows[~rows["lever"].isin(UNPAIRED_LEVERS)]
    if "median_s" not in rows:
        rows = rows.assign(median_s=np.nan)
    found = [(noise.level(r) if isinstance(r["median_s"], float) and r["median_s"] > 0 else np.nan, case_noise(r),
              case_doubt(r)) for _, r in rows.iterrows()]
    columns = pd.DataFrame(found or None, index=rows.index, columns=list(CASE_COLUMNS))
    return pd.concat([rows, columns.astype({"case_level": float, "case_noise": float})], axis=1)


def figures(rows: pd.DataFrame, spec: Spec) -> pd.Series:
    """The prepared rows' figures for the spec; a time, or a rate derived from one, is the run's level for the case
    (the median of its round medians, reports/noise.py), so one odd round does not make the effect."""
    value = rows[spec.figure].astype(float)
    level = rows["case_level"]
    if spec.kind not in TIMED:
        return value
    return (level if spec.figure == "median_s" else value * rows["median_s"] / level).where(level.notna(), value)


def pairs(rows: pd.DataFrame, spec: Spec) -> pd.DataFrame:
    """Baseline and variant figures of the cases that differ only in the spec's axis (one row per pair), with
    each side's noise (`baseline_noise`, `variant_noise`, log units) and the doubt about the pair (`doubt`)."""
    return paired(prepared(rows[rows["group"] == spec.group]), spec)


def no_pairs() -> pd.DataFrame:
    """The pairs of a spec the rows hold none of."""
    return pd.DataFrame(columns=["baseline", "variant", "baseline_noise", "variant_noise", "reasons", "doubt"])


def paired(rows: pd.DataFrame, spec: Spec) -> pd.DataFrame:
    """`pairs` of the spec's group's rows, already `prepared`: the columns a pair reads taken first, so that each
    spec filters these and not every column of the results."""
    if spec.axis not in rows or spec.figure not in rows:
        return no_pairs()
    read = [*_param_names(rows), spec.axis, spec.figure, "group", "layer", "param_names", "median_s", *CASE_COLUMNS]
    rows = rows[[c for c in dict.fromkeys(read) if c in rows]]
    if spec.layers and "layer" in rows:
        rows = rows[rows["layer"].astype(str).str.contains(spec.layers, regex=True)]
    if rows.empty:
        return no_pairs()
    rows = rows[rows[spec.figure].notna() & rows[spec.axis].notna()]
    chosen = _resolve(list(rows[spec.axis].unique()), spec.baseline, spec.variant)
    if chosen is None:
        return no_pairs()
    keys = [n for n in _param_names(rows) if n != spec.axis and n not in spec.ignore and n not in NOT_AXES]
    if not keys:
        keys = ["group"]
    key_frame = rows[keys].astype(object).fillna("-").astype(str)  # a param another model lacks is a key too
    timed = spec.kind in TIMED
    cases = pd.DataFrame({"figure": figures(rows, spec), "noise": rows["case_noise"] if timed else 0.0,
                          "doubt": rows["case_doubt"] if timed else [()] * len(rows)}, index=rows.index)
    sides = []
    for side, value in zip(("baseline", "variant"), chosen, strict=True):
        mask = rows[spec.axis] == value
        grouped = cases[mask].groupby([key_frame.loc[mask, k].to_numpy() for k in keys])  # Series keys: slower
        sides.append(pd.DataFrame({side: grouped["figure"].median(), f"{side}_noise": grouped["noise"].max(),
                                   f"{side}_doubt": grouped["doubt"].agg(lambda d: tuple(sorted(set().union(*d))))}
                                  ).rename_axis(keys))
    found = pd.concat(sides, axis=1, join="inner")
    # each pair's reasons as a tuple (what `effect` names when every pair has one) and as the text a reader sees
    found["reasons"] = [tuple(dict.fromkeys((*b, *v))) for b, v in zip(found["baseline_doubt"],
                                                                        found["variant_doubt"], strict=True)]
    found["doubt"] = ["; ".join(f"{side} {', '.join(d)}" for side, d in (("baseline", b), ("variant", v)) if d)
                      for b, v in zip(found.pop("baseline_doubt"), found.pop("variant_doubt"), strict=True)]
    found.attrs["values"] = tuple(str(v) for v in chosen)  # what None resolved to, e.g. ('off', 'block')
    return found


def interval(logs: np.ndarray, errors: np.ndarray) -> tuple[float, float]:
    """95 % interval of the mean of `logs` (log ratios, one per pair, each with its standard error from the noise
    of its two cases): its standard error holds the pairs' own noise and their spread around the mean, so pairs
    that disagree (a lever that helps some shapes and hurts others, or timings a busy machine scattered) give a
    wide interval, and a mean that says little."""
    n = len(logs)
    own = float(np.sum(errors**2)) / n**2
    between = float(np.var(logs, ddof=1)) / n if n > 1 else 0.0
    half = float(stats.norm.ppf(0.975)) * math.sqrt(own + between)
    mean = float(np.mean(logs))
    return math.exp(mean - half), math.exp(mean + half)


def effect(rows: pd.DataFrame, spec: Spec) -> Effect:
    """The geometric-mean effect of one spec over its trustworthy pairs (a time ratio is turned into a speed-up),
    with its interval and verdict (see the module docstring)."""
    return summarized(pairs(rows, spec), spec)


def summarized(found: pd.DataFrame, spec: Spec) -> Effect:
    """`effect` of the spec's pairs."""
    baseline, variant = found.attrs.get("values", (spec.baseline or "off", spec.variant or "on"))
    scope = f" ({spec.layers} layers)" if spec.layers else ""
    comparison = f"{spec.group}{scope}: {spec.axis} {baseline} -> {variant}, {READING[spec.kind]}"
    found = found[(found["baseline"] > 0) & (found["variant"] > 0)] if len(found) else found
    if found.empty:
        return Effect(spec.lever, comparison, None, None, None, 0)
    trusted = found[found["doubt"] == ""]
    doubtful = len(found) - len(trusted)
    if trusted.empty:
        why = sorted({reason for reasons in found["reasons"] for reason in reasons})
        doubt = f"every pair has a case {' or '.join(why)}"
    else:
        doubt = f"{doubtful} doubtful pair(s) left out" if doubtful else ""
        found = trusted
    ratios = found["baseline"] / found["variant"] if spec.kind == "speedup" else found["variant"] / found["baseline"]
    logs = np.log(ratios.to_numpy(float))
    result = Effect(spec.lever, comparison, float(np.exp(logs.mean())), float(ratios.min()), float(ratios.max()),
                    len(ratios), doubt=doubt)
    if spec.kind in TIMED:
        errors = np.sqrt(found["baseline_noise"].to_numpy(float) ** 2 + found["variant_noise"].to_numpy(float) ** 2)
        result.ci_low, result.ci_high = interval(logs, errors)
        # the verdict reads the variant's time against the baseline's: the inverse of a speed-up or TFLOP/s ratio
        result.verdict = change.classify(1 / result.ratio, 1 / result.ci_high, 1 / result.ci_low,
                                         change.DEFAULT_THRESHOLD_PCT)
    return result


def median_effect(lever: str, comparison: str, values: pd.Series, unit: str) -> Effect:
    """A figure the cases record themselves, as the median and range over the cases that report it."""
    values = values.dropna().astype(float)
    if values.empty:
        return Effect(lever, comparison, None, None, None, 0)
    return Effect(lever, comparison, float(values.median()), float(values.min()), float(values.max()), len(values),
                  unit=unit, over="cases")


def _strategy(rows: pd.DataFrame) -> pd.Series:
    return rows["strategy"] if "strategy" in rows else pd.Series(None, index=rows.index, dtype=object)


def _column(rows: pd.DataFrame, name: str) -> pd.Series:
    return rows[name] if name in rows else pd.Series(dtype=float)


def bytes_per_param(rows: pd.DataFrame) -> Effect:
    """The measured optimizer-state budget (`extra_info.bytes_per_param`) of one rank holding everything."""
    alone = rows[~_strategy(rows).isin(DISTRIBUTED)]
    return median_effect("bytes/param", "AdamW mixed precision, bytes per parameter (rule of thumb: 16-18)",
                         _column(alone, "bytes_per_param"), " B/param")


def distributed_effects(rows: pd.DataFrame) -> list[Effect]:
    """Per strategy under torchrun: bytes per parameter per rank, and the scaling efficiency (throughput of N
    ranks / N x one rank's, 1.0 is perfect)."""
    found = []
    for strategy in DISTRIBUTED:
        mine = rows[_strategy(rows) == strategy]
        found.append(median_effect(f"{strategy.upper()} bytes/param per rank", f"train_step: {strategy}, "
                                   "state held per rank (one rank alone: 16)", _column(mine, "bytes_per_param"),
                                   " B/param"))
        found.append(median_effect(f"{strategy.upper()} scaling efficiency", f"train_step: {strategy}, throughput "
                                   "of N ranks / (N x one rank)", _column(mine, "scaling_efficiency"), ""))
    return found


def effects(rows: pd.DataFrame) -> list[Effect]:
    """Every lever of the recipe for the rows of one device, measured or marked not measured."""
    ready = prepared(rows)
    by_group = dict(list(ready.groupby("group", sort=False)))  # each spec pairs the rows of its group only
    measured = [summarized(paired(by_group[spec.group], spec) if spec.group in by_group else no_pairs(), spec)
                for spec in SPECS]
    return [*measured, bytes_per_param(rows), *distributed_effects(rows)]


COLUMNS = ["lever", "comparison", "effect on this machine", "95 % CI", "pairs", "note"]


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Levers as a table: the measured ones with their effect, interval, range and doubt, then one line per lever
    not measured at all. `uncertain` (a column of booleans beside) marks the rows whose figure says too little."""
    found = effects(rows)
    shown = [e for e in found if e.pairs]
    missing = sorted({e.lever for e in found} - {e.lever for e in shown})
    out = [{"lever": e.lever, "comparison": e.comparison, "effect on this machine": e.figure, "95 % CI": e.interval,
            "pairs": e.spread, "note": e.doubt, "uncertain": e.uncertain} for e in shown]
    out += [{"lever": lever, "comparison": "", "effect on this machine": "not measured", "95 % CI": "", "pairs": "",
             "note": "", "uncertain": False} for lever in missing]
    return pd.DataFrame(out, columns=[*COLUMNS, "uncertain"])
