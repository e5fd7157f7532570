"""The pytest side: options, the run's session, the logic behind the `run_case` fixture, JSON hooks.

Belongs here: what joins the core and the observers to pytest and pytest-benchmark (`pytest_plugin` holds the
options, hooks and fixture; the root conftest.py only loads it, and a bench file elsewhere loads it with
`pytest -p suites.harness.pytest_plugin`). May import `suites.core` and `suites.observers` (and reports' strict
JSON and schema version, which the results writer uses); never a suite.
"""
