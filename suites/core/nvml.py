"""Access to NVML (nvidia-ml-py), or the reason it is unavailable: one place that opens the library."""

from __future__ import annotations

import functools
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
    torch has no uuid. It tells two boxes of one GPU model apart."""
    uuid = getattr(props, "uuid", None)
    if uuid is None:
        return None
    text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    return text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"


def handle(index: int) -> tuple[Any | None, str | None]:
    """(NVML handle of the CUDA device with this index, None), else (None, the reason).

    CUDA and NVML number devices differently (CUDA_VISIBLE_DEVICES renumbers CUDA's; NVML always sees every GPU),
    so the handle is looked up by the device's UUID, then by PCI bus id; by index only when nothing renumbers.
    """
    lib, reason = nvml()
    if lib is None:
        return None, reason
    import os

    import torch

    try:
        props = torch.cuda.get_device_properties(index)
        if uuid := nvml_uuid(props):
            return lib.nvmlDeviceGetHandleByUUID(uuid.encode()), None
        if hasattr(props, "pci_bus_id"):
            bus_id = f"{props.pci_domain_id:08X}:{props.pci_bus_id:02X}:{props.pci_device_id:02X}.0"
            return lib.nvmlDeviceGetHandleByPciBusId(bus_id.encode()), None
        if os.environ.get("CUDA_VISIBLE_DEVICES"):
            return None, f"cuda:{index}: torch gives no UUID or PCI bus id and CUDA_VISIBLE_DEVICES renumbers devices"
        return lib.nvmlDeviceGetHandleByIndex(index), None
    except Exception as exc:
        return None, f"no NVML handle for cuda:{index}: {exc}"


def query(fn, *args, default=None):
    """Call an NVML getter; None (or `default`) where the driver or part does not support it."""
    try:
        return fn(*args)
    except Exception:
        return default
