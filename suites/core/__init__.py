"""The measurement core: cases, timing and stopping rules, the runner, devices and peaks, precision modes, memory.

Belongs here: what every suite needs to be measured the same way. Imports torch, numpy, the standard library
and reports' strict JSON (reports/format/strict_json.py) only: never a suite (`ops`, `training`), an observer or the
harness. Every stopping rule is written in `profiles` (what each profile measures with, and the two named rules):
no other module of suites/, bench/ or tools/ builds a StopRule of its own.
"""
