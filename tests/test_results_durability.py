"""The results writer under hostile conditions, each made real: a disk that fills (a 1 MiB tmpfs, the kernel's own
ENOSPC; or a file size limit, RLIMIT_FSIZE, for any user), processes killed with SIGKILL and SIGTERM, stale and
live journals of other processes, runs overlapping in one storage, symlinks and device nodes as targets, runs
that measure nothing, the nightly workflow's own shell after an OOM-style kill.

The writer's side of the project's hostile corpus (the reports' side is tests/hostile.py), input -> outcome:

- disk fills while the journal is written (tmpfs) -> run stops, journal whole, message true, exit != 0
- file size limit reached mid-run, in pytest's pass or in earlier rounds (RLIMIT_FSIZE, set once the journal
  holds a case) -> the same
- disk full at the start -> usage error in one line, no journal left; the next run works
- journal left empty, or with a header only, by an earlier run -> replaced with a note
- journal of a SIGKILL'd --benchmark-json run -> moved aside with a note, still read by reports
- journal of a SIGKILL'd --benchmark-save run -> counts as its run number; the next run takes the next
- journal of a run that is still going -> refused, naming its pid and host
- journal path a symlink (to an empty file, a user's file, nothing) -> refused in one line, nothing written through
- --collect-only, or a -k that selects nothing, over an existing --benchmark-json -> the file left as it was
- a -k that selects nothing, new --benchmark-json -> no file (the suite is not in use; pytest exits 5)
- the --benchmark-json folder deleted mid-run, its journal with it -> the file written where pytest was started,
  the error names it
- --benchmark-json a symlink -> the file it names replaced, the link stays; a symlink loop -> usage error
- --benchmark-json /dev/null (a character device), a named pipe -> usage error, nothing touched or blocked
- --benchmark-json of a 245-byte name -> written (no helper name longer than the journal's)
- SIGTERM during rounds 1-2 of --bench-rounds 3 -> the file keeps every case measured so far, incomplete
- SIGKILL during rounds 1-2 of --bench-rounds 3 -> the journal keeps every round of every case
- a storage holding run 9999 (or a 10000_ file) -> usage error naming it, no stored run written over
- two overlapping runs in one storage; 4 processes claiming 100 numbers at once -> a number each
- nightly run killed outright (the OOM killer's SIGKILL) -> its journal kept as the history entry
- a killed run's journal read by `reports table` -> the same device as the finished run's file
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pytest_benchmark.utils import get_machine_id

from suites.harness import targets
from suites.harness.journal import Journal, JournalBusy, JournalRefused
from tests.resultfiles import RUN_A
from tests.runs import (
    ROOT,
    ProcessRun,
    bench_args,
    environment,
    run_command,
    run_pytest_in_process,
    run_reports_in_process,
    start,
    start_pytest,
    start_python,
)
from tests.single_thread import one_thread  # noqa: F401  (the fixture, used below)
from tests.test_results_file import _journal_lines, _quick, _start_quick

# in-process runs on the one thread of the runs the tests start (_start_quick): a killed run's journal and the file
# of the run after it are of the same device
pytestmark = pytest.mark.usefixtures("one_thread")

ROUNDS = ["-k", "square and float32", "--bench-rounds", "3"]
ONE_CASE = ["-k", "square and 256x256x256 and float32"]  # a run that only has to finish, or to be refused


def _run(*args: str) -> ProcessRun:
    """A run that is neither killed nor stopped: in this interpreter (tests/runs.py)."""
    return run_pytest_in_process(*_quick(*args))


def _wait_for_lines(proc: subprocess.Popen, journal: Path, lines: int) -> None:
    deadline = time.monotonic() + 300
    while _journal_lines(journal) < lines and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, f"the run ended before its journal had {lines} lines: {proc.communicate()[0][-3000:]}"


def _journal_cases(journal: Path) -> list[str]:
    """The case of every line after the header; every line must be whole JSON."""
    header, *lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert header["journal"]
    return [(line.get("benchmarks") or line["not_measured"])["extra_info"]["case"] for line in lines]


def _table_devices(path: Path) -> list[str]:
    table = run_reports_in_process("table", str(path))
    assert table.returncode == 0, table.stderr
    return re.findall(r"^## \w+ on (.+)$", table.stdout, re.M)


# a disk that fills

@pytest.fixture
def small_disk(tmp_path):
    """A real 1 MiB filesystem (tmpfs): a write past its end gets the kernel's ENOSPC, as on a full disk."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a 1 MiB tmpfs (the RLIMIT_FSIZE test covers any user)")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = run_command(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)])
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield disk
    run_command(["umount", "-l", str(disk)])


