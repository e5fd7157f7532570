"""`python -m reports COMMAND ...`: one subcommand per module.

Each command module exposes `register(subparsers)`, which adds its parser and sets `func` (args -> exit code).
Bad input raises `reports.errors.InputError`; it becomes one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys

from reports import plots, table, trace
from reports.errors import InputError

COMMANDS = [table, plots, trace]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in COMMANDS:
        module.register(subparsers)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
