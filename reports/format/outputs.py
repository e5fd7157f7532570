"""How a report writes its files: never over one of its inputs, and whole or not at all.

`refuse_inputs` runs before any work: `compare A B --json A` once overwrote the baseline A with the comparison and
exited 0, and `--json -` wrote a file named `-`. An output is compared with every input by file identity
(os.path.samefile), so a symlink, a hard link or another spelling of the path is caught too. `replacing` writes a
file beside its target under a temporary name and moves it over the target in one step (os.replace): a full disk,
an error or a kill while writing leaves the old file or none, never half a file (a kill can leave the hidden
temporary file behind, never the target half-written).
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from reports.format.errors import InputError
from reports.format.load import expand

if TYPE_CHECKING:
    from matplotlib.figure import Figure


# `-` means stdout to most tools, but every command prints its report there, so an output named `-` would be a
# file of that name beside a report that a reader expected to parse (`compare ... --json -` wrote a file `-`).
STDOUT_NAME = "-"


def refuse_inputs(option: str, outputs: Sequence[str | Path], inputs: Sequence[str | Path]) -> None:
    """An InputError when an output (a file or folder the command writes) is one of the inputs as named or a
    results file a named folder holds; outputs that do not exist yet are new files and always fine. An output
    named `-` is refused too (STDOUT_NAME)."""
    if any(str(p) == STDOUT_NAME for p in outputs):
        raise InputError(f"{option} {STDOUT_NAME}: would be a file named '{STDOUT_NAME}', not stdout, which holds the "
                         "command's report; name a file (e.g. ./- if that is the name meant)")
    existing = [Path(p) for p in outputs if Path(p).exists()]
    if not existing:
        return
    for source in dict.fromkeys([*map(Path, inputs), *expand(list(inputs))]):
        for output in existing:
            with contextlib.suppress(OSError):
                if os.path.samefile(output, source):
                    raise InputError(f"{option} {output}: is the input {source}; refusing to overwrite an input "
                                     "(name another output)")


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` (same folder, same suffix, so a writer that reads the format from the name
    still does) to write the new file at; when the block ends without an error it replaces `path` in one step,
    else it is removed and `path` is untouched. A symlink is written through: its target is replaced."""
    target = Path(os.path.realpath(path))
    temporary = target.with_name(f".{target.name[:60]}.{uuid.uuid4().hex[:8]}.tmp{target.suffix}")
    try:
        yield temporary
        os.replace(temporary, target)
    finally:
        temporary.unlink(missing_ok=True)


def write_with(path: str | Path, writer: Callable[[Path], object], option: str = "") -> Path:
    """`writer(temporary_path)` writes the file, which then replaces `path` whole (see `replacing`); an error while
    writing (a full disk, a file-size limit) is an InputError naming `path` (after the `option` that named it),
    not the temporary file."""
    try:
        with replacing(path) as temporary:
            writer(temporary)
    except OSError as exc:
        named = f"{option} {path}" if option else str(path)
        raise InputError(f"{named}: cannot write ({exc.strerror or exc}); the file is left as it was") from None
    return Path(path)


def write_text(path: str | Path, text: str, option: str = "") -> Path:
    """The text as UTF-8, replacing `path` whole."""
    return write_with(path, lambda temporary: temporary.write_text(text, encoding="utf-8"), option)


def save_figure(figure: Figure, path: str | Path, dpi: int) -> Path:
    """A matplotlib figure as the image its suffix names (PNG), replacing `path` whole."""
    return write_with(path, lambda temporary: figure.savefig(temporary, dpi=dpi))
