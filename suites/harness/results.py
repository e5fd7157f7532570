"""The run's results on disk: checked before the first case, journaled per case, written whole at the end.

pytest-benchmark writes its JSON once, after the last test, and only when something was timed: a run that dies
at minute 50 of 60 (a CI timeout's SIGTERM, Ctrl-C, a full disk at the end) keeps nothing, and a run whose
cases were all unsupported writes no file at all. This writer takes the file outputs over from it:

- before the first case, each output location (`--benchmark-json`, `--benchmark-save`/`--benchmark-autosave`
  into a file storage) is checked by creating the run's journal beside it: a missing or unwritable folder is a
  usage error in the first second, not a traceback after an hour;
- each finished case (measured, or not measured with its reason) is appended to the journal and fsync'ed the
  moment its test ends; a run killed outright (SIGKILL, the OOM killer) leaves the journal, which
  `python -m reports` reads as a results file marked incomplete;
- SIGTERM, SIGHUP and SIGINT stop the run like Ctrl-C does, and the final file still gets written;
- the final file is written to a temporary name, fsync'ed and renamed over the target, so no reader ever sees
  half a file; it holds the finished cases only, and a run that did not finish every selected case carries
  `incomplete: true` and `incomplete_reason` at its top level. Then the journal is removed.

Journal format (JSON Lines): a header `{"journal": 1, "machine_info": ..., "commit_info": ..., "datetime": ...,
"version": ...}`, then one line per case, `{"benchmarks": ENTRY}` or `{"not_measured": ENTRY}`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pytest_benchmark import __version__ as PYTEST_BENCHMARK_VERSION
from pytest_benchmark.utils import get_tag, safe_dumps

JOURNAL_SUFFIX = ".journal"
JOURNAL_VERSION = 1
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT") if hasattr(signal, name))


def write_atomically(path: Path, text: str) -> None:
    """Write text to path so that a reader sees the old file or the whole new one, never a part.

    The stop signals are blocked meanwhile: a second Ctrl-C must not leave the temporary file instead of results.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with blocked_signals():
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        _fsync_dir(path.parent)


