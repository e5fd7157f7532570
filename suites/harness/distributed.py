"""Several ranks under torchrun: the process group, and how one case is measured on every rank at once.

`torchrun --nproc-per-node N -m pytest bench/...` starts N copies of pytest. Each joins the process group (NCCL on
CUDA, gloo on CPU; rank r uses `cuda:LOCAL_RANK`) with a timeout that every collective inherits, so a rank that
dies or hangs makes the others fail instead of waiting forever. Every rank collects the same cases in the same
order (checked), and measures each case in lockstep:

- the build is agreed: if it fails on any rank, every rank records that rank's failure (`rank r: ...`) and the
  run goes on, so a case that runs out of memory on one GPU is an `oom` result, not a hang;
- every rank takes the same number of samples (a count, as nccl-tests does: a collective inside the workload must
  be called as often on every rank; the profile's `lockstep_samples`, suites/core/profiles.py), with a barrier
  before each sample, outside the timed window, and every sample stops with `stop_reason` `count`;
- on CUDA every rank holds its stream for the same time before each sample's start event: the longest hold any
  rank planned, agreed once after warm-up (`agree`) and never lengthened by one rank alone, so that the ranks'
  kernels start together after the barrier and a short collective does not absorb the difference of two holds;
- the figure is the slowest rank's: sample i is the maximum over ranks of sample i, and every derived field
  (TFLOP/s, tokens/s, bus bandwidth) comes from those; each rank's own median is kept beside it (the straggler);
- a failure inside the timed loop leaves the ranks' collectives out of step, so it ends the run with that rank's
  message (torchrun then stops the other ranks) rather than letting them wait for the timeout.

Only rank 0 writes the JSON and prints the table. Without torchrun (no WORLD_SIZE above 1) none of this runs.
"""

from __future__ import annotations

import dataclasses
import datetime
import inspect
import os
import shutil
import socket
import subprocess
import time

import pytest
import torch
import torch.distributed as dist

from suites.core import defaults
from suites.core.cases import Case, Unsupported, Workload
from suites.core.measurement import Measurement
from suites.core.runner import CaseResult, first_line
from suites.harness import results

DEFAULT_TIMEOUT_S = defaults.DIST_TIMEOUT_S
GLOO_DRAIN_S = 0.2  # `leave`: how long gloo's worker threads get to drop the last collective's tensors
# torch 2.13 renamed all_gather_into_tensor (now deprecated) to all_gather_single
_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
# barrier() takes its own timeout from torch 2.13 on; before, it inherits the process group's (the same timeout_s)
_BARRIER_TAKES_TIMEOUT = "timeout" in inspect.signature(dist.barrier).parameters


@dataclasses.dataclass(frozen=True)
class World:
    """This rank's place in the run."""

    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    nodes: int
    backend: str
    hosts: tuple[str, ...]  # the host of every rank, by rank
    ranks: tuple[dict, ...] = ()  # every rank's host, device and GPU (name, UUID, memory), by rank
    timeout_s: float = DEFAULT_TIMEOUT_S  # of the process group, and of each barrier

    def fields(self) -> dict:
        """What every case's entry says of the world (the `ranks` step of suites/harness/entry.py)."""
        return {"world_size": self.world_size, "ranks_per_node": self.local_world_size, "nodes": self.nodes}


