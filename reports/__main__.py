"""`python -m reports COMMAND ...`: one subcommand per module.

Each command module exposes `register(subparsers)`, which adds its parser and sets `func` (args -> exit code).
Only the module of the command asked for is imported (all of them for --help): `trace` needs neither pandas
nor matplotlib, and importing them would cost it more time than summarizing a 100k-event trace.
Bad input raises `reports.format.errors.InputError`; it becomes one line on stderr and exit code 2, never a traceback.
Everything a command prints goes out with its control characters escaped (reports/format/printable.py): names
from input files never act on the terminal.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from reports.format.errors import InputError
from reports.format.printable import escaped_output

COMMANDS = {
    "table": "reports.table",
    "plot": "reports.plot",
    "trace": "reports.trace",
    "compare": "reports.compare",
    "history": "reports.history",
    "hardware": "reports.hardware",
    "html": "reports.html",
    "export": "reports.export",
    "accept": "reports.accept",
}


def main(argv: list[str] | None = None) -> int:
    with escaped_output():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    argv = sys.argv[1:] if argv is None else argv
    wanted = [argv[0]] if argv and argv[0] in COMMANDS else list(COMMANDS)
    for name in wanted:
        importlib.import_module(COMMANDS[name]).register(subparsers)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except OSError as exc:  # an output that cannot be written (full disk, a file where a folder was asked)
        print(f"error: {exc.filename or ''}: cannot write ({exc.strerror or exc})", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
