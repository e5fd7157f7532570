"""The suite's pytest plugin: options, hooks and the `run_case` fixture, wired to suites/harness/plugin.py.

The root conftest.py loads it for this repository's bench/ and tests/; a bench file in another repository loads it
with `pytest -p suites.harness.pytest_plugin ...` or a root conftest.py of one line,
`pytest_plugins = ["suites.harness.pytest_plugin"]` (docs/your_model.md).
"""

import pytest

from suites.harness import plugin
from suites.harness import session as sessions


def pytest_addoption(parser):
    plugin.add_options(parser)


@pytest.hookimpl(tryfirst=True)  # before pytest-benchmark reads its options
def pytest_configure(config):
    plugin.configure(config)


def pytest_collection_finish(session):
    plugin.collection_finish(session.items, session.config)


def pytest_unconfigure(config):
    plugin.unconfigure(config)


@pytest.hookimpl(tryfirst=True)  # before pytest's own pass, which is the last round
def pytest_runtestloop(session):
    plugin.measure_rounds(session)


def pytest_benchmark_update_machine_info(config, machine_info):
    plugin.update_machine_info(config, machine_info)


def pytest_benchmark_update_json(config, benchmarks, output_json):
    plugin.update_json(config, output_json)


@pytest.fixture
def run_case(request, benchmark):
    """`run_case(case)`: measure one case in device time and record it in the benchmark JSON."""
    bench_session = plugin.session(request.config)
    return lambda case: sessions.run(bench_session, benchmark, request, case)
