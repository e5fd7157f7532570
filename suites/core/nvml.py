"""Access to NVML (nvidia-ml-py), or the reason it is unavailable: one place that opens the library."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any


@functools.cache
def _init() -> tuple[Any | None, str | None]:
    try:
        import pynvml
    except ImportError as exc:
        return None, f"nvidia-ml-py is not installed ({exc})"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml raises NVMLError subclasses, or OSError-like errors when libnvidia-ml is absent
        return None, f"NVML could not be initialised: {exc}"
    return pynvml, None


def nvml() -> tuple[Any | None, str | None]:
    """(the pynvml module, None) when NVML works here, else (None, the reason)."""
    return _init()


def nvml_uuid(props: Any) -> str | None:
    """NVML's name of a device ("GPU-" + UUID, as nvidia-smi prints it) from torch's device properties; None where
    torch has no uuid. It tells two boxes of one GPU model apart. (Under MIG torch gives the instance's UUID
    without its "MIG-" prefix: `locate` asks NVML which of the two it is.)"""
    uuid = getattr(props, "uuid", None)
    if uuid is None:
        return None
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


# What a MIG instance's readings are: NVML answers power, energy, clocks and clock-event reasons only for the whole
# GPU, which the instances share.
MIG_NOTE = ("a MIG instance: power, energy, clocks and clock-event reasons are those of its whole GPU, shared with "
            "the other instances on it")


@dataclass(frozen=True)
class Located:
    """A CUDA device as NVML knows it: the handle to query (under MIG the parent GPU's, since device-wide getters
    refuse an instance's handle), NVML's name for the device itself, and the parent's name under MIG."""

    handle: Any | None
    uuid: str | None = None  # GPU-... or MIG-...
    mig_parent_uuid: str | None = None
    reason: str | None = None  # why there is no handle

    @property
    def mig(self) -> bool:
        return is_mig(self.uuid)


def is_mig(uuid: str | None) -> bool:
    """Whether NVML's name of a device is a MIG instance's."""
    return uuid is not None and uuid.startswith("MIG-")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _by_uuid(lib: Any, uuid: str) -> Located:
    """The handle of a device NVML knows by this UUID; a MIG instance's resolves to its parent GPU's handle."""
    found = lib.nvmlDeviceGetHandleByUUID(uuid.encode())
    if not query(lib.nvmlDeviceIsMigDeviceHandle, found, default=False):
        return Located(found, uuid)
    try:
        parent = lib.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(found)
    except Exception as exc:  # an NVMLError: the instance is known, its GPU cannot be queried
        return Located(None, uuid, reason=f"{uuid}: NVML gives no handle of its parent GPU ({exc})")
    parent_uuid = query(lib.nvmlDeviceGetUUID, parent)
    return Located(parent, uuid, _text(parent_uuid) if parent_uuid is not None else None)


def locate(lib: Any, props: Any, index: int, renumbered: bool) -> Located:
    """Find the NVML handle of CUDA device `index` (its torch properties `props`).

    CUDA and NVML number devices differently (CUDA_VISIBLE_DEVICES, `renumbered`, renumbers CUDA's; NVML always
    sees every GPU), so the handle is looked up by the device's UUID (as a GPU's, then as a MIG instance's: torch
    drops the prefix), then by PCI bus id (under MIG that is the parent GPU's), by index only when nothing
    renumbers. Each failed way is named in the reason when none works.
    """
    tried: list[str] = []
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        text = _text(uuid)
        for name in [text] if text.startswith(("GPU-", "MIG-")) else [f"GPU-{text}", f"MIG-{text}"]:
            try:
                return _by_uuid(lib, name)
            except Exception as exc:  # NVMLError_NotFound for the wrong prefix; try the next name
                tried.append(f"{name}: {exc}")
    if hasattr(props, "pci_bus_id"):
        bus_id = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
        try:
            found = lib.nvmlDeviceGetHandleByPciBusId(bus_id.encode())
            return Located(found, _text(u) if (u := query(lib.nvmlDeviceGetUUID, found)) is not None else None)
        except Exception as exc:
            tried.append(f"PCI {bus_id}: {exc}")
    if renumbered:
        tried.append("by index: CUDA_VISIBLE_DEVICES renumbers devices")
    else:
        try:
            return Located(lib.nvmlDeviceGetHandleByIndex(index))
        except Exception as exc:
            tried.append(f"index {index}: {exc}")
    return Located(None, reason=f"no NVML handle for cuda:{index} ({'; '.join(tried) or 'torch gives no UUID'})")


def located(index: int) -> Located:
    """`locate` for CUDA device `index` of this process, or why NVML cannot be asked."""
    lib, reason = nvml()
    if lib is None:
        return Located(None, reason=reason)
    import os

    import torch

    try:
        props = torch.cuda.get_device_properties(index)
    except Exception as exc:  # no such device, or no CUDA in this build
        return Located(None, reason=f"no NVML handle for cuda:{index}: {exc}")
    return locate(lib, props, index, renumbered=bool(os.environ.get("CUDA_VISIBLE_DEVICES")))


def handle(index: int) -> tuple[Any | None, str | None]:
    """(NVML handle of the CUDA device with this index, None), else (None, the reason); under MIG the handle of
    the instance's GPU (see `locate`)."""
    found = located(index)
    return found.handle, found.reason


@dataclass(frozen=True)
class Census:
    """The GPUs NVML sees, asked without CUDA: how many, their names, the driver's version, and the newest CUDA
    version that driver runs (NVML's `CudaDriverVersion`, e.g. 12080 -> "12.8")."""

    count: int
    names: tuple[str, ...]
    driver: str | None
    driver_cuda: str | None


def census() -> Census | None:
    """What NVML sees on this machine, or None where it cannot be asked (nvidia-ml-py or the driver's library
    missing: then there is no GPU this process could use either). The library comes from `nvml()`, the one seam
    through which every NVML answer enters: tests give it the answers of a machine they are not on."""
    lib, _ = nvml()
    if lib is None:
        return None
    count = query(lib.nvmlDeviceGetCount, default=0)
    handles = [query(lib.nvmlDeviceGetHandleByIndex, i) for i in range(count)]
    names = tuple(_text(name) for h in handles if h is not None and (name := query(lib.nvmlDeviceGetName, h)))
    driver = query(lib.nvmlSystemGetDriverVersion)
    version = query(lib.nvmlSystemGetCudaDriverVersion_v2) or query(lib.nvmlSystemGetCudaDriverVersion)
    return Census(count, names, _text(driver) if driver is not None else None,
                  f"{version // 1000}.{version % 1000 // 10}" if version else None)


def query(fn, *args, default=None):
    """Call an NVML getter; None (or `default`) where the driver or part does not support it."""
    try:
        return fn(*args)
    except Exception:
        return default
