"""History pictures: one case's level over the runs of a machine (a small multiple on the HTML page, a figure of
`history -o`), and one case on several machines normalised to one of them.

Every picture is drawn from a `Panel`, worked out from the data before anything is drawn, so a test reads what the
picture shows. A panel holds, per run: its level (the figure the gate judges, reports/timeline.py); whether it was
disturbed (reports/marks.py: drawn hollow, as in every picture of the project), cut short (an incomplete run or a
killed night's journal: an orange x) or one of the runs whose levels are the case's reference now, what the gate
compares its newest run with (reports/judge.py: ringed green, their level a green line); and, per series, the
levels the judgement named at its steps (timeline.fitted) with the band of the run-to-run noise around them
(+-2 sigma: sigma is the noise the gate judged the case by, where it judged it, else the noise the judgement
read off the series), each step as a red dashed line with its size and the commit where it started, and the
last run in the colour of its verdict.

The scale is robust: the axis holds the fitted levels, the band and every run within `REACH_SIGMAS` sigma (at
least `MIN_REACH`) of its fitted level. A run beyond, a one-night spike, is drawn at the edge it lies beyond as a
triangle, and the panel says how far out the farthest one is; so one spike does not flatten a year of history.
The newest `judge.PERSIST - 1` runs always lie inside: a change too new to be a step is the news of the morning,
not an outlier. An axis that still spans more than `LOG_SPAN` (a loaded machine's nights can lie 30x apart) is
logarithmic, so the faster runs do not lie flat on zero.

Speed: a year of nightly runs of a few hundred cases is hundreds of pictures. They are drawn on one reused figure
(`Canvas`): a new figure per case costs about twice as much on this machine, mostly its ticks and title layout,
so each panel has few ticks and its title is the page's caption, not text drawn in the picture.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
from matplotlib import dates as mdates
from matplotlib import ticker
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from PIL import Image

from reports import marks
from reports.format.outputs import save_figure, write_with
from reports.judge import PERSIST
from reports.plots.style import TITLE_WIDTH, text, time_unit
from reports.text import format_time
from reports.timeline import Trend, fitted, short_commit
from reports.verdicts import Verdict

REACH_SIGMAS = 6.0
MIN_REACH = 0.10  # a run 10 % off its level is on the axis whatever the noise
BAND_SIGMAS = 2.0
LOG_SPAN = 10.0
DENSE = 60  # runs beyond which a line's markers are drawn smaller
LEVEL, BAND, REFERENCE, STEP, CUT = "#4c72b0", "#d8dde6", "#2e8b57", "#c44e52", "#dd8452"
VERDICT_COLORS = {"slower": "#c44e52", "faster": "#2e8b57", "not judged": "#e08a00"}
MACHINE_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#8172b3", "#937860", "#da8bc3"]
PANEL_SIZE = (4.6, 2.5)  # inches; at PANEL_DPI three fit a 1300-pixel page side by side
PANEL_DPI = 90
PALETTE = 64


@dataclass
class Line:
    """One series as drawn: x (dates or run numbers), y in the axis unit, and what each point is."""

    label: str
    x: np.ndarray
    y: np.ndarray
    disturbed: np.ndarray
    incomplete: np.ndarray
    color: str = LEVEL


@dataclass
class Panel:
    """What one picture draws; y values are already in the axis unit (`unit`)."""

    lines: list[Line]
    unit: str  # the y axis label
    limits: tuple[float, float]
    beyond: list[tuple[float, float, float]] = field(default_factory=list)  # (x, y at the edge, ratio to its level)
    fitted: np.ndarray | None = None  # first line's fitted levels (single-machine panels)
    band: tuple[np.ndarray, np.ndarray] | None = None
    sigma_pct: float | None = None
    sigma_basis: str = ""
    reference: np.ndarray | None = None  # the gate's reference runs among the first line's
    reference_level: float | None = None
    steps: list[tuple[float, str]] = field(default_factory=list)  # (x between the runs, "+25 % abcdef01")
    verdict: str | None = None  # the gate's verdict on the last run: slower, faster, not judged, or None
    log_scale: bool = False
    note: str = ""  # one line under the picture on the page: what the panel holds beyond its data


def run_axis(runs: pd.DataFrame) -> np.ndarray:
    """The runs' dates as naive UTC datetimes (matplotlib draws them as dates), or run numbers where a run has
    none."""
    when = pd.to_datetime(runs["datetime"], utc=True)
    if when.isna().any():
        return np.arange(len(runs), dtype=float)
    return when.dt.tz_localize(None).to_numpy()


def robust_limits(y: np.ndarray, level: np.ndarray, sigma: float, keep: np.ndarray,
                  also: list[np.ndarray]) -> tuple[tuple[float, float], np.ndarray]:
    """(low, high) of an axis holding `also` (the fitted levels) and every point within the reach of its level
    (or in `keep`), and which points lie beyond: the module docstring's robust scale. `sigma` is the series' own
    robust noise (log units), which one spike does not inflate; the band is drawn within the axis, not fitted to
    it, so a noisy case's band fills its picture rather than shrinking its runs. The margin is a share of the
    span in log units, so it reads the same on a log axis."""
    reach = max(REACH_SIGMAS * sigma, math.log1p(MIN_REACH))
    inside = (np.abs(np.log(y / level)) <= reach) | keep
    values = np.log(np.concatenate([y[inside], *also]))
    low, high = float(values.min()), float(values.max())
    pad = (high - low) * 0.08 or 0.02
    return (math.exp(low - pad), math.exp(high + pad)), ~inside


def wide(limits: tuple[float, float]) -> bool:
    """Whether an axis spans more than LOG_SPAN: drawn on a log scale, where runs a hundred times apart (a
    loaded machine's nights) both stay readable instead of the faster ones lying flat on zero."""
    return limits[1] / limits[0] > LOG_SPAN


def newest(count: int) -> np.ndarray:
    """Which of `count` runs are among the newest PERSIST - 1: always on the axis."""
    return np.arange(count) >= count - (PERSIST - 1)


def sigma_of(trend: Trend, verdict: Verdict | None) -> tuple[float, str]:
    """The run-to-run noise the band shows (log units) and where it comes from."""
    if verdict is not None and verdict.noise_pct is not None and verdict.source != "assumed":
        return math.log1p(verdict.noise_pct / 100), f"the gate's, from {verdict.basis}"
    return trend.noise, f"this series' own spread over {len(trend.runs)} runs"


def verdict_name(verdict: Verdict | None) -> str | None:
    if verdict is None:
        return None
    if verdict.not_judged:
        return "not judged"
    return verdict.verdict if verdict.verdict in ("slower", "faster") else None


def case_panel(trend: Trend, verdict: Verdict | None = None) -> Panel:
    """One case on one machine (module docstring); `verdict`: the gate's on its last run."""
    runs = trend.runs
    levels = trend.levels
    unit, scale = time_unit(float(np.median(levels)))
    fit = fitted(levels, trend.steps)
    sigma, basis = sigma_of(trend, verdict)
    low, high = fit * math.exp(-BAND_SIGMAS * sigma), fit * math.exp(BAND_SIGMAS * sigma)
    limits, beyond = robust_limits(levels, fit, trend.noise, newest(len(levels)), [fit])
    x = run_axis(runs)
    used = trend.reference if trend.reference is not None else np.zeros(len(runs), dtype=bool)
    edge = [(x[i], limits[1] if levels[i] > fit[i] else limits[0], levels[i] / fit[i]) for i in np.flatnonzero(beyond)]
    line = Line(trend.device, x, levels / scale, runs["marks"].map(bool).to_numpy(), runs["incomplete"].to_numpy())
    panel = Panel([line], f"{unit} per call", (limits[0] / scale, limits[1] / scale),
                  [(px, py / scale, r) for px, py, r in edge], fit / scale, (low / scale, high / scale),
                  math.expm1(sigma) * 100, basis, used,
                  float(np.median(levels[used])) / scale if used.any() else None,
                  [(_between(x, s.at), f"{(s.ratio - 1) * 100:+.0f} % {short_commit(runs['commit'].iloc[s.at])}")
                   for s in trend.steps], verdict_name(verdict), wide(limits))
    panel.note = _note(trend, panel)
    return panel


def _between(x: np.ndarray, at: int) -> float:
    """Where a step starting at run `at` is drawn: halfway between that run and the one before."""
    return x[at - 1] + (x[at] - x[at - 1]) / 2


def _note(trend: Trend, panel: Panel) -> str:
    parts = [f"{len(trend.runs)} run{'s' if len(trend.runs) != 1 else ''}",
             f"noise {panel.sigma_pct:.1f} % ({panel.sigma_basis})"]
    if panel.beyond:
        far = max(panel.beyond, key=lambda b: abs(math.log(b[2])))[2]
        parts.append(f"{len(panel.beyond)} beyond the axis (farthest {far:.2f}x its level)")
    if trend.runs["incomplete"].any():
        parts.append(f"{int(trend.runs['incomplete'].sum())} from runs cut short")
    if panel.log_scale:
        parts.append("log scale")
    return "; ".join(parts)


def machines_panel(found: list[Trend], reference: Trend) -> Panel:
    """One case on several machines (`found`, the reference among them), each run's level divided by the
    reference machine's current level (its last fitted level), on a log axis: the reference reads 1, a machine
    twice as fast 0.5."""
    base = float(fitted(reference.levels, reference.steps)[-1])
    lines = [Line(t.device, run_axis(t.runs), t.levels / base, t.runs["marks"].map(bool).to_numpy(),
                  t.runs["incomplete"].to_numpy(), MACHINE_COLORS[i % len(MACHINE_COLORS)])
             for i, t in enumerate(found)]
    y = np.concatenate([line.y for line in lines])
    fit = np.concatenate([fitted(line.y, t.steps) for line, t in zip(lines, found, strict=True)])
    keep = np.concatenate([newest(len(line.y)) for line in lines])
    limits, beyond = robust_limits(y, fit, max(t.noise for t in found), keep, [fit])
    x = np.concatenate([line.x for line in lines])
    edge = [(x[i], limits[1] if y[i] > fit[i] else limits[0], y[i] / fit[i]) for i in np.flatnonzero(beyond)]
    return Panel(lines, "time / reference's current level", limits, edge, log_scale=True,
                 note=f"1 = the current level of {reference.device}, {format_time(base)}")


def emptied(ax: Axes) -> None:
    """The axes without what a panel drew, its ticks kept: `ax.clear()` would build them anew, a third of the
    time of a small picture."""
    for artist in [*ax.lines, *ax.collections, *ax.texts, *ax.patches]:
        artist.remove()
    ax.set_yscale("linear")
    ax.set_xlabel("")
    if ax.get_legend():
        ax.get_legend().remove()


def x_limits(panel: Panel) -> tuple:
    """The first and last run of the panel with a margin (set, not autoscaled: a reused axes remembers the data
    of the panel before)."""
    x = np.concatenate([line.x for line in panel.lines])
    first, last = x.min(), x.max()
    margin = (last - first) * 0.03 if last > first else (np.timedelta64(12, "h") if x.dtype.kind == "M" else 0.5)
    return first - margin, last + margin


def draw(ax: Axes, panel: Panel, legend: bool = False) -> None:
    """The panel on these axes (emptied first)."""
    emptied(ax)
    if panel.band is not None:
        x = panel.lines[0].x
        ax.fill_between(x, *panel.band, color=BAND, lw=0, step="mid", zorder=0)
        ax.step(x, panel.fitted, where="mid", color="#777", lw=0.8, zorder=1)
    for line in panel.lines:
        y = np.clip(line.y, *panel.limits)
        ax.plot(line.x, y, "-", color=line.color, lw=0.9 if len(y) <= DENSE else 0.6, zorder=2)
        small = 1.0 if len(y) <= DENSE else 0.6  # a year of points: smaller, or the markers hide the line
        clean = ~line.disturbed & ~line.incomplete
        ax.plot(line.x[clean], y[clean], "o", color=line.color, ms=2.6 * small, zorder=3)
        ax.plot(line.x[line.disturbed & ~line.incomplete], y[line.disturbed & ~line.incomplete], "o",
                mfc="white", mec=line.color, ms=3.2 * small, mew=0.8 * small, zorder=3)
        ax.plot(line.x[line.incomplete], y[line.incomplete], "x", color=CUT, ms=5, mew=1.4, zorder=4)
    if panel.reference is not None and panel.reference.any():
        first = panel.lines[0]
        ax.plot(first.x[panel.reference], np.clip(first.y[panel.reference], *panel.limits), "o", mfc="none",
                mec=REFERENCE, ms=6.5, mew=1.2, zorder=4)
        ax.plot(first.x[panel.reference][[0, -1]], [panel.reference_level] * 2, color=REFERENCE, lw=1.6, zorder=4)
    for x, y, _ in panel.beyond:
        top = y >= panel.limits[1]
        ax.plot([x], [y], "^" if top else "v", color=STEP, ms=6, clip_on=False, zorder=5)
    first, last = x_limits(panel)
    for x, label in panel.steps:
        ax.axvline(x, color=STEP, ls="--", lw=1, zorder=1)
        left = (x - first) / (last - first) > 0.5  # the label on the side with room for it
        ax.annotate(text(label), (x, 1), xycoords=("data", "axes fraction"), xytext=(-2 if left else 2, -2),
                    textcoords="offset points", ha="right" if left else "left", va="top", fontsize=7, color=STEP)
    if panel.verdict:
        last = panel.lines[0]
        ax.plot(last.x[-1:], np.clip(last.y[-1:], *panel.limits), "D", color=VERDICT_COLORS[panel.verdict], ms=6,
                zorder=6)
    ax.set_xlim(*x_limits(panel))
    if panel.log_scale:
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0), numticks=5))
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    else:
        ax.yaxis.set_major_locator(ticker.MaxNLocator(4))
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%.4g"))
    ax.set_ylim(*panel.limits)
    if np.issubdtype(panel.lines[0].x.dtype, np.datetime64):
        locator = mdates.AutoDateLocator(minticks=2, maxticks=4)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, show_offset=False))
    else:
        ax.xaxis.set_major_locator(ticker.MaxNLocator(4, integer=True))
        ax.set_xlabel("run", fontsize=7)
    ax.set_ylabel(text(panel.unit), fontsize=7)
    ax.tick_params(labelsize=7)
    if legend:
        ax.legend(handles=key([panel], own=True), fontsize=6, loc="upper left", framealpha=0.85)
    elif len(panel.lines) > 1:  # which line is which machine: a small multiple's only legend
        ax.legend(handles=[Line2D([], [], color=line.color, marker="o", ms=3, label=text(line.label))
                           for line in panel.lines], fontsize=6, loc="best", framealpha=0.85)


