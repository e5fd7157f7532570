"""Distributed suites: collectives and training steps under DDP and FSDP2, run on every rank under torchrun.

Belongs here: a suite whose workload talks to the other ranks through torch.distributed (a process group the
harness has joined). May import `suites.core` and `suites.training` (its models and step); never `checks` or the
harness. Without a process group of two or more ranks its cases are Unsupported, with the command that runs them.
"""
