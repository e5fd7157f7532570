"""Results -> pandas -> tables, plots, verdicts.

Reads pytest-benchmark JSON and trace files only; never imports torch, so reports run on any laptop.

Two layers. `reports.format` is the results format itself, what the measuring side and the reports share: strict
JSON and its schema version, the typed fields, reading and validating results files and journals, machine
identity, reading back a run a program started, the rule of what a figure can be trusted for, and Kineto traces.
It imports no report, so `suites/` depends on it alone (tests/test_layout.py). The rest are the report commands
(one module per command of `python -m reports`: table, plot, compare, history, hardware, html, export, trace,
accept; none imports another) and what they share: the text helpers (`text`), the definition of faster
(`change`), run-to-run noise (`noise`), step detection (`stats`), the verdicts (`verdicts`, `pair_judgement`,
`nights`, `judge`, `comparison`), the marks (`marks`), the levers (`levers`), the sections a command shares with
another or with the page (`sections`) and the pictures (`plots`).
"""
