"""What consecutive cases share (suites/core/reuse.py): the same bits as drawing and computing afresh, and nothing
held beside a case of another group."""

import pytest
import torch

from suites.core import reuse
from suites.core.profiles import SMOKE
from suites.core.runner import execute
from suites.ops import attention, conv, matmul
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)

# beside the other worker's torch: 22 s on two threads, 16 s on one; 2 s with the heap frozen (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")

CPU = torch.device("cpu")


def fresh(shapes, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=gen) for shape in shapes]


def test_kept_draws_are_the_draws_of_a_fresh_generator_in_order():
    reuse.forget_draws()
    four = reuse.standard_normals([(2, 3)] * 3 + [(4,)], seed=0)
    three = reuse.standard_normals([(2, 3)] * 3, seed=0)  # a prefix: the kept tensors
    assert all(a is b for a, b in zip(three, four[:3], strict=True))
    five = reuse.standard_normals([(2, 3)] * 3 + [(4,), (5,)], seed=0)  # one more, drawn after the kept ones
    for got, want in zip(five, fresh([(2, 3)] * 3 + [(4,), (5,)], 0), strict=True):
        assert torch.equal(got, want)
    other = reuse.standard_normals([(4,)], seed=1)
    assert torch.equal(other[0], fresh([(4,)], 1)[0])


def error_rels(cases, isolated: bool) -> dict[str, float]:
    found = {}
    for case in cases:
        if isolated:
            reuse.SHELF.clear()
            reuse.forget_draws()
        result = execute(case, CPU, SMOKE)
        if result.status == "ok":
            found[case.id] = result.figures["error_rel"]
    return found


def test_a_shared_reference_gives_each_implementation_the_error_a_fresh_one_gives():
    cases = attention.cases("quick")[-8:] + conv.cases("quick")[:8]  # every_path's group; a layer's formats
    assert len({c.reuse_group for c in cases}) < len(cases)
    shared, alone = error_rels(cases, isolated=False), error_rels(cases, isolated=True)
    assert shared == alone and len(shared) >= 8


def test_a_case_of_another_group_never_runs_beside_a_kept_reference():
    group = attention.cases("quick")[-1]
    execute(group, CPU, SMOKE)
    assert reuse.SHELF.value is not None
    execute(matmul.cases("quick")[0], CPU, SMOKE)  # of no group
    assert reuse.SHELF.value is None and reuse.SHELF.group is None


def test_a_run_gives_back_what_it_kept_when_it_ends(tmp_path):
    """The plugin is a guest in a process that may go on (a user's own session): at the run's end the last inputs
    drawn and the last group's float64 reference (device memory on a GPU) are dropped, not kept to the process's
    end."""
    from tests.runs import run_bench_in_process

    proc = run_bench_in_process("bench/test_conv.py", "--bench-profile", "quick", "-k", "resnet50 and float32",
                                json_path=tmp_path / "conv.json")
    assert proc.returncode == 0, proc.tail(2000)
    assert any(b["extra_info"].get("error_rel") is not None for b in proc.json["benchmarks"])  # it drew and checked
    assert reuse._DRAWS.tensors == [] and reuse.SHELF.value is None
