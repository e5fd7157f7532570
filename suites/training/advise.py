"""`python -m suites advise MODULE:FACTORY`: every lever of the training recipe on the user's model, and a setting.

It checks the model, batch and loss in one float32 forward (a problem is one line and exit 2), then measures the
levers one at a time from the baseline and the combination of those that helped (suites/training/advise_sweep.py),
and prints each lever's verdict, what it could not judge, and the recommended setting
(suites/training/advise_rules.py). It reads the sweep's results through `reports.format.load` (the project's one
checked reader), and says every PROGRESS_S what it is doing.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

import torch

from reports.format.errors import InputError
from suites.core import devices, profiles
from suites.core.units import parse_bytes
from suites.training import user_model
from suites.training.advise_rules import FAILED, report
from suites.training.advise_sweep import Sweep, heartbeat, measure, say
from suites.training.user_model import ModelError, UserModel

USAGE = 2  # exit status of a usage error (a model, batch or loss that cannot run, a bad option)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m suites advise", description=__doc__.splitlines()[0])
    parser.add_argument("model", metavar="MODULE:FACTORY", help="a function returning the torch.nn.Module")
    parser.add_argument("--batch", metavar="MODULE:FACTORY",
                        help="a function (taking the device) returning one batch (default: make_batch of MODULE)")
    parser.add_argument("--loss", metavar="MODULE:FN", help="loss_fn(output, batch), when the output has no loss")
    parser.add_argument("--name", help="the model's name in case ids (default: the module's last part)")
    parser.add_argument("--device", default="auto", help="auto (CUDA when available), cpu, cuda or cuda:N")
    parser.add_argument("--bench-profile", default="quick", choices=profiles.NAMES, dest="profile",
                        help="quick: minutes on a small CPU; full: the real sweep for a GPU")
    parser.add_argument("--mem-budget", type=parse_bytes, help="peak memory a setting may use, e.g. 20GiB "
                        "(default: the GPU's memory; none on a CPU)")
    parser.add_argument("--out", default="advise", help="directory for the bench file, JSON and logs")
    return parser.parse_args(argv)


def _user_model(args: argparse.Namespace) -> UserModel:
    module = args.model.partition(":")[0]
    batch = args.batch or f"{module}:make_batch"
    loss = user_model.load(args.loss, "loss function") if args.loss else None
    return UserModel(user_model.load(args.model, "model"), user_model.load(batch, "batch"), loss,
                     name=args.name or module.split(".")[-1])


def _budget(args: argparse.Namespace, device: torch.device) -> int | None:
    if args.mem_budget is not None or device.type != "cuda":
        return args.mem_budget
    return torch.cuda.get_device_properties(device).total_memory


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # a case-id part and a file name: no path separators


def usable_out(out: Path) -> str | None:
    """Why --out cannot hold the sweep's files, or None."""
    if out.exists() and not out.is_dir():
        return f"--out {out}: is a file; the sweep needs a directory"
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, "")  # the user's modules are named from the working directory, as `python -m` does
    out = Path(args.out)
    if problem := usable_out(out):
        print(f"advise: {problem}", file=sys.stderr)
        return USAGE
    try:
        device = devices.resolve(args.device)
        say(f"checking {args.model} with one batch on {device}")
        with heartbeat("building and checking the model and its batch"):
            user = _user_model(args)
            if not NAME.fullmatch(user.name):
                raise ModelError(f"--name {user.name!r}: use letters, digits, '_', '.' and '-' (it names files)")
            user.probe(device)
    except (ModelError, devices.DeviceError) as exc:
        print(f"advise: {exc}", file=sys.stderr)
        return USAGE
    if device.type == "cuda":
        torch.cuda.empty_cache()  # the probe's memory goes back before the sweep's process measures peaks
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"advise: --out {out}: {exc.strerror or exc}", file=sys.stderr)
        return USAGE
    sweep = Sweep(out, args.model, args.batch or f"{args.model.partition(':')[0]}:make_batch", args.loss,
                  user.name, str(device), args.profile)
    budget, start = _budget(args, device), time.perf_counter()
    say(f"measuring {user.name} on {device} ({args.profile} profile); bench file {sweep.bench}")
    try:
        rows = measure(sweep, budget)
    except (RuntimeError, InputError) as exc:
        print(f"advise: {exc}", file=sys.stderr)
        return FAILED
    print(f"\n{user.name} on {device}, {args.profile} profile: one lever at a time from the baseline "
          f"(amp_bf16, eager, foreach AdamW); step = median wall time per step\n")
    text, status = report(rows, budget)
    print(f"{text} ({time.perf_counter() - start:.0f} s)\nResults: {out}/*.json; python -m reports html {out} -o "
          f"{out}/report")
    return status
