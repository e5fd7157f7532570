"""The tests' runs of the suite's commands: pytest on bench/, `python -m reports ...`, `python -m suites...`, torchrun.

One place for what every run needs: the repository as working directory and on PYTHONPATH (a bench file in another
folder still finds `suites` and `tests`), captured text, a timeout (a hung child fails its test instead of hanging
the suite), and a result that reads its JSON results file and gives the tail of its output for a failed assert.

A run gets a fresh interpreter (`run_*`) where a fresh one is what it checks: it is signalled or killed, runs under
torchrun, sets an environment variable read at import, runs a guest repository that sees only what is installed,
turns the first import's warnings into errors, or compares its answer with another process's (the progress lines
written to the terminal's own file descriptor are read in this interpreter through capfd: tests/test_progress.py).
Any other run runs in this interpreter (`*_in_process`): one that ends before the first case (a usage error, a
`-k` selection, a command's one-line error), and a measuring run that none of these concern (`run_bench_in_process`,
`run_guest_in_process` for a user's repository): the same exit code, output and results file, without the 1.5-3 s a
fresh interpreter spends importing torch.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest

from reports.__main__ import main as reports_main

ROOT = Path(__file__).resolve().parents[1]
PYTEST_OPTIONS = ["-p", "no:cacheprovider", "-q"]  # a test run leaves no .pytest_cache in the checkout
TIMEOUT_S = 600


@dataclass
class ProcessRun:
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


def environment(extra: dict[str, str] | None = None, inherit: bool = True) -> dict[str, str]:
    """This process's environment with the repository on PYTHONPATH, and extra; only extra when not inherit (a run
    that must see nothing of this repository but what is installed)."""
    base = os.environ | {"PYTHONPATH": str(ROOT)} if inherit else {}
    return base | (extra or {})


def run_command(command: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None, inherit_env: bool = True,
                timeout: float = TIMEOUT_S, json_path: Path | None = None) -> ProcessRun:
    """Any program run to its end; env adds to this process's environment (or is the whole of it, see environment)."""
    proc = subprocess.run(command, cwd=cwd, env=environment(env, inherit_env), capture_output=True, text=True,
                          timeout=timeout)
    return ProcessRun(command, proc.returncode, proc.stdout, proc.stderr, json_path)


def run_python(*args: str, **kwargs) -> ProcessRun:
    """`python ARGS` in a fresh interpreter, as a user runs it."""
    return run_command([sys.executable, *args], **kwargs)


OUTPUTS = {"joined": (subprocess.PIPE, subprocess.STDOUT), "stdout": (subprocess.PIPE, None),
           "discard": (subprocess.DEVNULL, subprocess.DEVNULL)}


def start(command: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None, output: str = "joined",
          **popen_kwargs) -> subprocess.Popen:
    """Any program started and left running, for a test that reads its output as it comes or signals it. output:
    `joined` (stderr into the stdout pipe), `stdout` (stderr left to this process's) or `discard`."""
    stdout, stderr = OUTPUTS[output]
    return subprocess.Popen(command, cwd=cwd, env=environment(env), stdout=stdout, stderr=stderr, text=True,
                            **popen_kwargs)


def start_python(*args: str, **kwargs) -> subprocess.Popen:
    return start([sys.executable, *args], **kwargs)


def start_pytest(*args: str, **kwargs) -> subprocess.Popen:
    return start_python("-m", "pytest", *PYTEST_OPTIONS, *args, **kwargs)


def bench_args(path: str, *args: str, json_path: Path | None = None) -> list[str]:
    """pytest's arguments for a benchmark run of a bench file on this CPU, writing json_path when given."""
    out = [f"--benchmark-json={json_path}"] if json_path is not None else []
    return [path, "--benchmark-only", "--bench-device", "cpu", *args, *out]


def run_pytest(*args: str, **kwargs) -> ProcessRun:
    """`python -m pytest -q ARGS`."""
    return run_python("-m", "pytest", *PYTEST_OPTIONS, *args, **kwargs)


def run_bench(path: str, *args: str, json_path: Path | None = None, **kwargs) -> ProcessRun:
    """A benchmark run of one bench file on this CPU (`--benchmark-only --bench-device cpu`)."""
    return run_pytest(*bench_args(path, *args, json_path=json_path), json_path=json_path, **kwargs)


