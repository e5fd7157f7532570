"""Achievable peaks: the highest gemm FLOP/s per dtype and memory bandwidth this device reaches, searched for.

Why: a datasheet peak is not reachable (an H100's bf16 gemm tops out near 80 % of its 989 TFLOP/s however it
is written), so 70 % of datasheet is good on one part and poor on another. As mamf-finder does, a bounded search
over gemm shapes finds what the device does reach: a coarse grid of cubes, then a coordinate search around the
best shape (each of M, N, K moved up and down by a step that halves when nothing improves), within a time budget
per dtype. Bandwidth gets the same: a large device-to-device copy and a streaming triad (a = b + s*c), the best
of both. Every shape is timed by suites.core.timing with the same median as the cases, so a case and the peak it
is divided by are measured alike.

`pct_achievable` = attained / attainable, where attainable is the roofline at the case's arithmetic intensity:
min(achievable FLOP/s of its dtype, intensity x achievable bandwidth); with only a FLOP or only a byte model, the
one roof it has. It stays at or below 100 by design: the achievable roofs are the best this device was seen to
do, so when a case beats the roof that binds it (a shape the search did not try, or noise that slowed the
search) that roof is raised to the case's figure for the rest of the run, the case reads 100 with
`above_achievable` and a note of by how much, and the roof records which case raised it (`raised_by`). A roof
only rises, so no case reads above 100.

A case raises only the roofs of its own kind. The searched roofs are gemm roofs, read and raised by the matmul
suite's gemms; every other suite (conv, attention, the training steps) is read against its own copy of the
searched figures, raised by its own cases only. A convolution that cuDNN runs as Winograd or FFT does fewer
multiplies than its direct FLOP model counts, so it can beat any gemm roof; raising the gemm roof with it would
lower every later gemm's figure. The raised copies are kept under `kinds` in machine_info. A case whose FLOP
figure is above the device's datasheet peak (`tflops_above_peak`, set by the runner) raises no roof at all: its
FLOP model counts more than the kernel did; nor does one above the memory peak (`gbps_above_peak`: served from a
cache), nor a `device_bench` case, whose flops and bytes are its caller's declaration (it reads 100 with a note).

Two searches: the short one (the quick profile's plan: about a minute on a GPU, seconds on a CPU) that a run
makes by default whatever its profile, and the long one (the full profile's plan: 5 x 60 + 15 = 315 s on a GPU,
wider shapes and a tighter rule) only when asked (`--bench-achievable-peaks full`, `depth`): the main job's first
run on a machine should not wait five minutes before its first case, and a roof the short search set too low is
raised by the first case that beats it (above). The result is kept in a JSON file keyed by the machine's identity
(device, driver, torch build, the run's torch threads) and the search's plan, so a later run on the same machine
loads it instead of searching again; a long search serves every later run, a short one the runs that do not ask
for the long one. Nothing here is silent: a
search says what it searches and how long it may take before it starts, a loaded file says where it came from,
when it was searched and what its roofs are, and a case that beats a roof says so on the terminal as well as in
its record (a loaded roof can be stale: another load on the machine, another clock). The suite's own bench files
search or load the peaks by default (`auto`); a `device_bench` test in a user's repository never starts a search
unless `--bench-achievable-peaks` is given (`asked`): a test of its own must not wait a minute for peaks.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import torch

from reports.format import strict_json
from suites.core import devices, gemm, memory
from suites.core.cases import Case, Unsupported
from suites.core.precision import DTYPES, float32_mode
from suites.core.profiles import MiB, Profile, SearchPlan, search_plan, searches_serving
from suites.core.stopping import StopRule
from suites.core.timing import measure

FORMAT = 1  # version of the cache file's layout; a file of another version is searched again
NOT_SEARCHED = "not searched"  # how a dtype's reason starts when the search's total ran out before it


@dataclass
class Found:
    """One achievable figure: the best value (FLOP/s or bytes/s), where it was reached, and how it was found."""

    value: float
    at: str  # gemm shape MxNxK, or the kernel and array size
    how: str
    tried: int
    seconds: float
    raised_by: str | None = None  # the case that beat the searched figure during this run, if one did
    searched_value: float | None = None  # the searched figure, kept when a case raised `value`


GEMM = "gemm"  # the kind of the searched roofs
BANDWIDTH = "bandwidth"  # the name of the bandwidth roof among a kind's roofs (the others are dtypes)


def roof_kind(case: Case) -> str:
    """The kind of work whose roofs a case is read against and may raise: the searched gemm roofs for the matmul
    suite, its own copy of them for any other suite (see the module docstring)."""
    return GEMM if case.suite == "matmul" else case.suite


@dataclass
class Peaks:
    """The achievable roofs of one device: FLOP/s per dtype, bandwidth, and why a dtype has none."""

    flops: dict[str, Found] = field(default_factory=dict)
    bandwidth: Found | None = None
    kernels: dict[str, Found] = field(default_factory=dict)  # copy and triad, the best of which is `bandwidth`
    missing: dict[str, str] = field(default_factory=dict)  # dtype -> reason it has no figure
    profile: str = ""
    identity: dict = field(default_factory=dict)
    source: str = ""  # `searched` or the file it was loaded from
    searched_at: str = ""
    kinds: dict[str, dict[str, Found]] = field(default_factory=dict)  # kind -> roof name -> its own copy
    # where a raised roof is said as it happens (a run's terminal); not part of the record
    log: Callable[[str], None] = field(default=lambda _: None, repr=False, compare=False)

    def as_dict(self) -> dict:
        raised = {kind: {name: asdict(found) for name, found in roofs.items() if found.raised_by}
                  for kind, roofs in self.kinds.items()}
        return {"format": FORMAT, "profile": self.profile, "identity": self.identity, "source": self.source,
                "searched_at": self.searched_at,
                "flops": {dtype: asdict(found) for dtype, found in self.flops.items()},
                "bandwidth": asdict(self.bandwidth) if self.bandwidth else None,
                "kernels": {name: asdict(found) for name, found in self.kernels.items()},
                "missing": dict(self.missing),
                "kinds": {kind: roofs for kind, roofs in raised.items() if roofs}}

    @classmethod
    def from_dict(cls, data: dict, source: str) -> Peaks:
        return cls(flops={d: Found(**f) for d, f in data["flops"].items()},
                   bandwidth=Found(**data["bandwidth"]) if data.get("bandwidth") else None,
                   kernels={k: Found(**f) for k, f in data.get("kernels", {}).items()},
                   missing=dict(data.get("missing", {})), profile=data["profile"], identity=data["identity"],
                   source=source, searched_at=data.get("searched_at", ""))

    def roof(self, kind: str, name: str) -> Found | None:
        """Roof `name` (a dtype, or BANDWIDTH) of a kind of work: the searched one for gemms; for another kind its
        own copy, made from the searched figure (as searched, before any gemm raised it) on first use."""
        searched = self.bandwidth if name == BANDWIDTH else self.flops.get(name)
        if searched is None or kind == GEMM:
            return searched
        own = self.kinds.setdefault(kind, {})
        if name not in own:
            own[name] = dataclasses.replace(searched, value=searched.searched_value or searched.value,
                                            raised_by=None, searched_value=None)
        return own[name]

    def pct(self, case: Case, median_s: float, notes: Sequence[str] = (), raises: bool = True) -> dict:
        """`pct_achievable` of a measured case (empty when it has no model or no roof applies); raises the binding
        roof of the case's kind when the case beats it, so the figure is at most 100, and says so beside it
        (`above_achievable`, and a note appended to `notes`). Without `raises` (a model the caller declared, as a
        `device_bench` test does, which nothing checks), a case above its roof reads 100 the same way and the roof
        stays: a bogus declaration must not lower the figures of the cases after it."""
        kind = roof_kind(case)
        roofs: list[tuple[float, Found, str]] = []  # (attainable FLOP/s or bytes/s, the roof that gives it, its name)
        peak = self.roof(kind, case.peak_dtype) if case.flops and case.peak_dtype else None
        if peak:
            roofs.append((peak.value, peak, case.peak_dtype))
        if case.bytes and (bandwidth := self.roof(kind, BANDWIDTH)):
            scale = case.flops / case.bytes if peak else 1.0  # FLOP per byte on the roofline
            roofs.append((bandwidth.value * scale, bandwidth, BANDWIDTH))
        if not roofs:
            return {}
        attained = (case.flops if peak else case.bytes) / median_s
        attainable, roof, name = min(roofs, key=lambda r: r[0])
        if attained <= attainable:
            return {"pct_achievable": 100 * attained / attainable}
        if not raises:
            return {"pct_achievable": 100.0, "above_achievable": True, "notes": [*notes, (
                f"{attained / attainable:.3g}x the achievable {kind} {name} roof by its declared flops/bytes (a "
                "cache-resident working set, noise in the search, or a declaration counting more work than the "
                "call does); a declared model raises no roof")]}
        roof.searched_value = roof.searched_value or roof.value
        roof.value *= attained / attainable
        roof.raised_by = case.id
        note = (f"{attained / attainable:.3g}x the achievable {kind} {name} roof, which it raises for the rest of "
                f"the run (other kinds' roofs stay): a shape the search did not try, noise in the search, or a "
                f"model counting more work than the kernel did")
        self.log(f"achievable: {case.id} ran at {attained / attainable:.3g}x the {kind} {name} roof ({self.source}"
                 f"{', searched ' + self.searched_at if self.searched_at else ''}); the roof is raised to it for the "
                 "rest of the run" + (", and `--bench-achievable-peaks search` searches again"
                                      if self.source.startswith("loaded") else ""))
        return {"pct_achievable": 100.0, "above_achievable": True, "notes": [*notes, note]}


def _time_per_call(fn: Callable[[], object], device: torch.device, rule: StopRule) -> float:
    return measure(fn, device, rule).median_s


Shape = tuple[int, int, int]


def _text(shape: Shape) -> str:
    return "x".join(map(str, shape))


def _gemm_rate(shape: Shape, dtype: str, device: torch.device, rule: StopRule) -> float:
    """Measured FLOP/s of one gemm shape (2MNK per call over the median device time)."""
    product = gemm.build(*shape, dtype, device, seeded=False)
    try:
        seconds = _time_per_call(product.fn, device, rule)
    finally:
        del product
        memory.release(device)
    return 2 * math.prod(shape) / seconds


def search_gemm(dtype: str, device: torch.device, plan: SearchPlan, clock: Callable[[], float] = time.perf_counter,
                rate: Callable[[Shape], float] | None = None) -> Found:
    """The best gemm FLOP/s of `dtype` within the plan's budget: cubes of the grid, then a coordinate search.

    A shape is skipped when, at the best rate seen so far, its samples would not fit in the budget left (the
    budget is kept to within one shape's measurement). `rate` replaces the measurement (tests of the search).
    """
    if rate is None and (reason := gemm.support(dtype, device)):
        raise Unsupported(reason)
    measure_rate = rate or (lambda shape: _gemm_rate(shape, dtype, device, plan.rule))
    start = clock()
    tried: dict[Shape, float] = {}

    def fits(shape: Shape) -> bool:
        left = plan.gemm_budget_s - (clock() - start)
        best = max(tried.values(), default=None)
        calls = 2 + plan.rule.min_samples
        return left > 0 and (best is None or calls * 2 * math.prod(shape) / best < left)

    def attempt(shape: Shape) -> bool:
        """Measure a new shape when it fits; True when it beats the best so far."""
        if shape in tried or not fits(shape):
            return False
        previous = max(tried.values(), default=0.0)
        try:
            with float32_mode(dtype == "tf32"):
                tried[shape] = measure_rate(shape)
        except (torch.OutOfMemoryError, Unsupported):  # a shape too large, or one the kernel rejects, is a
            tried[shape] = 0.0  # point of the search, not a failure of it
            memory.release(device)
        return tried[shape] > previous

    for size in plan.sizes:
        attempt((size, size, size))
    if not any(tried.values()):
        raise Unsupported(f"no {dtype} gemm of the grid fits the {plan.gemm_budget_s:g} s budget")
    grid = len(tried)
    step = plan.step
    while step >= plan.min_step and fits(max(tried, key=tried.get)):
        best = max(tried, key=tried.get)
        moves = [tuple(d + sign * step if i == axis else d for i, d in enumerate(best))
                 for axis in range(3) for sign in (1, -1)]
        improved = [attempt(s) for s in moves if min(s) >= plan.min_step]
        if not any(improved):
            step //= 2
    best = max(tried, key=tried.get)
    seconds = clock() - start
    how = (f"searched: {grid} cubes of the grid, then {len(tried) - grid} shape(s) of coordinate refinement "
           f"(steps {plan.step} down to {plan.min_step}), {seconds:.1f} s of a {plan.gemm_budget_s:g} s budget; "
           f"median device time per shape")
    return Found(tried[best], _text(best), how, len(tried), seconds)


def _kernel(name: str, n_bytes: int, device: torch.device) -> tuple[Callable[[], object], int]:
    """(fn, bytes moved per call): copy reads and writes one array; triad reads two and writes one (STREAM)."""
    n = n_bytes // 4
    src, dst = torch.rand(n, device=device), torch.empty(n, device=device)
    if name == "copy":
        return (lambda: dst.copy_(src)), 2 * n * 4
    other = torch.rand(n, device=device)
    return (lambda: torch.add(src, other, alpha=3.0, out=dst)), 3 * n * 4


def search_bandwidth(device: torch.device, plan: SearchPlan, clock: Callable[[], float] = time.perf_counter
                     ) -> dict[str, Found]:
    """The best copy and triad bandwidth (bytes/s) over the plan's array sizes, within its budget."""
    found: dict[str, Found] = {}
    budget = plan.bandwidth_budget_s / 2
    for name in ("copy", "triad"):
        start, best, tried = clock(), None, 0
        for size in plan.bandwidth_sizes:
            if clock() - start > budget:
                break
            try:
                fn, moved = _kernel(name, size, device)
                rate = moved / _time_per_call(fn, device, plan.rule)
                del fn
            except torch.OutOfMemoryError:  # arrays too large for this device: the smaller sizes stand
                continue
            finally:
                memory.release(device)
            tried += 1
            if best is None or rate > best[0]:
                best = (rate, size)
        if best is None:
            continue
        seconds = clock() - start
        how = (f"searched: {name} of float32 arrays, {tried} size(s) in {seconds:.1f} s; bytes read + written "
               f"per call over the median device time")
        found[name] = Found(best[0], f"{name} {best[1] // MiB} MiB per array", how, tried, seconds)
    return found


def identity(device: torch.device) -> dict:
    """What makes two runs the same machine for the cache: the machine identity the results carry (the GPU's UUID,
    so two boxes of one GPU model never share peaks, or the CPU model; driver, CUDA, torch's version), the threads
    torch runs with in this process (a run under OMP_NUM_THREADS=1 is another machine for a CPU gemm, and on a GPU
    another host side), and on a CPU the cores and the instruction set torch's kernels use."""
    info = devices.identity(device) | {"device_type": device.type, "torch_threads": torch.get_num_threads()}
    if device.type != "cuda":
        cpu = devices.cpu_info()
        info |= {key: cpu[key] for key in ("usable_cores", "capability")}
    return info


def cache_path(directory: Path, ident: dict, profile: str) -> Path:
    """`<device>-<hash of the identity>-<profile>.json` under directory."""
    name = ident.get("machine") or ident["device_type"]
    digest = hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]
    return directory / f"{re.sub(r'[^A-Za-z0-9]+', '-', name).strip('-')}-{digest}-{profile}.json"


