"""A run's journal: one JSON line per finished case, on disk before the next case starts, owned by one process.

Why a journal: pytest-benchmark writes its JSON once, after the last test, so a run killed at minute 50 of 60
(SIGKILL, the OOM killer) would keep nothing. The journal keeps every finished case; `python -m reports` reads
it as a results file marked incomplete (reports/format/document.py, `Document`).

Format (JSON Lines, each line strict JSON with its own `nonfinite`: docs/results.md): a header `{"journal": 2,
"schema_version": 1, "machine_info": ..., "commit_info": ..., "datetime": ..., "version": ..., "writer": {"pid",
"host", "started"}}`, then one line per case: `{"benchmarks": ENTRY}` or `{"not_measured": ENTRY}`. A case
measured in rounds before pytest's pass is journaled after each of its rounds, with `"round": K` beside the
entry; a later line of the same case (same `fullname`) supersedes an earlier one.

What makes it durable:

- the line is written with `pwrite` and fsync'ed; a write that fails part way (a full disk) is cut back to the
  last whole line, so the file stays readable and holds exactly the cases it is said to hold;
- the writing process holds an exclusive `flock` on the file for its whole life. The kernel drops the lock when
  the process dies, however it dies, so a later run tells a live journal (refused: two writers of one file) from
  a stale one (moved aside, or taken over when it holds no case) without guessing. Where the filesystem has no
  locks, the header's writer (pid, host, the process's start time) decides: a pid gone, or now another process,
  on this host is stale; a journal of another host is taken as live;
- the journal is a file of its own, never written through a symbolic link: a link at its path (which this suite
  never makes) is refused, the link and what it names left as they are. Followed, it would write the journal
  over whatever file it names (an empty one is "taken over"), anywhere the user may write.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from reports.format import strict_json
from reports.format.schema import JOURNAL_VERSION, RESULTS_SCHEMA_VERSION

SUFFIX = ".journal"


class JournalRefused(Exception):
    """The journal's path cannot take this run's journal; the message is one line saying why."""


class JournalBusy(JournalRefused):
    """The journal belongs to a run that is still going (its writer holds the lock)."""


@dataclass(frozen=True)
class Writer:
    """The process writing a journal, as its header records it: enough to tell it from any later process."""

    pid: int
    host: str
    started: float | None  # the process's start, seconds since the epoch (None where /proc does not say)

    @classmethod
    def this_process(cls) -> Writer:
        return cls(os.getpid(), socket.gethostname(), process_start(os.getpid()))

    @classmethod
    def from_header(cls, header: dict) -> Writer | None:
        found = header.get("writer") if isinstance(header, dict) else None
        if not isinstance(found, dict) or not isinstance(found.get("pid"), int):
            return None
        started = found.get("started")
        return cls(found["pid"], str(found.get("host")), started if isinstance(started, int | float) else None)

    def alive(self) -> bool:
        """Whether this process may still be running: another host's cannot be checked, so it may."""
        if self.host != socket.gethostname():
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # exists, owned by another user
        now = process_start(self.pid)
        return self.started is None or now is None or abs(now - self.started) < 1.0

    def describe(self) -> str:
        since = "" if self.started is None else \
            f", started {datetime.fromtimestamp(self.started, timezone.utc).isoformat(timespec='seconds')}"
        return f"pid {self.pid} on {self.host}{since}"


