"""Finding a CUDA device's NVML handle, on a model of NVML's lookups (no GPU or NVML here).

The model answers as nvml.h documents: nvmlDeviceGetHandleByUUID knows GPUs by "GPU-<uuid>" and MIG instances by
"MIG-<uuid>"; device-wide getters need the parent GPU's handle, which nvmlDeviceGetDeviceHandleFromMigDeviceHandle
gives; torch's device properties carry the bare UUID (no prefix) and the PCI address, which under MIG is the
parent GPU's.
"""

from __future__ import annotations

from dataclasses import dataclass

from suites.core import device as devices
from suites.core import nvml, peaks

GPU_UUID = "2f4a7d3c-1b0e-4c5d-9e8f-0a1b2c3d4e5f"
MIG_UUID = "9c8b7a6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"


class NotFound(Exception):
    """What pynvml raises for an unknown UUID or address (NVMLError_NotFound)."""


@dataclass(frozen=True)
class Handle:
    name: str
    mig: bool = False


class MigMachine:
    """One GPU split into MIG instances, as NVML sees it (only the getters the lookup uses)."""

    gpu = Handle(f"GPU-{GPU_UUID}")
    instance = Handle(f"MIG-{MIG_UUID}", mig=True)
    pci = "00000000:3B:00.0"

    def __init__(self, parent_lookup_fails: bool = False) -> None:
        self.parent_lookup_fails = parent_lookup_fails

    def nvmlDeviceGetHandleByUUID(self, uuid: bytes) -> Handle:
        for known in (self.gpu, self.instance):
            if uuid == known.name.encode():
                return known
        raise NotFound("Not Found")

    def nvmlDeviceIsMigDeviceHandle(self, handle: Handle) -> bool:
        return handle.mig

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: Handle) -> Handle:
        if self.parent_lookup_fails or not handle.mig:
            raise NotFound("Insufficient Permissions")
        return self.gpu

    def nvmlDeviceGetUUID(self, handle: Handle) -> str:
        return handle.name

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: bytes) -> Handle:
        if bus_id == self.pci.encode():
            return self.gpu
        raise NotFound("Not Found")

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        return self.gpu


@dataclass
class Props:
    """torch.cuda.get_device_properties' fields the lookup reads."""

    uuid: str | None
    pci_domain_id: int = 0
    pci_bus_id: int = 0x3B
    pci_device_id: int = 0


def test_a_mig_instance_resolves_to_its_parent_gpu_handle():
    found = nvml.locate(MigMachine(), Props(MIG_UUID), 0, renumbered=True)
    assert found.handle is MigMachine.gpu and found.reason is None
    assert (found.uuid, found.mig_parent_uuid, found.mig) == (f"MIG-{MIG_UUID}", f"GPU-{GPU_UUID}", True)


def test_a_whole_gpu_is_found_by_its_uuid():
    found = nvml.locate(MigMachine(), Props(GPU_UUID), 0, renumbered=True)
    assert (found.handle, found.uuid, found.mig_parent_uuid, found.mig) == (MigMachine.gpu, f"GPU-{GPU_UUID}",
                                                                            None, False)


def test_a_uuid_nvml_does_not_know_falls_back_to_the_pci_address():
    found = nvml.locate(MigMachine(), Props("00000000-0000-0000-0000-000000000000"), 0, renumbered=True)
    assert (found.handle, found.uuid) == (MigMachine.gpu, f"GPU-{GPU_UUID}")


def test_no_way_left_says_every_way_tried():
    found = nvml.locate(MigMachine(), Props("00000000-0000-0000-0000-000000000000", pci_bus_id=0x99), 1,
                        renumbered=True)
    assert found.handle is None
    assert found.reason.startswith("no NVML handle for cuda:1 (GPU-00000000")
    assert "MIG-00000000" in found.reason and "PCI 00000000:99:00.0" in found.reason
    assert "CUDA_VISIBLE_DEVICES renumbers" in found.reason


def test_a_mig_instance_whose_parent_nvml_refuses_says_so():
    found = nvml.locate(MigMachine(parent_lookup_fails=True), Props(MIG_UUID), 0, renumbered=True)
    assert found.handle is None and found.uuid == f"MIG-{MIG_UUID}"
    assert found.reason == f"MIG-{MIG_UUID}: NVML gives no handle of its parent GPU (Insufficient Permissions)"


def _gpu(uuid: str | None, parent: str | None) -> devices.GpuInfo:
    spec = peaks.GpuSpec(capability=(9, 0), sm_count=32, sm_clock_mhz=1980.0, memory_gib=17.5)
    return devices.GpuInfo("NVIDIA H100 80GB HBM3 MIG 2g.20gb", "9.0", 32, 17 * 2**30, 50 * 2**20, "570.1", "12.8",
                           90100, {}, 5120, {"default": 700.0, "enforced": 700.0}, uuid, spec, parent)


def test_machine_info_of_a_mig_instance_names_its_gpu_and_what_the_nvml_figures_are_of():
    info = _gpu(f"MIG-{MIG_UUID}", f"GPU-{GPU_UUID}").as_dict()
    assert info["mig"] == {"instance_uuid": f"MIG-{MIG_UUID}", "parent_uuid": f"GPU-{GPU_UUID}",
                           "note": nvml.MIG_NOTE}
    assert "mig" not in _gpu(f"GPU-{GPU_UUID}", None).as_dict()