def _fill(disk: Path) -> Path:
    """Write zeros into the disk until the kernel says it is full."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def _assert_stopped_cleanly(proc: subprocess.Popen, log: str, journal: Path, why: str) -> list[str]:
    """The run stopped at the refused line: no traceback, non-zero exit, the journal whole and holding exactly the
    cases the message says, the remaining cases not run."""
    assert proc.returncode not in (0, None), log[-3000:]
    assert "Traceback" not in log and "INTERNALERROR" not in log, log[-3000:]
    assert f"Interrupted: cannot write the journal {journal} ({why})" in log, log[-3000:]
    said = re.search(rf"error: cannot write \S+ \({why}\); (?:the (\d+)|(\d+) of the \d+) cases? (?:is|are) "
                     rf"in {re.escape(str(journal))}", log)
    assert said, log[-3000:]
    cases = _journal_cases(journal)
    assert len(set(cases)) == int(said.group(1) or said.group(2)) >= 1
    passed = re.search(r"(\d+) passed", log)
    assert (int(passed.group(1)) if passed else 0) < 7  # -k float32 selects 7: the rest never ran
    table = run_reports_in_process("table", str(journal))
    assert table.returncode == 0 and "warning" not in table.stderr, table.stderr
    return cases


@pytest.mark.slow
def test_a_disk_that_fills_mid_run_stops_it_with_the_journal_whole_and_the_message_true(small_disk):
    out, journal = small_disk / "run.json", small_disk / "run.json.journal"
    proc = _start_quick("-k", "float32", f"--benchmark-json={out}")
    _wait_for_lines(proc, journal, 2)  # header + one case
    filler = _fill(small_disk)
    log = proc.communicate(timeout=300)[0]
    cases = _assert_stopped_cleanly(proc, log, journal, "No space left on device")

    filler.unlink()  # space again: the stopped run's journal is stale now, and blocks nothing
    again = _run(*ONE_CASE, f"--benchmark-json={out}")
    assert again.returncode == 0, again.stdout[-3000:]
    aside = [p for p in small_disk.iterdir() if p.name.startswith("run.unfinished-")]
    assert len(aside) == 1 and f"moved to {aside[0]}" in again.stdout
    assert _journal_cases(aside[0]) == cases and json.loads(out.read_text())["benchmarks"]


def _ignore_sigxfsz() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing


@pytest.mark.slow
@pytest.mark.parametrize("rounds", [[], ["--bench-rounds", "3"]], ids=["one-round", "in-earlier-rounds"])
def test_a_file_size_limit_reached_mid_run_stops_it_with_the_journal_whole(rounds, tmp_path):
    """RLIMIT_FSIZE refuses the write that crosses it part way, as a full disk does: no root needed. The limit is
    set on the running process (prlimit) once its journal holds a case, 64 bytes past the journal's end, so the
    next line crosses it however many samples each case took (a fixed 8 KiB from the start was sometimes outgrown
    by the header and the first case under load, and the run stopped before journaling any)."""
    out, journal = tmp_path / "run.json", tmp_path / "run.json.journal"
    proc = _start_quick("-k", "float32", *rounds, f"--benchmark-json={out}", preexec_fn=_ignore_sigxfsz)
    _wait_for_lines(proc, journal, 2)  # header + one case
    limit = journal.stat().st_size + 64
    resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (limit, limit))
    log = proc.communicate(timeout=300)[0]
    _assert_stopped_cleanly(proc, log, journal, "File too large")


@pytest.mark.slow
def test_a_disk_full_at_the_start_is_a_usage_error_that_leaves_nothing_behind(small_disk):
    out = small_disk / "run.json"
    filler = _fill(small_disk)
    proc = _run(*ONE_CASE, f"--benchmark-json={out}")
    assert proc.returncode == 4 and "Traceback" not in proc.stderr, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert f"{out}: cannot write there (No space left on device)" in proc.stderr
    assert sorted(p.name for p in small_disk.iterdir()) == ["filler"]
    filler.unlink()
    again = _run(*ONE_CASE, f"--benchmark-json={out}")
    assert again.returncode == 0 and "journal" not in again.stdout, again.stdout[-2000:] + again.stderr[-2000:]


# stale and live journals

def _journal_in_a_process(journal: Path, then: str) -> subprocess.Popen:
    """A real process that creates a journal with one case line, then sleeps (`wait`) or is killed (`die`)."""
    code = ("import sys, os, signal, time\nfrom pathlib import Path\nfrom suites.harness.journal import Journal\n"
            f"j = Journal.create(Path({str(journal)!r}), {{'datetime': '2026-01-01T02:17:00+00:00'}}, [])\n"
            "j.add({'benchmarks': {'fullname': 'a', 'extra_info': {'case': 'a'}}})\n"
            "print('ready', flush=True)\n"
            + ("time.sleep(600)\n" if then == "wait" else "os.kill(os.getpid(), signal.SIGKILL)\n"))
    proc = start_python("-c", code, output="stdout")
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_a_journal_whose_process_was_killed_is_moved_aside_and_still_read(tmp_path):
    journal = tmp_path / "run.json.journal"
    _journal_in_a_process(journal, "die").wait(timeout=60)
    notes: list[str] = []
    ours = Journal.create(journal, {"datetime": "2026-01-02T00:00:00+00:00"}, notes)
    aside = tmp_path / "run.unfinished-20260101T021700Z.json.journal"
    assert len(notes) == 1 and notes[0].startswith(f"note: {journal} held the cases of an earlier run that ended "
                                                   "without writing its results (pid ")
    assert notes[0].endswith(f"moved to {aside}, which `python -m reports` reads")
    assert json.loads(aside.read_text().splitlines()[1])["benchmarks"]["fullname"] == "a"
    assert json.loads(journal.read_text())["datetime"] == "2026-01-02T00:00:00+00:00"
    ours.close(remove=True)


def test_a_journal_whose_process_is_running_is_refused(tmp_path):
    journal = tmp_path / "run.json.journal"
    owner = _journal_in_a_process(journal, "wait")
    try:
        with pytest.raises(JournalBusy, match=rf"still going \(pid {owner.pid} on "):
            Journal.create(journal, {}, [])
        assert len(journal.read_text().splitlines()) == 2  # untouched
    finally:
        owner.kill()
        owner.wait(timeout=60)


@pytest.mark.parametrize("left", ["empty", "header only"])
def test_a_journal_that_holds_no_case_is_replaced_with_a_note(left, tmp_path):
    journal = tmp_path / "run.json.journal"
    journal.write_text("" if left == "empty" else json.dumps({"journal": 1, "machine_info": {}}) + "\n")
    notes: list[str] = []
    Journal.create(journal, {"datetime": "now"}, notes).close(remove=False)
    assert notes == [f"note: {journal} was the journal of an earlier run that finished no case; replaced"]
    assert [p.name for p in tmp_path.iterdir()] == ["run.json.journal"]
    assert json.loads(journal.read_text())["datetime"] == "now"


@pytest.mark.parametrize("names", ["an empty file", "a user's file", "nothing"])
def test_a_journal_path_that_is_a_symlink_is_refused_and_nothing_is_written_through_it(names, tmp_path):
    """A link at the journal's path (this suite never makes one) to an empty file had the journal written through
    it, over the file it named; to a file with content, the link was moved aside as an unfinished journal; a
    dangling one read as other runs racing for it. Each is refused in one line, the link and its target as they
    were."""
    target = tmp_path / "elsewhere" / "precious.txt"
    target.parent.mkdir()
    before = {"an empty file": "", "a user's file": "a user's notes\n", "nothing": None}[names]
    if before is not None:
        target.write_text(before)
    journal = tmp_path / "run.json.journal"
    journal.symlink_to(target)
    said = rf"^{re.escape(str(journal))}: is a symbolic link \(to {re.escape(str(target))}\); the journal is written"
    with pytest.raises(JournalRefused, match=said + " only to a file of its own, never through a link"):
        Journal.create(journal, {"datetime": "now"}, [])
    assert journal.is_symlink() and os.readlink(journal) == str(target)
    assert (target.read_text() if target.exists() else None) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["elsewhere", "run.json.journal"]
    refused = _run(*ONE_CASE, f"--benchmark-json={tmp_path / 'run.json'}")
    assert refused.returncode == 4 and "passed" not in refused.stdout and "Traceback" not in refused.stderr
    assert f"{journal}: is a symbolic link (to {target})" in refused.stderr
    assert (target.read_text() if target.exists() else None) == before and journal.is_symlink()


def test_a_journal_line_refused_by_a_full_disk_is_cut_back_to_the_whole_lines(small_disk):
    journal = Journal.create(small_disk / "run.json.journal", {}, [])
    journal.add({"benchmarks": {"fullname": "a"}})
    _fill(small_disk)
    with pytest.raises(OSError, match="No space left"):
        journal.add({"benchmarks": {"fullname": "b", "data": "x" * 100_000}})
    text = (small_disk / "run.json.journal").read_text()
    assert text.endswith("\n") and [json.loads(line) for line in text.splitlines()][1] == {"benchmarks":
                                                                                         {"fullname": "a"}}


@pytest.mark.slow
def test_a_killed_runs_journal_is_read_as_incomplete_of_the_same_device_and_blocks_no_later_run(tmp_path):
    """SIGKILL a real run once two cases are journaled: SIGKILL cannot be caught, so what survives is the journal,
    one fsync'ed line per finished case, which the reports read as incomplete. Its header is the machine the
    finished file describes (the suite's fields included), so `reports table` names the same device; the next run
    to the same file moves it aside, kept whole."""
    out, journal = tmp_path / "run.json", tmp_path / "run.json.journal"
    proc = _start_quick("--bench-dtypes", "float32,float16", f"--benchmark-json={out}")
    _wait_for_lines(proc, journal, 3)  # header + two cases
    proc.kill()
    proc.communicate(timeout=60)
    header = json.loads(journal.read_text().splitlines()[0])
    cases = [json.loads(line)["benchmarks"]["extra_info"]["case"] for line in journal.read_text().splitlines()[1:]
             if '"benchmarks"' in line]
    assert len(cases) >= 2

    table = run_reports_in_process("table", str(journal))
    assert table.returncode == 0, table.stderr
    assert "matmul on" in table.stdout and "256x256x256" in table.stdout
    gate = run_reports_in_process("compare", str(RUN_A), str(journal), "--fail-on-regression",
                                  "--allow-different-devices")
    assert gate.returncode == 1 and "read from its journal" in gate.stdout, gate.stdout + gate.stderr

    again = _run(*ONE_CASE, f"--benchmark-json={out}")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    aside = next(tmp_path.glob("run.unfinished-*.json.journal"))
    assert f"note: {journal} held the cases of an earlier run" in again.stdout and f"moved to {aside}" in again.stdout
    assert _journal_lines(aside) == len(cases) + 1  # the journal's results are moved aside, kept
    finished = json.loads(out.read_text())["machine_info"]
    assert {k: header["machine_info"][k] for k in ("identity", "cpu_info", "torch", "bench_device")} == \
        {k: finished[k] for k in ("identity", "cpu_info", "torch", "bench_device")}
    assert _table_devices(aside) == _table_devices(out) and "thread" in _table_devices(out)[0]


@pytest.mark.slow
def test_a_killed_save_run_counts_as_its_number_and_overlapping_runs_get_their_own(tmp_path):
    """A run SIGKILL'd in the storage, a second made while it ran, a third after: three numbers, three runs."""
    storage = tmp_path / "storage"
    save = [*ONE_CASE, f"--benchmark-storage={storage}"]
    killed = _start_quick("--bench-dtypes", "float32,bfloat16", f"--benchmark-storage={storage}",
                          "--benchmark-save=nightly")
    _wait_for_lines(killed, _storage_file(storage, "0001_nightly.json.journal"), 2)
    killed.send_signal(signal.SIGSTOP)  # held mid-run, as a descheduled process is, while the second makes its run
    overlapping = _run(*save, "--benchmark-save=other")
    assert overlapping.returncode == 0, overlapping.tail(2000)
    assert killed.poll() is None, "the first run ended before the second made its run"
    killed.kill()
    killed.communicate(timeout=60)
    again = _run(*save, "--benchmark-save=nightly")
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-2000:]
    folder = storage / get_machine_id()
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == \
        ["0001_nightly.json.journal", "0002_other.json", "0003_nightly.json"]
    table = run_reports_in_process("table", str(storage))
    assert table.returncode == 0 and "skipped" not in table.stderr, table.stdout + table.stderr


