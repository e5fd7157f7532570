"""NVML telemetry: throttle decoding, energy windows and summaries over sample values, the sampler thread, and the
'absent with the reason, once' path that a machine without NVML takes."""

import threading
import time
import warnings
from types import SimpleNamespace

import pynvml
import pytest
import torch

from suites.core import nvml
from suites.core.runner import execute
from suites.core.stopping import StopRule
from suites.observers.telemetry import (
    CounterReading,
    NvmlReader,
    Sample,
    Sampler,
    TelemetryExtension,
    TelemetryUnavailable,
    counter_energy,
    decode_reasons,
    machine_info,
    observe,
    power_energy,
    read_until_advanced,
    summarize,
    window_energy,
)
from suites.ops import matmul
from tests.runs import run_pytest_in_process

CPU = torch.device("cpu")
RULE = StopRule(min_samples=3, min_time_s=0.0, target_rel_iqr=1.0, timeout_s=1.0, warmup_s=0.0)
SMALL = matmul.make_case(matmul.MatmulShape("square", 64, 64, 64), "float32")

# Clock-event masks as NVML reports them: idle between kernels, the power cap under a long gemm, a hot GPU.
IDLE, POWER_CAP, APP_CLOCKS, HOT = 0x1, 0x4, 0x2, 0x20 | 0x40


def test_reason_masks_decode_to_names_lowest_bit_first():
    assert decode_reasons(0) == []
    assert decode_reasons(IDLE) == ["gpu_idle"]
    assert decode_reasons(POWER_CAP | IDLE) == ["gpu_idle", "sw_power_cap"]
    assert decode_reasons(HOT | 0x80) == ["sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake"]
    assert decode_reasons(0x8 | 0x800) == ["hw_slowdown", "unknown_0x800"]


def _samples(masks, watts=(250.0, 410.0, 690.0, 700.0), clocks=(1980, 1980, 1755, 1830)):
    return [Sample(t_s=10.0 + 0.02 * i, used_bytes=80_000_000_000 + i * 2**20, gpu_util_pct=100, mem_util_pct=40,
                   power_w=w, sm_clock_mhz=c, mem_clock_mhz=2619, temp_c=50 + i, reasons=m)
            for i, (m, w, c) in enumerate(zip(masks, watts, clocks, strict=True))]


def test_summary_of_a_power_capped_window():
    samples = _samples([IDLE, 0, POWER_CAP, POWER_CAP])
    energy = counter_energy(CounterReading(10.0, 5_000_000), [CounterReading(10.07, 5_035_700)])
    out = summarize(samples, energy)
    assert out["samples"] == 4
    assert out["power_mean_w"] == pytest.approx(512.5) and out["power_max_w"] == 700.0
    assert out["sm_clock_min_mhz"] == 1755 and out["sm_clock_median_mhz"] == 1905.0
    assert out["temp_max_c"] == 53
    assert out["nvml_used_bytes"] == 80_000_000_000 + 3 * 2**20
    # the power cap is the normal state of a busy GPU: recorded, not a doubt
    assert out["throttled"] is False and out["throttle_reasons"] == []
    assert out["clock_event_reasons"] == ["gpu_idle", "sw_power_cap"]
    assert out["throttled_sample_share"] == 0.0 and out["power_capped_share"] == 0.5
    assert (out["energy_j"], out["energy_method"]) == (pytest.approx(35.7), "energy_counter")


def test_a_thermal_slowdown_makes_a_case_doubtful_and_the_power_cap_beside_it_does_not():
    out = summarize(_samples([POWER_CAP, POWER_CAP | HOT, POWER_CAP, 0x80]), None)
    assert out["throttled"] is True
    assert out["throttle_reasons"] == ["sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake"]
    assert out["throttled_sample_share"] == 0.5 and out["power_capped_share"] == 0.75


def test_idle_and_applications_clocks_are_not_throttling():
    out = summarize(_samples([IDLE, APP_CLOCKS, IDLE | APP_CLOCKS, 0]), None)
    assert out["throttled"] is False and out["throttle_reasons"] == []
    assert out["clock_event_reasons"] == ["gpu_idle", "applications_clocks_setting"]
    assert "energy_j" not in out


def test_summary_leaves_out_what_the_driver_did_not_report():
    out = summarize([Sample(t_s=1.0, power_w=100.0), Sample(t_s=1.02)], None)
    assert out == {"samples": 2, "power_mean_w": 100.0, "power_max_w": 100.0}


def test_counter_energy_over_the_window_when_it_advanced():
    start = CounterReading(100.0, 1_234_000)
    energy = counter_energy(start, [CounterReading(100.5, 1_484_000)])
    assert (energy.joules, energy.method, energy.window_s) == (250.0, "energy_counter", 0.5)


def test_short_window_is_stretched_until_the_counter_advances():
    # A 10 ms window on a GPU whose counter steps every ~25 ms: unchanged at the end, advanced 22 ms later.
    start = CounterReading(0.000, 9_000_000)
    after = [CounterReading(0.010, 9_000_000), CounterReading(0.020, 9_000_000), CounterReading(0.032, 9_014_400)]
    energy = counter_energy(start, after)
    assert energy.method == "energy_counter_stretched"
    assert energy.joules == pytest.approx(14.4) and energy.window_s == pytest.approx(0.032)


