"""Peak FLOP/s per dtype and peak memory bandwidth of a GPU, with the source of every figure.

Why derived and not looked up by name: name-keyed tables go stale and call a new part 'unknown' (an H200 in a
table written for the H100). The rate per SM per clock is a property of the architecture (compute capability),
so peak = SM count x SM clock x per-SM rate covers every part of a known architecture. A small table of vendor
datasheet figures, keyed by (compute capability, SM count, memory, board power) rather than by name, cross-checks
the derivation;
where it knows the part, its figure is the one `pct_peak` divides by, because NVIDIA rates Hopper's tensor cores
at the 1830 MHz boost clock, below the 1980 MHz maximum that NVML reports, and users compare with the datasheet.
Parts of one die that differ only in form factor (H100/H200 SXM at 700 W against NVL at 400-600 W, rated about 16 %
lower) are told apart by the board's default power limit; where that is unknown and both match, no datasheet row
is taken (the derived figure is used, and the source names the ambiguity) rather than the wrong one.
"""

from __future__ import annotations

from dataclasses import dataclass

# Dense (no sparsity) FLOP per clock per SM. An FMA counts as 2 FLOP. float32 is IEEE on the CUDA cores.
PER_SM_FLOP_PER_CLOCK: dict[tuple[int, int], dict[str, int]] = {
    (7, 0): {"float32": 128, "float16": 1024},  # V100
    (7, 5): {"float32": 128, "float16": 1024},  # T4, RTX 20
    (8, 0): {"float32": 128, "tf32": 1024, "float16": 2048, "bfloat16": 2048},  # A100, A30
    (8, 6): {"float32": 256, "tf32": 512, "float16": 1024, "bfloat16": 1024},  # A10, A40, RTX 30
    (8, 9): {"float32": 256, "tf32": 512, "float16": 1024, "bfloat16": 1024, "float8_e4m3fn": 2048},  # L4, L40S
    (9, 0): {"float32": 256, "tf32": 2048, "float16": 4096, "bfloat16": 4096, "float8_e4m3fn": 8192},  # H100, H200
    (10, 0): {"float32": 256, "tf32": 4096, "float16": 8192, "bfloat16": 8192, "float8_e4m3fn": 16384},  # B200
}


@dataclass(frozen=True)
class VendorPart:
    """Datasheet figures of one part: dense TFLOP/s per dtype and memory bandwidth in GB/s."""

    name: str
    capability: tuple[int, int]
    sm_count: int
    min_memory_gib: float
    tflops: dict[str, float]
    bandwidth_gbps: float
    board_w: tuple[float, float] = (0.0, float("inf"))  # range of the default board power limit of this form factor


VENDOR_PARTS: tuple[VendorPart, ...] = (
    VendorPart("Tesla V100 SXM2", (7, 0), 80, 15, {"float32": 15.7, "float16": 125}, 900),
    VendorPart("Tesla T4", (7, 5), 40, 14, {"float32": 8.1, "float16": 65}, 320),
    VendorPart("A100 40GB", (8, 0), 108, 38,
               {"float32": 19.5, "tf32": 156, "float16": 312, "bfloat16": 312}, 1555),
    VendorPart("A100 80GB SXM", (8, 0), 108, 76,
               {"float32": 19.5, "tf32": 156, "float16": 312, "bfloat16": 312}, 2039),
    VendorPart("L4", (8, 9), 58, 20,
               {"float32": 30.3, "tf32": 60, "float16": 121, "bfloat16": 121, "float8_e4m3fn": 242}, 300),
    VendorPart("H100 PCIe", (9, 0), 114, 76,
               {"float32": 51, "tf32": 378, "float16": 756, "bfloat16": 756, "float8_e4m3fn": 1513}, 2000),
    VendorPart("H100 SXM", (9, 0), 132, 76,
               {"float32": 67, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4, "float8_e4m3fn": 1978.9}, 3350,
               (650, 750)),
    VendorPart("H100 NVL", (9, 0), 132, 86,
               {"float32": 60, "tf32": 417.5, "float16": 835.5, "bfloat16": 835.5, "float8_e4m3fn": 1670.5}, 3900,
               (300, 450)),
    VendorPart("H200 SXM", (9, 0), 132, 130,
               {"float32": 67, "tf32": 494.7, "float16": 989.4, "bfloat16": 989.4, "float8_e4m3fn": 1978.9}, 4800,
               (650, 750)),
    VendorPart("H200 NVL", (9, 0), 132, 130,
               {"float32": 60, "tf32": 417.5, "float16": 835.5, "bfloat16": 835.5, "float8_e4m3fn": 1670.5}, 4800,
               (450, 649)),
    VendorPart("B200", (10, 0), 148, 170,
               {"float32": 80, "tf32": 1100, "float16": 2250, "bfloat16": 2250, "float8_e4m3fn": 4500}, 8000),
)