def key(panels: list[Panel], own: bool = False) -> list:
    """The legend entries of what these panels draw, and only that: a key under small multiples (`own`: the
    legend of a single panel, whose band says its sigma and where it comes from, and whose lines are named)."""
    lines = [line for p in panels for line in p.lines]
    named = own and len(panels[0].lines) > 1
    entries = [Line2D([], [], color=line.color, marker="o", ms=3, lw=0.9, label=text(line.label))
               for line in panels[0].lines] if named else \
        [Line2D([], [], color=LEVEL, marker="o", ms=3, lw=0.9, label="level per run (median of its rounds)")]
    if any(p.band is not None for p in panels):
        band = panels[0]
        label = (f"fitted level +- 2 sigma (sigma {band.sigma_pct:.1f} %: {band.sigma_basis})" if own
                 else "fitted level +- 2 sigma of run-to-run noise (each picture's sigma in its caption)")
        entries.append(Patch(facecolor=BAND, edgecolor="#777", label=text(label)))
    if any(line.disturbed.any() for line in lines):
        entries.append(Line2D([], [], marker="o", ls="none", mfc="white", mec="#444",
                              label="disturbed run (" + ", ".join(m.name for m in marks.MARKS) + ")"))
    if any(line.incomplete.any() for line in lines):
        entries.append(Line2D([], [], marker="x", ls="none", color=CUT, mew=1.4, label="run cut short (incomplete)"))
    if any(p.reference is not None and p.reference.any() for p in panels):
        entries.append(Line2D([], [], marker="o", mfc="none", mec=REFERENCE, color=REFERENCE, ms=6,
                              label="runs whose level is the reference now, and that level"))
    if any(p.steps for p in panels):
        entries.append(Line2D([], [], color=STEP, ls="--", label="step: its size and the commit where it started"))
    if any(p.beyond for p in panels):
        entries.append(Line2D([], [], marker="^", ls="none", color=STEP, label="run beyond the axis (a spike)"))
    for name in [v for v in VERDICT_COLORS if any(p.verdict == v for p in panels)]:
        entries.append(Line2D([], [], marker="D", ls="none", color=VERDICT_COLORS[name],
                              label=f"last run, the gate says: {name}"))
    return entries


