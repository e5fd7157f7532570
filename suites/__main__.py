"""`python -m suites COMMAND ...`: the measuring side's commands, one entry for all of them.

`gpu_check` checks a new GPU box inside a budget (also `python -m suites.gpu_check`, the package's own entry),
`crosscheck` times the suite's matmul cases against torch.utils.benchmark, `advise` measures every lever of the
training recipe on a user's model, and `plan` says what the main job will cost before it runs. Only the command
asked for is imported: each imports torch.
"""

from __future__ import annotations

import importlib
import sys

COMMANDS = {
    "gpu_check": "suites.gpu_check.command",
    "crosscheck": "suites.gpu_check.crosscheck",
    "advise": "suites.training.advise",
    "plan": "suites.plan",
}
USAGE = f"usage: python -m suites {{{','.join(COMMANDS)}}} [options]  (python -m suites COMMAND --help for its options)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(f"{__doc__.splitlines()[0]}\n{USAGE}")
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"error: unknown command {argv[0]!r}; {USAGE}", file=sys.stderr)
        return 2
    return importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