@dataclass(frozen=True)
class GpuSpec:
    """What the peaks are derived from, as read off the device (torch properties and NVML)."""

    capability: tuple[int, int]
    sm_count: int
    sm_clock_mhz: float | None  # maximum SM clock
    memory_gib: float
    memory_clock_mhz: float | None = None  # maximum memory clock (data rate is twice this)
    bus_width_bits: int | None = None
    board_power_w: float | None = None  # NVML's default power limit: tells form factors of one die apart


@dataclass(frozen=True)
class Peak:
    """One peak figure and where it came from; `derived` and `vendor` are kept side by side for the cross-check."""

    value: float | None
    source: str
    derived: float | None = None
    vendor: float | None = None

    def as_dict(self) -> dict[str, float | str | None]:
        return {"value": self.value, "source": self.source, "derived": self.derived, "vendor": self.vendor}


def derived_flops(spec: GpuSpec, dtype: str) -> float | None:
    """SM count x SM clock x dense FLOP per clock per SM for the architecture, in FLOP/s; None when unknown."""
    rate = PER_SM_FLOP_PER_CLOCK.get(spec.capability, {}).get(dtype)
    if rate is None or not spec.sm_clock_mhz:
        return None
    return spec.sm_count * spec.sm_clock_mhz * 1e6 * rate


def derived_bandwidth(spec: GpuSpec) -> float | None:
    """Memory clock x 2 (double data rate) x bus width / 8, in bytes/s; None when a property is missing."""
    if not spec.memory_clock_mhz or not spec.bus_width_bits:
        return None
    return spec.memory_clock_mhz * 1e6 * 2 * spec.bus_width_bits / 8


def _candidates(spec: GpuSpec) -> list[VendorPart]:
    """Datasheet rows of the same architecture and SM count with the most memory not above the device's, kept
    to the board power's form factor where it is known."""
    matches = [
        p for p in VENDOR_PARTS
        if p.capability == spec.capability and p.sm_count == spec.sm_count and p.min_memory_gib <= spec.memory_gib
        and (spec.board_power_w is None or p.board_w[0] <= spec.board_power_w <= p.board_w[1])
    ]
    most = max((p.min_memory_gib for p in matches), default=None)
    return [p for p in matches if p.min_memory_gib == most]


def vendor_part(spec: GpuSpec) -> VendorPart | None:
    """The one datasheet row this device is, or None when none or several (form factors of one die) match."""
    found = _candidates(spec)
    return found[0] if len(found) == 1 else None


def _how(spec: GpuSpec, how: str) -> str:
    """`how`, plus the parts the device could be when the datasheet cannot tell them apart."""
    found = _candidates(spec)
    if len(found) < 2:
        return how
    return f"{how}; datasheet ambiguous ({' or '.join(p.name for p in found)}: board power unknown)"


def _resolve(derived: float | None, vendor: float | None, vendor_name: str | None, how: str) -> Peak:
    if vendor is not None:
        note = f"derived {derived / 1e12:.4g}T" if derived else "no derivation for this architecture"
        return Peak(vendor, f"vendor datasheet ({vendor_name}); {note} from {how}", derived, vendor)
    if derived is not None:
        return Peak(derived, f"derived from {how}", derived, None)
    return Peak(None, f"unknown: no per-SM rate for this architecture and no datasheet entry ({how})")


def peak_flops(spec: GpuSpec, dtype: str) -> Peak:
    """Peak dense FLOP/s for a dtype (`float32`, `tf32`, `float16`, `bfloat16`, `float8_e4m3fn`)."""
    part = vendor_part(spec)
    vendor = part.tflops.get(dtype) * 1e12 if part and dtype in part.tflops else None
    rate = PER_SM_FLOP_PER_CLOCK.get(spec.capability, {}).get(dtype)
    arch = "sm_{}{}".format(*spec.capability)
    how = _how(spec, f"{spec.sm_count} SM x {spec.sm_clock_mhz} MHz x {rate} FLOP/clk/SM ({arch})")
    return _resolve(derived_flops(spec, dtype), vendor, part.name if part else None, how)


def peak_bandwidth(spec: GpuSpec) -> Peak:
    """Peak memory bandwidth in bytes/s."""
    part = vendor_part(spec)
    vendor = part.bandwidth_gbps * 1e9 if part else None
    how = _how(spec, f"{spec.memory_clock_mhz} MHz x 2 x {spec.bus_width_bits} bit / 8")
    return _resolve(derived_bandwidth(spec), vendor, part.name if part else None, how)


PEAK_DTYPES = ("float32", "tf32", "float16", "bfloat16", "float8_e4m3fn")


def all_peaks(spec: GpuSpec) -> dict[str, dict]:
    """Peaks for every dtype plus `bandwidth`, as plain dicts for machine_info."""
    peaks = {dtype: peak_flops(spec, dtype).as_dict() for dtype in PEAK_DTYPES}
    peaks["bandwidth"] = peak_bandwidth(spec).as_dict()
    return peaks
