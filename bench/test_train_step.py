"""A full training step with each lever of the mixed-precision recipe: cases from suites/train_step.py."""

from suites import plugin, train_step


def pytest_generate_tests(metafunc):
    plugin.parametrize(metafunc, train_step.cases)


def test_train_step(case, run_case):
    run_case(case)
