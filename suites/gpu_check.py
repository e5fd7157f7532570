"""`python -m suites.gpu_check`: the entry point of suites.checks.gpu_check, kept where users call it."""

import sys

from suites.checks.gpu_check import main

if __name__ == "__main__":
    sys.exit(main())
