"""What a benchmark run gives its cases, given to a test module that runs cases itself: one intra-op thread.

`one_thread`: these tests step tiny models whose operations last microseconds; with two intra-op threads every
operation ends in a thread barrier, and on a shared machine (other processes on the same cores) those barriers
wait for a descheduled thread: a try of the tiny GPT took 1.5 s on two threads and 0.05 s on one. What the tests
check (peaks, search answers, dtypes, losses) does not depend on the thread count; both sides of every comparison
run with the same setting.
"""

import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
