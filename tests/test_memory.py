"""Handing memory back between cases: what the collections after each case walk (suites/core/memory.py)."""

import gc
import sys
import types
import weakref

import pytest
import torch

from suites.core import memory

CPU = torch.device("cpu")


@pytest.fixture
def host_without_freeze():
    """A process that froze nothing of its own, as a user's pytest is: this test session's freeze (tests/conftest.py)
    given back to the collector for the test, and made again after it."""
    gc.unfreeze()
    yield
    gc.collect()
    gc.freeze()


@pytest.fixture
def frozen_run(host_without_freeze):
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


def test_a_release_outside_a_run_freezes_nothing(host_without_freeze):
    """The collector is the process's own when no run froze it (the plugin is a guest): a release only collects."""
    name = "a_module_imported_outside_a_run"
    sys.modules[name] = types.ModuleType(name)
    try:
        memory.release(CPU)
        assert gc.get_freeze_count() == 0
    finally:
        del sys.modules[name]


def test_a_host_that_froze_its_heap_keeps_its_freeze_through_a_run():
    """This test session froze its heap after collecting (tests/conftest.py), as a server that forks workers does: a
    run in it freezes nothing (not even what its cases import) and thaws nothing, since gc.unfreeze would give the
    host's objects back with the run's; its releases still collect what the cases made."""
    before = gc.get_freeze_count()
    assert before > 100_000
    memory.freeze_long_lived()
    assert memory.FROZEN.modules == 0 and gc.get_freeze_count() == before
    name = "a_module_a_case_imported_in_a_frozen_host"
    sys.modules[name] = types.ModuleType(name)
    try:
        garbage = types.ModuleType("garbage")
        garbage.itself = garbage  # a cycle only a collection frees
        freed = weakref.ref(garbage)
        del garbage
        memory.release(CPU)
        assert gc.get_freeze_count() == before and freed() is None
    finally:
        del sys.modules[name]
    memory.thaw()
    assert gc.get_freeze_count() == before
