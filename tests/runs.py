"""The tests' runs of the suite's commands: pytest on bench/, `python -m reports ...`, `python -m suites...`, torchrun.

One place for what every run needs: the repository as working directory and on PYTHONPATH (a bench file in another
folder still finds `suites` and `tests`), captured text, a timeout (a hung child fails its test instead of hanging
the suite), and a result that reads its JSON results file and gives the tail of its output for a failed assert.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = ["-m", "pytest", "-p", "no:cacheprovider", "-q"]
TIMEOUT_S = 600


@dataclass
class Run:
    """A finished run: its command, exit code and output, and the results file it was asked to write."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    json_path: Path | None = None

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    @cached_property
    def json(self) -> dict:
        assert self.json_path is not None, "the run was not asked for a results file"
        return json.loads(self.json_path.read_text())

    def tail(self, chars: int = 3000) -> str:
        """The ends of stdout and stderr: the message of an assert on the exit code."""
        return self.stdout[-chars:] + self.stderr[-chars:]


def environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    return os.environ | {"PYTHONPATH": str(ROOT)} | (extra or {})


def run_python(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = TIMEOUT_S,
               json_path: Path | None = None) -> Run:
    """`python ARGS` in a fresh interpreter, as a user runs it; env adds to this process's environment."""
    command = [sys.executable, *args]
    proc = subprocess.run(command, cwd=cwd, env=environment(env), capture_output=True, text=True, timeout=timeout)
    return Run(command, proc.returncode, proc.stdout, proc.stderr, json_path)


def start_python(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None,
                 discard_output: bool = False) -> subprocess.Popen:
    """`python ARGS` started and left running, for a test that reads its output as it comes (stderr joined to
    stdout) or signals it."""
    stdout = subprocess.DEVNULL if discard_output else subprocess.PIPE
    return subprocess.Popen([sys.executable, *args], cwd=cwd, env=environment(env), stdout=stdout,
                            stderr=subprocess.STDOUT, text=True)


def bench_args(path: str, *args: str, json_path: Path | None = None) -> list[str]:
    """pytest's arguments for a benchmark run of a bench file on this CPU, writing json_path when given."""
    out = [f"--benchmark-json={json_path}"] if json_path is not None else []
    return [*PYTEST, path, "--benchmark-only", "--device", "cpu", *args, *out]


def run_pytest(*args: str, **kwargs) -> Run:
    """`python -m pytest -q ARGS` without the cache plugin (a test run leaves no .pytest_cache in the checkout)."""
    return run_python(*PYTEST, *args, **kwargs)


def run_bench(path: str, *args: str, json_path: Path | None = None, **kwargs) -> Run:
    """A benchmark run of one bench file on this CPU (`--benchmark-only --device cpu`)."""
    return run_python(*bench_args(path, *args, json_path=json_path), json_path=json_path, **kwargs)


def run_reports(*args: str, **kwargs) -> Run:
    """`python -m reports ARGS`."""
    return run_python("-m", "reports", *args, **kwargs)


def run_torchrun(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
                 json_path: Path | None = None) -> Run:
    """pytest under `torchrun --standalone --nproc-per-node 2` on this CPU (gloo), writing json_path when given."""
    out = [f"--benchmark-json={json_path}"] if json_path is not None else []
    return run_python("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *PYTEST,
                      "--device", "cpu", *args, *out, env=env, timeout=timeout, json_path=json_path)
