"""The state of one benchmark run under pytest: device, profile, stopping rule, peaks, and cases not measured.

pytest-benchmark's fixture times Python calls with a host clock; this suite times device work itself
(suites/core/timing.py) and then hands each sample to the fixture as one round, through the case's entry
(suites/harness/entry.py), so the JSON's `stats` (min, median, IQR, ...) and its raw `data` are device seconds per
call. A case runs here (`run`): measured by the runner, settled with the other ranks, and what the run knows of
it (`RunNotes`: its profile, threads, percent of the achievable peak, earlier rounds) handed to the entry's builder.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from suites.core import achievable, devices
from suites.core.cases import Case
from suites.core.precision import DTYPES
from suites.core.profiles import SMOKE, Profile, rules
from suites.core.runner import CaseResult, DevicePeaks, Extension, execute
from suites.core.stopping import StopRule
from suites.harness import bench_rounds, distributed, entry
from suites.harness.entry import RunNotes


def parse_dtypes(text: str | None) -> list[str] | None:
    """`--bench-dtypes a,b` -> ['a', 'b']; unknown names are a usage error that lists the valid ones."""
    if text is None:  # not given; an empty list given is an error below, not "no filter"
        return None
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in DTYPES]
    if unknown or not names:
        raise pytest.UsageError(f"--bench-dtypes: unknown {', '.join(unknown) or 'empty list'}; "
                                f"valid names: {', '.join(DTYPES)}")
    return names


@dataclass
class BenchSession:
    """What every case of the run shares."""

    device: torch.device
    profile: Profile
    dtypes: list[str] | None
    extensions: list[Extension] = field(default_factory=list)
    not_measured: list[dict] = field(default_factory=list)
    # auto (load this machine's cached peaks or search), search (again), off; None: not given on the command line,
    # which is auto for the suite's cases and off for device_bench tests (achievable.asked)
    achievable_mode: str | None = "off"
    achievable_cache: Path = Path(".")
    world: distributed.World | None = None  # set under torchrun with several ranks
    rounds: int = 1
    # the threads torch's kernels used when the run started: the run's label (machine_info), which a test calling
    # torch.set_num_threads must not change; a case measured with another count says so (its entry's `threads`)
    torch_threads: int = field(default_factory=torch.get_num_threads)
    round_log: bench_rounds.RoundLog = field(default_factory=bench_rounds.RoundLog)
    log: Callable[[str], None] = lambda _: None  # a line on the terminal as it happens (the achievable search's)
    _peaks: dict | None = None
    _achievable: achievable.Peaks | str | None = None  # the peaks, or why there are none

    def __post_init__(self) -> None:
        self.profile = Profile(self.profile)  # a plain name ("quick") is accepted too

    def rule(self, case: Case) -> StopRule:
        """The profile's rule, or its per-round rule when the case is measured in several rounds."""
        if self.rounds > 1 and bench_rounds.in_rounds(case):
            return rules(self.profile).round
        return rules(self.profile).stop

    def lockstep(self, disabled: bool, case: Case) -> tuple[StopRule, distributed.RankLockstep | None]:
        """The rule of a case and, with several ranks, how they measure it together (a count of samples)."""
        if self.world is None:
            return (SMOKE if disabled else self.rule(case)), None
        rule = SMOKE.counted(1) if disabled else rules(self.profile).lockstep()
        return rule, distributed.RankLockstep(self.world, self.device)

    def peaks(self, dtype: str | None) -> DevicePeaks:
        """The device's peak FLOP/s for a dtype and its memory bandwidth in GB/s (None on CPU: no honest peak is
        known there)."""
        if self.device.type != "cuda":
            return DevicePeaks()
        if self._peaks is None:
            self._peaks = devices.gpu_info(self.device).peaks
        bandwidth = self._peaks.get("bandwidth", {}).get("value")
        return DevicePeaks(self._peaks.get(dtype, {}).get("value") if dtype else None,
                     bandwidth / 1e9 if bandwidth else None)

    def achievable(self) -> achievable.Peaks | None:
        """This machine's achievable peaks, searched (or loaded) on first use; None when off or when it failed."""
        if self._achievable is None:
            if self.achievable_mode == "off":
                self._achievable = "off (--bench-achievable-peaks off)"
            elif self.world is not None:
                self._achievable = "off under torchrun: ranks searching at once would contend for the node"
            else:
                try:
                    self._achievable = achievable.obtain(self.device, achievable.depth(self.achievable_mode),
                                                         self.achievable_cache,
                                                         refresh=self.achievable_mode == "search", dtypes=self.dtypes,
                                                         log=self.log)
                except Exception as exc:  # the boundary: a failed search costs pct_achievable, never the cases
                    self._achievable = f"search failed: {type(exc).__name__}: {exc}"
        return self._achievable if isinstance(self._achievable, achievable.Peaks) else None

    def pct_achievable(self, result: CaseResult, device_bench: bool = False) -> dict:
        """`pct_achievable` of a measured case with a FLOP or byte model (see suites.core.achievable); none for a
        case that failed its check, or one above a datasheet peak, whose speed must not become a peak. A
        `device_bench` case's model is its caller's declaration: it is read against the roofs, never raises one."""
        info = result.figures
        if (result.measurement is None or result.status != "ok" or not (result.case.flops or result.case.bytes)
                or info.get("tflops_above_peak") or info.get("gbps_above_peak")
                or not achievable.asked(self.achievable_mode, device_bench)):
            return {}
        peaks = self.achievable()
        return peaks.pct(result.case, result.measurement.median_s, info.get("notes", ()),
                         raises=not device_bench) if peaks else {}

    def achievable_info(self) -> dict | None:
        """machine_info's `achievable`: the peaks with how they were found, or why there are none; None when no
        case asked for them."""
        if self._achievable is None:
            return None
        if isinstance(self._achievable, str):
            return {"source": None, "reason": self._achievable}
        return self._achievable.as_dict()


