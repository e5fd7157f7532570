"""The suite's all_reduce bus bandwidth against an all_reduce timed by hand, in the same run, on the same ranks.

Launched by torchrun, every rank joins one process group and, for each message size, alternates (`--rounds`
times) the suite's own path (suites.harness.distributed's lockstep: a barrier before each sample, the slowest
rank's samples, suites.distributed.collectives' case and bandwidths) with a hand-written nccl-tests-style loop:
a barrier, `--iters` back-to-back `dist.all_reduce` calls each timed with perf_counter (CUDA: synchronized), no
barrier between them; the slowest rank's median call (an all_reduce MAX of the ranks' medians; a median, not
nccl-tests' mean, so that a preempted call on a shared machine does not decide), busbw = size / t x 2(n-1)/n. Rank 0
prints the median busbw of each side and their ratio; the spread between rounds of one side is the noise the
ratio must be read against.

Usage: torchrun --standalone --nproc-per-node 2 tools/bench_allreduce.py [--device cpu] [--dtype float32]
       [--sizes 65536,1048576,8388608] [--rounds 3] [--iters 20] [--json PATH]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reports.format import strict_json
from suites.core import devices
from suites.core.precision import DTYPES
from suites.core.profiles import Profile, rules
from suites.core.runner import execute
from suites.distributed import collectives
from suites.harness import distributed


def hand_busbw(nbytes: int, dtype: torch.dtype, device: torch.device, iters: int) -> float:
    """nccl-tests' loop: warm up, barrier, `iters` all_reduce calls, the slowest rank's median call."""
    n = dist.get_world_size()
    buf = torch.randn(max(n, nbytes // dtype.itemsize // n * n), device=device).to(dtype)
    for _ in range(2):
        dist.all_reduce(buf)
    dist.barrier()
    times = []
    for _ in range(iters):
        start = time.perf_counter()
        dist.all_reduce(buf)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    per_call = torch.tensor([float(np.median(times))], dtype=torch.float64, device=device)
    dist.all_reduce(per_call, op=dist.ReduceOp.MAX)
    return collectives.bandwidths("all_reduce", n, buf.numel() * dtype.itemsize, per_call.item())["busbw_gbps"]


def suite_busbw(world: distributed.World, dtype_name: str, nbytes: int, device: torch.device, samples: int) -> float:
    """The suite's figure for the same message: its case, lockstep rule and slowest-rank reduction."""
    lockstep = distributed.RankLockstep(world, device)
    case = lockstep.agreed(collectives.case("all_reduce", dtype_name, nbytes))
    result, _ = lockstep.settle(execute(case, device, rules(Profile.QUICK).stop.counted(samples), lockstep=lockstep))
    if result.status != "ok":
        raise SystemExit(f"suite case {case.id}: {result.status}: {result.reason}")
    return result.figures["busbw_gbps"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="float32", choices=collectives.COLLECTIVE_DTYPES)
    parser.add_argument("--sizes", default="65536,1048576,8388608", help="message sizes in bytes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if not distributed.launched():
        raise SystemExit("launch with torchrun --nproc-per-node N (N >= 2)")
    device = distributed.local_device(devices.resolve(args.device))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    world = distributed.join(device, distributed.DEFAULT_TIMEOUT_S)
    rows = []
    for nbytes in (int(s) for s in args.sizes.split(",")):
        suite, hand = [], []
        for _ in range(args.rounds):
            suite.append(suite_busbw(world, args.dtype, nbytes, device, args.iters))
            hand.append(hand_busbw(nbytes, DTYPES[args.dtype], device, args.iters))
        rows.append({"bytes": nbytes, "suite_busbw_gbps": float(np.median(suite)),
                     "hand_busbw_gbps": float(np.median(hand)),
                     "ratio": float(np.median(suite) / np.median(hand)),
                     "suite_spread": float((max(suite) - min(suite)) / np.median(suite)),
                     "hand_spread": float((max(hand) - min(hand)) / np.median(hand))})
    if world.rank == 0:
        print(f"all_reduce {args.dtype}, world size {world.world_size}, {world.backend}, {args.rounds} rounds")
        print(f"{'bytes':>10} {'suite busbw GB/s':>17} {'hand busbw GB/s':>16} {'ratio':>6} {'spreads':>14}")
        for r in rows:
            print(f"{r['bytes']:>10} {r['suite_busbw_gbps']:>17.4f} {r['hand_busbw_gbps']:>16.4f} {r['ratio']:>6.3f} "
                  f"{r['suite_spread']:>6.1%} {r['hand_spread']:>6.1%}")
        if args.json:
            args.json.write_text(strict_json.dumps(rows, indent=1))
    distributed.leave()


if __name__ == "__main__":
    main()
