"""The pytest side: options, the run's session, the logic behind the `run_case` fixture, JSON hooks.

Belongs here: what joins the core and the observers to pytest and pytest-benchmark (the root conftest.py
stays thin and calls into `plugin`). May import `suites.core` and `suites.observers`; never a suite.
"""
