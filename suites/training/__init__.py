"""Training suites: the recipe's training step and its levers, models, data, batch size, memory, numerics.

Belongs here: a suite whose unit is a step of training (or a correctness experiment on one). May import
`suites.core` and `suites.ops` (and, for `advise`, the torch-free results reader of `reports`); never `checks` or
the harness.
"""