def run_reports(*args: str, **kwargs) -> ProcessRun:
    """`python -m reports ARGS`."""
    return run_python("-m", "reports", *args, **kwargs)


def run_torchrun(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
                 json_path: Path | None = None) -> ProcessRun:
    """pytest under `torchrun --standalone --nproc-per-node 2` on this CPU (gloo), writing json_path when given."""
    out = [f"--benchmark-json={json_path}"] if json_path is not None else []
    return run_python("-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "pytest",
                      *PYTEST_OPTIONS, "--bench-device", "cpu", *args, *out, env=env, timeout=timeout,
                      json_path=json_path)


def exit_status(exc: SystemExit) -> int:
    """The exit status the interpreter gives an uncaught SystemExit; a message is printed on stderr, as it prints it."""
    if exc.code is None or isinstance(exc.code, int):
        return exc.code or 0
    print(exc.code, file=sys.stderr)
    return 1


def call_in_process(main: Callable[[list[str]], int], *args: str, cwd: Path = ROOT) -> ProcessRun:
    """A command's `main(argv)` called here with its stdout and stderr captured, in cwd. A SystemExit ends it as it
    would end the interpreter: its code, or its message on stderr and exit code 1."""
    out, err = io.StringIO(), io.StringIO()
    saved_cwd, saved_path = os.getcwd(), sys.path[:]
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = int(main(list(args)))
            except SystemExit as exc:
                code = exit_status(exc)
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path  # pytest puts the bench files' root first
    return ProcessRun([f"{main.__module__}.{main.__name__}", *args], code, out.getvalue(), err.getvalue())


def run_pytest_in_process(*args: str, cwd: Path = ROOT, json_path: Path | None = None) -> ProcessRun:
    """`python -m pytest -q ARGS` by pytest.main in this interpreter. Test files outside the repository (a user's,
    written into a test's folder) are forgotten again: the next run's `test_mine.py` of another folder is its own."""
    before = set(sys.modules)
    try:
        proc = call_in_process(pytest.main, *PYTEST_OPTIONS, *args, cwd=cwd)
        proc.json_path = json_path
        return proc
    finally:
        for name in set(sys.modules) - before if cwd != ROOT else ():
            if _inside(getattr(sys.modules[name], "__file__", None), cwd):
                del sys.modules[name]


def _inside(file: str | None, folder: Path) -> bool:
    return file is not None and Path(file).resolve().is_relative_to(folder.resolve())


def run_bench_in_process(path: str, *args: str, json_path: Path | None = None, cwd: Path = ROOT) -> ProcessRun:
    """run_bench's run by pytest.main in this interpreter."""
    return run_pytest_in_process(*bench_args(path, *args, json_path=json_path), cwd=cwd, json_path=json_path)


def guest_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of pytest in a user's repository: this process's without its PYTEST_ variables (no addopts,
    no forced plugins), this checkout first on PYTHONPATH (the installed entry point names the plugin's module; an
    editable install elsewhere must not answer for it), and extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env | (extra or {})


def run_guest(repo: Path, *args: str, env: dict[str, str] | None = None) -> ProcessRun:
    """pytest in a user's repository (a small one a test writes into its folder) in a fresh interpreter, with the
    skip reasons (-rs): what a user of another repository gets, none of this repository's conftest.py loaded."""
    return run_python("-m", "pytest", "-p", "no:cacheprovider", "-rs", *args, cwd=repo, env=guest_environment(env),
                      inherit_env=False)


def run_guest_in_process(repo: Path, *args: str, env: dict[str, str] | None = None) -> ProcessRun:
    """run_guest's run in this interpreter (pytest.main in the repository, whose conftest.py is the only one it
    loads), with env set for its length: for a guest whose check needs none of a fresh interpreter's (see the
    module docstring; torch's threads are this process's, and it has imported torch)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in [name for name in os.environ if name.startswith("PYTEST_")]:
            patch.delenv(name)
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        return run_pytest_in_process("-rs", *args, cwd=repo)


def run_reports_in_process(*args: str, cwd: Path = ROOT) -> ProcessRun:
    """`python -m reports ARGS` by its main() in this interpreter (tests/test_trace.py runs the command itself)."""
    return call_in_process(reports_main, *args, cwd=cwd)