def test_counter_that_never_advances_falls_back_to_the_power_integral():
    start = CounterReading(0.0, 7_000)
    stuck = [CounterReading(0.01, 7_000), CounterReading(1.01, 7_000)]
    assert counter_energy(start, stuck) is None
    samples = [Sample(t_s=0.02, power_w=300.0), Sample(t_s=0.04, power_w=500.0), Sample(t_s=0.06, power_w=500.0)]
    energy = window_energy(start, stuck, samples, 0.0, 0.08)
    # 300 W held over [0, 0.02], a ramp to 500 W over [0.02, 0.04], 500 W over [0.04, 0.08]
    assert energy.method == "power_integral"
    assert energy.joules == pytest.approx(300 * 0.02 + 400 * 0.02 + 500 * 0.04)
    assert energy.window_s == pytest.approx(0.08)


def test_one_power_sample_is_zeus_instant_approximation_and_none_is_no_energy():
    energy = power_energy([Sample(t_s=0.5, power_w=420.0)], 0.49, 0.51)
    assert energy.method == "instant_power" and energy.joules == pytest.approx(8.4)
    assert power_energy([Sample(t_s=0.5)], 0.0, 1.0) is None
    assert window_energy(None, [], [], 0.0, 1.0) is None


def test_polling_stops_at_the_first_advanced_reading():
    recorded = iter([CounterReading(t, e) for t, e in [(0.01, 500), (0.02, 500), (0.03, 520), (0.04, 540)]])
    readings = read_until_advanced(lambda: next(recorded), CounterReading(0.0, 500), poll_s=0.0)
    assert [r.energy_mj for r in readings] == [500, 500, 520]
    assert next(recorded).energy_mj == 540  # never read


def test_polling_gives_up_after_the_stretch_limit():
    start = CounterReading(time.perf_counter(), 42)
    readings = read_until_advanced(lambda: CounterReading(time.perf_counter(), 42), start, max_stretch_s=0.02,
                                   poll_s=0.001)
    assert readings and all(r.energy_mj == 42 for r in readings)
    assert counter_energy(start, readings) is None


def test_sampler_reads_in_its_thread_until_stopped():
    sampler = Sampler(lambda: Sample(t_s=time.perf_counter()), interval_s=0.005)
    sampler.start()
    time.sleep(0.05)
    samples = sampler.stop()
    count = len(samples)
    time.sleep(0.02)
    assert count >= 2 and len(sampler.samples) == count  # nothing is read after stop()
    times = [s.t_s for s in samples]
    assert times == sorted(times)


def test_absent_on_a_cpu_run_with_the_reason_and_no_warning():
    """A CPU has no NVML telemetry to expect: machine_info says why, and no warning fails a `-W error` host."""
    ext = TelemetryExtension(CPU)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = [execute(SMALL, CPU, RULE, extensions=[ext]) for _ in range(2)]
    assert [r.status for r in results] == ["ok", "ok"]
    assert all("telemetry" not in r.figures for r in results)
    info = machine_info([ext])
    assert info["available"] is False and info["reason"]
    if nvml.nvml()[0] is None:
        assert info["reason"] == nvml.nvml()[1]


