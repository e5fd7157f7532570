"""reports.format.fields: the types the reports read results with, what each accepts and refuses, and that every
figure a report shows is one of the typed fields."""

from __future__ import annotations

import math
from datetime import datetime, timezone

import pytest

from reports.format import fields, validate
from reports.sections import group_tables, systems

ACCEPTED = {
    "TEXT": ["matmul", ""],
    "LABEL": ["2.13.0", 90100, 7.5],
    "FLAG": [True, False],
    "COUNT": [1, 4, 4.0, fields.MAX_COUNT],
    "TIME": [1e-3, 1, fields.MIN_TIME_S, fields.MAX_TIME_S],
    "SPREAD": [0, 0.0, 1e-6],
    "FIGURE": [0, 3.5, 10**20, fields.MAX_FIGURE],
    "RATIO": [0.0, 0.04, math.inf],
    "TIMES": [[1e-3, 2e-3], [1, 2]],
    "DATE": ["2026-11-29T09:58:51+00:00", "2022-11-03T14:25:31.908712", "2024-11-12T08:05:09Z"],
    "OBJECT": [{}, {"a": 1}],
}
REFUSED = {
    "TEXT": [5, ["a"], {"a": 1}, True],
    "LABEL": [True, ["2.13"], math.nan, math.inf, {"v": 1}],
    "FLAG": ["no", "false", 0, 1],
    "COUNT": [0, -1, 4.5, True, "4", math.inf, math.nan, 10**400, fields.MAX_COUNT + 1],
    "TIME": [0, -1e-3, math.nan, math.inf, True, "1e-3", [1e-3], 5e-324, 1.7e308, 10**400],
    "SPREAD": [-1e-9, math.nan, math.inf, "0"],
    "FIGURE": [-3.0, math.nan, math.inf, 1.7e308, "1", [1, 2], False],
    "RATIO": [-0.1, math.nan, -math.inf, "inf"],
    "TIMES": [[], [1e-3, 0], [1e-3, "a"], [1e-3, True], [[1e-3]], "1e-3", {"a": 1e-3}],
    "DATE": ["9999-12-31T23:59:59+00:00", "0001-01-01T00:00:00", "yesterday", 1764000000],
    "OBJECT": [[1], "x", 3],
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_each_kind_accepts_what_a_writer_gives_and_refuses_the_rest(name):
    kind = getattr(fields, name)
    for value in ACCEPTED[name]:
        assert kind.check(value) is not None, value
    for value in REFUSED[name]:
        assert kind.check(value) is None, value


def test_checked_values_are_what_the_reports_compute_with():
    assert fields.LABEL.check(90100) == "90100" and fields.COUNT.check(4.0) == 4
    assert fields.DATE.check("2022-11-03T14:25:31") == datetime(2022, 11, 3, 14, 25, 31, tzinfo=timezone.utc)
    samples = [1e-3, 2e-3]
    assert fields.TIMES.check(samples) is samples  # a million floats are not copied
    assert fields.TIMES.check([1, 2]) == [1.0, 2.0]


def test_every_figure_a_report_shows_is_a_typed_field():
    """A column a table or the hardware view prints must have its type checked at the edge (or be computed by
    the report itself): a field added to a report without a type would take whatever a file holds."""
    typed = {f.column for f in [*fields.RUN.values(), *fields.ENTRY.values()] if f.column} | set(fields.DERIVED)
    computed = {"time", "mark", "enqueue", "busy", "system", "speedup"}  # formatted or derived by the report
    assert set(group_tables.FIGURES) - computed <= typed, sorted(set(group_tables.FIGURES) - computed - typed)
    assert set(systems.FIGURES) - computed <= typed, sorted(set(systems.FIGURES) - computed - typed)


def test_reserved_columns_hold_the_run_and_the_loaders_own():
    assert {"file", "datetime", "commit", "machine", "device", "machine_id", "group", "name", "fullname", "case",
            "status", "median_s", "samples_s", "incomplete_reason", "param_names", "throttled", "torch_device",
            "torch_version", "reason"} <= fields.RESERVED
    assert {"tflops", "stop_reason", "converged", "strategy"} <= fields.TYPED_EXTRA
    assert not fields.RESERVED & {"dtype", "shape", "tflops", "strategy"}


def test_an_object_keeps_its_right_members_and_names_the_wrong_ones():
    bad: list[str] = []
    machine = validate.checked(validate.tree(fields.RUN), {"machine_info": {
        "node": ["vm"], "gpu": {"name": "NVIDIA H200", "peaks": {"bfloat16": {"value": "fast", "source": "sheet"}}},
        "distributed": {"world_size": "4", "nodes": 2}, "python_version": "3.11"}}, "", bad)
    assert machine == {"machine_info": {"gpu": {"name": "NVIDIA H200", "peaks": {"bfloat16": {"source": "sheet"}}},
                                        "distributed": {"nodes": 2}}}
    assert bad == ["machine_info.node=a list of 1 (expected text)",
                   "machine_info.gpu.peaks.bfloat16.value='fast' (expected a number within [0, 1e+30])",
                   "machine_info.distributed.world_size='4' (expected a whole number >= 1)"]