@contextlib.contextmanager
def blocked_signals() -> Iterator[None]:
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _fsync_dir(folder: Path) -> None:
    """Make a rename durable (POSIX); a filesystem that cannot open directories is left as it is."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def dumps(data: dict) -> str:
    """JSON as pytest-benchmark writes it (its encoder turns what json cannot encode into its repr)."""
    return safe_dumps(data, ensure_ascii=True, indent=4)


class Journal:
    """An append-only file of one JSON line per finished case, each line on disk before the next case starts."""

    def __init__(self, path: Path, header: dict) -> None:
        self.path = path
        self._fh = open(path, "x", encoding="utf-8")  # noqa: SIM115 (open for the whole run, closed in close())
        self._append({"journal": JOURNAL_VERSION, **header})

    def add(self, kind: str, entry: dict) -> None:
        self._append({kind: entry})

    def _append(self, line: dict) -> None:
        self._fh.write(json.dumps(line, default=repr) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self, remove: bool) -> None:
        self._fh.close()
        if remove:
            self.path.unlink(missing_ok=True)


def output_targets(config: pytest.Config, json_path: Path | None, save_name: str | None) -> list[Path]:
    """The files this run will write, each checked: its folder exists and is a folder, the file is not one."""
    targets = []
    if json_path is not None:
        targets.append(json_path)
    if save_name is not None:
        storage = config._benchmarksession.storage
        if storage.path.exists() and not storage.path.is_dir():
            raise pytest.UsageError(f"--benchmark-storage {storage.path}: is a file, not a folder")
        try:
            storage.path.mkdir(parents=True, exist_ok=True)
            folder = storage.get("")  # the machine's folder, created like pytest-benchmark creates it
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--benchmark-storage {storage.path}: {exc.strerror or exc}") from None
        targets.append(folder / f"{next_number(folder):04d}_{save_name}.json")
    for target in targets:
        if target.is_dir():
            raise pytest.UsageError(f"{target}: is a folder; the results file needs a file name")
        if not target.parent.is_dir():
            raise pytest.UsageError(f"{target}: folder {target.parent} does not exist")
    return targets


def next_number(folder: Path) -> int:
    """pytest-benchmark's run counter: one more than the highest NNNN_*.json in the machine's folder."""
    numbers = [int(p.name[:4]) for p in folder.glob("[0-9][0-9][0-9][0-9]_*.json")]
    return max(numbers, default=0) + 1


class ResultsWriter:
    """A pytest plugin object: it owns the run's file outputs from the end of collection (`start`) to session
    finish."""

    def __init__(self, config: pytest.Config, json_path: Path | None, save_name: str | None,
                 not_measured: list[dict]) -> None:
        self.config = config
        self.json_path = json_path
        self.save_name = save_name
        self.not_measured = not_measured  # the session's list, appended to as cases end
        self.targets: list[Path] = []
        self.journal: Journal | None = None
        self.machine_info: dict = {}
        self.commit_info: dict = {}
        self.finished: set[str] = set()
        self.selected = 0
        self.stopped_by: str | None = None
        self._journaled_not_measured = 0
        self._old_handlers: dict[int, object] = {}

    def start(self, selected: int) -> None:
        """Check the outputs and open the journal, before the first of the `selected` cases runs."""
        self.selected = selected
        self.targets = output_targets(self.config, self.json_path, self.save_name)
        if not self.targets:
            return
        for target in self.targets:
            _check_writable(target.parent)
        self.machine_info = self.config.hook.pytest_benchmark_generate_machine_info(config=self.config)
        self.commit_info = self.config.hook.pytest_benchmark_generate_commit_info(config=self.config)
        self.config.hook.pytest_benchmark_update_commit_info(config=self.config, commit_info=self.commit_info)
        journal_path = self.targets[0].with_name(self.targets[0].name + JOURNAL_SUFFIX)
        header = {"machine_info": self.machine_info, "commit_info": self.commit_info,
                  "datetime": datetime.now(timezone.utc).isoformat(), "version": PYTEST_BENCHMARK_VERSION}
        try:
            self.journal = Journal(journal_path, header)
        except FileExistsError:
            raise pytest.UsageError(f"{journal_path}: a journal of another run is there (running, or killed: "
                                    "read it with `python -m reports table`, then remove it)") from None
        except OSError as exc:
            raise pytest.UsageError(f"{self.targets[0]}: cannot write there ({exc.strerror or exc})") from None
        self._install_signal_handlers()

    # pytest hooks

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        ended = call.when == "call" or (call.when == "setup" and report.skipped)  # a skip is a finished case
        if ended and self.journal is not None and is_case(item):
            self._journal_case(item)
        return report

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.targets:
            return
        written = True
        with blocked_signals():  # a second Ctrl-C or SIGTERM waits until the file is whole
            output = self._output(session, exitstatus)
            text = dumps(output)
            for target in self.targets:
                if target != self.json_path and not (output["benchmarks"] or output["not_measured"]):
                    continue  # no empty run in the storage; an explicit --benchmark-json is always written
                try:
                    write_atomically(target, text)
                except OSError as exc:
                    written = False
                    print(f"\nerror: cannot write {target} ({exc.strerror or exc}); the finished cases are in "
                          f"{self.journal.path}, which `python -m reports` reads")
                    session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
                    continue
                saved = "Wrote" if target == self.json_path else "Saved"  # pytest-benchmark's own words
                print(f"\n{saved} benchmark data in: {target}" + (f" (incomplete: {output['incomplete_reason']})"
                                                                 if output.get("incomplete") else ""))
            self.journal.close(remove=written)
            self._restore_signal_handlers()

    # the parts

    def _journal_case(self, item: pytest.Item) -> None:
        """The case's entry on disk and the case counted as finished, both or neither (signals wait meanwhile)."""
        with blocked_signals():
            self.finished.add(item.nodeid)
            fixture = item.funcargs.get("benchmark")
            stats = getattr(fixture, "stats", None)
            if stats is not None and not fixture.has_error:
                self.journal.add("benchmarks", stats.as_dict(include_data=True))
            for entry in self.not_measured[self._journaled_not_measured:]:
                self.journal.add("not_measured", entry)
            self._journaled_not_measured = len(self.not_measured)

    def _output(self, session: pytest.Session, exitstatus: int) -> dict:
        """pytest-benchmark's JSON of the finished cases, with our hooks' fields and the incomplete mark."""
        bs = self.config._benchmarksession
        done = [b for b in bs.benchmarks if b.fullname in self.finished]
        machine_info = dict(self.machine_info)
        self.config.hook.pytest_benchmark_update_machine_info(config=self.config, machine_info=machine_info)
        output = self.config.hook.pytest_benchmark_generate_json(
            config=self.config, benchmarks=done, include_data=True, machine_info=machine_info,
            commit_info=self.commit_info)
        self.config.hook.pytest_benchmark_update_json(config=self.config, benchmarks=done, output_json=output)
        output["not_measured"] = [e for e in output.get("not_measured", []) if e.get("fullname") in self.finished]
        reason = self._incomplete_reason(session, exitstatus)
        if reason:
            output["incomplete"] = True
            output["incomplete_reason"] = reason
        return output

    def _incomplete_reason(self, session: pytest.Session, exitstatus: int) -> str | None:
        """Why the run did not finish every selected case, or None when it did."""
        if len(self.finished) >= self.selected and self.stopped_by is None:
            return None
        if self.stopped_by:
            why = f"stopped by {self.stopped_by}"
        elif exitstatus == pytest.ExitCode.INTERRUPTED:
            why = "interrupted"
        elif session.shouldstop or session.shouldfail:
            why = f"stopped early ({session.shouldstop or session.shouldfail})"
        else:
            why = "not every selected case ran"
        return f"{why}; {len(self.finished)} of {self.selected} selected cases finished"

    def _install_signal_handlers(self) -> None:
        """SIGTERM and SIGHUP end the run as Ctrl-C does (KeyboardInterrupt), so the finish hooks still run."""
        def stop(signum: int, frame: object) -> None:
            self.stopped_by = self.stopped_by or signal.Signals(signum).name
            raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

        with contextlib.suppress(ValueError):  # not the main thread: leave the signals as they are
            for signum in STOP_SIGNALS:
                self._old_handlers[signum] = signal.signal(signum, stop)

    def _restore_signal_handlers(self) -> None:
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        self._old_handlers.clear()