def process_start(pid: int) -> float | None:
    """When a process started (Linux /proc: boot time plus the start in clock ticks), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime"))
        return int(boot.split()[1]) + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def encode(line: dict) -> bytes:
    """One line of strict JSON (reports/format/strict_json.py: json escapes every newline inside a string)."""
    return (strict_json.dumps(line) + "\n").encode()


class Journal:
    """An append-only file of one JSON line per finished case, owned (locked) by this process while open."""

    def __init__(self, path: Path, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self.size = size  # bytes of whole lines on disk
        self.cases = 0  # case lines on disk

    @classmethod
    def create(cls, path: Path, header: dict, notes: list[str]) -> Journal:
        """The journal at path, its header on disk; a stale journal there is moved aside (or, holding no case,
        taken over), with a line in `notes`. JournalBusy when a running process owns it; OSError when the header
        cannot be written (nothing is left behind then)."""
        line = encode({"journal": JOURNAL_VERSION, "schema_version": RESULTS_SCHEMA_VERSION, **header,
                       "writer": asdict(Writer.this_process())})
        for _ in range(5):  # another run may move or take the file between our steps: look again
            fd = _open_exclusively(path, notes)
            if fd is None:
                continue
            try:
                os.ftruncate(fd, 0)
                _write_all(fd, line, 0)
                os.fsync(fd)
            except OSError:
                with contextlib.suppress(OSError):
                    path.unlink()
                os.close(fd)
                raise
            fsync_dir(path.parent)
            return cls(path, fd, len(line))
        raise JournalBusy(f"{path}: other runs keep taking this journal; try again")

    def add(self, line: dict) -> None:
        """Append one line durably, or raise OSError with the file cut back to its last whole line."""
        data = encode(line)
        try:
            _write_all(self._fd, data, self.size)
            os.fsync(self._fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self.size)
            raise
        self.size += len(data)
        self.cases += 1

    def present(self) -> bool:
        """Whether the file at `path` is still this journal (not deleted with its folder, nor replaced)."""
        return _same_file(self._fd, self.path)

    def close(self, remove: bool) -> None:
        """Let the journal go; removed once the results file holds everything it did."""
        if remove and self.present():
            self.path.unlink()
        os.close(self._fd)


def _open_exclusively(path: Path, notes: list[str]) -> int | None:
    """A locked descriptor of a new (or taken-over empty) journal at path; None when path changed meanwhile."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    except FileExistsError:
        return _take_stale(path, notes)
    if _lock(fd) is False:  # another run took our new, empty file over before we locked it
        os.close(fd)
        raise JournalBusy(f"{path}: another run started on this journal at the same moment")
    return fd


def _take_stale(path: Path, notes: list[str]) -> int | None:
    """The existing journal at path, if no running process owns it: moved aside when it holds cases (None: try
    again at path), else taken over (its descriptor)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP and path.is_symlink():
            raise JournalRefused(f"{path}: is a symbolic link (to {os.readlink(path)}); the journal is written only "
                                 "to a file of its own, never through a link: remove the link, or write the results "
                                 "elsewhere") from None
        raise
    try:
        locked = _lock(fd)
        header, header_size = _header(fd)
        writer = Writer.from_header(header)
        if locked is False or (locked is None and writer is not None and writer.alive()):
            who = writer.describe() if writer else "a run"
            raise JournalBusy(f"{path}: the journal of a run that is still going ({who}); wait for it to end, "
                              "or write elsewhere")
        if not _same_file(fd, path):
            os.close(fd)
            return None
        who = f" ({writer.describe()})" if writer else ""
        if os.fstat(fd).st_size > header_size:  # a case, or a cut line: evidence worth keeping
            aside = _aside_name(path, header)
            os.rename(path, aside)
            notes.append(f"note: {path} held the cases of an earlier run that ended without writing its results"
                         f"{who}; moved to {aside}, which `python -m reports` reads")
            os.close(fd)
            return None
        notes.append(f"note: {path} was the journal of an earlier run that finished no case{who}; replaced")
        return fd
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def _lock(fd: int) -> bool | None:
    """Take the exclusive lock: True, False when another process holds it, None where locks are unsupported."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError:
        return None
    return True


def _header(fd: int) -> tuple[dict, int]:
    """The journal's header line and its length in bytes; ({}, 0) when there is none (empty, or cut short)."""
    head = os.pread(fd, 1 << 20, 0)
    first, newline, _ = head.partition(b"\n")
    try:
        header = json.loads(first) if newline else None
    except ValueError:
        header = None
    return (header, len(first) + 1) if isinstance(header, dict) else ({}, 0)


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def _aside_name(path: Path, header: dict) -> Path:
    """`run.unfinished-20260101T021700Z.json.journal` beside `run.json.journal`: still read as a journal, named
    for when its run started."""
    try:
        stamp = datetime.fromisoformat(header["datetime"]).astimezone(timezone.utc)
    except (KeyError, TypeError, ValueError):
        stamp = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    target = Path(path.name.removesuffix(SUFFIX))
    base = f"{target.stem[:100]}.unfinished-{stamp:%Y%m%dT%H%M%SZ}"  # a name the filesystem takes
    return unused(path.with_name(f"{base}{target.suffix}{SUFFIX}"), target.suffix + SUFFIX)


def unused(path: Path, ending: str | None = None) -> Path:
    """path, or where a file (or a link) is there already, the first free name beside it with -2, -3, ... before
    its ending (its suffix unless given: `.json.journal`)."""
    ending = path.suffix if ending is None else ending
    stem, found, n = path.name.removesuffix(ending), path, 2
    while found.exists() or found.is_symlink():
        found, n = path.with_name(f"{stem}-{n}{ending}"), n + 1
    return found


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new name durable (POSIX); a filesystem that cannot open directories is left as it is."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
