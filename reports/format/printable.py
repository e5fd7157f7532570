"""Text from input files as a terminal shows it: control characters written out, never acted on.

A kernel name, a case name, a device name or a file name comes from a file someone else wrote. Printed as it is,
a control character in it acts on the reader's terminal: `\\x1b[2J` clears the screen, `\\x1b]8;;URL\\x07` makes a
link, `\\r` lets the rest of a line overwrite its start, so a table can show what its file does not hold. So
every `python -m reports` command writes through `escaped_output` (reports/__main__.py), which escapes every C0
and C1 control character and DEL but the line break and the tab as `\\xNN` in everything it prints, on stdout and
stderr alike: no printer, present or future, can forget a field. A line break stays one (a cell of two lines is
drawn as two), and JSON printed by a command is unchanged, since `json` escapes control characters itself.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import TextIO

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but \t and \n, DEL, C1 (\x9b is CSI on its own)


def printable(text: str) -> str:
    """The text with each control character but the line break and the tab written as `\\xNN`."""
    return CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)


class Escaping:
    """A text stream that writes `printable(text)` to the stream it wraps; everything else is the wrapped one's."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(printable(text) if CONTROL.search(text) else text)
        return len(text)

    def __getattr__(self, name: str) -> object:
        return getattr(self.stream, name)


@contextlib.contextmanager
def escaped_output() -> Iterator[None]:
    """stdout and stderr escaped (`Escaping`) for the duration of the block."""
    with contextlib.redirect_stdout(Escaping(sys.stdout)), contextlib.redirect_stderr(Escaping(sys.stderr)):
        yield
