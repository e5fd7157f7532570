"""NVML telemetry around each case's measurement: memory, utilization, power, clocks, temperature, throttling, energy.

A background thread reads the GPU every `interval_s` while the case is measured (`Sampler`); the readings are
summarized into `extra_info.telemetry` (`summarize`). The thread only calls NVML (ctypes calls that release the
GIL) and appends to a list, so the timed work on the GPU is not disturbed (tools/bench_sampler_cost.py measures
how much it is).

Energy follows zeus (ml-energy/zeus, ZeusMonitor): the difference of NVML's total-energy counter
(`nvmlDeviceGetTotalEnergyConsumption`, mJ since the driver loaded) between the start and the end of the
window. The counter advances in steps (every 20-100 ms depending on the GPU), so a window shorter than a step may
see no change; zeus then multiplies the instant power by the window. Here the window is first stretched: the
counter is polled after the case until it advances (at most `max_stretch_s`), and the energy of that longer
window is reported with its length; only when the counter never moves (or the GPU has none, before Volta) is the
energy the integral of the power samples over the case's window. `energy_method` says which was used.

Clock-event reasons are NVML's bit mask (`nvmlDeviceGetCurrentClocksEventReasons`, called
`...ClocksThrottleReasons` by older drivers). They fall in three kinds:
- configuration (idle, applications-clocks and display-clock settings, sync boost): nothing to say;
- the power cap (`sw_power_cap`, and `board_limit`): the normal state of a busy GPU. A dense bf16 or fp8 gemm or
  a training step on an H100/H200 runs at its power limit with the clock the limit allows; that clock is its
  speed, and the same case tomorrow runs the same way. Recorded (`power_capped_share`), never a doubt;
- slowdowns (`hw_slowdown`, `sw_thermal_slowdown`, `hw_thermal_slowdown`, `hw_power_brake`, `reliability`): the
  GPU was too hot, an external signal braked it, or the hardware protected itself. These make a timing
  untrustworthy, set `throttled`, and make `reports compare` call the case `unsure`.
A clock that moved between two runs of a case is compared there as well (the median SM clock of each).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from suites.core import defaults, nvml
from suites.core.cases import Case
from suites.core.runner import Extension

DEFAULT_INTERVAL_MS = defaults.TELEMETRY_INTERVAL_MS
MAX_STRETCH_S = 1.0  # several times the slowest counter update period reported (100 ms)
COUNTER_POLL_S = 0.002

# nvml.h's nvmlClocksEventReason* / nvmlClocksThrottleReason* bits (identical values in both families).
REASON_NAMES: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
# The newer name first: older drivers and nvidia-ml-py releases have only the second.
REASON_GETTERS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
POWER_CAP = frozenset({"sw_power_cap", "board_limit"})
SLOWDOWNS = frozenset({"hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake", "reliability"})


class TelemetryUnavailable(UserWarning):
    """Telemetry cannot be taken on this machine or device; the run goes on without it."""


def decode_reasons(mask: int) -> list[str]:
    """The names of the bits set in a clock-event reason mask, lowest bit first; unknown bits by value."""
    names, bit = [], 1
    while bit <= mask:
        if mask & bit:
            names.append(REASON_NAMES.get(bit, f"unknown_0x{bit:x}"))
        bit <<= 1
    return names


def is_throttling(reason: str) -> bool:
    """Whether a clock-event reason makes a timing untrustworthy: a slowdown, or a bit this code does not know."""
    return reason in SLOWDOWNS or reason.startswith("unknown_")


@dataclass(frozen=True)
class Sample:
    """One reading of the GPU; a field is None where the driver or part does not report it."""

    t_s: float  # time.perf_counter()
    used_bytes: int | None = None
    gpu_util_pct: int | None = None
    mem_util_pct: int | None = None
    power_w: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    temp_c: int | None = None
    reasons: int | None = None  # clock-event reason bit mask


@dataclass(frozen=True)
class CounterReading:
    """The total-energy counter at one moment."""

    t_s: float
    energy_mj: int


@dataclass(frozen=True)
class Energy:
    """Energy over a window, how it was obtained, and the window it covers (stretched windows are longer)."""

    joules: float
    method: str  # energy_counter, energy_counter_stretched, power_integral, instant_power
    window_s: float


def read_until_advanced(read: Callable[[], CounterReading | None], start: CounterReading,
                        max_stretch_s: float = MAX_STRETCH_S, poll_s: float = COUNTER_POLL_S) -> list[CounterReading]:
    """Counter readings from the end of the window on, until one exceeds `start` or `max_stretch_s` has passed.

    The first reading is the window's end; later ones exist only when the counter had not advanced by then.
    """
    readings: list[CounterReading] = []
    deadline = time.perf_counter() + max_stretch_s
    while (reading := read()) is not None:
        readings.append(reading)
        if reading.energy_mj > start.energy_mj or time.perf_counter() >= deadline:
            break
        time.sleep(poll_s)
    return readings


def counter_energy(start: CounterReading, readings: Sequence[CounterReading]) -> Energy | None:
    """Energy between `start` and the first of `readings` (see read_until_advanced) where the counter advanced."""
    for index, reading in enumerate(readings):
        if reading.energy_mj > start.energy_mj:
            method = "energy_counter" if index == 0 else "energy_counter_stretched"
            return Energy((reading.energy_mj - start.energy_mj) / 1e3, method, reading.t_s - start.t_s)
    return None


def power_energy(samples: Sequence[Sample], start_s: float, end_s: float) -> Energy | None:
    """The integral of the power samples over [start_s, end_s] (trapezoids, each end held at its nearest sample);
    one sample gives instant power x window, zeus' approximation; none gives None."""
    points = [(s.t_s, s.power_w) for s in samples if s.power_w is not None and start_s <= s.t_s <= end_s]
    if not points:
        return None
    window = end_s - start_s
    if len(points) == 1:
        return Energy(points[0][1] * window, "instant_power", window)
    from scipy.integrate import trapezoid  # here: scipy.integrate's import is 0.35 s of every run's start on a CPU

    t = np.array([start_s] + [p[0] for p in points] + [end_s])
    watts = np.array([points[0][1]] + [p[1] for p in points] + [points[-1][1]])
    return Energy(float(trapezoid(watts, t)), "power_integral", window)


