"""The package rules of suites/ and reports/ as their __init__ docstrings state them, and no import cycles."""

from __future__ import annotations

import ast
import sys
from functools import cache
from pathlib import Path

import pytest

from tests.runs import run_python

ROOT = Path(__file__).resolve().parent.parent

# Which packages of suites/ each package may import (itself always).
ALLOWED = {
    "core": set(),
    "observers": {"core"},
    "harness": {"core", "observers"},
    "ops": {"core"},
    "training": {"core", "ops"},
    "distributed": {"core", "training"},
    "gpu_check": {"core", "observers", "harness", "ops", "training"},
}


@cache
def parsed(path: Path) -> ast.Module:
    """A source file's syntax tree, parsed once for all the rules that read it (pytest's own package among them)."""
    return ast.parse(path.read_text())


def imports_of(path: Path) -> set[str]:
    """Every module name the file imports, at any depth (lazy imports inside functions count too)."""
    names: set[str] = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


MODULES = {module_name(p): p for top in ("suites", "reports") for p in (ROOT / top).rglob("*.py")}


def test_every_package_of_suites_has_its_rule():
    found = {p.name for p in (ROOT / "suites").iterdir() if (p / "__init__.py").is_file()}
    assert found == set(ALLOWED)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_what_its_role_allows(package):
    assert (ROOT / "suites" / package).is_dir(), f"suites/{package} is gone: the rule names a package that is not"
    for path in (ROOT / "suites" / package).glob("*.py"):
        used = {name.split(".")[1] for name in imports_of(path) if name.startswith("suites.") and
                name.split(".")[1] in ALLOWED}
        assert used <= ALLOWED[package] | {package}, f"{module_name(path)} imports {sorted(used - ALLOWED[package])}"


def test_reports_never_imports_suites_or_torch():
    for name, path in MODULES.items():
        if name.startswith("reports"):
            bad = {n for n in imports_of(path) if n.split(".")[0] in ("torch", "suites")}
            assert not bad, f"{name} imports {sorted(bad)}"


# The results format (reports/format/, reports/__init__.py): what both sides share. The measuring side writes and
# reads results and traces through it and takes nothing else of reports/; it imports no report command, so a
# change to a table or a plot cannot reach the measurement.
FORMAT = "reports.format"
# The JSON encoding every writer of the measuring side imports: standard library only, no pandas, no matplotlib.
JSON_ENCODING = {"reports.format.strict_json", "reports.format.schema"}


def in_format(name: str) -> bool:
    return name == FORMAT or name.startswith(FORMAT + ".")


def test_suites_take_from_reports_only_the_results_format():
    for name, path in MODULES.items():
        if name.startswith("suites"):
            bad = {n for n in imports_of(path) if n.split(".")[0] == "reports" and n != "reports" and not in_format(n)}
            assert not bad, f"{name} imports {sorted(bad)}: suites/ takes only the results format (reports.format)"


def test_the_results_format_imports_no_report():
    for name, path in MODULES.items():
        if in_format(name):
            bad = {n for n in imports_of(path) if n.split(".")[0] == "reports" and n != "reports" and not in_format(n)}
            assert not bad, f"{name} imports {sorted(bad)}"
    for name in JSON_ENCODING:
        third_party = {n.split(".")[0] for n in imports_of(MODULES[name])} - set(sys.stdlib_module_names)
        assert third_party <= {"__future__"}, f"{name} imports {sorted(third_party)}"


def import_graph() -> dict[str, set[str]]:
    """Each module of suites/ and reports/ with the modules of theirs it imports."""
    return {name: {n for n in imports_of(path) if n in MODULES and n != name} for name, path in MODULES.items()}


def import_chain(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """The shortest chain of imports from one module to another (both included), None where there is none."""
    came_from: dict[str, str | None] = {start: None}
    queue = [start]
    for name in queue:
        if name == goal:
            chain = [name]
            while (before := came_from[chain[-1]]) is not None:
                chain.append(before)
            return chain[::-1]
        for dep in sorted(graph[name] - set(came_from)):
            came_from[dep] = name
            queue.append(dep)
    return None


def test_no_report_command_imports_another():
    """A command module (reports/__main__.py `COMMANDS`) holds its command line and its own rendering; what it
    shares with another command or with the HTML page lives in a module that is no command (reports/sections/,
    reports/plots/, reports/text.py, ...), so that a change to one command's output cannot reach another's. Counted
    through the modules in between: the page's history section importing `hardware` was the page importing it."""
    from reports.__main__ import COMMANDS

    graph, commands = import_graph(), set(COMMANDS.values())
    found = [" -> ".join(chain) for name in sorted(commands) for other in sorted(commands - {name})
             if (chain := import_chain(graph, name, other))]
    assert found == []


def test_no_import_cycles():
    graph = import_graph()
    done: set[str] = set()

    def visit(name: str, stack: list[str]) -> None:
        if name in stack:
            raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(name):], name]))
        if name in done:
            return
        for dep in graph[name]:
            visit(dep, [*stack, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


MAX_LINES = 500  # a module longer holds several things a reader has to tell apart: split it along its seams


@pytest.mark.parametrize("top", ["suites", "reports"])
def test_no_module_is_over_500_lines(top):
    """timing.py had grown to five modules in one (795 lines), verdicts.py to four; a module of its own is where a
    reader looks for the stopping rule, or for how a pair of runs is judged."""
    found = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / top).rglob("*.py"))
             if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert found == {}, f"over {MAX_LINES} lines"


