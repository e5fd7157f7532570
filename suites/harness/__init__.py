"""The pytest side: options, the run's session, the logic behind the `run_case` and `device_bench` fixtures, JSON
hooks, the results writer, rounds, torchrun ranks.

Belongs here: what joins the core and the observers to pytest and pytest-benchmark (`pytest_plugin` holds the
hooks and fixtures, registered in every pytest run by the installed project's `pytest11` entry point; `options`
the command line, declared without torch). May import `suites.core` and `suites.observers` (and
reports' strict JSON and schema version, which the writers use); never a suite.
`pytest_plugin` and `options` import nothing heavy at module level: a run that does not use the suite pays nothing.
"""
