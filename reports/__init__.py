"""Results -> pandas -> tables, plots, verdicts.

Reads pytest-benchmark JSON and trace files only; never imports torch, so reports run on any laptop.
"""
