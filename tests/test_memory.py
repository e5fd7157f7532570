"""Handing memory back between cases: what the collections after each case walk (suites/core/memory.py)."""

import gc
import sys
import types

import pytest
import torch

from suites.core import memory

CPU = torch.device("cpu")


@pytest.fixture
def frozen_run():
    """The run's freeze as the plugin makes it at its first case, given back afterwards as at the run's end."""
    memory.freeze_long_lived()
    yield
    memory.thaw()


def test_what_a_cases_imports_made_is_frozen_at_the_next_release_and_nothing_else_is(frozen_run):
    """A module a case imported lives as long as the run: after the next release it is out of the collector's
    sight, so later collections do not walk it again; a release after a case that imported nothing freezes
    nothing (the case's own survivors stay collectable)."""
    name = "a_module_a_case_imported"
    module = types.ModuleType(name)
    module.table = [[i] for i in range(20_000)]  # 20 001 tracked objects
    sys.modules[name] = module
    try:
        before = gc.get_freeze_count()
        memory.release(CPU)
        assert gc.get_freeze_count() >= before + 20_000
        assert not any(obj is module.table for obj in gc.get_objects())
        kept = gc.get_freeze_count()
        survivors = [[i] for i in range(1_000)]
        memory.release(CPU)
        assert gc.get_freeze_count() <= kept
        assert any(obj is survivors for obj in gc.get_objects())
    finally:
        del sys.modules[name]


def test_a_release_outside_a_run_freezes_nothing():
    """The collector is the process's own when no run froze it (the plugin is a guest): a release only collects."""
    memory.thaw()
    name = "a_module_imported_outside_a_run"
    sys.modules[name] = types.ModuleType(name)
    try:
        memory.release(CPU)
        assert gc.get_freeze_count() == 0
    finally:
        del sys.modules[name]
