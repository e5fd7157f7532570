"""Finding a CUDA device's NVML handle, on a model of NVML's lookups (no GPU or NVML here); and GPUs that NVML sees
and torch cannot use, with this machine's real torch and NVML's answers of a GPU box given through `nvml.nvml`.

The model answers as nvml.h documents: nvmlDeviceGetHandleByUUID knows GPUs by "GPU-<uuid>" and MIG instances by
"MIG-<uuid>"; device-wide getters need the parent GPU's handle, which nvmlDeviceGetDeviceHandleFromMigDeviceHandle
gives; torch's device properties carry the bare UUID (no prefix) and the PCI address, which under MIG is the
parent GPU's.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from suites.core import devices, nvml, peaks
from tests.runs import run_pytest_in_process

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


# --- GPUs NVML sees and torch cannot use ---------------------------------------------------------------------------

class DriverMachine:
    """A box with one H200 under driver 570, which runs CUDA 12.8 at most: what NVML answers there, through the
    getters `nvml.census` asks (pynvml's names and return types: the driver's version a str, the CUDA version an
    int of 1000 x major + 10 x minor)."""

    def __init__(self, count: int = 1, driver: str = "570.86.15", cuda: int = 12080) -> None:
        self.count, self.driver, self.cuda = count, driver, cuda

    def nvmlDeviceGetCount(self) -> int:
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        return Handle(f"GPU-{index}")

    def nvmlDeviceGetName(self, handle: Handle) -> str:
        return "NVIDIA H200"

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return self.cuda


no_gpu_torch = pytest.mark.skipif(torch.cuda.is_available(), reason="torch uses a GPU here: the case is torch not")


@pytest.fixture
def gpu_box(monkeypatch):
    """This machine's real torch (which sees no GPU), with NVML answering as on an H200 box under driver 570."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(nvml, "nvml", lambda: (DriverMachine(), None))


def test_the_census_reports_what_nvml_sees(monkeypatch):
    monkeypatch.setattr(nvml, "nvml", lambda: (DriverMachine(count=2), None))
    assert nvml.census() == nvml.Census(2, ("NVIDIA H200", "NVIDIA H200"), "570.86.15", "12.8")
    monkeypatch.setattr(nvml, "nvml", lambda: (None, "NVML Shared Library Not Found"))
    assert nvml.census() is None


@no_gpu_torch
def test_without_a_gpu_auto_is_the_cpu_quietly():
    # the real machine: torch sees no GPU, and NVML is absent or sees none
    seen = nvml.census()
    assert seen is None or seen.count == 0
    assert devices.resolve("auto") == torch.device("cpu")


@no_gpu_torch
def test_gpus_that_torch_cannot_use_make_auto_and_cuda_an_error_naming_the_driver(gpu_box):
    for option in ("auto", "cuda", "cuda:0"):
        with pytest.raises(devices.DeviceError) as err:
            devices.resolve(option, "--bench-device")
        message = str(err.value)
        assert len(message.splitlines()) == 1
        assert message.startswith(f"--bench-device {option}: NVML sees 1 GPU (NVIDIA H200) with driver 570.86.15, "
                                  "which runs CUDA 12.8 at most")
        wheel = torch.version.cuda
        assert ("CPU-only build" if wheel is None else f"CUDA {wheel}") in message
        assert message.endswith("`--bench-device cpu` measures this machine's CPU instead")


@no_gpu_torch
def test_an_explicit_cpu_or_gpus_hidden_on_purpose_run_on_the_cpu(gpu_box, monkeypatch):
    assert devices.resolve("cpu") == torch.device("cpu")
    for hidden in ("", "-1"):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", hidden)
        assert devices.resolve("auto") == torch.device("cpu")


