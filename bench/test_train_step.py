"""A full training step with each lever of the mixed-precision recipe: cases from suites/training/train_step.py."""

from suites.harness import pytest_plugin
from suites.training import train_step


def pytest_generate_tests(metafunc):
    pytest_plugin.parametrize(metafunc, train_step.cases)


def test_train_step(case, run_case):
    run_case(case)
