"""pytest plugin of the suite: thin wiring of suites/ into pytest and pytest-benchmark.

The options, hooks and the `run_case` fixture live in suites/harness/pytest_plugin.py, so that a bench file in another
repository can load the same plugin (`pytest -p suites.harness.pytest_plugin`).
"""

pytest_plugins = ["suites.harness.pytest_plugin"]
