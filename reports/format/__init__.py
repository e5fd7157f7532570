"""The results format both sides share: what a results file, a journal and a trace are, and how to read them.

The measuring side (suites/) writes through `strict_json` and `schema` and reads back through `load`,
`readback` and `kineto`; the report commands read through the same modules. Nothing here imports a report
command, pandas' plotting or torch (tests/test_layout.py holds both rules), so a change to a table cannot reach
a measurement. Why a package inside reports/ and not one of its own: it is what `pip install .` installs for a
laptop without torch, with the reports; the measuring side's `bench` extra adds torch on top of it.
"""
