"""This repository's pytest set-up: the suite's plugin, and the option spellings its bench/ had before the options
were namespaced.

Installing the project registers suites/harness/pytest_plugin.py in every pytest run (its `pytest11` entry point);
the `pytest_plugins` line loads it also where plugin autoloading is off (PYTEST_DISABLE_PLUGIN_AUTOLOAD) and does
nothing otherwise. The old spellings (`--device`, `--trace-dir`, `--telemetry-interval-ms`, `--achievable-peaks`,
`--achievable-cache`, `--dist-timeout-s`) stay aliases of the `--bench-...` options here, so the documented
commands, CI, gpu_check and the nightly workflow keep working; another repository has only the `--bench-...` ones.
"""

from suites.harness import options

pytest_plugins = ["suites.harness.pytest_plugin"]


def pytest_addoption(parser):
    options.add_legacy_spellings(parser)
