"""One judgement of change over time: what a machine's nights say about each case, used by the gate (`compare`
over a history), `history` and the history page alike, so that the three never disagree.

The input is one machine's runs in time order ("nights"), each case's level per night (reports/nights.py, in log
space: a step means the same relative change at any time scale), NaN where a night has no usable figure. Nights are
judged one after another, as the nightly gate meets them, and every reader replays the same nights:

1. **The whole run's shift.** Each night, the median over its cases of how far each lies from its own level is
   the shift the whole run shares (the machine, not the code: on a real A10G series, nights on which 67-73 % of
   140 cases ran +20 % together). It is taken out of every case before the case is judged, and judged itself as
   one more series, its noise read off its distances to its level (a machine disturbed one night in three is
   disturbed, not noisy): a night whose shift is beyond that is `moved` and set aside (its cases are not judged
   one by one: they respond to a busy machine each in its own way); a shift that holds is a step of the machine,
   which needs accepting like any other, and the nights set aside during it are then judged after all. With fewer
   than `MIN_POOLED_CASES` cases no shift is estimated (the median of a few cases is one of them).
2. **Noise from the series.** A case's noise is the robust spread of its night-to-night differences over its last
   `NOISE_WINDOW` nights (1.4826 x median |difference| / sqrt 2: a step moves one difference only, an alternating
   bimodal case keeps its full spread); the nights of a move under way are left out until it is judged, and a
   series whose differences go one way (a drift, `DRIFT_SHARE`) is measured about its drift: a history that gets
   2x slower every night is a trend, not 145 % of noise. It is widened by 1 + 1/n for n differences (three lucky
   nights must not make a case look quiet) and never below the noise floor. A case with fewer than `OWN_NIGHTS`
   differences borrows the median noise of the machine's cases, not a blend: on a busy machine the median case
   moves 30 % from night to night while a big GEMM moves 0.5 %, and a blend would blind the quiet case.
3. **A step is a move that holds.** A move is a run of consecutive nights each half the threshold or more off the
   level, the same way. Its evidence is the sum of its nights' distances in noise, each capped at `CAP` and less
   an allowance `ALLOWANCE` (a CUSUM, Page 1954, that starts afresh when the run ends), so that one night, or two,
   can never add up to `EVIDENCE`: a step is named on its third night at the earliest, a smaller move needs more
   nights, and it must outlast the longest run the case has come back from before (a bimodal case that sits in
   its other mode for two nights needs three), and its newest night must lie nearer the new level than the old. A
   step is named only from a level that rests on `SETTLED` nights (`PERSIST` where a named step began it: a
   regression undone after four nights is a step back), and only where it moved the threshold or more
   both against the run and in itself, the same way (a case that did not share the run's 6x improvement is no
   slower); other moves only move the level. The nights of a move, while it is unconfirmed, do not move the level.
4. **A one-night move is `moved`, not a step.** A night beyond the threshold and beyond how far, in noise, one
   night of one of this machine's cases lies once in `NIGHTS_PER_ALARM` nights (the tail of the machine's own
   distances: benchmark noise has heavy tails, and on a real A10G series 1 % of 150 cases' nights lay beyond 10
   noises; `UNKNOWN_TAIL` before `TAIL_NIGHTS` of history) has moved: the gate cannot tell a blip from the first
   night of a step, and asks for a re-run (exit 3). Unless the case has moved as far on `BLIPS_SEEN` earlier nights
   and come back each time (`seen`: within what its series has shown).
5. **The reference is what was accepted.** Each case has a reference level, the one its gate compares with: the
   level it settled at, which follows it through quiet moves and improvements (an improvement is taken at once,
   so that losing it again is a regression) and stays where it was when a step opens a regression. A regression
   stays open night after night, failing the gate, until a step back closes it or an acceptance
   (`python -m reports accept`, reports/acceptances.py) takes the new level as the reference.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np

from reports.noise import MIN_POOLED_CASES, ROBUST

MOVED_SIGMA = 4.0  # one night this far from its level, in noise, has moved (each of ~150 cases is judged nightly)
ALLOWANCE = 0.5  # evidence a night adds is its distance in noise less this (CUSUM's reference value k)
CAP = 3.5  # a night's distance counts up to this: three nights are needed to name a step, whatever one night did
EVIDENCE = 7.5  # evidence that names a step: three nights at the cap (3 x 3.0 > 7.5 > 2 x 3.0)
NOISE_WINDOW = 60  # nights whose night-to-night differences give a case's noise
LEVEL_WINDOW = 30  # nights of a level whose median is that level
OWN_NIGHTS = 3  # differences a case needs before its noise is its own; fewer borrow the machine's
DRIFT_SHARE = 0.8  # differences one way that make a drift (noise goes both ways about evenly)
PRIOR_NIGHTS = 4  # differences a case needs before its noise counts towards the machine's
PERSIST = 3  # nights a move must hold to be a step
SETTLED = 5  # nights a level must rest on before a move from it is judged (the first nights only set it)
TAIL_NIGHTS = 10  # nights of history before the tail of a machine's distances says how far a night may move
# Before that, how far one night must lie: benchmark noise has heavy tails (on a real A10G series, 1 % of the nights
# of 150 cases lay beyond 10 noises and the tail settled at 12-13), so a few nights cannot be held to a normal one.
UNKNOWN_TAIL = 8.0
NIGHTS_PER_ALARM = 20  # a night has moved where it lies beyond what all cases show once in this many nights
BLIPS_SEEN = 2  # earlier one-night moves at least as far, each undone, that make a move within the series' history


@dataclass(frozen=True)
class Step:
    """A change of level that held: from night `at` on (first night of the new level), named on `confirmed`."""

    at: int
    confirmed: int
    before: float  # log level before, as measured (the run's shift in it)
    after: float  # log level after, as measured
    accepted: str = ""  # why the new level became the reference: "improvement", or an acceptance's reason

    @property
    def ratio(self) -> float:
        return float(np.exp(self.after - self.before))


@dataclass(frozen=True)
class Acceptance:
    """Accept the level of night `night` as the reference, for the cases `cases` (None: every case and the
    whole run's shift), for `reason`."""

    night: int
    reason: str
    cases: frozenset[str] | None = None


class Tracks:
    """The running state of several series judged side by side (the cases of a machine, or its one shift)."""

    def __init__(self, count: int, nights: int, floor: float, residual: bool = False) -> None:
        self.residual = residual
        self.values = np.full((count, nights), np.nan)  # shift-adjusted log levels
        self.in_level = np.zeros((count, nights), dtype=bool)  # nights that count towards the current level
        self.moved = np.zeros((count, nights), dtype=bool)  # one-night moves (not part of a step)
        self.stepping = np.zeros((count, nights), dtype=bool)  # the nights of a move that became a named step
        self.judged = np.zeros((count, nights), dtype=bool)  # nights judged against a settled level
        self.deviation = np.full((count, nights), np.nan)  # distance from the level, log units, as judged that night
        self.sigma_at = np.full((count, nights), np.nan)  # the noise each night was judged by
        self.level = np.full(count, np.nan)
        self.reference = np.full(count, np.nan)
        self.follows = np.ones(count, dtype=bool)  # the reference is the current level (no open regression)
        self.named_level = np.zeros(count, dtype=bool)  # the current level began with a named step
        self.raw = np.full((count, nights), np.nan)  # log levels as measured (the night's shift in them)
        self.raw_level = np.full(count, np.nan)
        self.raw_reference = np.full(count, np.nan)
        self.ref_span = np.zeros((count, 2), dtype=int)  # first and last night of each reference level
        self.night = 0  # the night being judged
        self.start = np.zeros(count, dtype=int)  # first night of the current level
        self.up, self.down = np.zeros(count), np.zeros(count)
        self.run_up, self.run_down = np.zeros(count, dtype=int), np.zeros(count, dtype=int)
        self.up_from, self.down_from = np.full(count, nights), np.full(count, nights)  # first night of each run
        self.blip_up, self.blip_down = np.zeros(count, dtype=int), np.zeros(count, dtype=int)
        self.steps: list[list[Step]] = [[] for _ in range(count)]
        self.shifted = np.zeros(nights, dtype=bool)  # nights the whole run moved: no case judged
        self.aside = np.full((count, nights), np.nan)  # the values of those nights, kept out of every level
        self.floor = floor

    def own_noise(self, night: int) -> tuple[np.ndarray, np.ndarray]:
        """Each series' robust noise before `night`, and how many values it rests on: from its night-to-night
        differences (a case: a bimodal one keeps its full spread), or, for `residual` tracks (the whole run's
        shift), from its distances to its level (a machine disturbed one night in three is disturbed, not noisy)."""
        start = max(0, night - NOISE_WINDOW)
        if self.residual:
            spread = np.abs(self.deviation[:, start:night])
            scale = 1.0
        else:  # the nights of a move under way are not noise: they are left out until it is judged
            window = self.values[:, start:night]
            pending = np.minimum(self.up_from, self.down_from)[:, None] <= np.arange(start, night)
            spread = np.abs(_without_drift(_steps_between_values(np.where(pending, np.nan, window))))
            scale = np.sqrt(2)
        counts = np.sum(np.isfinite(spread), axis=1)
        with np.errstate(all="ignore"):
            own = np.where(counts > 0, ROBUST * _nanmedian(spread) / scale, np.nan)
        return own, counts

    def noise(self, night: int, pooled: float) -> np.ndarray:
        """The noise each series is judged by (module docstring, 2)."""
        own, counts = self.own_noise(night)
        with np.errstate(all="ignore"):
            widened = own * (1 + 1 / counts)  # a spread read off few values may be a lucky one
        return np.maximum(np.where(counts >= OWN_NIGHTS, widened, pooled), self.floor)

    def current_level(self, rows: np.ndarray, night: int) -> tuple[np.ndarray, np.ndarray]:
        """The median of the last LEVEL_WINDOW counted nights of each row's level, up to `night` included: of the
        values judged (the run's shift taken out) and of the values as measured."""
        kept = self.in_level[rows, :night + 1] & (np.arange(night + 1) >= self.start[rows][:, None])
        kept &= np.cumsum(kept[:, ::-1], axis=1)[:, ::-1] <= LEVEL_WINDOW  # the last ones; every row at once
        out, measured = (_nanmedian(np.where(kept, a[rows, :night + 1], np.nan)) for a in (self.values, self.raw))
        none = ~kept.any(axis=1)
        return np.where(none, self.level[rows], out), np.where(none, self.raw_level[rows], measured)

    def refer(self, rows: np.ndarray | int) -> None:
        """The current level of `rows` becomes their reference, judged and as measured (`raw_reference`: a case's
        reference in its own terms, which outcome() compares with), and its nights the reference nights."""
        self.reference[rows] = self.level[rows]
        self.raw_reference[rows] = self.raw_level[rows]
        self.ref_span[rows, 0] = self.start[rows]
        self.ref_span[rows, 1] = self.night

    def reference_nights(self, row: int) -> np.ndarray:
        """The nights whose levels make a row's reference (the last LEVEL_WINDOW counted nights of its span)."""
        first, last = self.ref_span[row]
        found = np.zeros(self.values.shape[1], dtype=bool)
        counted = np.flatnonzero(self.in_level[row, first:last + 1])[-LEVEL_WINDOW:] + first
        found[counted] = True
        return found

    def settled(self) -> np.ndarray:
        """Whether each level rests on SETTLED nights or more (before that, the first nights only set it)."""
        nights = np.arange(self.values.shape[1])
        return (self.in_level & (nights >= self.start[:, None])).sum(axis=1) >= SETTLED

    def judge(self, night: int, x: np.ndarray, sigma: np.ndarray, threshold: np.ndarray, limit: float,
              shift: float = 0.0) -> None:
        """Night `night`'s values (log levels less the night's `shift`, NaN where not measured) judged against each
        level; `limit`: how far from its level, in noise, one night must lie to have moved (module docstring, 4)."""
        self.night = night
        self.values[:, night] = x
        self.raw[:, night] = x + shift
        seen = np.isfinite(x)
        new = seen & ~np.isfinite(self.level)
        self.level[new], self.raw_level[new] = x[new], x[new] + shift
        self.refer(new)
        self.start[new] = night
        self.in_level[new, night] = True
        old = seen & ~new
        dev = np.where(old, x - self.level, np.nan)
        self.deviation[:, night] = dev
        self.sigma_at[:, night] = sigma
        z = np.where(old, dev / sigma, 0.0)
        self.count_runs(old, dev, z, threshold)
        settled = old & self.settled()
        self.judged[:, night] = settled
        # a level of fewer than PERSIST nights is no level yet: only a move beyond UNKNOWN_TAIL has moved from it
        moved = old & (np.abs(z) > np.where(settled, limit, max(limit, UNKNOWN_TAIL))) & (np.abs(dev) >= threshold)
        self.moved[:, night] = moved
        self.in_level[:, night] |= old & ~moved
        up = old & (self.up >= EVIDENCE) & (self.run_up >= np.maximum(PERSIST, self.blip_up + 1))
        down = old & (self.down >= EVIDENCE) & (self.run_down >= np.maximum(PERSIST, self.blip_down + 1))
        for row in np.flatnonzero(up | down):  # the new level starts with the nights that moved off the old one
            since = int(self.up_from[row] if up[row] else self.down_from[row])
            if self.holds(row, since, night):
                self.relevel(row, since, night, threshold[row])
        changed = np.flatnonzero(old)
        self.level[changed], self.raw_level[changed] = self.current_level(changed, night)
        self.refer(self.follows)

    def count_runs(self, old: np.ndarray, dev: np.ndarray, z: np.ndarray, threshold: np.ndarray) -> None:
        """Each series' run of consecutive nights half the threshold or more off its level, each way, the evidence
        of the run (each night's distance in noise, capped, less the allowance), and the longest such run it came
        back from (module docstring, 3)."""
        off = np.where(old & (np.abs(np.nan_to_num(dev)) >= threshold / 2), np.sign(np.nan_to_num(dev)), 0)
        for run, since, blip, total, sign in ((self.run_up, self.up_from, self.blip_up, self.up, 1),
                                              (self.run_down, self.down_from, self.blip_down, self.down, -1)):
            still = old & (off == sign)
            ended = old & ~still & (run > 0)
            blip[ended] = np.maximum(blip[ended], run[ended])
            since[still & (run == 0)] = self.night
            since[ended] = self.values.shape[1]
            run[still] += 1
            total[still] += np.minimum(sign * z[still], CAP) - ALLOWANCE
            run[ended] = 0
            total[ended] = 0.0

    def holds(self, row: int, since: int, night: int) -> bool:
        """Whether the newest night of a move lies nearer the move's level (the median of its nights) than the
        old one: a move whose last night is on its way back is not a new level."""
        span = self.values[row, since:night + 1] - self.level[row]
        middle = float(np.nanmedian(span))
        return abs(float(span[-1]) - middle) <= abs(float(span[-1]))

    def tail(self, night: int, nights_per_alarm: int) -> float:
        """How far from its level, in noise, one night of one series lies at most once in `nights_per_alarm`
        nights of all of them, as their history before `night` shows (module docstring, 4): the quantile
        1 - 1 / (nights_per_alarm x series) of the settled nights' distances, steps' own nights left out, and never
        below MOVED_SIGMA; UNKNOWN_TAIL with fewer than TAIL_NIGHTS nights of history."""
        if night < TAIL_NIGHTS:
            return UNKNOWN_TAIL
        kept = self.judged[:, :night] & ~self.stepping[:, :night]
        z = np.abs(self.deviation[:, :night] / self.sigma_at[:, :night])[kept]
        z = z[np.isfinite(z)]
        active = max(1, int(np.isfinite(self.values[:, night - 1]).sum()))
        return max(MOVED_SIGMA, float(np.quantile(z, 1 - 1 / (nights_per_alarm * active)))) if len(z) else MOVED_SIGMA

    def relevel(self, row: int, since: int, night: int, threshold: float, accepted: str = "") -> None:
        """A new level for `row` from night `since` on: a named step when it moved the threshold or more. The old
        level is worked out again without the move's nights, which counted towards it while the move was young."""
        old_start, following = self.start[row], self.follows[row]
        self.in_level[row, since:night + 1] = False
        if since > old_start and self.in_level[row, old_start:since].any():
            old, old_raw = (float(v[0]) for v in self.current_level(np.array([row]), since - 1))
        else:
            old, old_raw = self.level[row], self.raw_level[row]
        before = old
        nights = int(self.in_level[row, old_start:since].sum())  # a level a named step made is known on PERSIST
        settled = nights >= (PERSIST if self.named_level[row] else SETTLED)
        span = self.values[row, since:night + 1]
        after = float(np.nanmedian(span)) if np.isfinite(span).any() else before
        self.in_level[row, since:night + 1] = np.isfinite(span)
        self.moved[row, since:night + 1] = False
        self.start[row] = since
        self.level[row] = after
        self.raw_level[row] = self.current_level(np.array([row]), night)[1][0]
        self.up[row] = self.down[row] = 0.0
        self.run_up[row] = self.run_down[row] = 0
        self.up_from[row] = self.down_from[row] = self.values.shape[1]
        raw_after = self.raw_level[row]
        # a step moved the threshold against the run and in itself, the same way; a case that only did not follow
        # the run (most cases 3x faster, it 1.3x) moves its level quietly
        moved = (after - before, raw_after - old_raw)
        named = settled and min(abs(m) for m in moved) >= threshold and moved[0] * moved[1] > 0
        slower = after >= self.reference[row] + threshold and raw_after >= self.raw_reference[row] + threshold
        if accepted or not (slower and (named or not following)):
            # accepted, an improvement, or a quiet move: the reference follows the level, no regression is open
            accepted = accepted or ("improvement" if named and after < before else "")
            self.follows[row] = True
        else:  # a step that opened a regression, or a quiet move of one that stays open
            self.follows[row] = False
            if following:  # the reference is the old level, as it stood before the move
                self.reference[row], self.raw_reference[row] = old, old_raw
                self.ref_span[row] = (old_start, since - 1)
        if self.follows[row]:
            self.refer(row)
        self.named_level[row] = named
        if named:
            self.steps[row].append(Step(since, night, old_raw, raw_after, accepted))
            self.stepping[row, since:night + 1] = True

    def accept(self, rows: np.ndarray, night: int, reason: str, threshold: np.ndarray) -> None:
        """Take the level at `night` of `rows` as their reference: a move under way becomes the new level."""
        self.night = night
        for row in rows:
            if not np.isfinite(self.level[row]):
                continue
            pending = min(self.up_from[row], self.down_from[row])
            if pending < self.values.shape[1]:
                self.relevel(row, int(pending), night, threshold[row], accepted=reason)
            else:
                self.refer(row)
                self.follows[row] = True
                open_steps = self.steps[row]
                if open_steps and not open_steps[-1].accepted:
                    open_steps[-1] = Step(open_steps[-1].at, open_steps[-1].confirmed, open_steps[-1].before,
                                          open_steps[-1].after, reason)


def _without_drift(diffs: np.ndarray) -> np.ndarray:
    """Night-to-night differences less their median where a series drifts (DRIFT_SHARE of them or more one way): a
    history that got 2x slower at every run is a trend, not 145 % of noise per night. Differences that go both ways
    (noise, an alternating bimodal case) are left as they are: centring those would make an alternation quiet."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        counts = np.sum(np.isfinite(diffs), axis=1)
        share = np.maximum(np.nansum(diffs > 0, axis=1), np.nansum(diffs < 0, axis=1)) / np.maximum(counts, 1)
        drifting = (counts >= OWN_NIGHTS) & (share >= DRIFT_SHARE)
        return diffs - np.where(drifting, np.nanmedian(diffs, axis=1), 0.0)[:, None] if drifting.any() else diffs


def _steps_between_values(window: np.ndarray) -> np.ndarray:
    """Each row's differences between consecutive values, skipping the nights it has none (NaN where a night has
    no value, or no earlier one): a night set aside does not cost a series two of its differences."""
    if window.shape[1] < 2:
        return np.full((window.shape[0], 0), np.nan)
    have = np.isfinite(window)
    index = np.where(have, np.arange(window.shape[1]), -1)
    last = np.maximum.accumulate(index, axis=1)[:, :-1]  # the latest night with a value, up to each night
    previous = np.take_along_axis(window, np.maximum(last, 0), axis=1)
    return np.where(have[:, 1:] & (last >= 0), window[:, 1:] - previous, np.nan)


def _nanmedian(a: np.ndarray) -> np.ndarray:
    """Row medians ignoring NaN, NaN for a row with none: np.nanmedian's figures, from one sort (NaN sorts last)
    rather than its masked array, several times slower on the small matrices of a night."""
    if a.shape[1] == 0:
        return np.full(a.shape[0], np.nan)
    counts, ordered, rows = np.sum(~np.isnan(a), axis=1), np.sort(a, axis=1), np.arange(a.shape[0])
    low, high = ordered[rows, np.maximum(counts - 1, 0) // 2], ordered[rows, np.minimum(counts // 2, a.shape[1] - 1)]
    return np.where(counts > 0, (low + high) / 2, np.nan)


def pooled_noise(tracks: Tracks, night: int, raw: np.ndarray, shift: float, floor: float) -> float:
    """The machine's typical noise, which a case with few nights borrows (module docstring, 2): the median of the
    settled cases' own noise; in the first nights, the spread of this night's cases about the shift (two nights
    differ by sqrt 2 noises); the floor where there are too few cases for either."""
    own, counts = tracks.own_noise(night)
    settled = own[counts >= PRIOR_NIGHTS]
    usable = np.isfinite(raw)
    if len(settled) >= MIN_POOLED_CASES or (len(settled) and usable.sum() < MIN_POOLED_CASES):
        return float(np.median(settled))
    if usable.sum() >= MIN_POOLED_CASES:
        return ROBUST * float(np.median(np.abs(raw[usable] - shift))) / np.sqrt(2)
    return floor


@dataclass
class Judgement:
    """Every night of a machine judged (module docstring): the cases' tracks and the whole run's shift."""

    cases: list[str]
    nights: int
    tracks: Tracks
    shift: Tracks  # one row: the shift the whole run shares, per night
    shifts: np.ndarray  # the shift taken out of each night, log units
    threshold: np.ndarray  # per case, log units
    floor: float
    accepted: list[Acceptance] = field(default_factory=list)

    def index(self, case: str) -> int:
        return self.cases.index(case)


def judge(levels: np.ndarray, cases: list[str], threshold: np.ndarray | float, floor: float,
          acceptances: list[Acceptance] = ()) -> Judgement:
    """Judge every night of a machine in order: `levels` (cases x nights) in seconds, NaN where a case has no
    usable figure that night; `threshold` the minimum effect per case (a fraction, e.g. 0.05); `floor` the smallest
    noise any series is judged by (a fraction)."""
    levels = np.asarray(levels, dtype=float)
    count, nights = levels.shape
    with np.errstate(all="ignore"):
        y = np.where(levels > 0, np.log(levels), np.nan)
    thresholds = np.log1p(np.broadcast_to(np.asarray(threshold, dtype=float), (count,)).copy())
    log_floor = float(np.log1p(floor))
    run_threshold = np.array([float(np.median(thresholds))]) if count else np.zeros(1)
    tracks, shift = Tracks(count, nights, log_floor), Tracks(1, nights, log_floor, residual=True)
    shifts = np.zeros(nights)
    by_night: dict[int, list[Acceptance]] = {}
    for a in acceptances:
        by_night.setdefault(a.night, []).append(a)
    def cases_of(night: int) -> None:
        """Judge the cases on `night` (the run's shift taken out), against their levels as they stand."""
        raw = y[:, night] - tracks.level
        x = y[:, night] - shifts[night]
        tracks.shifted[night] = False
        tracks.judge(night, x, tracks.noise(night, pooled_noise(tracks, night, raw, shifts[night], log_floor)),
                     thresholds, tracks.tail(night, NIGHTS_PER_ALARM), shifts[night])

    for night in range(nights):
        raw = y[:, night] - tracks.level
        usable = np.isfinite(raw)
        if usable.sum() >= MIN_POOLED_CASES:
            shifts[night] = float(np.median(raw[usable]))
        began = shift.start[0]
        shift.judge(night, shifts[night:night + 1], shift.noise(night, log_floor), run_threshold, MOVED_SIGMA)
        if shift.start[0] != began:  # the run's move held: the nights set aside were the machine's new normal
            for earlier in range(shift.start[0], night):
                if tracks.shifted[earlier]:
                    cases_of(earlier)
        if shift.moved[0, night]:  # the whole run moved: its cases' figures say nothing of their own
            tracks.shifted[night] = True
            tracks.aside[:, night] = y[:, night] - shifts[night]
        else:
            cases_of(night)
        for a in by_night.get(night, []):
            rows = np.arange(count) if a.cases is None else np.array([i for i, c in enumerate(cases) if c in a.cases])
            tracks.accept(rows, night, a.reason, thresholds)
            if a.cases is None:
                shift.accept(np.array([0]), night, a.reason, run_threshold)
    return Judgement(list(cases), nights, tracks, shift, shifts, thresholds, log_floor, list(acceptances))


# What one night of one series is, for the gate (judge.outcome): the first three leave the gate open; `slower`
# fails it; `moved`, `undone` and a whole run's `moved` shift ask for a re-run; the rest pass.
NEW, MISSING, SAME, SEEN, FASTER, MOVED_FASTER = "new", "missing", "same", "seen", "faster", "moved faster"
BEHIND = "behind the run"
SLOWER, UNDONE, MOVED, SHIFTED = "slower", "undone", "moved", "shifted"


@dataclass(frozen=True)
class Outcome:
    """What the judgement says of one series on one night (module docstring): the gate reads it of the newest."""

    status: str
    ratio: float  # the night's level against the reference (the whole run's shift taken out)
    ci_low: float
    ci_high: float
    sigma: float  # the noise the night was judged by, log units
    z: float  # the night's distance from the level, in noise
    step: Step | None = None  # the step that opened a regression, or the newest step towards faster
    blips: int = 0  # earlier one-night moves at least as far that came back (status `seen`)

    @property
    def noise_pct(self) -> float:
        return float(np.expm1(self.sigma) * 100)


def outcome(tracks: Tracks, row: int, night: int, threshold: float, shift: float = 0.0) -> Outcome:
    """The status of `row` on `night` (after that night was judged; `shift`: the whole run's shift that night), by
    the rules of the module docstring. Its ratio is the series' own: its level that night against its reference,
    both as measured (the run's shift in them); it is judged against the run (the shift taken out), and only a
    change that is slower both ways is a regression: a case that did not share a large improvement of the whole
    run lies above the run, but is no slower than it was (`behind`)."""
    x, ref = tracks.values[row, night], tracks.reference[row]
    own = float(tracks.raw_reference[row])  # the reference as measured
    if tracks.shifted[night]:
        change = float(tracks.aside[row, night] + shift - own)
        return Outcome(SHIFTED, float(np.exp(change)), np.nan, np.nan, np.nan, np.nan)
    if not np.isfinite(x):
        return Outcome(MISSING, np.nan, np.nan, np.nan, np.nan, np.nan)
    sigma = float(tracks.sigma_at[row, night])
    change = float(x + shift - own)
    if not np.isfinite(tracks.values[row, :night]).any():
        return Outcome(NEW, 1.0, 1.0, 1.0, sigma, 0.0)
    dev = float(tracks.deviation[row, night])
    z = dev / sigma
    common = {"ratio": float(np.exp(change)), "ci_low": float(np.exp(change - 1.96 * sigma)),
              "ci_high": float(np.exp(change + 1.96 * sigma)), "sigma": sigma, "z": z}
    steps = tracks.steps[row]
    if tracks.level[row] - ref >= threshold:  # an open regression against the run
        opened = next((s for s in reversed(steps) if s.after > s.before and not s.accepted), None)
        if tracks.raw_level[row] - own < threshold:  # and none of its own: it did not share the run's improvement
            return Outcome(BEHIND, step=opened, **common)
        # nearer the reference than the regressed level, against the run or as measured
        back = x - ref < (tracks.level[row] - ref) / 2 or change < (tracks.raw_level[row] - own) / 2
        status = UNDONE if back else SLOWER
        return Outcome(status, step=opened, **common)
    if tracks.moved[row, night]:
        if dev < 0:
            return Outcome(MOVED_FASTER, **common)
        earlier = tracks.moved[row, :night] & (tracks.deviation[row, :night] >= dev)
        blips = int(earlier.sum())
        status = MOVED if blips < BLIPS_SEEN and change >= threshold else SEEN if change >= threshold else BEHIND
        return Outcome(status, blips=blips, **common)
    recent = steps[-1] if steps and night - steps[-1].confirmed < PERSIST and steps[-1].after < steps[-1].before \
        else None
    return Outcome(FASTER if recent else SAME, step=recent, **common)