@pytest.mark.parametrize("highest", ["9999_old.json", "10000_older.json"])
def test_a_storage_whose_run_numbers_are_used_up_is_refused_before_the_first_case(highest, tmp_path):
    """Past run 9999 (pytest-benchmark's four digits), or with a 10000_ file an older writer left, the run is a
    usage error that names the storage: no stored run is written over, and nothing is measured to be lost."""
    storage = tmp_path / "storage"
    folder = storage / get_machine_id()
    folder.mkdir(parents=True)
    stored = {name: shutil.copy(RUN_A, folder / name) for name in ("9999_old.json", highest)}
    before = {name: Path(path).read_bytes() for name, path in stored.items()}
    refused = _run(*ONE_CASE, f"--benchmark-storage={storage}", "--benchmark-autosave")
    assert refused.returncode == pytest.ExitCode.USAGE_ERROR, refused.tail()
    number = int(highest.split("_")[0])
    assert f"--benchmark-storage {folder}: holds run {number}, and pytest-benchmark numbers runs with four " \
        f"digits (--benchmark-compare sees no run {number + 1})" in refused.output, refused.tail()
    assert "Traceback" not in refused.output and "passed" not in refused.output
    assert {p.name: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(".")} == before


def _storage_file(storage: Path, name: str) -> Path:
    """A file of the storage's machine folder, which pytest-benchmark names for this machine."""
    return storage / get_machine_id() / name


