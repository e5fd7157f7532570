"""`python -m reports accept RUN --history DIR --reason TEXT`: take a run's level as the new reference.

What an acceptance is and how the judgement applies it: reports/acceptances.py. This is the command: it checks the
run, the folder and the reason, appends the record and says what it covers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from reports import acceptances
from reports.format.errors import InputError
from reports.format.load import load


def run(args: argparse.Namespace) -> int:
    if not args.reason.strip():
        raise InputError("--reason: say why this level is meant (it is shown beside the step it closes)")
    folder = Path(args.history)
    if not folder.is_dir():
        raise InputError(f"--history {folder}: not a directory (the folder of runs the gate reads)")
    candidate = load([args.run], samples=False)
    if candidate["file"].nunique() != 1:
        raise InputError(f"{args.run}: expected one result file")
    found = acceptances.record(candidate, args.reason.strip(), args.case)
    path = acceptances.append(folder, found)
    covered = ", ".join(found.cases) if found.cases else "every case and the whole run's shift"
    print(f"accepted {found.file} ({found.machine}, {found.datetime}) for {covered}: {found.reason}\n"
          f"recorded in {path}; the gate judges the nights after it against this level")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("accept", help="take a run's level as the reference the gate judges by")
    parser.add_argument("run", help="the results file of the run whose level is meant (e.g. the night that failed)")
    parser.add_argument("--history", required=True, help="the folder of runs the gate reads (the nightly's runs "
                        "folder, .benchmarks): the acceptance is kept there, in accepted.jsonl")
    parser.add_argument("--reason", required=True, help="why the new level is meant (shown on the history page)")
    parser.add_argument("--case", action="append", default=[], help="accept only this case (repeatable; default: "
                        "every case and the whole run's shift)")
    parser.set_defaults(func=run)
