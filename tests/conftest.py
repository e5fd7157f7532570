"""Runs that several test modules read: one process each, however many tests check it."""

from pathlib import Path

import pytest
from matplotlib.figure import Figure

from tests.runs import run_bench


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory) -> dict:
    """A quick run of the matmul `square` cases on this CPU in every dtype, tf32 among them (unsupported here)."""
    out = tmp_path_factory.mktemp("run") / "quick.json"
    proc = run_bench("bench/test_matmul.py", "--bench-profile", "quick", "--bench-dtypes",
                     "float32,bfloat16,float16,tf32", "-k", "square", json_path=out)
    assert proc.returncode == 0, proc.tail()
    return {"path": out, "json": proc.json, "stdout": proc.stdout}


@pytest.fixture(scope="module")
def advise_rows() -> list:
    """The advisor's rows of a real conv sweep on this CPU (tests/data/advise_conv_cpu_quick), with parity."""
    from suites.training import advise  # the plugin's tests need no torch at collection

    sweep = Path(__file__).parent / "data" / "advise_conv_cpu_quick"
    found = advise.read_rows(sweep / "sweep.json") + advise.read_rows(sweep / "combination.json")
    advise.add_parity(found)
    return found


@pytest.fixture
def drawn(monkeypatch) -> list:
    """Every matplotlib figure a report saves, recorded as it is saved (after the real savefig has drawn it)."""
    figures = []
    save = Figure.savefig

    def recording(self, *args, **kwargs):
        save(self, *args, **kwargs)
        figures.append(self)

    monkeypatch.setattr(Figure, "savefig", recording)
    return figures