def test_the_reason_names_the_cuda_the_wheel_needs_or_what_else_failed():
    seen = nvml.Census(8, ("NVIDIA H200",) * 8, "570.86.15", "12.8")
    cuda13 = devices.why_unusable(seen, "2.11.0+cu130", "13.0")
    assert cuda13 == ("NVML sees 8 GPUs (NVIDIA H200) with driver 570.86.15, which runs CUDA 12.8 at most, but "
                      "torch 2.11.0+cu130 cannot use them: this wheel is built for CUDA 13.0, which needs driver 580 "
                      "or newer; update the driver, or install a torch wheel built for CUDA 12.8 or older")
    fits = devices.why_unusable(seen, "2.11.0+cu126", "12.6")
    assert "should run on this driver" in fits and "/dev/nvidia*" in fits
    assert "CPU-only build" in devices.why_unusable(seen, "2.13.0+cpu", None)
    unknown = devices.why_unusable(nvml.Census(1, (), None, None), "2.11.0+cu130", "13.0")
    assert unknown.startswith("NVML sees 1 GPU with driver of unknown version, but torch")


@no_gpu_torch
def test_gpu_check_refuses_to_plan_or_run_the_cpu_on_a_gpu_box_unless_told(gpu_box, tmp_path, capsys):
    from suites.gpu_check import command

    for args in (["--plan"], ["--plan", "--device", "auto"], ["--device", "cuda", "--out", str(tmp_path / "o")]):
        assert command.main(args) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "NVML sees 1 GPU (NVIDIA H200)" in err, err
    assert command.main(["--plan", "--device", "cpu"]) == 0
    assert not (tmp_path / "o").exists()


@no_gpu_torch
def test_a_bench_run_on_auto_stops_in_one_line_before_its_first_case(gpu_box):
    proc = run_pytest_in_process("bench/test_matmul.py", "-k", "square and 256x256x256 and float32 and not cold",
                                 "--benchmark-only")
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "NVML sees" in line]
    assert len(errors) == 1 and "driver 570.86.15" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "passed" not in proc.stdout


@no_gpu_torch
def test_the_drivers_device_files_stand_for_gpus_that_nvml_cannot_be_asked_about(tmp_path, monkeypatch):
    """A container started without the driver's `utility` capability: no NVML library, yet /dev/nvidia0 and
    /dev/nvidia1 are there. `auto` measured this GPU box's CPU; now it stops with one line naming the files."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(nvml, "nvml", lambda: (None, "NVML could not be initialised: NVML Shared Library Not Found"))
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    monkeypatch.setattr(devices, "DEVICE_FILES", str(tmp_path / "nvidia[0-9]*"))
    for option in ("auto", "cuda"):
        with pytest.raises(devices.DeviceError) as err:
            devices.resolve(option)
        message = str(err.value)
        assert len(message.splitlines()) == 1
        assert message.startswith(f"--device {option}: the NVIDIA driver's device files {tmp_path}/nvidia0, "
                                  f"{tmp_path}/nvidia1 are here but NVML cannot be asked (NVML could not be "
                                  f"initialised: NVML Shared Library Not Found) and torch {torch.__version__} sees "
                                  "no GPU: ")
    assert devices.resolve("cpu") == torch.device("cpu")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # hidden on purpose: the CPU, as asked
    assert devices.resolve("auto") == torch.device("cpu")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    monkeypatch.setattr(devices, "DEVICE_FILES", str(tmp_path / "none[0-9]*"))  # no GPU at all: the CPU, quietly
    assert devices.resolve("auto") == torch.device("cpu")


@pytest.mark.parametrize("main", ["suites.training.memory_budget:main", "suites.training.autocast_audit:main",
                                  "suites.gpu_check.crosscheck:main", "suites.training.advise:main",
                                  "suites.gpu_check.command:main"])
def test_no_command_line_defaults_to_the_cpu_where_auto_would_find_a_gpu(main, gpu_box, capsys):
    """Each command resolves its --device through devices.resolve, `auto` unless told: on a box whose GPU torch
    cannot use (NVML answering as an H200 box) each stops in one line and exit 2, where three of them measured
    the CPU by default."""
    import importlib

    module, name = main.split(":")
    if torch.cuda.is_available():
        pytest.skip("torch uses a GPU here: auto finds it")
    args = {"suites.training.advise:main": ["examples/conv_model.py"], "suites.gpu_check.command:main": ["--plan"]}
    status = getattr(importlib.import_module(module), name)(args.get(main, []))
    err = capsys.readouterr().err
    assert status == 2 and "NVML sees 1 GPU (NVIDIA H200)" in err and len(err.strip().splitlines()) == 1