def load(directory: Path, ident: dict, profile: str) -> Peaks | None:
    """The cached peaks of this machine: a full search serves both profiles, a quick one only quick runs."""
    for wanted in searches_serving(profile):
        path = cache_path(directory, ident, wanted)
        try:
            data = strict_json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if data.get("format") == FORMAT and data.get("identity") == ident:
            return Peaks.from_dict(data, f"loaded from {path}")
    return None


def save(peaks: Peaks, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = cache_path(directory, peaks.identity, peaks.profile)
    path.write_text(strict_json.dumps(peaks.as_dict(), indent=1))
    return path


def total_budget_s(plan: SearchPlan, dtypes: Sequence[str]) -> float:
    """What a search of these dtypes and the bandwidth is given in all: the plan's budget per dtype for each, plus
    its bandwidth budget. Each part may run over by its last measurement; `search` takes that from the next."""
    return plan.gemm_budget_s * len(dtypes) + plan.bandwidth_budget_s


def search(device: torch.device, profile: str, dtypes: list[str] | None = None,
           log: Callable[[str], None] = lambda _: None, budget_s: float | None = None,
           clock: Callable[[], float] = time.perf_counter) -> Peaks:
    """Search every dtype the device runs (those of `dtypes` when given), then the bandwidth, within `budget_s`
    in all (default: `total_budget_s`), saying what it does through `log` as it goes: the total first, then a
    line per dtype and one for the bandwidth.

    The total is a deadline: a dtype gets the plan's budget or what is left of the total after the bandwidth's
    share, whichever is less, so a dtype that overran (its last shape, its first allocation) shortens the next;
    a dtype for which nothing is left is recorded as missing with that reason.
    """
    plan = search_plan(device.type, profile)
    names = dtypes or list(DTYPES)
    total = total_budget_s(plan, names) if budget_s is None else budget_s
    start = clock()
    peaks = Peaks(profile=profile, identity=identity(device), source="searched",
                  searched_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    log(f"achievable peaks: searching {', '.join(names)} and the bandwidth on {device} ({profile} plan) in "
        f"{total:g} s ({plan.gemm_budget_s:g} s per dtype, {plan.bandwidth_budget_s:g} s bandwidth, each part "
        "over by at most its last shape) before the next case; once per machine identity (device, driver, torch, "
        "threads), then loaded from the cache; --bench-achievable-peaks off skips it"
        + (", full runs the long search instead" if Profile(profile) is Profile.QUICK else ""))
    for dtype in names:
        left = total - (clock() - start) - min(plan.bandwidth_budget_s, total / (len(names) + 1))
        if left <= 0:
            peaks.missing[dtype] = f"{NOT_SEARCHED}: the search's {total:g} s in all were spent"
            log(f"achievable {dtype}: {peaks.missing[dtype]}")
            continue
        try:
            found = search_gemm(dtype, device, dataclasses.replace(plan, gemm_budget_s=min(plan.gemm_budget_s,
                                                                                            left)), clock)
        except Unsupported as exc:
            peaks.missing[dtype] = str(exc)
            log(f"achievable {dtype}: none ({exc})")
            continue
        peaks.flops[dtype] = found
        log(f"achievable {dtype}: {found.value / 1e12:.4g} TFLOP/s at {found.at} ({found.tried} shapes, "
            f"{found.seconds:.1f} s)")
    left = total - (clock() - start)
    peaks.kernels = search_bandwidth(device, dataclasses.replace(
        plan, bandwidth_budget_s=min(plan.bandwidth_budget_s, max(left, 0.0))), clock)
    if not peaks.kernels:
        peaks.missing["bandwidth"] = ("no copy or triad array size of the plan fits in memory" if left > 0 else
                                      f"{NOT_SEARCHED}: the search's {total:g} s in all were spent")
        log(f"achievable bandwidth: none ({peaks.missing['bandwidth']})")
        return peaks
    best = max(peaks.kernels.values(), key=lambda f: f.value)
    peaks.bandwidth = Found(**asdict(best))
    log(f"achievable bandwidth: {best.value / 1e9:.4g} GB/s ({best.at}); the search took {clock() - start:.0f} s")
    return peaks


def depth(mode: str | None) -> Profile:
    """The search a `--bench-achievable-peaks` mode makes or loads, named by the profile whose plan it runs: the
    long one (full) only for `full`; else the short one (quick), whatever the run's profile."""
    return Profile.FULL if mode == "full" else Profile.QUICK


def obtain(device: torch.device, profile: str, directory: Path, refresh: bool = False,
           dtypes: list[str] | None = None, log: Callable[[str], None] = lambda _: None) -> Peaks:
    """This machine's cached peaks from a search of `profile`'s plan or a longer one, or a new search of that
    plan saved for the next run (always a new one with `refresh`).

    A cache serves the dtypes it holds; a dtype asked for that it lacks means a new search.
    """
    ident = identity(device)
    cached = None if refresh else load(directory, ident, profile)
    wanted = set(dtypes or DTYPES)
    if cached is not None and wanted <= set(cached.flops) | answered(cached.missing):
        log(f"achievable peaks: {cached.source} (searched {cached.searched_at} with torch {ident.get('torch')}, "
            f"{ident['torch_threads']} threads): {roofs_text(cached)}; --bench-achievable-peaks search searches "
            "again")
        cached.log = log
        return cached
    peaks = search(device, profile, dtypes, log)
    peaks.log = log
    try:
        log(f"achievable peaks: cached in {save(peaks, directory)}")
    except OSError as exc:
        log(f"achievable peaks not cached ({exc}); the next run searches again")
    return peaks


def roofs_text(peaks: Peaks) -> str:
    """`float32 0.0198 TFLOP/s, bandwidth 8.57 GB/s`: the roofs a run divides by, for the line that loads them."""
    parts = [f"{dtype} {found.value / 1e12:.4g} TFLOP/s" for dtype, found in peaks.flops.items()]
    if peaks.bandwidth is not None:
        parts.append(f"bandwidth {peaks.bandwidth.value / 1e9:.4g} GB/s")
    return ", ".join(parts) or "no roofs"


def asked(option: str | None, device_bench: bool) -> bool:
    """Whether a case may use (load, or search for) the achievable peaks: always when --bench-achievable-peaks was
    given (`off` then says so in machine_info), else for the suite's own cases (`auto`) and never for a
    `device_bench` test, which would otherwise wait for a search it did not ask for."""
    return option is not None or not device_bench


def answered(missing: dict[str, str]) -> set[str]:
    """The missing dtypes whose reason is an answer (unsupported here), not a search cut short by its total."""
    return {dtype for dtype, reason in missing.items() if not reason.startswith(NOT_SEARCHED)}