class Canvas:
    """One figure reused for every panel of a page (module docstring: speed)."""

    def __init__(self, size: tuple[float, float] = PANEL_SIZE, dpi: int = PANEL_DPI) -> None:
        self.figure = Figure(figsize=size, dpi=dpi)
        self.canvas = FigureCanvasAgg(self.figure)
        self.ax = self.figure.add_axes((0.13, 0.14, 0.84, 0.82))

    def write(self, panel: Panel, path: Path) -> Path:
        """The panel as a PNG of at most PALETTE colours: a third of the bytes of matplotlib's full-colour PNG for
        a picture of a few flat colours, which a page embedding hundreds of them needs. The pixels are taken from
        the canvas and encoded once."""
        draw(self.ax, panel)
        self.canvas.draw()
        pixels = Image.frombuffer("RGBA", self.canvas.get_width_height(), self.canvas.buffer_rgba())
        return write_with(path, pixels.convert("RGB").quantize(colors=PALETTE).save)


def write_key(panels: list[Panel], path: Path) -> Path:
    """The key of every mark these small multiples carry, as its own small picture."""
    entries = key(panels)
    figure = Figure(figsize=(12, 0.35 + 0.22 * math.ceil(len(entries) / 2)))
    figure.legend(handles=entries, loc="center", ncol=2, fontsize=10, frameon=False)
    return save_figure(figure, path, dpi=PANEL_DPI)


