"""`python -m suites.training.memory_budget`: bytes per parameter of a real GPT after real AdamW steps, per layout.

Measured from the tensors (suites/training/param_bytes.py) beside the analytic budget and the 16-18 rule.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, replace

import torch
from tabulate import tabulate

from suites.core import devices
from suites.core.profiles import Profile
from suites.training import param_bytes, recipe, train_step
from suites.training.data import token_batches
from suites.training.models import GPT, GPTConfig
from suites.training.param_bytes import MemoryBudget, table


def measure_budget(model: str, master_weights: bool, device: torch.device, steps: int = 2) -> MemoryBudget:
    """The AdamW bf16 mixed-precision memory budget of a GPT preset after `steps` real steps."""
    profile = replace(train_step.PROFILES[Profile.QUICK], gpt=model, gpt_batch=2, steps=steps)
    levers = train_step.Levers(master_weights=master_weights)
    config = train_step.gpt_config(profile, levers)
    torch.manual_seed(train_step.SEED)
    net = GPT(config).to(device)
    if master_weights:
        net.to(torch.bfloat16)
    optimizer = train_step.optimizer_for(net, levers, profile.lr)
    step = recipe.make_step(net, optimizer, levers.precision, device=device)
    vocab = GPTConfig.preset(model).vocab_size
    recipe.train(step, token_batches(vocab, 2, config.block_size, steps, train_step.SEED, device))
    return param_bytes.measure(net, optimizer)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m suites.training.memory_budget",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="GPT preset (tiny, small, gpt2-124m); default tiny")
    parser.add_argument("--device", default="auto", help="auto (default: cuda when available), cpu, cuda or cuda:N")
    args = parser.parse_args(argv)
    try:
        device = devices.resolve(args.device)
        layouts = {"autocast amp_bf16 (fp32 weights = master)": False, "bf16 weights + fp32 master": True}
        rows = {name: measure_budget(args.model, master, device) for name, master in layouts.items()}
    except (ValueError, RuntimeError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    print(tabulate(table(rows, layouts), headers="keys", tablefmt="github"))
    print("measured bytes/param (analytic in brackets); activations come on top:")
    for name, budget in rows.items():
        print(f"  {name}: {asdict(budget)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