def launched() -> bool:
    """True under torchrun (or srun/mpirun setting the same variables) with more than one rank."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def local_device(device: torch.device) -> torch.device:
    """Rank r of a node uses cuda:LOCAL_RANK; a CPU run stays on the CPU."""
    if device.type != "cuda":
        return device
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device.index not in (None, local_rank) and int(os.environ.get("LOCAL_WORLD_SIZE", "1")) > 1:
        raise pytest.UsageError(f"--bench-device {device}: under torchrun each rank uses cuda:LOCAL_RANK; "
                                "pass --bench-device cuda")
    return torch.device("cuda", local_rank)


def join(device: torch.device, timeout_s: float) -> World:
    """Join the process group (NCCL on CUDA, gloo on CPU) with `timeout_s` on every collective."""
    if not timeout_s > 0:
        raise pytest.UsageError(f"--bench-dist-timeout-s {timeout_s:g}: expected a positive number of seconds")
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s),
                            device_id=device if device.type == "cuda" else None)
    mine = {"host": socket.gethostname(), "device": str(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        mine |= {"gpu": props.name, "uuid": str(getattr(props, "uuid", "")), "memory_bytes": props.total_memory}
    ranks: list[dict | None] = [None] * dist.get_world_size()
    dist.all_gather_object(ranks, mine)
    hosts = [str(r["host"]) for r in ranks]
    local = int(os.environ.get("LOCAL_WORLD_SIZE", hosts.count(hosts[dist.get_rank()])))
    return World(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), local,
                 len(set(hosts)), backend, tuple(hosts), tuple(ranks), timeout_s)


def leave() -> None:
    """Leave the process group at the run's end; on gloo, after a pause of GLOO_DRAIN_S with the GIL released.

    Before torch 2.8 gloo's destructor holds the GIL while it waits for the group's worker threads (pytorch#56297,
    fixed by pytorch#154976), and a worker thread that still holds the last collective's tensors (those of
    `all_gather_object` in `settle`, which Python has dropped) takes the GIL to free them: a deadlock at exit. CI saw
    it once under torch 2.6 on a loaded 2-core machine, rank 1 stuck after `40 passed`, the workers' stacks in
    ~ProcessGroupGloo and ~AsyncAllgatherWork. The pause lets the workers run first; it narrows the window, which
    only torch's fix closes (a thread not scheduled for the whole pause can still hit it)."""
    if not dist.is_initialized():
        return
    if dist.get_backend() == "gloo":
        time.sleep(GLOO_DRAIN_S)
    dist.destroy_process_group()


def quiet_other_ranks(bench: object, world: World) -> None:
    """Only rank 0 writes results and prints the table: the others drop pytest-benchmark's session `bench`'s
    --benchmark-json, saving and autosaving, and its table."""
    if world.rank == 0:
        return
    results.drop_json(bench)
    bench.save = bench.autosave = None
    bench.quiet = True


def check_same_cases(nodeids: list[str], world: World) -> None:
    """Every rank must run the same cases in the same order, or their collectives would pair up wrongly."""
    everyone: list[list[str] | None] = [None] * world.world_size
    dist.all_gather_object(everyone, nodeids)
    for rank, theirs in enumerate(everyone):
        if theirs != nodeids:
            diff = next((f"{a} vs {b}" for a, b in zip(nodeids, theirs or [], strict=False) if a != b),
                        f"{len(nodeids)} vs {len(theirs or [])} cases")
            pytest.exit(f"rank {rank} collected other cases than rank {world.rank} ({diff}): every rank must be "
                        "started with the same arguments", returncode=4)


