"""Observers of a measurement: NVML telemetry (power, energy, clocks, throttling) and profiler traces.

Belongs here: anything that watches a case through the runner's `Extension` hooks without changing what is
timed. May import `suites.core` and the torch-free readers of `reports`; never a suite or the harness.
"""
