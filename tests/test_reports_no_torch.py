"""reports/ never imports torch: every module of the package, and the commands run end to end, in a fresh
interpreter in which importing torch is made impossible (as on a laptop without torch)."""

from __future__ import annotations

import textwrap

from tests.resultfiles import RUN_A, RUN_B
from tests.runs import run_python

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