class RankLockstep:
    """One case measured on every rank together (suites.core.runner.Lockstep)."""

    def __init__(self, world: World, device: torch.device) -> None:
        self.world, self.device = world, device
        self.built = False
        self.own_median_s: float | None = None

    def before_sample(self) -> None:
        """Every rank starts the sample together (NCCL's barrier blocks the host until it completes)."""
        timeout = {"timeout": datetime.timedelta(seconds=self.world.timeout_s)} if _BARRIER_TAKES_TIMEOUT else {}
        dist.barrier(device_ids=[self.device.index] if self.device.type == "cuda" else None, **timeout)

    def agree(self, seconds: float) -> float:
        """The largest of every rank's `seconds` (the hold every rank then uses)."""
        value = torch.tensor([seconds], dtype=torch.float64, device=self.device)
        dist.all_reduce(value, op=dist.ReduceOp.MAX)
        return float(value.item())

    def reduce(self, m: Measurement) -> Measurement:
        """Sample i becomes the slowest rank's sample i; `rel_iqr` and `converged` follow from those (judged
        against the profile's target by the count rule)."""
        self.own_median_s = m.median_s
        mine = torch.tensor(m.samples_s, dtype=torch.float64, device=self.device)
        counts = [None] * self.world.world_size
        dist.all_gather_object(counts, len(m.samples_s))
        if len(set(counts)) != 1:
            raise RuntimeError(f"ranks took different numbers of samples {counts}: the stopping rule is not a count")
        everyone = torch.empty(self.world.world_size * mine.numel(), dtype=torch.float64, device=self.device)
        _all_gather(everyone, mine)
        slowest = everyone.view(self.world.world_size, -1).max(dim=0).values.tolist()
        return dataclasses.replace(m, samples_s=slowest)

    def agreed(self, case: Case) -> Case:
        """The case with a build that every rank agrees on: a failure on any rank is raised on every rank."""

        def build(device: torch.device) -> Workload:
            workload, error = None, None
            try:
                workload = case.build(device)
            except Exception as exc:  # shared with the other ranks, then raised again below
                error = exc
            unsupported = isinstance(error, Unsupported)
            outcome = None if error is None else (unsupported, str(error) if unsupported else first_line(error))
            outcomes: list = [None] * self.world.world_size
            dist.all_gather_object(outcomes, outcome)
            failed = [(rank, o) for rank, o in enumerate(outcomes) if o is not None]
            if failed:  # every rank records the first failing rank's reason (an OOM's text keeps it an OOM)
                rank, (unsupported, message) = failed[0]
                raise (Unsupported if unsupported else RuntimeError)(f"rank {rank}: {message}") from error
            self.built = True
            return workload

        return dataclasses.replace(case, build=build)

    def settle(self, result: CaseResult) -> tuple[CaseResult, dict]:
        """Every rank ends the case with the same status: the first failing rank's, named. A failure inside the
        timed loop (the build was agreed, yet nothing was measured) ends the run: the ranks are out of step.
        Returns the settled result and what its entry says of the ranks (the `ranks` step of
        suites/harness/entry.py): the world's size, every rank's own median and, where any had some, telemetry."""
        if self.built and result.measurement is None:
            pytest.exit(f"rank {self.world.rank}: {result.case.id}: {result.reason}", returncode=1)
        mine = {"status": result.status, "reason": result.reason, "median_s": self.own_median_s,
                "telemetry": result.figures.get("telemetry")}
        everyone: list = [None] * self.world.world_size
        dist.all_gather_object(everyone, mine)
        fields = self.world.fields()
        if self.own_median_s is not None:
            fields["rank_median_s"] = [r["median_s"] for r in everyone]
        if any(r["telemetry"] for r in everyone):
            fields["rank_telemetry"] = [r["telemetry"] for r in everyone]
        failed = next(((rank, r) for rank, r in enumerate(everyone) if r["status"] != "ok"), None)
        if failed is not None and result.status == "ok":
            rank, theirs = failed
            result = dataclasses.replace(result, status=theirs["status"], reason=f"rank {rank}: {theirs['reason']}")
        return result, fields


def machine_info(world: World, device: torch.device) -> dict:
    """The run as one machine: world size, nodes, hosts, every rank's device, backend, NCCL version and this
    node's GPU topology. (Each case's `rank_telemetry` holds every rank's telemetry during the case.)"""
    info: dict = {"world_size": world.world_size, "nodes": world.nodes, "ranks_per_node": world.local_world_size,
                  "backend": world.backend, "hosts": sorted(set(world.hosts)), "ranks": list(world.ranks)}
    if device.type == "cuda":
        info["nccl_version"] = ".".join(map(str, torch.cuda.nccl.version()))
        if topology := gpu_topology():
            info["gpu_topology"] = topology
    return info


def gpu_topology() -> str | None:
    """`nvidia-smi topo -m` of this node (NVLink, PCIe, NUMA affinity of each GPU), where nvidia-smi exists."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        out = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout
