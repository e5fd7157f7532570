"""What a benchmark run gives its cases, given to a test module that runs cases itself: one intra-op thread, and
the long-lived objects frozen out of the collector's sight.

`one_thread`: these tests step tiny models whose operations last microseconds; with two intra-op threads every
operation ends in a thread barrier, and on a shared machine (other processes on the same cores) those barriers
wait for a descheduled thread: a try of the tiny GPT took 1.5 s on two threads and 0.05 s on one. What the tests
check (peaks, search answers, dtypes, losses) does not depend on the thread count; both sides of every comparison
run with the same setting.

`frozen_heap`: every case, try and searched shape ends in `memory.release`, a full collection. A run freezes what
is alive at its start (suites/core/memory.py's `freeze_long_lived`: torch, pytest, the collected cases), so that
each collection walks only what the cases made; a test that calls `execute`, `try_batch` or a search outside a run
walked the whole of this process instead (torch, pytest, every test module: 0.3 s a case on this 2-core host).
The module's tests run as a run's cases do; what a collection frees is the same. A run started inside the module
(`run_bench_in_process`) thaws at its end, as it does in a user's process: the next test freezes again.
"""

import pytest
import torch

from suites.core import memory


@pytest.fixture(scope="module")
def one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


@pytest.fixture
def frozen_heap(request):
    if not memory.FROZEN.modules:  # the module's first test, or a run inside the module thawed at its end
        memory.freeze_long_lived()
        request.node.getparent(pytest.Module).addfinalizer(memory.thaw)  # thawed after the module's last test
