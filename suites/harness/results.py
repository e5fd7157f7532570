"""The run's results on disk: checked before the first case, journaled per case, written whole at the end.

pytest-benchmark writes its JSON once, after the last test, and only when something was timed: a run that dies
at minute 50 of 60 (a CI timeout's SIGTERM, Ctrl-C, a full disk at the end) keeps nothing, and a run whose
cases were all unsupported writes no file at all. This writer takes the file outputs over from it:

- before the first case, each output location (`--benchmark-json`, `--benchmark-save`/`--benchmark-autosave`
  into a file storage) is checked and the run's journal is created (suites/harness/journal.py): beside the
  storage's file when the run saves there, else beside `--benchmark-json`. A missing or unwritable folder, a
  folder or a special file (a device, a FIFO) where the file should be, a file that would refuse to be replaced
  (immutable, read-only), a full disk: a usage error in the first second, not a traceback after an hour
  (suites/harness/targets.py, which also writes the file whole). A symlink is followed to the file it names,
  which is then replaced (the link stays). A journal left by a run that is gone (killed) is moved aside, or
  replaced when it holds no case, with a note; one whose run is still going is refused, and so is a symbolic link
  at the journal's path (never written through);
- the storage's run number is claimed with the journal under a lock on the machine's folder, and a journal
  counts as its run's number: two runs starting together, or a run after a killed one, get numbers of their own;
- each finished case (measured, or not measured with its reason) is appended to the journal and fsync'ed the
  moment its test ends, and with `--bench-rounds N` each of rounds 1..N-1 too (`journal_round`); a run killed
  outright (SIGKILL, the OOM killer) leaves the journal, which `python -m reports` reads as a results file
  marked incomplete. A journal line that cannot be written (a full disk) stops the run: the journal is cut back
  to its whole lines, the final file is still tried, and the messages say which cases are where;
- SIGTERM, SIGHUP and SIGINT stop the run like Ctrl-C does, and the final file still gets written;
- the final file is written to a temporary name, fsync'ed and renamed over the target, so no reader ever sees
  half a file; it holds the finished cases (and those measured only in earlier rounds), and a run that did not
  finish every selected case carries `incomplete: true` and `incomplete_reason` at its top level. Then the
  journal is removed. When no target takes the file and the journal is gone too (its folder was deleted during
  the run), the file is written beside where pytest was started (else in the temporary folder) as
  `NAME.rescued-<time>-<pid>.json`, and the message says so. A run that finished no case (`--collect-only`
  writes nothing at all, a `-k` that selects nothing, a stop before the first case) replaces no file: an
  existing results file is left as it was.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import signal
import tempfile
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from pytest_benchmark import __version__ as PYTEST_BENCHMARK_VERSION
from pytest_benchmark.utils import SafeJSONEncoder, get_tag

from reports.format import strict_json
from reports.format.schema import RESULTS_SCHEMA_VERSION
from suites.core.children import stops_to_catch
from suites.harness.entry import benchmark_session
from suites.harness.journal import SUFFIX, Journal, JournalRefused, unused
from suites.harness.targets import blocked_signals, resolve_target, storage_folder, write_atomically
from suites.harness.tracebacks import give_every_entry_a_line

NUMBER_LOCK = ".run-numbers.lock"  # in the storage's machine folder; held while a run claims its number
RUN_NUMBER = re.compile(r"(\d+)_")  # a storage file's run number, NNNN_NAME.json
REGRESSED = "regressed-"  # the prefix of an autosaved run whose comparison failed (ResultsWriter)
LAST_NUMBER = 9999  # pytest-benchmark's four digits: its save and its --benchmark-compare stop there


def dumps(data: dict) -> str:
    """The results document as strict JSON, stamped with its schema version first (pytest-benchmark's encoder
    turns what json cannot encode into its repr, as pytest-benchmark's own files do)."""
    return strict_json.dumps({"schema_version": RESULTS_SCHEMA_VERSION, **data}, default=SafeJSONEncoder().default,
                             ensure_ascii=True, indent=4)


def journal_path(target: Path) -> Path:
    return target.with_name(target.name + SUFFIX)


def next_number(folder: Path) -> int:
    """pytest-benchmark's run counter: one more than the highest NNNN_*.json in the machine's folder, a run's
    journal (NNNN_*.json.journal: running, or killed) counting as its run; a number of more digits (a 10000_
    file an older writer left) counts too, so that it is never written over."""
    numbers = [int(found.group(1)) for p in folder.glob("[0-9]*_*")
               if p.name.endswith((".json", ".json" + SUFFIX)) and (found := RUN_NUMBER.match(p.name))]
    return max(numbers, default=0) + 1


def claim_number(folder: Path, name: str, header: dict, notes: list[str]) -> tuple[Path, Journal]:
    """The storage's next run file and this run's journal beside it. The number is taken and the journal (which
    holds it) created under the folder's lock, so that two runs starting at once get two numbers. A storage whose
    numbers are used up (run LAST_NUMBER is there) is a usage error, before the first case: pytest-benchmark
    refuses to save there too, and a run numbered past it would be one that `--benchmark-compare` never sees."""
    with _locked(folder / NUMBER_LOCK):
        number = next_number(folder)
        if number > LAST_NUMBER:
            raise pytest.UsageError(
                f"--benchmark-storage {folder}: holds run {number - 1}, and pytest-benchmark numbers runs with four "
                f"digits (--benchmark-compare sees no run {number}); move the older runs away or save into another "
                "--benchmark-storage")
        target = folder / f"{number:04d}_{name}.json"
        return target, Journal.create(journal_path(target), header, notes)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on a lock file, waited for (it is held for microseconds); none where locks are
    unsupported, which leaves the old race rather than failing the run."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class ResultsWriter:
    """A pytest plugin object: it owns the run's file outputs from the end of collection (`start`) to session
    finish."""

    def __init__(self, config: pytest.Config, json_path: Path | None, save_name: str | None,
                 not_measured: list[dict], implicit_save: bool = False, suite_cases: frozenset[str] = frozenset()
                 ) -> None:
        self.config = config
        self.json_path = json_path
        self.save_name = save_name
        self.implicit_save = implicit_save  # the storage's run is the plugin's autosave, not asked for
        self.suite_cases = suite_cases  # the nodeids of the tests using the suite's fixtures (not plain benchmark)
        self.not_measured = not_measured  # the session's list, appended to as cases end
        self.targets: list[Path] = []  # the storage's file first, then --benchmark-json's (resolved)
        self.json_target: Path | None = None
        self.journal: Journal | None = None
        self.session: pytest.Session | None = None
        self.machine_info: dict = {}
        self.commit_info: dict = {}
        self.finished: set[str] = set()
        self.partial: dict[str, tuple[str, dict]] = {}  # by nodeid: a case's entry from its earlier rounds
        self.journaled: set[str] = set()  # the cases with a line in the journal
        self.journal_error: str | None = None  # why the journal stopped taking lines
        self.selected = 0
        self.stopped_by: str | None = None
        self._journaled_not_measured = 0
        self._old_handlers: dict[int, object] = {}

    def start(self, session: pytest.Session, selected: int) -> None:
        """Check the outputs and open the journal, before the first of the `selected` cases runs."""
        self.selected = selected
        self.session = session
        json_target = self.json_target = resolve_target(self.json_path) if self.json_path is not None else None
        folder = storage_folder(self.config) if self.save_name is not None else None
        if json_target is None and folder is None:
            return
        header = self._header()
        notes: list[str] = []
        where = folder if folder is not None else self.json_path
        try:
            if folder is not None:
                target, self.journal = claim_number(folder, self.save_name, header, notes)
                self.targets.append(target)
            else:
                self.journal = Journal.create(journal_path(json_target), header, notes)
        except JournalRefused as exc:
            raise pytest.UsageError(str(exc)) from None
        except OSError as exc:
            raise pytest.UsageError(f"{where}: cannot write there ({exc.strerror or exc})") from None
        if json_target is not None:
            self.targets.append(json_target)
        for note in notes:
            print(note)
        self._install_signal_handlers()

    # pytest hooks

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        ended = call.when == "call" or (call.when == "setup" and report.skipped)  # a skip is a finished case
        if ended and self.journal is not None and is_case(item):
            self._journal_case(item)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo) -> None:
        """Before pytest's terminal reporter prints the interrupt: a stop signal can leave a traceback entry
        without a line number, which pytest cannot print (suites/harness/tracebacks.py)."""
        give_every_entry_a_line(excinfo.tb)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.journal is None:
            return
        with blocked_signals():  # a second Ctrl-C or SIGTERM waits until the file is whole
            output = self._output(session, exitstatus)
            self._set_aside_a_regression()
            written, failed = self._write(output)
            lost = failed and not written and not self.journal.present()  # its folder deleted, say
            if lost and (rescued := rescue(failed[0][0], dumps(output))) is not None:
                written.append(rescued)
            for target, why in failed:
                where = f"the results are in {written[0]}" if written else self._journal_holds()
                print(f"\nerror: cannot write {target} ({why}); {where}")
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
            self.journal.close(remove=bool(written) or not failed)  # kept while it holds what no file does
            self._restore_signal_handlers()

    # what the rounds before pytest's pass report

    def journal_round(self, item: pytest.Item, kind: str, entry: dict, rounds_done: int) -> None:
        """A case's entry after one of the rounds before pytest's pass (`kind` `benchmarks` or `not_measured`):
        kept for the final file should the run end before the case's pass, and journaled at once."""
        with blocked_signals():
            self.partial[item.nodeid] = (kind, entry)
            self._journal(item.nodeid, {kind: entry, "round": rounds_done})
        if self.journal_error and self.session is not None:
            raise self.session.Interrupted(self.session.shouldstop)

    # the parts

    def _header(self) -> dict:
        """The journal's first line: the machine as the final file will describe it (the suite's fields added by
        the same hook), so a killed run reads as the machine it ran on."""
        self.machine_info = self.config.hook.pytest_benchmark_generate_machine_info(config=self.config)
        self.commit_info = self.config.hook.pytest_benchmark_generate_commit_info(config=self.config)
        self.config.hook.pytest_benchmark_update_commit_info(config=self.config, commit_info=self.commit_info)
        return {"machine_info": self._machine_info(), "commit_info": self.commit_info,
                "datetime": datetime.now(timezone.utc).isoformat(), "version": PYTEST_BENCHMARK_VERSION}

    def _machine_info(self) -> dict:
        machine_info = dict(self.machine_info)
        self.config.hook.pytest_benchmark_update_machine_info(config=self.config, machine_info=machine_info)
        return machine_info

    def _journal_case(self, item: pytest.Item) -> None:
        """The case's entry on disk and the case counted as finished, both or neither (signals wait meanwhile)."""
        with blocked_signals():
            self.finished.add(item.nodeid)
            fixture = item.funcargs.get("benchmark")
            stats = getattr(fixture, "stats", None)
            if stats is not None and not fixture.has_error:
                samples = item.nodeid in self.suite_cases or self.json_target is not None or self._save_data()
                self._journal(item.nodeid, {"benchmarks": stats.as_dict(include_data=samples)})
            for entry in self.not_measured[self._journaled_not_measured:]:
                self._journal(str(entry.get("fullname")), {"not_measured": entry})
            self._journaled_not_measured = len(self.not_measured)

    def _journal(self, nodeid: str, line: dict) -> None:
        """One line on disk; when the disk refuses it, the run stops (the line is in memory, the journal whole)."""
        if self.journal is None or self.journal_error is not None:
            return
        try:
            self.journal.add(line)
        except OSError as exc:
            self.journal_error = exc.strerror or str(exc)
            if self.session is not None:
                self.session.shouldstop = (f"cannot write the journal {self.journal.path} ({self.journal_error}); "
                                           f"it holds the {_cases(len(self.journaled))} before this one")
            return
        self.journaled.add(nodeid)

    def _set_aside_a_regression(self) -> None:
        """A run the plugin autosaved on its own whose `--benchmark-compare-fail` failed is stored as
        `regressed-NNNN_NAME.json`, a name pytest-benchmark's `--benchmark-compare` never picks: the next run
        compares against the run before it again and fails too, until the regression is gone (pytest-benchmark
        saves no run it was not asked to, so its comparisons keep their baseline the same way). A save the user
        asked for (`--benchmark-save`, `--benchmark-autosave`) is numbered, as pytest-benchmark numbers it.

        The next run takes the same number, and its name (pytest-benchmark's, down to the second) can be the same
        too: a second regression within that second is kept beside the first (`regressed-NNNN_NAME-2.json`), not
        over it. Two runs at once hold two numbers (`claim_number`), so only runs one after the other share one."""
        regressions = getattr(benchmark_session(self.config), "performance_regressions", None)
        if not (self.implicit_save and regressions and self.save_name is not None):
            return
        numbered = self.targets[0]
        self.targets[0] = unused(numbered.with_name(f"{REGRESSED}{numbered.name}"))
        print(f"\nresults: the comparison failed, so this run is kept as {self.targets[0].name}, outside the "
              f"numbered runs: the next --benchmark-compare compares against the run before it again")

    def _journal_holds(self) -> str:
        """What the journal holds, said truly (a full disk may have kept the last cases out of it; its folder may
        have been deleted with it)."""
        if not self.journal.present():
            return f"its journal {self.journal.path} was deleted during the run too: the cases are lost"
        held, kept = len(self.journaled), len(self.finished | set(self.partial))
        which = f"the {_cases(held)}" if held == kept else f"{held} of the {_cases(kept)}"
        return f"{which} {'is' if held == 1 else 'are'} in {self.journal.path}, which `python -m reports` reads"

    def _write(self, output: dict) -> tuple[list[Path], list[tuple[Path, str]]]:
        """The final file at every target: the targets written, and those that failed with why. A run that kept
        no case replaces no file and leaves no empty run in the storage; a new --benchmark-json file says why."""
        written: list[Path] = []
        failed: list[tuple[Path, str]] = []
        kept = output["benchmarks"] or output["not_measured"]  # a skipped test finished, yet recorded nothing
        for target in self.targets:
            if not kept and (target.exists() or target != self.json_target):
                if target.exists():
                    print(f"\nresults: no case measured or recorded; {target} left as it was")
                continue
            try:
                write_atomically(target, dumps(self._document(output, target)))
            except OSError as exc:
                failed.append((target, exc.strerror or str(exc)))
                continue
            written.append(target)
            saved = "Wrote" if target == self.json_target else "Saved"  # pytest-benchmark's own words
            print(f"\n{saved} benchmark data in: {target}" + (f" (incomplete: {output['incomplete_reason']})"
                                                             if output.get("incomplete") else ""))
        return written, failed

    def _save_data(self) -> bool:
        """`--benchmark-save-data`, as the user gave it (the plugin sets pytest-benchmark's own copy for the
        storages it leaves to pytest-benchmark)."""
        return bool(self.config.getoption("benchmark_save_data", False))

    def _document(self, output: dict, target: Path) -> dict:
        """The file for one target. The suite's entries keep their raw samples everywhere (`compare` decides from
        them); pytest-benchmark's own (a plain `benchmark` test) follow its rule: kept in `--benchmark-json`, and
        in a storage only with `--benchmark-save-data` (one `sum` of 127,033 rounds made a 5.4 MB file)."""
        if target == self.json_target or self._save_data():
            return output
        plain = [{**entry, "stats": {k: v for k, v in entry["stats"].items() if k != "data"}}
                 if entry.get("fullname") not in self.suite_cases and isinstance(entry.get("stats"), dict) else entry
                 for entry in output["benchmarks"]]
        return {**output, "benchmarks": plain}

    def _output(self, session: pytest.Session, exitstatus: int) -> dict:
        """pytest-benchmark's JSON of the finished cases (and of those cut short after earlier rounds), with our
        hooks' fields and the incomplete mark."""
        bs = benchmark_session(self.config)
        done = [b for b in bs.benchmarks if b.fullname in self.finished]
        output = self.config.hook.pytest_benchmark_generate_json(
            config=self.config, benchmarks=done, include_data=True, machine_info=self._machine_info(),
            commit_info=self.commit_info)
        self.config.hook.pytest_benchmark_update_json(config=self.config, benchmarks=done, output_json=output)
        output["not_measured"] = [e for e in output.get("not_measured", []) if e.get("fullname") in self.finished]
        for nodeid, (kind, entry) in self.partial.items():
            if nodeid not in self.finished:
                output.setdefault(kind, []).append(entry)
        reason = self._incomplete_reason(session, exitstatus)
        if reason:
            output["incomplete"] = True
            output["incomplete_reason"] = reason
        return output

    def _incomplete_reason(self, session: pytest.Session, exitstatus: int) -> str | None:
        """Why the run did not finish every selected case, or None when it did."""
        finished = len(self.finished)
        if 0 < self.selected <= finished and self.stopped_by is None:
            return None
        if self.stopped_by:
            why = f"stopped by {self.stopped_by}"
        elif exitstatus == pytest.ExitCode.INTERRUPTED:
            why = "interrupted"
        elif session.shouldstop or session.shouldfail:
            why = f"stopped early ({session.shouldstop or session.shouldfail})"
        else:
            why = "not every selected case ran"
        rounds_only = len(set(self.partial) - self.finished)
        more = f", {rounds_only} more kept from their earlier rounds" if rounds_only else ""
        return f"{why}; {finished} of {self.selected} selected cases finished{more}"

    def _install_signal_handlers(self) -> None:
        """SIGTERM and SIGHUP end the run as Ctrl-C does (KeyboardInterrupt), so the finish hooks still run; an
        ignored SIGHUP stays ignored (`nohup pytest bench/ ...` goes on when its terminal closes)."""
        def stop(signum: int, frame: object) -> None:
            self.stopped_by = self.stopped_by or signal.Signals(signum).name
            raise KeyboardInterrupt(f"stopped by {signal.Signals(signum).name}")

        with contextlib.suppress(ValueError):  # not the main thread: leave the signals as they are
            for signum in stops_to_catch():
                self._old_handlers[signum] = signal.signal(signum, stop)

    def _restore_signal_handlers(self) -> None:
        for signum, handler in self._old_handlers.items():
            signal.signal(signum, handler)
        self._old_handlers.clear()


