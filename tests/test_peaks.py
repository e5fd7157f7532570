"""Peak figures derived from device properties, cross-checked with datasheets (dense TFLOP/s)."""

import pytest

from suites.core.peaks import GpuSpec, derived_bandwidth, derived_flops, peak_bandwidth, peak_flops

# Datasheet boost clocks at which NVIDIA rates the tensor cores.
A100 = GpuSpec((8, 0), 108, 1410, 39.4, memory_clock_mhz=1215, bus_width_bits=5120)
H100_SXM = GpuSpec((9, 0), 132, 1830, 79.1, memory_clock_mhz=2619, bus_width_bits=5120)
H200 = GpuSpec((9, 0), 132, 1830, 139.8)


@pytest.mark.parametrize(("spec", "tflops"), [(A100, 312), (H100_SXM, 989), (H200, 989)])
def test_dense_bf16_formula_matches_datasheets(spec, tflops):
    assert derived_flops(spec, "bfloat16") / 1e12 == pytest.approx(tflops, rel=0.005)


def test_formula_for_other_dtypes_of_the_a100():
    assert derived_flops(A100, "tf32") / 1e12 == pytest.approx(156, rel=0.005)
    assert derived_flops(A100, "float32") / 1e12 == pytest.approx(19.5, rel=0.005)


def test_memory_bandwidth_from_clock_and_bus_width():
    assert derived_bandwidth(A100) / 1e9 == pytest.approx(1555, rel=0.002)
    assert derived_bandwidth(H100_SXM) / 1e9 == pytest.approx(3352, rel=0.002)


def test_h200_as_nvml_reports_it_is_known_with_both_figures():
    # NVML reports the 1980 MHz maximum SM clock and the 700 W default power limit of the SXM board; the datasheet
    # rates the tensor cores at 1830 MHz.
    device = GpuSpec((9, 0), 132, 1980, 139.8, memory_clock_mhz=3201, bus_width_bits=6144, board_power_w=700)
    peak = peak_flops(device, "bfloat16")
    assert peak.value / 1e12 == pytest.approx(989.4)
    assert "H200" in peak.source
    assert peak.derived / 1e12 == pytest.approx(132 * 1.98 * 4096 / 1e3, rel=1e-6)
    assert peak_bandwidth(device).vendor / 1e12 == pytest.approx(4.8)


def test_parts_are_told_apart_by_memory_not_name():
    h100 = GpuSpec((9, 0), 132, 1980, 79.1)
    assert "H100 SXM" in peak_flops(h100, "bfloat16").source


def test_unlisted_part_of_a_known_architecture_is_derived():
    future = GpuSpec((9, 0), 144, 1980, 96.0)
    peak = peak_flops(future, "float8_e4m3fn")
    assert peak.vendor is None
    assert peak.source.startswith("derived")
    assert peak.value == pytest.approx(144 * 1980e6 * 8192)


def test_unknown_architecture_says_so_instead_of_guessing():
    peak = peak_flops(GpuSpec((12, 1), 48, 2500, 16.0), "bfloat16")
    assert peak.value is None
    assert peak.source.startswith("unknown")


def test_nvl_and_sxm_boards_of_one_die_are_told_apart_by_board_power():
    nvl = GpuSpec((9, 0), 132, 1785, 139.8, board_power_w=600)
    assert peak_flops(nvl, "bfloat16").value / 1e12 == pytest.approx(835.5)
    assert "H200 NVL" in peak_flops(nvl, "bfloat16").source
    h100_nvl = GpuSpec((9, 0), 132, 1785, 87.5, board_power_w=400)
    assert "H100 NVL" in peak_flops(h100_nvl, "float8_e4m3fn").source
    sxm = GpuSpec((9, 0), 132, 1980, 139.8, board_power_w=700)
    assert peak_flops(sxm, "bfloat16").value / 1e12 == pytest.approx(989.4)


def test_an_h200_of_unknown_board_power_takes_no_datasheet_row():
    unknown = GpuSpec((9, 0), 132, 1980, 139.8)
    peak = peak_flops(unknown, "bfloat16")
    assert peak.vendor is None and peak.value == peak.derived
    assert "ambiguous (H200 SXM or H200 NVL" in peak.source
