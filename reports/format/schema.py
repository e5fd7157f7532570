"""The versions of the JSON documents the project writes; their fields are in docs/results.md.

`RESULTS_SCHEMA_VERSION` is the top-level `schema_version` of a results file and of its journal's header line
(docs/schema/results.schema.json), `COMPARE_SCHEMA_VERSION` that of `compare --json`
(docs/schema/compare.schema.json). A version changes when a field is renamed, removed or changes its meaning;
a field added leaves it as it is, so a reader of version N reads every later file of version N, and a file of a
higher version is refused by the reader (reports/format/document.py): what it renamed or changed would be read wrong.
`JOURNAL_VERSION` is the `journal` field of a journal's header line: the layout of its lines.
"""

RESULTS_SCHEMA_VERSION = 1
COMPARE_SCHEMA_VERSION = 2
JOURNAL_VERSION = 2