def _stop_rules_written(path: Path) -> int:
    calls = [n for n in ast.walk(parsed(path)) if isinstance(n, ast.Call)]
    return sum(isinstance(c.func, ast.Name) and c.func.id == "StopRule" for c in calls)


def test_every_stop_rule_is_written_in_the_profile_module():
    """suites/core/__init__: a measurement rule is a profile's (or a named one), in suites/core/profiles.py."""
    home = {ROOT / "suites" / "core" / "profiles.py", ROOT / "suites" / "core" / "stopping.py"}
    found = {module_name(p) if p.is_relative_to(ROOT / "suites") else str(p.relative_to(ROOT)): _stop_rules_written(p)
             for top in ("suites", "bench", "tools") for p in (ROOT / top).rglob("*.py") if p not in home}
    assert {name: n for name, n in found.items() if n} == {}


def starts_processes(path: Path) -> bool:
    """Whether the file calls subprocess (`subprocess.run(...)`, or a name imported from it); naming its types in
    annotations does not count."""
    tree = parsed(path)
    imported = any(isinstance(n, ast.ImportFrom) and n.module == "subprocess" for n in ast.walk(tree))
    return imported or any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                           isinstance(n.func.value, ast.Name) and n.func.value.id == "subprocess"
                           for n in ast.walk(tree))


def test_tests_start_commands_only_through_the_runs_helper():
    starting = sorted(p.name for p in (ROOT / "tests").glob("*.py") if p.name != "runs.py" and starts_processes(p))
    assert not starting, f"{starting} start processes themselves: start commands with tests/runs.py"


def test_the_plugin_and_its_options_import_nothing_heavy():
    """The plugin is registered in every pytest run of an environment that installs the project, so importing it
    (and declaring its options) must not import torch or the numeric stack (suites/harness/__init__.py)."""
    code = ("import sys, suites.harness.pytest_plugin, suites.harness.options; "
            "print(sorted({'torch', 'numpy', 'pandas', 'scipy', 'pytest_benchmark'} & set(sys.modules)))")
    proc = run_python("-c", code, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


# A suite's per-role modules: the suite itself (suites/ops, training, distributed), its rows of the GPU check
# (suites/gpu_check), its pictures (reports/plots), its bench file and its tests. Each role holds one of them.
SUITE_ROLES = {"suite": ("suites/ops", "suites/training", "suites/distributed"), "gpu_check": ("suites/gpu_check",),
               "plots": ("reports/plots",), "bench": ("bench",), "tests": ("tests",)}


def test_no_two_modules_share_a_name_but_a_suites_per_role_modules():
    """One name, one thing: `train_step` was the training suite, the DDP/FSDP2 suite and the GPU check's rows."""
    suites_benched = {p.stem.removeprefix("test_") for p in (ROOT / "bench").glob("test_*.py")}
    found: dict[str, list[Path]] = {}
    for top in ("suites", "reports", "bench", "tools", "tests"):
        for path in (ROOT / top).rglob("*.py"):
            if path.stem not in ("__init__", "__main__", "conftest") and "data" not in path.relative_to(ROOT).parts:
                found.setdefault(path.stem, []).append(path.relative_to(ROOT))
    for stem, paths in sorted(found.items()):
        if len(paths) == 1:
            continue
        assert stem.removeprefix("test_") in suites_benched, f"{stem}: {[str(p) for p in paths]}"
        roles = [next(role for role, dirs in SUITE_ROLES.items() if str(p.parent) in dirs) for p in paths]
        assert len(roles) == len(set(roles)), f"{stem}: two in one role: {[str(p) for p in paths]}"


def test_no_two_classes_share_a_name():
    """`Estimate`, `Row` and `Run` were two classes each: a reader of one name must not have to ask which."""
    found: dict[str, list[str]] = {}
    for top in ("suites", "reports", "tools", "tests"):
        for path in (ROOT / top).rglob("*.py"):
            for node in parsed(path).body:
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in found.items() if len(paths) > 1} == {}