CLAIMER = """
import sys, time
from pathlib import Path
from suites.harness import results
folder, name, go = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
for _ in range(25):
    target, journal = results.claim_number(folder, name, {}, [])
    journal.close(remove=False)
    print(target.name[:4], flush=True)
"""


def test_processes_claiming_run_numbers_at_once_get_one_each(tmp_path):
    folder, go = tmp_path / "storage", tmp_path / "go"
    folder.mkdir()
    claimers = [start_python("-c", CLAIMER, str(folder), f"run{i}", str(go), output="stdout") for i in range(4)]
    assert [claimer.stdout.readline() for claimer in claimers] == ["ready\n"] * 4  # every process started, waiting
    go.touch()  # they claim at once
    numbers = [n for claimer in claimers for n in claimer.communicate(timeout=120)[0].split()]
    assert len(numbers) == 100 and len(set(numbers)) == 100


# targets

@pytest.mark.slow
def test_an_output_folder_deleted_during_the_run_loses_no_case_and_the_message_says_where_they_are(tmp_path):
    """The --benchmark-json folder, the journal with it, removed while the run measures: the cases are written
    beside where pytest was started, and the error names that file (not the deleted journal)."""
    out, started = tmp_path / "out" / "run.json", tmp_path / "started"
    out.parent.mkdir()
    started.mkdir()
    proc = start_pytest(*bench_args(str(ROOT / "bench" / "test_matmul.py"), "--bench-profile", "quick",
                                    "--bench-achievable-peaks", "off", "-k", "square and float32", json_path=out),
                        cwd=started, env={"OMP_NUM_THREADS": "1"})  # as _start_quick's
    _wait_for_lines(proc, Path(f"{out}.journal"), 2)
    shutil.rmtree(out.parent)
    log = proc.communicate(timeout=300)[0]
    assert proc.returncode == pytest.ExitCode.INTERNAL_ERROR and "Traceback" not in log, log[-3000:]
    (rescued,) = started.glob("run.rescued-*.json")
    assert f"error: cannot write {out} (No such file or directory); the results are in {rescued}" in log, log[-3000:]
    passed = int(re.search(r"(\d+) passed", log).group(1))
    assert len(json.loads(rescued.read_text())["benchmarks"]) == passed >= 1
    assert run_reports_in_process("table", str(rescued)).returncode == 0


