"""Which device the run measures, and what machine_info records about it."""

from __future__ import annotations

import glob
import os
import platform
import re
from dataclasses import dataclass, field

import torch

from suites.core import nvml, peaks
from suites.core.defaults import CUDA_DEVICE


class DeviceError(ValueError):
    """A --device value this machine cannot serve: a usage error, not a silent all-skip."""


# The oldest Linux driver each CUDA major version runs on (NVIDIA's CUDA release notes, "minor version
# compatibility"): a torch wheel built for CUDA 13 finds no GPU under a 570 driver, which runs CUDA 12.8 at most.
MIN_DRIVER = {13: 580, 12: 525, 11: 450}


def resolve(option: str, flag: str = "--device") -> torch.device:
    """`auto` is CUDA when available, else CPU; `cuda` or `cuda:N` without that GPU is an error (its message names
    the option as `flag` spells it). Where NVML sees GPUs that torch cannot use (a wheel built for a newer CUDA
    than the driver runs, a CPU-only build), or where NVML cannot be asked but the driver's device files show
    GPUs, `auto` and `cuda` are an error that says why: measuring the CPU of a GPU box unasked would pass for a
    GPU run. `cpu` asks for the CPU and is never refused."""
    if option == "cpu":
        return torch.device("cpu")
    cuda = CUDA_DEVICE.fullmatch(option)
    if option != "auto" and cuda is None:
        raise DeviceError(f"{flag} {option}: expected auto, cpu, cuda or cuda:N")
    if not torch.cuda.is_available():
        if reason := unusable_gpus():
            raise DeviceError(f"{flag} {option}: {reason}; `{flag} cpu` measures this machine's CPU instead")
        if option == "auto":
            return torch.device("cpu")
        raise DeviceError(f"{flag} {option}: no CUDA device is available here (torch {torch.__version__})")
    if option == "auto":
        return torch.device("cuda", torch.cuda.current_device())
    index = int(cuda.group(1)) if cuda.group(1) else torch.cuda.current_device()
    if not 0 <= index < torch.cuda.device_count():
        raise DeviceError(f"{flag} {option}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return torch.device("cuda", index)


def hidden_on_purpose() -> bool:
    """Whether CUDA_VISIBLE_DEVICES hides every GPU ("" or -1): then a CPU run is what was asked for."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "unset").strip() in ("", "-1")


# The device files the NVIDIA driver makes for each GPU it drives (/dev/nvidiactl and /dev/nvidia-uvm are the
# driver's own): a container started with the GPUs but without the driver's `utility` capability has them and no
# NVML library, so that NVML's silence alone is no proof that the box has no GPU.
DEVICE_FILES = "/dev/nvidia[0-9]*"


def driver_device_files() -> list[str]:
    """The per-GPU device files of the NVIDIA driver on this machine, in order."""
    return sorted(glob.glob(DEVICE_FILES))


def unusable_gpus() -> str | None:
    """Why torch cannot use the GPUs on this machine (one line), or None: no GPU here, or GPUs hidden on purpose.
    The GPUs are those NVML sees or, where NVML cannot be asked (its library missing or failing to load), the
    driver's device files. Call it when torch.cuda.is_available() is false."""
    if hidden_on_purpose():
        return None
    seen = nvml.census()
    if seen is not None and seen.count > 0:
        return why_unusable(seen, torch.__version__, torch.version.cuda)
    files = driver_device_files() if seen is None else []
    return why_unusable_files(files, nvml.nvml()[1], torch.__version__, torch.version.cuda) if files else None


def why_unusable_files(files: list[str], nvml_reason: str | None, torch_version: str, wheel_cuda: str | None) -> str:
    """One line for a machine whose NVIDIA driver made device files for its GPUs while NVML cannot be asked and torch
    sees no GPU: what is there, and what to check."""
    shown = ", ".join(files[:4]) + (", ..." if len(files) > 4 else "")
    head = (f"the NVIDIA driver's device files {shown} are here but NVML cannot be asked"
            + (f" ({nvml_reason})" if nvml_reason else "") + f" and torch {torch_version} sees no GPU")
    if wheel_cuda is None:
        return f"{head}: it is a CPU-only build; install a CUDA build of torch"
    return (f"{head}: a container started without the driver's libraries (NVIDIA_DRIVER_CAPABILITIES needs compute "
            f"and utility), /dev/nvidia* permissions, or a driver older than this wheel's CUDA {wheel_cuda} needs")


def why_unusable(seen: nvml.Census, torch_version: str, wheel_cuda: str | None) -> str:
    """One line: what NVML sees (GPUs, driver, the newest CUDA it runs), and what keeps this torch build off
    them: a CPU-only build, a build for a CUDA newer than the driver runs (with the driver it needs), or neither
    (then torch's own start-up is what failed)."""
    gpus = f"{seen.count} GPU{'s' if seen.count != 1 else ''}" + (f" ({seen.names[0]})" if seen.names else "")
    driver = f"driver {seen.driver or 'of unknown version'}" + (
        f", which runs CUDA {seen.driver_cuda} at most" if seen.driver_cuda else "")
    head = f"NVML sees {gpus} with {driver}, but torch {torch_version} cannot use {'them' if seen.count > 1 else 'it'}"
    older = f" (CUDA {seen.driver_cuda} or older)" if seen.driver_cuda else ""
    if wheel_cuda is None:
        return f"{head}: it is a CPU-only build; install a CUDA build of torch{older}"
    need = MIN_DRIVER.get(_major(wheel_cuda))
    if seen.driver_cuda and _version(wheel_cuda) > _version(seen.driver_cuda):
        needs = f", which needs driver {need} or newer" if need else ""
        return (f"{head}: this wheel is built for CUDA {wheel_cuda}{needs}; update the driver, or install a torch "
                f"wheel built for CUDA {seen.driver_cuda} or older")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return (f"{head}: torch.cuda.is_available() is false though the wheel's CUDA {wheel_cuda} should run on this "
            f"driver" + (f" (CUDA_VISIBLE_DEVICES={visible})" if visible is not None else "")
            + "; check /dev/nvidia* permissions and torch's warning at import")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:2])