@pytest.mark.skipif(nvml.nvml()[0] is not None, reason="NVML is here: telemetry is not absent")
def test_absent_on_a_cuda_run_is_warned_once_with_the_reason():
    """Where telemetry was expected (a CUDA device) and NVML is missing, the run says so once and goes on; the
    extension touches no CUDA when it has no reader, so this runs without a GPU."""
    ext = TelemetryExtension(torch.device("cuda", 0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            with ext.around(SMALL, CPU) as fields:
                assert fields == {}
    unavailable = [w for w in caught if issubclass(w.category, TelemetryUnavailable)]
    assert len(unavailable) == 1 and machine_info([ext])["reason"] in str(unavailable[0].message)


def test_zero_interval_turns_telemetry_off_without_a_warning():
    ext = TelemetryExtension(CPU, interval_ms=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert execute(SMALL, CPU, RULE, extensions=[ext]).status == "ok"
    assert machine_info([ext]) == {"available": False, "reason": "disabled by --bench-telemetry-interval-ms 0"}


STEP_S = 0.1


class StandInDriver:
    """Where no GPU is, stands in for the NVML library under NvmlReader: pynvml's own constants, and answers shaped
    like a busy H100's (newer driver) or like a driver without memory v2, clock-event reasons or instant power.
    The energy counter steps by 5 J every 100 ms: NVML's counter also moves in steps (20-100 ms apart)."""

    NVML_CLOCK_SM, NVML_CLOCK_MEM = pynvml.NVML_CLOCK_SM, pynvml.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU, NVML_FI_DEV_POWER_INSTANT = pynvml.NVML_TEMPERATURE_GPU, pynvml.NVML_FI_DEV_POWER_INSTANT
    nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def __init__(self, newer: bool) -> None:
        self.newer, self.t0 = newer, time.perf_counter()
        if newer:
            self.nvmlDeviceGetCurrentClocksEventReasons = lambda handle: 0x4

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        if version and not self.newer:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return SimpleNamespace(used=(70 if version else 71) * 2**30)

    def nvmlDeviceGetFieldValues(self, handle, field_ids):
        status = pynvml.NVML_SUCCESS if self.newer else pynvml.NVML_ERROR_NOT_SUPPORTED
        return [SimpleNamespace(nvmlReturn=status, value=SimpleNamespace(uiVal=612_000))]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        return 9_000_000 + 5_000 * int((time.perf_counter() - self.t0) / STEP_S)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return 0x1

    nvmlDeviceGetUtilizationRates = staticmethod(lambda handle: SimpleNamespace(gpu=97, memory=41))
    nvmlDeviceGetPowerUsage = staticmethod(lambda handle: 598_000)
    nvmlDeviceGetClockInfo = staticmethod(lambda handle, clock: {pynvml.NVML_CLOCK_SM: 1755}.get(clock, 2619))
    nvmlDeviceGetTemperature = staticmethod(lambda handle, sensor: 61)


def test_reader_uses_what_a_newer_driver_has():
    reader = NvmlReader(StandInDriver(newer=True), handle=None)
    assert (reader.memory_struct, reader.power_source) == ("v2", "instant")
    sample = reader()
    assert (sample.used_bytes, sample.power_w, sample.reasons) == (70 * 2**30, 612.0, 0x4)
    assert (sample.sm_clock_mhz, sample.mem_clock_mhz, sample.temp_c, sample.gpu_util_pct) == (1755, 2619, 61, 97)


def test_reader_falls_back_on_an_older_driver():
    reader = NvmlReader(StandInDriver(newer=False), handle=None)
    assert (reader.memory_struct, reader.power_source) == ("v1", "average")
    sample = reader()
    assert (sample.used_bytes, sample.power_w, sample.reasons) == (71 * 2**30, 598.0, 0x1)


def test_a_window_shorter_than_a_counter_step_is_stretched_until_it_steps():
    reader = NvmlReader(StandInDriver(newer=True), handle=None)
    time.sleep(STEP_S + 0.001 - (time.perf_counter() - reader.lib.t0) % STEP_S)  # just after a counter step
    with observe(reader, interval_s=0.001) as fields:
        time.sleep(0.005)
    telemetry = fields["telemetry"]
    assert telemetry["energy_method"] == "energy_counter_stretched"
    assert telemetry["energy_j"] == 5.0 and telemetry["energy_window_s"] > 0.005
    assert telemetry["power_mean_w"] == 612.0 and telemetry["clock_event_reasons"] == ["sw_power_cap"]
    assert telemetry["throttle_reasons"] == [] and telemetry["power_capped_share"] == 1.0
    assert telemetry["samples"] >= 1


def test_a_failing_block_stops_the_sampler_and_records_nothing():
    reader = NvmlReader(StandInDriver(newer=True), handle=None)
    with pytest.raises(RuntimeError, match="boom"), observe(reader, interval_s=0.001) as fields:
        raise RuntimeError("boom")
    assert fields == {}
    assert not any(t.name == "nvml-sampler" for t in threading.enumerate())


@pytest.mark.slow
def test_a_run_records_why_telemetry_is_absent(quick_run):
    run = quick_run["json"]
    info = run["machine_info"]["telemetry"]
    if torch.cuda.is_available():
        pytest.skip("checks the CPU path; a GPU run records telemetry")
    assert info["available"] is False and info["reason"]
    assert "TelemetryUnavailable" not in quick_run["stdout"]
    assert all("telemetry" not in b["extra_info"] for b in run["benchmarks"])


@pytest.mark.parametrize("interval", ["-5", "1e308", "1e-300", "0.5", "60001", "nan", "inf"])
def test_an_interval_out_of_the_samplers_bounds_is_a_usage_error_in_one_line(interval):
    """1e308 overflowed the sampler thread's wait (the thread died), 1e-300 made it a busy loop."""
    proc = run_pytest_in_process("bench/test_matmul.py", "--bench-telemetry-interval-ms", interval, "--collect-only")
    assert proc.returncode == 4, proc.tail()
    line = f"--bench-telemetry-interval-ms {float(interval):g}: expected 0 (off) or 1 to 60000 ms"
    assert line in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available() or nvml.nvml()[0] is None, reason="needs a CUDA GPU with NVML")
def test_nvml_reader_reports_power_clocks_and_energy_on_a_gpu():
    handle, reason = nvml.handle(torch.cuda.current_device())
    assert handle is not None, reason
    reader = NvmlReader(nvml.nvml()[0], handle)
    sample = reader()
    assert sample.power_w > 0 and sample.sm_clock_mhz > 0 and sample.used_bytes > 0 and sample.reasons is not None
    assert reader.energy().energy_mj > 0
