"""The versions of the JSON documents the project writes; their fields are in docs/results.md.

`RESULTS_SCHEMA_VERSION` is the top-level `schema_version` of a results file and of its journal's header line
(docs/schema/results.schema.json), `COMPARE_SCHEMA_VERSION` that of `compare --json`
(docs/schema/compare.schema.json). A version changes when a field is renamed, removed or changes its meaning;
a field added leaves it as it is, so a reader of version N reads every later file of version N, and a file of a
higher version is refused by the reader (reports/format/document.py): what it renamed or changed would be read wrong.
`JOURNAL_VERSION` is the `journal` field of a journal's header line: the layout of its lines.

`EXTRA_INFO_FIELDS` are the names of a case's `extra_info` that the suite writes (the schema's `extra_info`,
which tests/test_results_schema.py holds them to): a user's test may not set them (suites/harness/entry.py), so
that a figure in them is always one the suite measured.
"""

RESULTS_SCHEMA_VERSION = 1
COMPARE_SCHEMA_VERSION = 2
JOURNAL_VERSION = 2

EXTRA_INFO_FIELDS = frozenset({
    "above_achievable", "algbw_gbps", "bench_rounds", "busbw_gbps", "bytes", "bytes_per_param", "calls_per_sample",
    "case", "case_s", "compile_s", "contended", "contention", "converged", "device", "device_busy_error",
    "device_busy_s", "device_busy_share", "device_s", "dropped_samples", "enqueue_s", "error_rel", "fast_accum",
    "flops", "gbps", "gbps_above_peak", "hold_s", "host_bound", "l2_flush", "max_batch", "max_batch_exact", "mfu",
    "mfu_counted", "nodes", "note", "notes", "pct_achievable", "pct_peak", "peak_mem_bytes", "profile",
    "rank_median_s", "rank_telemetry", "ranks_per_node", "reason", "rel_iqr", "resolution_limited", "round_medians_s",
    "round_samples", "rounds_converged", "sample_overhead_s", "samples_per_s", "scaling_efficiency", "search_capped",
    "status", "step_wall_s", "stop_reason", "strategy", "suite", "telemetry", "tflops", "tflops_above_peak",
    "timed_batch", "timed_batch_reason", "timer", "tokens_per_s", "tolerance", "torch_threads", "trace",
    "trace_summary", "warmup_calls", "world_size",
})
