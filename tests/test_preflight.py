"""The GPU check's preflight rows that a CPU can produce: the versions of the libraries the figures rest on."""

from __future__ import annotations

import importlib.metadata

import torch

from suites.gpu_check import preflight


def test_preflight_names_every_library_with_its_installed_version(tmp_path):
    rows = {row.figure: row for row in preflight.preflight(tmp_path, torch.device("cpu"))}
    row = rows["libraries"]
    for name in ("pytest-benchmark", "tabulate", "scipy", "numpy", "nvidia-ml-py"):
        assert f"{name} {importlib.metadata.version(name)}" in row.value
    assert row.ok is True


def test_a_missing_library_fails_the_row(monkeypatch):
    monkeypatch.setattr(preflight, "LIBRARIES", (*preflight.LIBRARIES, "no-such-distribution-here"))
    row = preflight.library_row()
    assert row.ok is False
    assert row.value.endswith("no-such-distribution-here not installed")
