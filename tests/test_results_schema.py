"""The results schema (docs/results.md, docs/schema/*.json): strict JSON, a schema the data follows, and one list of
stable names that the code, the schema and the page agree on.

Inputs are the real runs in tests/data (their bare `Infinity` re-encoded once the strict way, see docs/inputs.md
"Reproducing the test fixtures"), a fresh quick run, and the writers themselves fed non-finite values. node's
JSON.parse is the strict reader where node is installed (the check says so when it is not).
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from reports.__main__ import main
from reports.format import strict_json
from reports.format.load import load
from reports.format.schema import EXTRA_INFO_FIELDS
from suites.core import stopping
from suites.harness.journal import Journal
from suites.harness.results import dumps
from tests.resultfiles import DATA, RUN_A, read
from tests.runs import run_command, run_guest_in_process

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "results.md"
SCHEMA = json.loads((ROOT / "docs" / "schema" / "results.schema.json").read_text())
COMPARE_SCHEMA = json.loads((ROOT / "docs" / "schema" / "compare.schema.json").read_text())
JSON_FILES = sorted(DATA.rglob("*.json"))
RESULTS = [p for p in JSON_FILES if '"benchmarks"' in p.read_text()]  # not the sampler tool's figures
# pb* and series/: other projects' files, none of our fields
OURS = [p for p in RESULTS if not p.name.startswith("pb") and "series" not in p.relative_to(DATA).parts]
NODE = shutil.which("node")


def validator(schema: dict, definition: str | None = None) -> Draft202012Validator:
    """A validator of the whole schema, or of one of its $defs (its references resolved in the schema)."""
    if definition is None:
        return Draft202012Validator(schema)
    registry = Registry().with_resource(schema["$id"], Resource.from_contents(schema))
    return Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/{definition}"}, registry=registry)


def errors(document: object, schema: dict = SCHEMA, definition: str | None = None) -> list[str]:
    return [f"{e.json_path}: {e.message[:200]}" for e in validator(schema, definition).iter_errors(document)]


def _bare(constant: str) -> None:
    raise ValueError(f"bare {constant} is not JSON")


def strict(text: str) -> object:
    """Parse as a strict reader does: NaN and Infinity are errors."""
    return json.loads(text, parse_constant=_bare)


def node_parses(paths: list[Path]) -> list[str]:
    """The files node's JSON.parse rejects, each with node's message (JSON Lines files: each line)."""
    script = ("const fs = require('fs'); const bad = [];"
              "for (const f of process.argv.slice(1)) { const text = fs.readFileSync(f, 'utf8');"
              "  const lines = f.endsWith('.journal') || f.endsWith('.jsonl');"
              "  const docs = lines ? text.split('\\n').filter(l => l) : [text];"
              "  for (const d of docs) { try { JSON.parse(d) } catch (e) { bad.push(f + ': ' + e.message) } } }"
              "console.log(JSON.stringify(bad));")
    proc = run_command([NODE, "-e", script, *map(str, paths)], timeout=120)
    assert proc.returncode == 0, proc.tail()
    return json.loads(proc.stdout)


needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed: JSON.parse cannot be asked")


# --- strict JSON ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: str(p.relative_to(DATA)))
def test_every_file_in_tests_data_is_strict_json_and_every_results_file_follows_the_schema(path):
    document = strict(path.read_text())
    assert path not in RESULTS or errors(document) == []


@needs_node
def test_node_reads_every_file_in_tests_data():
    assert node_parses(JSON_FILES) == []


def _run_with_non_finite_figures() -> dict:
    """A real run whose first case gets an infinite rel_iqr, a NaN error and an infinite round median."""
    data = read(RUN_A)
    info = data["benchmarks"][0]["extra_info"]
    info.update(rel_iqr=math.inf, error_rel=math.nan, round_medians_s=[1e-3, math.inf, 1e-3])
    return data


def test_the_writer_writes_non_finite_values_as_null_with_their_value_and_the_reports_put_them_back(tmp_path):
    text = dumps(_run_with_non_finite_figures())
    document = strict(text)
    assert document["schema_version"] == 1 and next(iter(document)) == "schema_version"
    info = document["benchmarks"][0]["extra_info"]
    assert info["rel_iqr"] is None and info["error_rel"] is None and info["round_medians_s"][1] is None
    listed = {e["path"]: e["value"] for e in document["nonfinite"]}
    assert listed["/benchmarks/0/extra_info/rel_iqr"] == "Infinity"
    assert listed["/benchmarks/0/extra_info/error_rel"] == "NaN"
    assert listed["/benchmarks/0/extra_info/round_medians_s/1"] == "Infinity"
    assert errors(document) == []
    info = strict_json.loads(text)["benchmarks"][0]["extra_info"]
    assert info["rel_iqr"] == math.inf and math.isnan(info["error_rel"]) and info["round_medians_s"][1] == math.inf
    (tmp_path / "run.json").write_text(text)  # the reports read the infinite spread; a round median that is no
    row = load([tmp_path / "run.json"]).iloc[0]  # time and a NaN error are left out, with a warning (fields.py)
    assert row["rel_iqr"] == math.inf


def test_nonfinite_is_written_before_the_entries_and_a_list_after_them_leaves_their_values_missing(tmp_path, capsys):
    """The loader streams a file entry by entry, so it can restore a value only from a list it has already read."""
    text = dumps(_run_with_non_finite_figures())
    keys = list(json.loads(text))
    assert keys.index("schema_version") < keys.index("nonfinite") < keys.index("benchmarks")
    document = json.loads(text)
    late = {key: value for key, value in document.items() if key != "nonfinite"} | {"nonfinite": document["nonfinite"]}
    (tmp_path / "late.json").write_text(json.dumps(late))
    row = load([tmp_path / "late.json"]).iloc[0]
    assert row["rel_iqr"] != math.inf and row["case"] == document["benchmarks"][0]["extra_info"]["case"]
    assert "comes after the part it names" in capsys.readouterr().err


def test_a_nonfinite_entry_never_changes_a_value_that_was_written():
    document = {"a": 1.0, "b": None, "c": [None], "nonfinite": [
        {"path": "/a", "value": "Infinity"}, {"path": "/b", "value": "-Infinity"}, {"path": "/c/0", "value": "NaN"},
        {"path": "/c/5", "value": "NaN"}, {"path": "/b", "value": "huge"}, "not an entry"]}
    problems = strict_json.restore(document)
    assert document["a"] == 1.0 and document["b"] == -math.inf and math.isnan(document["c"][0])
    assert len(problems) == 4 and "nonfinite" not in document


def test_a_journal_is_strict_json_line_by_line_and_read_back_with_its_values(tmp_path):
    path = tmp_path / "run.json.journal"
    data = _run_with_non_finite_figures()
    header = {key: data[key] for key in ("machine_info", "commit_info", "datetime", "version")}
    journal = Journal.create(path, header, [])
    journal.add({"benchmarks": data["benchmarks"][0]})
    journal.add({"not_measured": data["not_measured"][0]})
    journal.add({"benchmarks": data["benchmarks"][1], "round": 1})  # a case journaled after one of its rounds
    journal.close(remove=False)
    header, *lines = [strict(line) for line in path.read_text().splitlines()]
    assert header["schema_version"] == 1 and errors(header, definition="journal_header") == []
    assert [errors(line, definition="journal_line") for line in lines] == [[], [], []]
    assert lines[0]["nonfinite"][0] == {"path": "/benchmarks/extra_info/rel_iqr", "value": "Infinity"}
    row = load([path]).set_index("case").loc[data["benchmarks"][0]["extra_info"]["case"]]
    assert row["rel_iqr"] == math.inf and row["incomplete_reason"].startswith("the run ended")
    if NODE:
        assert node_parses([path]) == []


def test_the_achievable_cache_and_the_gpu_check_rows_are_strict_json(tmp_path):
    from suites.core import achievable
    from suites.gpu_check.command import Report
    from suites.gpu_check.rows import Row

    found = achievable.Found(value=1e12, at="4096x4096x4096", how="searched", tried=1, seconds=math.inf)
    peaks = achievable.Peaks(flops={"bfloat16": found}, profile="quick", identity={"machine": "x"})
    cache = achievable.save(peaks, tmp_path)
    assert strict(cache.read_text())["flops"]["bfloat16"]["seconds"] is None
    assert achievable.load(tmp_path, {"machine": "x"}, "quick").flops["bfloat16"].seconds == math.inf
    recorder = Report(tmp_path, lambda: 0.0)
    recorder.emit(Row("matmul", "TFLOP/s", "inf", "", None, "matmul"))
    assert [strict(line)["value"] for line in (tmp_path / "rows.jsonl").read_text().splitlines()] == ["inf"]


# --- the schema can fail -------------------------------------------------------------------------------------


def _mutated(change) -> dict:
    data = strict_json.loads(RUN_A.read_text())
    change(data)
    return strict(strict_json.dumps(data))


@pytest.mark.parametrize("change, where", [
    (lambda d: d["benchmarks"][0]["extra_info"].update(status="okay"), "status"),
    (lambda d: d["benchmarks"][0]["extra_info"].update(stop_reason="done"), "stop_reason"),
    (lambda d: d["benchmarks"][0]["extra_info"].update(timer="stopwatch"), "timer"),
    (lambda d: d["benchmarks"][0]["extra_info"].update(converged="yes"), "converged"),
    (lambda d: d["benchmarks"][0]["extra_info"].update(pct_achievable=140.0), "pct_achievable"),
    (lambda d: d["benchmarks"][0]["stats"].pop("median") and d["benchmarks"][0].pop("stats"), "stats"),
    (lambda d: d.update(incomplete=True), "incomplete_reason"),
    (lambda d: d.update(schema_version=2), "schema_version"),
    (lambda d: d.update(nonfinite=[{"path": "/x", "value": "inf"}]), "nonfinite"),
    (lambda d: d["benchmarks"][0]["extra_info"].update(flops=-1.0), "flops"),
    (lambda d: d["benchmarks"][0]["extra_info"].update(flops=None), "flops"),  # how NaN would be written
    (lambda d: d["benchmarks"][0]["extra_info"].update(bytes="1e9"), "bytes"),
    (lambda d: d["not_measured"][0]["extra_info"].pop("reason"), "reason"),
    (lambda d: d["machine_info"].update(torch={"version": "2.13", "build": "tpu"}), "build"),
], ids=["status", "stop_reason", "timer", "converged", "pct_achievable", "stats", "incomplete", "version",
        "nonfinite", "flops_negative", "flops_nan", "bytes_text", "reason", "torch.build"])
def test_the_schema_rejects_what_this_suite_never_writes(change, where):
    found = errors(_mutated(change))
    assert found and any(where in e for e in found), found


# --- one list of stable names --------------------------------------------------------------------------------


def table_names(heading: str) -> list[str]:
    """The backticked names in the first column of the table under the docs/results.md heading that starts so."""
    text = DOCS.read_text()
    start = next(m.end() for m in re.finditer(r"^#+ (.*)$", text, re.M) if m.group(1).startswith(heading))
    names = []
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        if line.startswith("|") and not set(line) <= set("|- "):
            names += re.findall(r"`([^`]+)`", line.split("|")[1])
    return names


def documented() -> set[str]:
    """Every backticked name on the page (code blocks left out)."""
    return set(re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", DOCS.read_text(), flags=re.S)))


def _ours() -> list[dict]:
    return [strict_json.loads(p.read_text()) for p in OURS]


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are unique: json.loads keeps the last of two silently."""
    keys = [k for k, _ in pairs]
    assert len(keys) == len(set(keys)), sorted({k for k in keys if keys.count(k) > 1})
    return dict(pairs)