def window_energy(start: CounterReading | None, readings: Sequence[CounterReading], samples: Sequence[Sample],
                  start_s: float, end_s: float) -> Energy | None:
    """The counter's energy where it advanced (the window stretched if needed), else the power integral."""
    found = counter_energy(start, readings) if start is not None else None
    return found or power_energy(samples, start_s, end_s)


def _present(samples: Sequence[Sample], name: str) -> list:
    return [value for s in samples if (value := getattr(s, name)) is not None]


def summarize(samples: Sequence[Sample], energy: Energy | None) -> dict[str, Any]:
    """The per-case figures of extra_info.telemetry from the samples of one window (absent figures left out)."""
    out: dict[str, Any] = {"samples": len(samples)}
    if power := _present(samples, "power_w"):
        out |= {"power_mean_w": float(np.mean(power)), "power_max_w": float(np.max(power))}
    if energy is not None:
        out |= {"energy_j": energy.joules, "energy_method": energy.method, "energy_window_s": energy.window_s}
    if sm := _present(samples, "sm_clock_mhz"):
        out |= {"sm_clock_min_mhz": int(np.min(sm)), "sm_clock_median_mhz": float(np.median(sm))}
    if mem := _present(samples, "mem_clock_mhz"):
        out["mem_clock_median_mhz"] = float(np.median(mem))
    if temp := _present(samples, "temp_c"):
        out["temp_max_c"] = int(np.max(temp))
    if util := _present(samples, "gpu_util_pct"):
        out["gpu_util_mean_pct"] = float(np.mean(util))
    if used := _present(samples, "used_bytes"):
        out["nvml_used_bytes"] = int(np.max(used))
    if masks := _present(samples, "reasons"):
        seen = decode_reasons(functools.reduce(int.__or__, masks, 0))
        throttled = [m for m in masks if any(is_throttling(r) for r in decode_reasons(m))]
        capped = [m for m in masks if any(r in POWER_CAP for r in decode_reasons(m))]
        out |= {"throttled": bool(throttled), "throttle_reasons": [r for r in seen if is_throttling(r)],
                "clock_event_reasons": seen, "throttled_sample_share": len(throttled) / len(masks),
                "power_capped_share": len(capped) / len(masks)}
    return out