def write_figure(panel: Panel, title: str, path: Path) -> Path:
    """One panel as a figure of its own, with its title and legend (`history -o`)."""
    figure = Figure(figsize=(9, 4.2))
    ax = figure.add_subplot()
    draw(ax, panel, legend=True)
    ax.set_title(text(textwrap.fill(title, TITLE_WIDTH + 30)), fontsize=9)
    ax.text(0, -0.14, text(panel.note), transform=ax.transAxes, fontsize=7, color="#555", va="top")
    figure.tight_layout()
    return save_figure(figure, path, dpi=100)


GRID_CELL = (4.2, 2.6)  # inches per small multiple of `history -o`, its labels and title included
GRID_MARGINS = {"left": 0.75, "right": 0.15, "top": 0.8, "bottom": 1.6, "across": 0.8, "down": 0.6}  # inches


def grid_layout(figure: Figure, rows: int, columns: int) -> None:
    """Fixed margins in inches for the grid's axes (tick labels, y label, title of each, the key under them):
    tight_layout measured every text of every axes first, half the time of a grid of tens of cases."""
    width, height = figure.get_size_inches()
    m = GRID_MARGINS
    cell_w = (width - m["left"] - m["right"] - (columns - 1) * m["across"]) / columns
    cell_h = (height - m["top"] - m["bottom"] - (rows - 1) * m["down"]) / rows
    figure.subplots_adjust(left=m["left"] / width, right=1 - m["right"] / width, top=1 - m["top"] / height,
                           bottom=m["bottom"] / height, wspace=m["across"] / cell_w, hspace=m["down"] / cell_h)


def write_grid(panels: list[tuple[str, Panel]], title: str, path: Path, columns: int = 3) -> Path:
    """Small multiples of one group on one machine in one figure, a title over each (`history -o`), and the key
    under them."""
    rows = math.ceil(len(panels) / columns)
    figure = Figure(figsize=(columns * GRID_CELL[0], rows * GRID_CELL[1] + GRID_MARGINS["bottom"]))
    axes = figure.subplots(rows, columns, squeeze=False)
    grid_layout(figure, rows, columns)
    for ax, (name, panel) in zip(axes.flat, panels, strict=False):
        draw(ax, panel)
        ax.set_title(text(name), fontsize=7)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    figure.suptitle(text(title), fontsize=10, y=1 - 0.15 / figure.get_size_inches()[1], va="top")
    figure.legend(handles=key([p for _, p in panels]), loc="lower center", ncol=2, fontsize=7, frameon=False)
    return save_figure(figure, path, dpi=80)