@pytest.mark.parametrize("name", ["results.schema.json", "compare.schema.json"])
def test_a_schema_names_each_field_once(name):
    """Two branches once typed one field twice, with different minimums; the schema kept one without a word."""
    json.loads((ROOT / "docs" / "schema" / name).read_text(), object_pairs_hook=unique_keys)


def test_stop_reasons_statuses_and_timers_are_the_same_in_the_code_the_page_and_the_schema():
    extra = SCHEMA["$defs"]["extra_info"]["properties"]
    assert table_names("Stop reasons") == list(stopping.STOP_REASONS) == extra["stop_reason"]["enum"]
    assert table_names("Status values")[1:] and table_names("Status values") == extra["status"]["enum"]
    assert table_names("Timers") == extra["timer"]["enum"]
    seen = {(key, e["extra_info"][key]) for d in _ours() for part in ("benchmarks", "not_measured")
            for e in d.get(part, []) for key in ("status", "stop_reason", "timer") if key in e["extra_info"]}
    for key, value in seen:
        assert value in extra[key]["enum"], (key, value)


def test_every_group_param_and_field_the_runs_hold_is_on_the_page():
    entries = [e for d in _ours() for part in ("benchmarks", "not_measured") for e in d.get(part, [])]
    assert {e["group"] for e in entries} <= set(table_names("Groups"))
    params = {p for e in entries for p in e["params"]}
    assert params <= set(table_names("Params")), sorted(params - set(table_names("Params")))
    fields = {k for e in entries for k in e["extra_info"]}
    assert fields <= documented(), sorted(fields - documented())
    machine = {k for d in _ours() for k in d["machine_info"]} - {"node", "processor", "machine", "system", "release",
                                                                 "cpu", "python_compiler", "python_implementation",
                                                                 "python_implementation_version", "python_version",
                                                                 "python_build"}
    assert machine <= set(table_names("`machine_info` fields")), machine