def test_every_test_of_a_module_that_imports_torch_is_marked_for_every_supported_torch(request):
    """CI runs the `torch_api` tests under every torch it supports (tests/conftest.py): the mark follows a module's
    imports, so a new test that calls torch cannot be left out of them."""
    from tests.conftest import imports_torch

    marked = {p.name for p in (ROOT / "tests").glob("test_*.py") if imports_torch(p)}
    assert {"test_distributed.py", "test_precision.py", "test_fake_cuda.py", "test_timing.py"} <= marked
    # no torch import: the reports' tests, the writer's, and a test that only writes `import torch` into a file
    assert not {"test_reports_no_torch.py", "test_results_durability.py", "test_plugin_guest.py"} & marked
    assert request.node.get_closest_marker("torch_api") is None  # this module does not import torch


# A case's entry has one writer (suites/harness/entry.py): every field of its extra_info is assembled there, and
# pytest-benchmark's private members (its fixture's, its session's) are used there only, so that a change in
# pytest-benchmark shows in one module and a reader finds every field of an entry in one place.
ENTRY_BUILDER = ROOT / "suites" / "harness" / "entry.py"
MUTATORS = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"}


def private_names(package: Path) -> set[str]:
    """The underscore names a package's source defines or reads on its objects."""
    names: set[str] = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(parsed(path)):
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__") and n != "_"}


@cache
def pytest_benchmark_private_names() -> set[str]:
    """pytest-benchmark's private names (`_make_stats`, `_mode`, ...), found in its installed source, less those
    pytest's own source uses too (a terminal reporter's `_tw` is pytest's)."""
    import _pytest
    import pytest_benchmark

    return private_names(Path(pytest_benchmark.__file__).parent) - private_names(Path(_pytest.__file__).parent)


def _is_extra_info(node: ast.AST) -> bool:
    """`x.extra_info`, a name `extra_info`, or an item of either (`x.extra_info["k"]`)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return (isinstance(node, ast.Attribute) and node.attr == "extra_info") or (
        isinstance(node, ast.Name) and node.id == "extra_info")


def entry_writes(tree: ast.AST, private: set[str]) -> list[str]:
    """Where a module writes an entry's extra_info or uses pytest-benchmark's private names, line by line."""
    found = []
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, (ast.Assign, ast.Delete)) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        if any(_is_extra_info(t) for t in targets):
            found.append(f"{node.lineno}: writes extra_info")
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in MUTATORS and _is_extra_info(func.value):
                found.append(f"{node.lineno}: extra_info.{func.attr}(...)")
            if any(k.arg == "extra_info" for k in node.keywords):
                found.append(f"{node.lineno}: extra_info=...")
            if (isinstance(func, ast.Name) and func.id == "setattr" and len(node.args) > 1
                    and isinstance(node.args[1], ast.Constant) and node.args[1].value == "extra_info"):
                found.append(f"{node.lineno}: setattr(..., 'extra_info', ...)")
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "extra_info"
                                              for k in node.keys):
            found.append(f"{node.lineno}: an entry's dict with extra_info")
        if isinstance(node, ast.Attribute) and node.attr in private:
            found.append(f"{node.lineno}: .{node.attr}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in private:
            found.append(f"{node.lineno}: {node.value!r}")
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pytest_benchmark"):
            private_imports = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
            if node.module == "pytest_benchmark.stats" or private_imports:
                found.append(f"{node.lineno}: from {node.module} import {', '.join(a.name for a in node.names)}")
    return found


def test_only_the_entry_builder_writes_extra_info_or_touches_pytest_benchmark_privates():
    private = pytest_benchmark_private_names()
    assert {"_make_stats", "_mode", "_benchmarksession", "_min_rounds", "_max_time", "_save_cprofile"} <= private
    paths = [ROOT / "conftest.py", *(p for top in ("suites", "bench") for p in (ROOT / top).rglob("*.py"))]
    found = {str(p.relative_to(ROOT)): hits for p in paths if p != ENTRY_BUILDER
             and (hits := entry_writes(parsed(p), private))}
    assert found == {}, f"write extra_info or use pytest-benchmark's private names outside {ENTRY_BUILDER}"
    assert entry_writes(parsed(ENTRY_BUILDER), private)  # the rule sees what the builder does


@pytest.mark.parametrize("code", [
    "result.extra_info['status'] = 'ok'", "benchmark.extra_info.update(info)", "result.extra_info |= info",
    "extra_info['torch_threads'] = 2", "replace(result, extra_info={})", "benchmark._make_stats(1)",
    "getattr(config, '_benchmarksession', None)", "from pytest_benchmark.stats import Metadata",
    "entry = {'name': n, 'extra_info': info}", "del fixture.extra_info['x']"])
def test_the_entry_rule_sees_each_kind_of_write(code):
    assert entry_writes(ast.parse(code), pytest_benchmark_private_names())