def is_case(item: pytest.Item) -> bool:
    """A test that measures (through `run_case` or pytest-benchmark's own fixture), as opposed to a plain test."""
    return "benchmark" in getattr(item, "fixturenames", ())


def _check_writable(folder: Path) -> None:
    if not os.access(folder, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"{folder}: cannot write there (permission denied)")


def drop_json(bench: object) -> Path | None:
    """Take `--benchmark-json` away from pytest-benchmark's session and return where it pointed. Before 5.3 the
    option is an open file by now (argparse's FileType opened it for writing while parsing): its handle is
    closed; from 5.3 on it is a path."""
    value = getattr(bench, "json", None)
    if value is None:
        return None
    bench.json = None
    if hasattr(value, "close"):
        value.close()
        return Path(value.name)
    return Path(value)


def take_over(config: pytest.Config, bench: object, not_measured: list[dict], selected: int) -> None:
    """Take the file outputs from pytest-benchmark's session `bench` and start the writer, once collection has
    shown that the run measures the suite's cases (suites/harness/pytest_plugin.py decides when).

    A storage that is not a folder (elasticsearch) stays pytest-benchmark's.
    """
    json_path = drop_json(bench)
    save_name = None
    storage = str(config.getoption("benchmark_storage", "") or "")
    if "://" not in storage or storage.startswith("file://"):
        save_name = bench.save or _autosave_name(bench.autosave)
        bench.save = bench.autosave = None
    writer = ResultsWriter(config, json_path, save_name, not_measured)
    writer.start(selected)  # a usage error here leaves nothing registered
    config.pluginmanager.register(writer, "bench-results")


def _autosave_name(autosave: object) -> str | None:
    """pytest-benchmark's autosave tag (the commit and time) whether the option holds the tag or just True."""
    if not autosave:
        return None
    return autosave if isinstance(autosave, str) else get_tag()