def test_every_pytest_option_of_the_plugin_is_on_the_page_with_its_older_spelling():
    from suites.harness.options import OPTIONS

    assert OPTIONS and sorted(o.name for o in OPTIONS) == sorted(table_names("Options"))
    rows = {line.split("|")[1].strip(" `"): line.split("|")[2].strip(" `") for line in DOCS.read_text().splitlines()
            if line.startswith("| `--bench-")}
    assert {o.name: o.legacy or "" for o in OPTIONS} == rows


def test_the_common_extra_info_fields_of_the_page_are_typed_in_the_schema():
    common = set(table_names("`extra_info` fields every case may carry"))
    assert common and common <= set(SCHEMA["$defs"]["extra_info"]["properties"]), \
        sorted(common - set(SCHEMA["$defs"]["extra_info"]["properties"]))


def test_the_suites_extra_info_fields_a_test_may_not_set_are_the_schemas():
    """device_bench refuses a test's value in these names (suites/harness/entry.py): the list the code holds is
    the schema's, so a field added to one is added to the other."""
    assert set(SCHEMA["$defs"]["extra_info"]["properties"]) == EXTRA_INFO_FIELDS


def test_code_cites_this_page_for_the_stable_names_not_a_card_outside_the_repository():
    for path in [*ROOT.glob("reports/**/*.py"), *ROOT.glob("suites/**/*.py")]:
        assert "shared/design.md" not in path.read_text(), path


