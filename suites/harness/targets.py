"""Where a run's results go: each output checked before the first case, and the file put there whole at the end.

An output that cannot take the file must be found in the first second, not after an hour of measuring
(suites/harness/results.py writes the file at the end). pytest-benchmark before 5.3 opened `--benchmark-json` for
writing while it parsed the option, so an immutable file failed there; from 5.3 the option is a path that
nothing opens until the end, and a check of the folder's mode bits (`os.access`) cannot see what refuses the
write: an immutable or append-only file (`chattr +i`, `+a`, which refuse root too), a folder that is immutable or
on a read-only mount, and anything at all for root, whom the mode bits never stop. So the check does what the end
will do, without changing anything: it makes and removes a file in the folder under the name the final file is
first written to, and opens an existing file for writing without truncating it (`check_replaceable`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from suites.core.children import STOP_SIGNALS
from suites.harness.entry import benchmark_session
from suites.harness.journal import fsync_dir

SPECIAL_FILES = {stat.S_ISCHR: "a character device", stat.S_ISBLK: "a block device", stat.S_ISFIFO: "a named pipe",
                 stat.S_ISSOCK: "a socket"}


def temporary_name(path: Path) -> Path:
    """The name a file is written under before it is renamed over `path`: hidden, beside it, this process's, never
    a longer name than the journal's."""
    return path.with_name(f".{path.name[:40]}.{os.getpid()}.tmp")


def write_atomically(path: Path, text: str) -> None:
    """Write text to path so that a reader sees the old file or the whole new one, never a part.

    The stop signals are blocked meanwhile: a second Ctrl-C must not leave the temporary file instead of results.
    """
    tmp = temporary_name(path)
    with blocked_signals():
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        fsync_dir(path.parent)


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


def resolve_target(path: Path) -> Path:
    """Where `--benchmark-json` really writes: a symlink is followed to the file it names (so the rename replaces
    that file and the link stays a link, as a user expects of `>` or an editor's save); a folder or a special
    file (a device, a FIFO, a socket), which a rename would replace, is a usage error, and so is a file or folder
    that would refuse the results at the end (`check_replaceable`)."""
    real = Path(os.path.realpath(path))
    try:
        mode = real.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise pytest.UsageError(f"--benchmark-json {path}: {exc.strerror or exc}") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise pytest.UsageError(f"--benchmark-json {path}: is a folder; the results file needs a file name")
    kind = next((name for test, name in SPECIAL_FILES.items() if mode is not None and test(mode)), None)
    if kind:
        raise pytest.UsageError(f"--benchmark-json {path}: is {kind}, not a regular file; name a results file")
    if not real.parent.is_dir():
        raise pytest.UsageError(f"--benchmark-json {path}: folder {real.parent} does not exist")
    check_writable(real.parent)
    check_replaceable(real, path)
    return real


def check_replaceable(real: Path, shown: Path) -> None:
    """That `write_atomically` can put a file at `real` (`--benchmark-json {shown}`), tried now and changing
    nothing: its temporary file made and removed in the folder, and an existing file opened for writing, not
    truncated (an immutable or append-only one refuses even root; a read-only one refuses other users, as the
    shell's `>` and pytest-benchmark's own writer do)."""
    tmp = temporary_name(real)
    try:
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600))
        tmp.unlink()
    except OSError as exc:
        raise pytest.UsageError(f"--benchmark-json {shown}: cannot write in {real.parent} "
                                f"({exc.strerror or exc})") from None
    try:
        os.close(os.open(real, os.O_WRONLY | os.O_CLOEXEC | os.O_NOCTTY))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise pytest.UsageError(f"--benchmark-json {shown}: the file there cannot be replaced "
                                f"({exc.strerror or exc}); name another file, or make it writable") from None


def storage_folder(config: pytest.Config) -> Path:
    """The machine's folder of the file storage, created like pytest-benchmark creates it, and checked (the
    run's journal, made there before the first case, then shows that files can be made in it)."""
    storage = benchmark_session(config).storage
    if storage.path.exists() and not storage.path.is_dir():
        raise pytest.UsageError(f"--benchmark-storage {storage.path}: is a file, not a folder")
    try:
        storage.path.mkdir(parents=True, exist_ok=True)
        folder = storage.get("")
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise pytest.UsageError(f"--benchmark-storage {storage.path}: {exc.strerror or exc}") from None
    check_writable(folder)
    return folder


def check_writable(folder: Path) -> None:
    """The mode bits' answer, for the message a user most often needs (root passes it everywhere)."""
    if not os.access(folder, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"{folder}: cannot write there (permission denied)")
