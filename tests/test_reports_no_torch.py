"""reports/ never imports torch: every module of the package, and the commands run end to end, in a fresh
interpreter in which importing torch is made impossible (as on a laptop without torch); and the base install
(`pip install .`, no extra) holds everything reports/ imports, while torch and the benchmarking side are the
`bench` extra."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import textwrap

import pytest

from tests.resultfiles import RUN_A, RUN_B
from tests.runs import ROOT, run_python

SCRIPT = textwrap.dedent("""
    import importlib, pkgutil, sys

    class NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("torch is blocked: reports/ must not need it")

    sys.meta_path.insert(0, NoTorch())
    import reports
    modules = [m.name for m in pkgutil.walk_packages(reports.__path__, "reports.")]
    for name in modules:
        importlib.import_module(name)
    from reports.__main__ import main
    a, b, out = sys.argv[1:4]
    codes = [main(["compare", a, b]), main(["table", a]), main(["hardware", a, b]), main(["html", a, "-o", out]),
             main(["history", a, b])]
    assert "torch" not in sys.modules, "torch was imported"
    print("modules:", len(modules), "codes:", codes)
""")


def test_reports_never_imports_torch(tmp_path):
    result = run_python("-c", SCRIPT, str(RUN_A), str(RUN_B), str(tmp_path / "html"), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "codes: [0, 0, 0, 0, 0]" in result.stdout
    modules = int(result.stdout.split("modules:")[1].split()[0])
    assert modules >= 10  # every module of the package was imported, not an empty walk


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized as PEP 503 does (`pytest_benchmark` is `pytest-benchmark`)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement).group()).lower()


def test_the_base_install_holds_what_reports_imports_and_no_torch():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_name(r) for r in project["dependencies"]}
    modules = set()
    for path in (ROOT / "reports").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
    third_party = modules - set(sys.stdlib_module_names) - {"reports"}
    providers = importlib.metadata.packages_distributions()
    needed = {_name(dist) for module in third_party for dist in providers[module]}
    assert needed and needed <= base, f"reports/ imports {sorted(needed - base)}, which `pip install .` lacks"
    bench = {_name(r) for r in project["optional-dependencies"]["bench"]}
    assert {"torch", "pytest", "pytest-benchmark", "nvidia-ml-py"} <= bench and not bench & base