class Sampler:
    """Calls `read` every `interval_s` in a daemon thread between start() and stop(); `read` is injectable so the
    loop's own cost can be measured without a GPU (tools/bench_sampler_cost.py)."""

    def __init__(self, read: Callable[[], Any], interval_s: float) -> None:
        self.read, self.interval_s = read, interval_s
        self.samples: list = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.samples, self._stop = [], threading.Event()
        self._thread = threading.Thread(target=self._loop, name="nvml-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> list:
        """Stop the thread (after its current reading) and return the readings in time order."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples

    def _loop(self) -> None:
        while True:
            self.samples.append(self.read())
            if self._stop.wait(self.interval_s):
                return


class NvmlReader:
    """Reads one Sample of a device from NVML. Which variants the driver has (memory v2, instant power, clock-event
    or throttle reasons) is probed once here, not on every reading."""

    def __init__(self, lib: Any, handle: Any) -> None:
        self.lib, self.handle = lib, handle
        v2 = getattr(lib, "nvmlMemory_v2", None)
        self.memory_struct = "v2" if v2 and nvml.query(lib.nvmlDeviceGetMemoryInfo, handle, v2) else "v1"
        self._memory_args = (handle, v2) if self.memory_struct == "v2" else (handle,)
        getters = [getattr(lib, name, None) for name in REASON_GETTERS]
        self._reasons = next((g for g in getters if g and nvml.query(g, handle) is not None), None)
        self.power_source = "instant" if self._instant_power_mw() is not None else "average"
        self._power_mw = self._instant_power_mw if self.power_source == "instant" else \
            functools.partial(nvml.query, lib.nvmlDeviceGetPowerUsage, handle)

    def _instant_power_mw(self) -> int | None:
        """NVML_FI_DEV_POWER_INSTANT; nvmlDeviceGetPowerUsage is a 1 s average on Ampere and newer (not GA100)."""
        field = getattr(self.lib, "NVML_FI_DEV_POWER_INSTANT", None)
        values = nvml.query(self.lib.nvmlDeviceGetFieldValues, self.handle, [field]) if field else None
        if not values or values[0].nvmlReturn != 0:
            return None
        return int(values[0].value.uiVal)

    def __call__(self) -> Sample:
        lib, handle, query = self.lib, self.handle, nvml.query
        memory = query(lib.nvmlDeviceGetMemoryInfo, *self._memory_args)
        util = query(lib.nvmlDeviceGetUtilizationRates, handle)
        power_mw = self._power_mw()
        return Sample(
            t_s=time.perf_counter(),
            used_bytes=None if memory is None else int(memory.used),
            gpu_util_pct=None if util is None else int(util.gpu),
            mem_util_pct=None if util is None else int(util.memory),
            power_w=None if power_mw is None else power_mw / 1e3,
            sm_clock_mhz=query(lib.nvmlDeviceGetClockInfo, handle, lib.NVML_CLOCK_SM),
            mem_clock_mhz=query(lib.nvmlDeviceGetClockInfo, handle, lib.NVML_CLOCK_MEM),
            temp_c=query(lib.nvmlDeviceGetTemperature, handle, lib.NVML_TEMPERATURE_GPU),
            reasons=query(self._reasons, handle) if self._reasons else None,
        )

    def energy(self) -> CounterReading | None:
        """The total-energy counter now; None where the GPU has none (before Volta)."""
        value = nvml.query(self.lib.nvmlDeviceGetTotalEnergyConsumption, self.handle)
        return None if value is None else CounterReading(time.perf_counter(), int(value))


@contextlib.contextmanager
def observe(reader: NvmlReader, interval_s: float) -> Iterator[dict]:
    """Sample `reader` while the block runs; when it ends normally, the yielded dict gets `telemetry`: the summary
    of the samples and the window's energy (the counter polled on after the block when it had not advanced)."""
    fields_out: dict = {}
    start_s, start = time.perf_counter(), reader.energy()
    sampler = Sampler(reader, interval_s)
    sampler.start()
    try:
        yield fields_out
    finally:
        end_s = time.perf_counter()
        samples = sampler.stop()
    readings = read_until_advanced(reader.energy, start) if start is not None else []
    fields_out["telemetry"] = summarize(samples, window_energy(start, readings, samples, start_s, end_s))


def allocator_peaks(device: torch.device) -> dict[str, int]:
    """The caching allocator's peaks since the runner reset them after the build: with nvml_used_bytes, the gap
    (CUDA context, other processes, fragmentation) is visible."""
    return {"torch_peak_allocated_bytes": torch.cuda.max_memory_allocated(device),
            "torch_peak_reserved_bytes": torch.cuda.max_memory_reserved(device)}


class TelemetryExtension(Extension):
    """Samples NVML around each case's measurement; absent, with the reason warned once, where it cannot."""

    def __init__(self, device: torch.device, interval_ms: float = DEFAULT_INTERVAL_MS) -> None:
        self.device, self.interval_ms = device, interval_ms
        self._warned = False

    @functools.cached_property
    def _reader(self) -> tuple[NvmlReader | None, str | None]:
        if self.interval_ms == 0:
            return None, "disabled by --bench-telemetry-interval-ms 0"
        lib, reason = nvml.nvml()
        if lib is None:
            return None, reason
        if self.device.type != "cuda":
            return None, f"NVML telemetry observes CUDA devices; this run measures {self.device}"
        handle, reason = nvml.handle(self.device.index)
        return (NvmlReader(lib, handle), None) if handle is not None else (None, reason)

    def machine_info(self) -> dict[str, Any]:
        """machine_info['telemetry']: whether telemetry was taken, and why not."""
        reader, reason = self._reader
        if reader is None:
            return {"available": False, "reason": reason}
        mig = {"mig": nvml.MIG_NOTE} if nvml.located(self.device.index).mig else {}
        return {"available": True, "interval_ms": self.interval_ms, "memory_struct": reader.memory_struct,
                "power_source": reader.power_source} | mig

    @contextlib.contextmanager
    def around(self, case: Case, device: torch.device) -> Iterator[dict]:
        reader, reason = self._reader
        if reader is None:
            # a CUDA run expected telemetry and is told once; a CPU run has none to expect (its machine_info says
            # why), and a warning on every CPU run is noise that fails hosts that turn warnings into errors
            if not self._warned and self.interval_ms != 0 and self.device.type == "cuda":
                self._warned = True
                warnings.warn(TelemetryUnavailable(f"telemetry absent: {reason}"), stacklevel=4)
            yield {}
            return
        with observe(reader, self.interval_ms / 1e3) as fields_out:
            yield fields_out
            torch.cuda.synchronize(device)  # the window ends when the GPU is done (not after a failure)
        fields_out["telemetry"] |= allocator_peaks(device)


def machine_info(extensions: Sequence[Extension]) -> dict[str, Any]:
    """machine_info['telemetry'] of a run: from its TelemetryExtension, or absent with the reason."""
    found = [ext.machine_info() for ext in extensions if isinstance(ext, TelemetryExtension)]
    return found[0] if found else {"available": False, "reason": "no telemetry extension in this run"}