def rescue(target: Path, text: str) -> Path | None:
    """Where the results go when no target took them (its folder deleted during the run, say): a new file named
    for the target, in the folder pytest was started from, else in the temporary folder; None when neither takes
    it (the journal's message is then the last word)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for folder in (Path.cwd(), Path(tempfile.gettempdir())):
        path = folder / f"{target.stem[:100]}.rescued-{stamp}-{os.getpid()}{target.suffix}"
        try:
            write_atomically(path, text)
        except OSError:
            continue
        return path
    return None


def _cases(count: int) -> str:
    return f"{count} case{'s' if count != 1 else ''}"


def is_case(item: pytest.Item) -> bool:
    """A test that measures (through `run_case` or pytest-benchmark's own fixture), as opposed to a plain test."""
    return "benchmark" in getattr(item, "fixturenames", ())


def writer_of(config: pytest.Config) -> ResultsWriter | None:
    """The run's writer, when it took the outputs over (rank 0, a file output chosen)."""
    return config.pluginmanager.get_plugin("bench-results")


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


def take_over(session: pytest.Session, bench: object, not_measured: list[dict], implicit_save: bool = False,
              suite_cases: frozenset[str] = frozenset()) -> None:
    """Take the file outputs from pytest-benchmark's session `bench` and start the writer, once collection has
    shown that the run measures the suite's cases, `suite_cases` (suites/harness/pytest_plugin.py decides when).

    A storage that is not a folder (elasticsearch) stays pytest-benchmark's.
    """
    config = session.config
    json_path = drop_json(bench)
    save_name = None
    storage = str(config.getoption("benchmark_storage", "") or "")
    if "://" not in storage or storage.startswith("file://"):
        save_name = bench.save or _autosave_name(bench.autosave)
        bench.save = bench.autosave = None
    writer = ResultsWriter(config, json_path, save_name, not_measured, implicit_save, suite_cases)
    writer.start(session, sum(is_case(item) for item in session.items))  # a usage error: nothing registered
    config.pluginmanager.register(writer, "bench-results")


def _autosave_name(autosave: object) -> str | None:
    """pytest-benchmark's autosave tag (the commit and time) whether the option holds the tag or just True."""
    if not autosave:
        return None
    return autosave if isinstance(autosave, str) else get_tag()
