"""What each lever of the mixed-precision recipe is worth on the machine that produced the results.

A lever's effect is measured, never assumed: cases that differ only in the lever's axis (e.g. `dtype` float32
vs bfloat16, everything else equal) are paired, and the ratio of their figures is summarized as a geometric
mean with its range over the pairs. A lever without such pairs in the results is reported as not measured.
The specs name the stable params of ../shared/design.md and of each suite (matmul, conv, attention, train_step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

OFF = {"off", "none", "no", "false", "0", "eager", "disabled"}
# Params that name the experiment rather than a setting (train_step's `lever`: "baseline", "precision", ...):
# the twin of a case differs in it, so it never keys a pair.
NOT_AXES = {"lever"}
# Experiments whose cases are not like for like: a largest-batch search times each case at its own batch size.
UNPAIRED_LEVERS = {"max_batch"}


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
    low: float | None
    high: float | None
    pairs: int

    unit: str = "x"
    over: str = "pairs"

    @property
    def text(self) -> str:
        if not self.pairs:
            return "not measured"
        if self.pairs == 1:
            return f"{self.ratio:.2f}{self.unit} (1 {self.over.rstrip('s')})"
        return f"{self.ratio:.2f}{self.unit} (range {self.low:.2f}-{self.high:.2f}{self.unit} over {self.pairs} " \
               f"{self.over})"


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


def pairs(rows: pd.DataFrame, spec: Spec) -> pd.DataFrame:
    """Baseline and variant figures of the cases that differ only in the spec's axis (one row per pair)."""
    rows = rows[(rows["group"] == spec.group) & (rows.get("status") == "ok")]
    if "lever" in rows:
        rows = rows[~rows["lever"].isin(UNPAIRED_LEVERS)]
    if spec.layers and "layer" in rows:
        rows = rows[rows["layer"].astype(str).str.contains(spec.layers, regex=True)]
    if spec.axis not in rows or spec.figure not in rows or rows.empty:
        return pd.DataFrame(columns=["baseline", "variant"])
    rows = rows[rows[spec.figure].notna() & rows[spec.axis].notna()]
    chosen = _resolve(list(rows[spec.axis].unique()), spec.baseline, spec.variant)
    if chosen is None:
        return pd.DataFrame(columns=["baseline", "variant"])
    keys = [n for n in _param_names(rows) if n != spec.axis and n not in spec.ignore and n not in NOT_AXES]
    if not keys:
        keys = ["group"]
    key_frame = rows[keys].astype(object).fillna("-").astype(str)  # a param another model lacks is a key too
    sides = {}
    for side, value in zip(("baseline", "variant"), chosen, strict=True):
        mask = rows[spec.axis] == value
        sides[side] = rows.loc[mask, spec.figure].astype(float).groupby([key_frame.loc[mask, k] for k in keys]).median()
    found = pd.concat(sides, axis=1, join="inner")
    found.attrs["values"] = tuple(str(v) for v in chosen)  # what None resolved to, e.g. ('off', 'block')
    return found


def effect(rows: pd.DataFrame, spec: Spec) -> Effect:
    """The geometric-mean effect of one spec over its pairs (a time ratio is turned into a speed-up)."""
    found = pairs(rows, spec)
    baseline, variant = found.attrs.get("values", (spec.baseline or "off", spec.variant or "on"))
    scope = f" ({spec.layers} layers)" if spec.layers else ""
    comparison = f"{spec.group}{scope}: {spec.axis} {baseline} -> {variant}, {READING[spec.kind]}"
    found = found[(found["baseline"] > 0) & (found["variant"] > 0)]
    if found.empty:
        return Effect(spec.lever, comparison, None, None, None, 0)
    ratios = found["baseline"] / found["variant"] if spec.kind == "speedup" else found["variant"] / found["baseline"]
    logs = np.log(ratios.to_numpy(float))
    return Effect(spec.lever, comparison, float(np.exp(logs.mean())), float(ratios.min()), float(ratios.max()),
                  len(ratios))


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
    measured = [effect(rows, spec) for spec in SPECS]
    return [*measured, bytes_per_param(rows), *distributed_effects(rows)]


def table(rows: pd.DataFrame) -> pd.DataFrame:
    """Levers as a table: the measured ones with their effect, then one line per lever not measured at all."""
    found = effects(rows)
    shown = [e for e in found if e.pairs]
    missing = sorted({e.lever for e in found} - {e.lever for e in shown})
    out = [{"lever": e.lever, "comparison": e.comparison, "effect on this machine": e.text} for e in shown]
    out += [{"lever": lever, "comparison": "", "effect on this machine": "not measured"} for lever in missing]
    return pd.DataFrame(out, columns=["lever", "comparison", "effect on this machine"])
