"""Runs that several test modules read: one process each, however many tests check it."""

import pytest

from tests.runs import run_bench


@pytest.fixture(scope="session")
def quick_run(tmp_path_factory) -> dict:
    """A quick run of the matmul `square` cases on this CPU in every dtype, tf32 among them (unsupported here)."""
    out = tmp_path_factory.mktemp("run") / "quick.json"
    proc = run_bench("bench/test_matmul.py", "--bench-profile", "quick", "--bench-dtypes",
                     "float32,bfloat16,float16,tf32", "-k", "square", json_path=out)
    assert proc.returncode == 0, proc.tail()
    return {"path": out, "json": proc.json, "stdout": proc.stdout}