def _major(text: str) -> int:
    return _version(text)[0]


@dataclass
class GpuInfo:
    """The facts about one CUDA device that results are read against."""

    name: str
    capability: str
    sm_count: int
    memory_bytes: int
    l2_bytes: int
    driver: str | None
    cuda: str | None
    cudnn: int | None
    clocks_mhz: dict[str, float | None]
    bus_width_bits: int | None
    power_limits_w: dict[str, float | None]
    uuid: str | None  # NVML's name: GPU-..., or MIG-... for a MIG instance
    spec: peaks.GpuSpec = field(repr=False)
    mig_parent_uuid: str | None = None  # under MIG, the GPU the instance is part of

    @property
    def peaks(self) -> dict[str, dict]:
        return peaks.all_peaks(self.spec)

    def as_dict(self) -> dict:
        return {
            "name": self.name, "capability": self.capability, "sm_count": self.sm_count,
            "memory_bytes": self.memory_bytes, "l2_bytes": self.l2_bytes, "driver": self.driver,
            "cuda": self.cuda, "cudnn": self.cudnn, "clocks_mhz": self.clocks_mhz,
            "bus_width_bits": self.bus_width_bits, "power_limits_w": self.power_limits_w, "uuid": self.uuid,
            "peaks": self.peaks,
        } | self.mig_info()

    def mig_info(self) -> dict:
        """`mig` under MIG: the parent GPU and what the NVML figures (clocks, power limits, telemetry) are of."""
        if not nvml.is_mig(self.uuid):
            return {}
        return {"mig": {"instance_uuid": self.uuid, "parent_uuid": self.mig_parent_uuid, "note": nvml.MIG_NOTE}}


def _mhz_from_khz(value: int | None) -> float | None:
    return value / 1000 if value else None


def _watts(milliwatts: int | None) -> float | None:
    return milliwatts / 1000 if milliwatts else None


