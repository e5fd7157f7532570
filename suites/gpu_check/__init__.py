"""The GPU-box check (`python -m suites.gpu_check`) and its per-suite rows, and cross-checks with peer tools.

Belongs here: a row of the check (a figure read from a run's JSON, with its target) or a comparison with
another timer. May import any other part of `suites`; nothing imports it.
"""