# --- compare --json ------------------------------------------------------------------------------------------


def test_compare_json_follows_its_schema_and_is_strict(tmp_path, capsys):
    out = tmp_path / "verdicts.json"
    assert main(["compare", str(RUN_A), str(DATA / "run_cpu_quick_b.json"), "--json", str(out),
                 "--fail-on-regression"]) == 3  # two single runs: changes the gate could not judge
    document = strict(out.read_text())
    assert errors(document, COMPARE_SCHEMA) == []
    assert document["gate"]["status"] == "not judged" and document["gate"]["not_judged"]
    assert errors({**document, "gate": {"passed": "yes"}}, COMPARE_SCHEMA)  # the schema can fail
    assert errors({**document, "gate": {**document["gate"], "status": "re-run"}}, COMPARE_SCHEMA)
    if NODE:
        assert node_parses([out]) == []


# --- a fresh run -------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_fresh_quick_run_is_strict_json_follows_the_schema_and_names_only_documented_fields(quick_run):
    """The shared quick run of tests/conftest.py (matmul `square` cases, tf32 unsupported here)."""
    document = strict(quick_run["path"].read_text())
    assert document["schema_version"] == 1 and document["benchmarks"] and document["not_measured"]
    assert errors(document) == []
    fields = {k for part in ("benchmarks", "not_measured") for e in document[part] for k in e["extra_info"]}
    assert fields <= documented(), sorted(fields - documented())
    if NODE:
        assert node_parses([quick_run["path"]]) == []


@needs_node
def test_node_rejects_what_pythons_json_writes_by_default(tmp_path):
    """The check above can fail: a bare Infinity, as json.dumps writes it, is not JSON to node."""
    path = tmp_path / "bare.json"
    path.write_text(json.dumps({"rel_iqr": math.inf}))
    assert len(node_parses([path])) == 1


PARAMETRIZED_BENCH = """
import pytest


@pytest.mark.parametrize("shape", [(2, 3), [4]])
@pytest.mark.parametrize("options", [{"fused": True, "sizes": [1, 2]}, None])
def test_params(device_bench, shape, options):
    device_bench(lambda: sum(range(10)), flops=10)
"""


@pytest.mark.slow
def test_a_run_of_ordinary_parametrize_params_follows_the_schema(tmp_path):
    """pytest's parametrize takes any value: tuples, lists and dicts become JSON lists and objects in `params`,
    which the schema must accept (it rejected them), and the reports read."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "test_params.py").write_text(PARAMETRIZED_BENCH)
    out = tmp_path / "run.json"
    proc = run_guest_in_process(repo, "--benchmark-only", "--bench-profile", "quick", f"--benchmark-json={out}")
    assert proc.returncode == 0, proc.tail()
    document = strict(out.read_text())
    assert {json.dumps(e["params"], sort_keys=True) for e in document["benchmarks"]} == {
        json.dumps({"shape": shape, "options": options}, sort_keys=True)
        for shape in ([2, 3], [4]) for options in ({"fused": True, "sizes": [1, 2]}, None)}
    assert errors(document) == []
    assert main(["table", str(out)]) == 0
