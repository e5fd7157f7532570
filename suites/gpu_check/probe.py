"""`python -m suites.gpu_check.probe MODULE:FUNCTION OUT DEVICE`: one probe of the GPU check, in its own process.

gpu_check runs each probe here so that a hang or a crash costs one step (it has a timeout), not the check.
The function takes (out folder, torch.device) and returns or yields rows; each is printed on its own line as JSON
behind ROW_PREFIX, flushed as soon as the function gives it (the rows before a failure are kept). An exception
ends the probe with its first line and exit code 1.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

import torch

from suites.core.runner import first_line
from suites.gpu_check.command import load_function
from suites.gpu_check.rows import ROW_PREFIX


def main(argv: list[str] | None = None) -> int:
    name, out, device = argv if argv is not None else sys.argv[1:]
    try:
        for row in load_function(name)(Path(out), torch.device(device)):
            print(ROW_PREFIX + json.dumps(asdict(row)), flush=True)
    except Exception as exc:  # the probe's boundary: gpu_check records the failure as a row
        print(first_line(exc), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
