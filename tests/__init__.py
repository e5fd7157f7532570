"""Tests of suites/ and reports/, green on a CPU-only machine.

A test starts a command (pytest on bench/, `python -m ...`, torchrun) only through tests/runs.py, which holds what
every run needs (working directory, PYTHONPATH, timeout, captured output) and says which runs may share this process.
"""