def test_a_symlinked_target_is_followed_and_special_files_are_refused(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert targets.resolve_target(link) == real.resolve()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(pytest.UsageError, match="is a named pipe, not a regular file"):
        targets.resolve_target(fifo)
    with pytest.raises(pytest.UsageError, match="is a character device, not a regular file"):
        targets.resolve_target(Path("/dev/null"))
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(pytest.UsageError, match="symbolic links"):
        targets.resolve_target(tmp_path / "loop")


@pytest.mark.slow
def test_a_run_writes_through_a_symlink_and_refuses_a_device(tmp_path):
    real = tmp_path / "results" / "real.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    proc = _run(*ONE_CASE, f"--benchmark-json={link}")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert link.is_symlink() and json.loads(real.read_text())["benchmarks"]
    long = tmp_path / f"{'r' * 240}.json"  # its journal's name (253 bytes) fits: so must the temporary file's
    proc = _run(*ONE_CASE, f"--benchmark-json={long}")
    assert proc.returncode == 0 and json.loads(long.read_text())["benchmarks"], proc.stdout[-2000:]
    refused = _run(*ONE_CASE, "--benchmark-json=/dev/null")
    assert refused.returncode == 4 and "passed" not in refused.stdout and "Traceback" not in refused.stderr
    assert "--benchmark-json /dev/null: is a character device, not a regular file" in refused.stderr
    assert Path("/dev/null").is_char_device()


# runs that measure nothing

@pytest.mark.slow
@pytest.mark.parametrize("nothing", [["--collect-only"], ["-k", "no_such_case"]], ids=["collect-only", "k-nothing"])
def test_a_run_that_measures_nothing_replaces_no_file(nothing, tmp_path):
    out = tmp_path / "run.json"
    out.write_text('{"earlier": "results"}')
    proc = _run(*nothing, f"--benchmark-json={out}")
    assert proc.returncode == (0 if nothing[0] == "--collect-only" else 5), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert out.read_text() == '{"earlier": "results"}' and [p.name for p in tmp_path.iterdir()] == ["run.json"]
    if nothing[0] == "-k":  # none of the suite's cases selected: the suite stays out, pytest-benchmark writes none
        fresh = tmp_path / "new.json"
        assert _run(*nothing, f"--benchmark-json={fresh}").returncode == 5 and not fresh.exists()


# rounds

@pytest.mark.slow
def test_sigterm_during_the_earlier_rounds_keeps_every_case_they_measured(tmp_path):
    out, journal = tmp_path / "run.json", tmp_path / "run.json.journal"
    proc = _start_quick(*ROUNDS, f"--benchmark-json={out}")
    _wait_for_lines(proc, journal, 3)  # two cases through round 1 (pytest's pass is round 3)
    proc.send_signal(signal.SIGTERM)
    log = proc.communicate(timeout=120)[0]
    assert proc.returncode == 2 and "Traceback" not in log, log[-3000:]
    data = json.loads(out.read_text())
    assert data["incomplete"] is True and "stopped by SIGTERM; 0 of 3 selected cases finished" in \
        data["incomplete_reason"], data.get("incomplete_reason")
    kept = data["benchmarks"]
    assert len(kept) >= 2 and all(b["stats"]["rounds"] == len(b["stats"]["data"]) > 0 for b in kept)
    # a kept case's stats are over the samples of every round it had (the headline of all rounds)
    assert all(sum(b["extra_info"]["round_samples"]) == len(b["stats"]["data"]) and
               len(b["extra_info"]["round_medians_s"]) == b["extra_info"]["bench_rounds"] for b in kept)
    assert f"{len(kept)} more kept from their earlier rounds" in data["incomplete_reason"]
    table = run_reports_in_process("table", str(out), "--wide")
    assert table.returncode == 0 and len(re.findall(r"^float32 ", table.stdout, re.M)) == len(kept), table.stdout


@pytest.mark.slow
def test_sigkill_during_the_earlier_rounds_leaves_them_in_the_journal(tmp_path):
    out, journal = tmp_path / "run.json", tmp_path / "run.json.journal"
    proc = _start_quick(*ROUNDS, f"--benchmark-json={out}")
    _wait_for_lines(proc, journal, 5)  # round 1 of all three cases, and one of round 2
    proc.kill()
    proc.communicate(timeout=60)
    lines = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
    assert [line["round"] for line in lines[:4]] == [1, 1, 1, 2]
    table = run_reports_in_process("table", str(journal), "--wide")
    assert table.returncode == 0 and len(re.findall(r"^float32 ", table.stdout, re.M)) == 3, table.stdout


# the nightly workflow

def _workflow_step(name: str) -> tuple[str, str]:
    """The `if:` and the `run:` script of one step of the nightly workflow, as written there."""
    text = (ROOT / ".github" / "workflows" / "nightly.yml").read_text()
    # a step ends at the next step or where the next job (or a comment above it, two spaces in) starts
    step = re.split(r"\n      - name: |\n  (?=[\w#])", text.split(f"- name: {name}\n", 1)[1], maxsplit=1)[0]
    condition = re.search(r"^        if: (.*)$", step, re.M)
    script = step.split("        run: |\n", 1)[1]
    return (condition.group(1) if condition else ""), "\n".join(line[10:] for line in script.splitlines())


@pytest.mark.slow
def test_the_nightly_workflow_keeps_a_killed_runs_journal_as_its_history_entry(tmp_path):
    """The workflow's own shell, with the real quick suite on CPU in place of the GPU command and SIGKILL as the
    OOM killer: the run step finds the journal, names the machine from its header, and the history keeps it."""
    venv = tmp_path / "venv"  # the runner's venv: ours, with `pytest` running the CPU suite in place of the GPU one
    shim = venv / "bin" / "pytest"
    shim.parent.mkdir(parents=True)
    (venv / "bin" / "activate").write_text(f'. "{sys.prefix}/bin/activate"\nPATH="{shim.parent}:$PATH"\n')
    suite = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--rootdir={ROOT}",
             str(ROOT / "bench" / "test_matmul.py"), "--benchmark-only", "--device", "cpu", "--bench-profile", "quick",
             "--bench-achievable-peaks", "off", "-k", "float32", "--benchmark-json", "results/nightly.json"]
    shim.write_text(f'#!/bin/sh\necho $$ > "$SHIM_PID"\nexec {" ".join(suite)}\n')
    shim.chmod(0o755)
    work = tmp_path / "workspace"
    (work / "results").mkdir(parents=True)
    env = {**environment(), "BENCH_VENV": str(venv), "BENCH_HISTORY": str(tmp_path / "history"),
           "GITHUB_SHA": "0123456789abcdef",
           "GITHUB_OUTPUT": str(tmp_path / "outputs"), "SHIM_PID": str(tmp_path / "pid"),
           "OMP_NUM_THREADS": "1"}  # as _start_quick's
    (tmp_path / "history" / "runs").mkdir(parents=True)
    _, bench = _workflow_step("Run the full suite")
    step = start(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", bench], cwd=work, env=env)
    _wait_for_lines(step, work / "results" / "nightly.json.journal", 2)
    os.kill(int((tmp_path / "pid").read_text()), signal.SIGKILL)
    log = step.communicate(timeout=120)[0]
    assert step.returncode == 0, log[-3000:]
    outputs = dict(line.split("=", 1) for line in (tmp_path / "outputs").read_text().splitlines())
    assert outputs["rc"] == "137" and outputs["result"] == "results/nightly.json.journal"

    condition, keep = _workflow_step("Keep as history entry")
    assert condition.startswith("always()")  # it runs after the failure or cancellation of the run step
    kept = run_command(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", keep], cwd=work, env=env)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    entry = next((tmp_path / "history" / "runs").iterdir())
    assert entry.name.endswith("_0123456789.json.journal")
    history = run_reports_in_process("table", str(tmp_path / "history" / "runs"))
    assert history.returncode == 0 and "float32" in history.stdout, history.stderr
