"""`python -m suites.crosscheck`: the entry point of suites.checks.crosscheck, kept where users call it."""

import sys

from suites.checks.crosscheck import main

if __name__ == "__main__":
    sys.exit(main())
