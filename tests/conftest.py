"""Runs that several test modules read (one process each, however many tests and workers check it), the `torch_api`
mark, and what lets the tests run under `pytest -n 2` as well as serially.

`torch_api` marks every test of a module that imports torch: it calls torch's API in this process (or drives it in
the ranks and runs it starts), so its result can change with the torch installed. CI runs the whole suite under
the primary torch and these tests again, but for the `slow` ones (a whole benchmark in a child), under every
other torch the project supports (.ci/run). The mark comes from the module's imports, not from a hand-kept list,
so a new test that imports torch is caught by it; the reports' tests (which never import torch), the results
writer's and the GPU check's plan run once.

Under pytest-xdist (`-n 2`: CI runs the tests that way, .ci/run) a worker's variables are taken out of the
environment for the pytest runs the tests start, and reports are 120 columns wide whatever the terminal.

What this file imports at its top is light: a pytest run of a file under tests/ loads it too (each torchrun rank of
tests/data/distributed), and matplotlib, pandas and scipy.stats (the pictures' fixtures, the runs' helpers) cost
such a process a second of its start; the fixtures import them when they are used.
"""

import ast
import fcntl
import gc
import json
import os
from functools import cache
from pathlib import Path

import pytest


@cache
def imports_torch(path: Path) -> bool:
    """Whether the module imports torch anywhere (at its top or inside a test)."""
    for node in ast.walk(ast.parse(path.read_text())):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                 [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if any(name == "torch" or name.startswith("torch.") for name in names):
            return True
    return False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if imports_torch(Path(item.fspath)):
            item.add_marker(pytest.mark.torch_api)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish() -> None:
    """Once the tests are collected, what is alive (torch, pandas, matplotlib, every test module and item) is frozen
    out of the collector's sight, as a benchmark run freezes its own (suites/core/memory.py): each collection
    after walks what the tests made since. Unfrozen, the collections of a worker's session walked its whole heap
    (pytest's after every run a test starts in this process, the runs' own after each case, the automatic ones):
    53 and 94 s of the two workers' 5 minutes under `-n 2`. The runs the tests start here leave the freeze as they
    find it, so their cases' collections walk what the module made since (frozen again after each module)."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    """After a module's last test (its module fixtures gone), what survived it is frozen too: the modules its runs
    imported (torch._dynamo, the profiler, Inductor: 100 000 objects and more), its caches; the garbage it left is
    collected first."""
    yield
    if nextitem is None or nextitem.module is not item.module:
        gc.collect()
        gc.freeze()


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """In a pytest-xdist worker, once pytest-benchmark has read them, its worker variables leave the environment: a
    pytest that a test runs (in a child or in this process, its own or `advise`'s) would take itself for a worker
    and disable its benchmarks."""
    for name in [name for name in os.environ if name.startswith("PYTEST_XDIST_")]:
        del os.environ[name]


@pytest.fixture(autouse=True)
def columns(monkeypatch) -> None:
    """Reports are as wide as the terminal (reports/text.py): 120 columns, as in a CI log, whatever the terminal
    the tests run in or pytest-xdist's workers see."""
    monkeypatch.setenv("COLUMNS", "120")


def session_folder(config: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of this test session's that all its pytest-xdist workers share (each worker's own temporary folder
    is one of its children), or the session's own when it runs alone."""
    own = tmp_path_factory.getbasetemp()
    return own.parent if hasattr(config, "workerinput") else own


@pytest.fixture(scope="session")
def quick_run(request, tmp_path_factory) -> dict:
    """A quick run of the matmul `square` cases on this CPU in every dtype, tf32 among them (unsupported here),
    with every warning an error: a clean CPU run warns of nothing (a host with `filterwarnings = error` runs it).
    Run once per test session: the first worker to need it runs it under a lock, the other reads its files."""
    folder = session_folder(request.config, tmp_path_factory) / "quick_run"
    folder.mkdir(exist_ok=True)
    out, stdout = folder / "quick.json", folder / "stdout.txt"
    from tests.runs import run_bench  # here, not at the top: see the module's docstring

    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not stdout.exists():  # written last, once the run passed
            proc = run_bench("bench/test_matmul.py", "--bench-profile", "quick", "--bench-dtypes",
                             "float32,bfloat16,float16,tf32", "-k", "square", "-W", "error", json_path=out)
            assert proc.returncode == 0, proc.tail()
            stdout.write_text(proc.stdout)
    return {"path": out, "json": json.loads(out.read_text()), "stdout": stdout.read_text()}


@pytest.fixture(scope="module")
def advise_rows() -> list:
    """The advisor's rows of a real conv sweep on this CPU (tests/data/advise_conv_cpu_quick), with parity."""
    from suites.training import advise_rules  # the plugin's tests need no torch at collection

    sweep = Path(__file__).parent / "data" / "advise_conv_cpu_quick"
    found = advise_rules.read_rows(sweep / "sweep.json") + advise_rules.read_rows(sweep / "combination.json")
    advise_rules.add_parity(found)
    return found


# The dots per inch a test draws its pictures at: the tests read what a figure shows (its artists, labels,
# colours, the PNGs a page embeds), which the resolution does not change. It saves only the rasterizing: 3 to 4 %
# of the picture modules' CPU time, as their layout and text cost the same at any resolution.
TEST_DPI = 20


def draw_small(patch: pytest.MonkeyPatch) -> None:
    """While `patch` holds, every matplotlib figure a report saves is drawn at TEST_DPI, whatever dpi the report
    asks for, the history page's small multiples too (their canvas, reports/plots/levels.py, encodes its own PNGs)
    (`small_pictures`; a module's fixture uses it under its own pytest.MonkeyPatch.context())."""
    from matplotlib.figure import Figure  # here, not at the top: see the module's docstring

    from reports.plots import levels

    save, canvas = Figure.savefig, levels.Canvas.__init__

    def small(self, *args, **kwargs):
        save(self, *args, **kwargs | {"dpi": TEST_DPI})

    def small_canvas(self, size: tuple[float, float] = levels.PANEL_SIZE, dpi: int = TEST_DPI) -> None:
        canvas(self, size, TEST_DPI)

    patch.setattr(Figure, "savefig", small)
    patch.setattr(levels.Canvas, "__init__", small_canvas)


@pytest.fixture
def small_pictures(monkeypatch) -> None:
    """Every matplotlib figure a report saves is drawn at TEST_DPI, whatever dpi the report asks for."""
    draw_small(monkeypatch)


def draw_without_layout(patch: pytest.MonkeyPatch) -> None:
    """While `patch` holds, every matplotlib figure a report saves is drawn without its layout engine (`no_layout`)."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine  # here, not at the top: see the module's docstring

    patch.setattr(ConstrainedLayoutEngine, "execute", lambda self, figure: None)


@pytest.fixture
def no_layout(monkeypatch) -> None:
    """Every matplotlib figure a report saves is drawn without its layout engine (constrained layout, a tenth of a
    page's time), for tests that check what a command makes of its input (its exit code, its lines, its files, the
    data behind a picture), never where an artist lies or what a tick reads (the ticks an axis gets depend on its
    size). The engine only moves the axes to fit the texts it measures, and every text it measures is laid out
    again when the figure is drawn (the same text, mathtext and font code): an input whose text breaks the layout
    breaks the drawing. Its one other outcome, a Python warning that it could not fit the axes, is no line of the
    command's output."""
    draw_without_layout(monkeypatch)


@pytest.fixture
def drawn(small_pictures, monkeypatch) -> list:
    """Every matplotlib figure a report saves, recorded as it is saved (after the real savefig has drawn it, small)."""
    from matplotlib.figure import Figure  # here, not at the top: see the module's docstring

    figures = []
    save = Figure.savefig

    def recording(self, *args, **kwargs):
        save(self, *args, **kwargs)
        figures.append(self)

    monkeypatch.setattr(Figure, "savefig", recording)
    return figures
