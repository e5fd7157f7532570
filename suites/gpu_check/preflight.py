"""The GPU check's first step: what this machine is, and whether the rest can run on it.

The rows record the GPU's product name, its power limits, clocks and the clock-event reasons at rest, the
driver, CUDA, cuDNN, torch and triton versions, those of the libraries the figures rest on (pytest-benchmark,
numpy, scipy, pandas, tabulate, nvidia-ml-py), and whether a C compiler and Python's headers exist: Triton and
Inductor compile kernels at run time and need both, so a box without them fails every `torch.compile` case.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shutil
import sysconfig
from pathlib import Path

import torch

from suites.core import devices, nvml
from suites.gpu_check.rows import Row
from suites.observers.telemetry import REASON_GETTERS, decode_reasons


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


# The distributions the measurement and its files rest on, by their names on the package index: a figure read
# against another's needs their versions (pytest-benchmark fills the JSON's stats, numpy and scipy the intervals).
LIBRARIES = ("pytest", "pytest-benchmark", "numpy", "scipy", "pandas", "tabulate", "nvidia-ml-py")


def library_row() -> Row:
    """One row of `name version` for LIBRARIES; it fails when one is missing (the project depends on each)."""
    versions = {name: _version(name) for name in LIBRARIES}
    missing = [name for name, version in versions.items() if version is None]
    value = ", ".join(f"{name} {version or 'not installed'}" for name, version in versions.items())
    return Row("preflight", "libraries", value, "all installed", not missing)


def toolchain_rows() -> list[Row]:
    """Versions of the Python side, a C compiler and Python.h (what Triton and Inductor build with)."""
    compiler = next((path for name in ("cc", "gcc", "clang") if (path := shutil.which(name))), None)
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    triton = _version("triton")
    return [
        Row("preflight", "python, torch (build)", f"{platform.python_version()}, {torch.__version__} "
            f"({devices.torch_info()['build']})", "", None),
        library_row(),
        Row("preflight", "triton", triton or "not installed", "installed on CUDA", None),
        Row("preflight", "C compiler", compiler or "none on PATH", "present (Triton, Inductor)", compiler is not None),
        Row("preflight", "Python.h", str(headers) if headers.exists() else f"missing ({headers})",
            "present (Triton, Inductor)", headers.exists()),
    ]


def gpu_rows(device: torch.device) -> list[Row]:
    """The GPU as torch and NVML see it: name, memory, SMs, clocks, power limits, versions, clock-event reasons."""
    info = devices.gpu_info(device)
    lib, reason = nvml.nvml()
    handle, handle_reason = nvml.handle(device.index or 0)
    clocks = info.clocks_mhz
    rows = [
        Row("preflight", "GPU", f"{info.name}, cc {info.capability}, {info.sm_count} SMs, "
            f"{info.memory_bytes / 2**30:.1f} GiB, L2 {info.l2_bytes / 2**20:.0f} MiB", "", None),
        Row("preflight", "driver, CUDA, cuDNN", f"{info.driver}, {info.cuda}, {info.cudnn}", "", None),
        Row("preflight", "SM clock MHz (current / max), memory max",
            f"{clocks['sm_current']} / {clocks['sm_max']}, {clocks['memory_max']}", "", None),
        Row("preflight", "power limit W (default / enforced)",
            f"{info.power_limits_w['default']} / {info.power_limits_w['enforced']}", "", None),
        Row("preflight", "bf16 peak used for pct_peak", info.peaks["bfloat16"]["source"][:150], "", None),
    ]
    if handle is None:
        rows.append(Row("preflight", "NVML", reason or handle_reason or "no handle", "available", False))
        return rows
    getter = next((g for name in REASON_GETTERS if (g := getattr(lib, name, None))), None)
    mask = nvml.query(getter, handle) if getter else None
    rows.append(Row("preflight", "clock-event reasons at rest",
                    ", ".join(decode_reasons(mask)) or "none" if mask is not None else "not reported", "", None))
    return rows


def preflight(out: Path, device: torch.device) -> list[Row]:
    rows = toolchain_rows()
    if device.type == "cuda":
        rows += gpu_rows(device)
    else:
        cpu = devices.cpu_info()
        rows.append(Row("preflight", "CPU", f"{cpu['model']}, {cpu['usable_cores']} usable cores, "
                        f"{cpu['torch_threads']} torch threads", "", None))
    return rows
