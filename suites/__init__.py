"""The library: what is measured (cases, FLOP and byte models, reference checks) and how (timing, telemetry).

Each sub-package holds one role; a module finds its room by what it is, and imports only downwards:

- `core`: the measurement itself (cases, timing, the runner, devices, peaks, precision modes, memory).
  Imports torch and numpy, never a suite, an observer or the harness.
- `observers`: what watches a measurement without changing it (NVML telemetry, profiler traces).
  May import `core` (and `reports`' torch-free trace reader).
- `harness`: the pytest side (options, session, the `run_case` fixture's logic, JSON hooks).
  May import `core` and `observers`, never a suite.
- `ops` and `training`: the suites, what they build and check (matmul, conv, attention; the training step,
  its models, data, batch search, numerics). May import `core`; `training` may import `ops`, not the reverse.
- `gpu_check`: the GPU-box check and its per-suite rows, cross-checks against peer tools. May import anything above.

Of `reports`, any package may import the results format (`reports.format`: the strict JSON every writer uses,
the schema version, the loader of results files and journals, the read-back of a run, the rule of what a run's
figure can be trusted for, the torch-free trace reader); never a report command (tables, plots, verdicts).

`python -m suites COMMAND` (suites/__main__.py) runs the commands: `gpu_check`, `crosscheck`, `advise`.
"""