DEVICE_FLAG = "--bench-device"


def resolve_device(config: pytest.Config) -> torch.device:
    try:
        return devices.resolve(config.getoption("bench_device"), DEVICE_FLAG)
    except devices.DeviceError as exc:
        raise pytest.UsageError(str(exc)) from None


def check_options(config: pytest.Config) -> None:
    """The checks that need torch, for options given on the command line: the dtypes, the device (its name and
    that this machine has it; CUDA is not initialised for it), the rounds."""
    parse_dtypes(config.getoption("bench_dtypes"))
    if config.getoption("bench_device") != "auto":  # auto picks a device; it cannot be wrong
        resolve_device(config)
    rounds = bench_rounds.parse_rounds(config.getoption("bench_rounds"))
    if rounds > 1 and distributed.launched():
        raise pytest.UsageError("--bench-rounds: one round under torchrun (the ranks measure each case in lockstep)")


def terminal_line(config: pytest.Config) -> Callable[[str], None]:
    """Write a line on pytest's terminal at once, also from inside a test, where pytest captures the output; on
    stderr where there is no terminal reporter (an xdist worker, a plugin-less run)."""
    def write(line: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            print(line, file=sys.stderr, flush=True)
            return
        capture = config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            reporter.ensure_newline()
            reporter.write_line(line)

    return write


def from_config(config: pytest.Config, profile: str) -> BenchSession:
    """The run's session, made when a test first needs the suite (never for a run that does not use it): the
    device (made CUDA's current device), and under torchrun this rank's place in the process group; `profile` is
    the one the run chose (suites/harness/options.py, `profile`)."""
    device = resolve_device(config)
    launched = distributed.launched()  # under torchrun: rank r on cuda:LOCAL_RANK, in the process group
    if launched:
        device = distributed.local_device(device)
    if device.type == "cuda":
        torch.cuda.set_device(device)  # timing's events, spin kernel and graph capture run on the current device
    world = distributed.join(device, config.getoption("bench_dist_timeout_s")) if launched else None
    return BenchSession(device, profile, parse_dtypes(config.getoption("bench_dtypes")),
                        achievable_mode=config.getoption("bench_achievable_peaks"),
                        achievable_cache=Path(config.getoption("bench_achievable_cache")), world=world,
                        log=terminal_line(config),
                        rounds=bench_rounds.parse_rounds(config.getoption("bench_rounds")))


Adjust = Callable[[StopRule], StopRule]  # what a device_bench test asked of the profile's rule (its options)


def measure_once(session: BenchSession, case: Case, earlier: list[CaseResult], adjust: Adjust | None = None
                 ) -> CaseResult:
    """One round of a case outside pytest's pass (see suites/harness/bench_rounds.py): no observers, nothing recorded;
    its figures pool the rounds before (`earlier`), so that a run stopped here keeps a headline of all of them."""
    rule = session.rule(case)
    return execute(case, session.device, adjust(rule) if adjust else rule, session.peaks(case.peak_dtype),
                   earlier_rounds=bench_rounds.earlier_measurements(earlier))


def measure_rounds_in_place(session: BenchSession, case: Case,
                            recorded: Callable[[list[CaseResult]], None] | None = None,
                            adjust: Adjust | None = None) -> None:
    """The rounds before the recorded one of a case that exists only inside its test (a `device_bench` callable):
    taken back to back, each pooling the ones before, into the session's round log, where `run` finds them.
    Unlike the suites' cases, whose rounds interleave over the whole selection before pytest's pass, these rounds
    see only the noise of the seconds the test runs."""
    log = bench_rounds.measure_rounds([case], session.rounds,
                                      lambda c, earlier: measure_once(session, c, earlier, adjust),
                                      report=lambda _: None, recorded=recorded)
    session.round_log.results[case.id] = log.results[case.id]


def run(session: BenchSession, benchmark, request: pytest.FixtureRequest, case: Case, adjust: Adjust | None = None
        ) -> entry.Recorded:
    """Run a case under pytest: record what was measured, then skip (unsupported, oom) or fail (error). `adjust`
    applies a device_bench test's options to the profile's rule (not to a smoke run's, nor to ranks in lockstep)."""
    rule, lockstep = session.lockstep(benchmark.disabled, case)
    if adjust is not None and lockstep is None and not benchmark.disabled:
        rule = adjust(rule)
    if lockstep is not None:
        case = lockstep.agreed(case)
    in_rounds = session.rounds > 1 and not benchmark.disabled and bench_rounds.in_rounds(case)
    earlier = session.round_log.results.get(case.id, []) if in_rounds else []
    result = execute(case, session.device, rule, session.peaks(case.peak_dtype), session.extensions, lockstep,
                     bench_rounds.earlier_measurements(earlier))
    ranks: dict = {}
    if lockstep is not None:
        result, ranks = lockstep.settle(result)
    threads = torch.get_num_threads()
    # a smoke run's single samples say nothing of a peak: no search for them
    achievable = {} if benchmark.disabled else session.pct_achievable(result, "device_bench" in request.fixturenames)
    notes = RunNotes(ranks=ranks, profile=str(session.profile), run_threads=session.torch_threads, threads=threads,
                     achievable=achievable, earlier_rounds=earlier if in_rounds else None)
    return settle(session, benchmark, request, result, notes)


def keep(session: BenchSession, benchmark, request: pytest.FixtureRequest, result: CaseResult,
         notes: RunNotes | None = None) -> entry.Recorded:
    """Record a case's result (its entry built from it and `notes`, nothing added without them): a measurement in
    pytest-benchmark's stats, a case not measured under `not_measured`."""
    info = entry.extra_info(result, notes or RunNotes())
    entry.record(benchmark, result, info)
    if result.measurement is None:
        session.not_measured.append(entry.not_measured(request.node.name, request.node.nodeid, result, info))
    return entry.Recorded(result, info)


def settle(session: BenchSession, benchmark, request: pytest.FixtureRequest, result: CaseResult,
           notes: RunNotes | None = None) -> entry.Recorded:
    """Record a case's result (`keep`), then skip the test (unsupported, oom) or fail it in one line (error)."""
    recorded = keep(session, benchmark, request, result, notes)
    if result.status in ("unsupported", "oom"):
        pytest.skip(f"{result.status}: {result.reason}")
    if result.status == "error":
        pytest.fail(f"{result.case.id}: {result.reason}", pytrace=False)
    return recorded