def gpu_info(device: torch.device) -> GpuInfo:
    """Read the device properties from torch, the clocks, bus width and driver from NVML where it answers."""
    props = torch.cuda.get_device_properties(device)
    where = nvml.located(device.index)
    handle = where.handle  # under MIG the parent GPU's: clocks and power limits are the whole GPU's
    lib, _ = nvml.nvml()
    clocks: dict[str, float | None] = {
        "sm_max": _mhz_from_khz(getattr(props, "clock_rate", None)),
        "memory_max": _mhz_from_khz(getattr(props, "memory_clock_rate", None)),
        "sm_current": None,
        "memory_current": None,
    }
    bus_width = getattr(props, "memory_bus_width", None)
    driver = None
    power: dict[str, float | None] = {"default": None, "enforced": None}
    if handle is not None:
        clocks["sm_max"] = nvml.query(lib.nvmlDeviceGetMaxClockInfo, handle, lib.NVML_CLOCK_SM) or clocks["sm_max"]
        clocks["memory_max"] = nvml.query(lib.nvmlDeviceGetMaxClockInfo, handle, lib.NVML_CLOCK_MEM) or clocks[
            "memory_max"]
        clocks["sm_current"] = nvml.query(lib.nvmlDeviceGetClockInfo, handle, lib.NVML_CLOCK_SM)
        clocks["memory_current"] = nvml.query(lib.nvmlDeviceGetClockInfo, handle, lib.NVML_CLOCK_MEM)
        bus_width = nvml.query(lib.nvmlDeviceGetMemoryBusWidth, handle) or bus_width
        driver = nvml.query(lib.nvmlSystemGetDriverVersion)
        power = {"default": _watts(nvml.query(lib.nvmlDeviceGetPowerManagementDefaultLimit, handle)),
                 "enforced": _watts(nvml.query(lib.nvmlDeviceGetEnforcedPowerLimit, handle))}
    spec = peaks.GpuSpec(
        capability=(props.major, props.minor),
        sm_count=props.multi_processor_count,
        sm_clock_mhz=clocks["sm_max"],
        memory_gib=props.total_memory / 2**30,
        memory_clock_mhz=clocks["memory_max"],
        bus_width_bits=bus_width,
        board_power_w=power["default"],
    )
    return GpuInfo(
        name=props.name, capability=f"{props.major}.{props.minor}", sm_count=props.multi_processor_count,
        memory_bytes=props.total_memory, l2_bytes=getattr(props, "L2_cache_size", 0), driver=driver,
        cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(), clocks_mhz=clocks,
        bus_width_bits=bus_width, power_limits_w=power, uuid=where.uuid or nvml.nvml_uuid(props), spec=spec,
        mig_parent_uuid=where.mig_parent_uuid,
    )


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_info(threads: int | None = None) -> dict:
    """CPU model, logical cores, cores this process may use, and the threads torch's kernels use (`threads`: the
    count a run started with, which a test may have changed since; else the count now)."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "model": _cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "torch_threads": threads or torch.get_num_threads(),
        "capability": torch.backends.cpu.get_cpu_capability(),
    }


def torch_info() -> dict:
    """Torch version and build, so results from different builds are never mixed silently."""
    build = "cuda" if torch.version.cuda else "rocm" if torch.version.hip else "cpu"
    return {"version": torch.__version__, "build": build, "cuda": torch.version.cuda, "hip": torch.version.hip,
            "git": torch.version.git_version, "debug": torch.version.debug}


def identity(device: torch.device, gpu: GpuInfo | None = None, threads: int | None = None) -> dict:
    """Which machine and software stack measured a run; runs of one `machine` form one history series.

    `machine` is the GPU's UUID (two boxes of one GPU model are two machines), or on CPU the model with the
    threads torch uses; the versions beside it (driver, CUDA, cuDNN, torch) and the world size are what
    `reports compare` names when they differ between baseline and candidate, a likely cause of a change.
    """
    info: dict = {"torch": torch.__version__, "world_size": int(os.environ.get("WORLD_SIZE", "1"))}
    if device.type == "cuda":
        gpu = gpu or gpu_info(device)
        uuid = gpu.uuid
        info |= {"machine": uuid or f"{gpu.name} (no UUID)", "gpu_uuid": uuid, "driver": gpu.driver,
                 "cuda": gpu.cuda, "cudnn": gpu.cudnn}
    else:
        threads = threads or torch.get_num_threads()
        info["machine"] = f"{_cpu_model()} ({threads} thread{'s' if threads != 1 else ''})"
    return info


def machine_info(device: torch.device, threads: int | None = None) -> dict:
    """The fields this suite adds to pytest-benchmark's machine_info; `threads` as in `cpu_info`."""
    info: dict = {"bench_device": str(device), "torch": torch_info(), "cpu_info": cpu_info(threads)}
    gpu = gpu_info(device) if device.type == "cuda" else None
    if gpu is not None:
        info["gpu"] = gpu.as_dict()
    info["identity"] = identity(device, gpu, threads)
    return info


def device_name(device: torch.device) -> str:
    """A short human name: the GPU's name, or the CPU model."""
    return torch.cuda.get_device_name(device) if device.type == "cuda" else _cpu_model()
