"""`python -m suites.advise MODULE:FACTORY`: the entry point of suites.training.advise, kept where users call it."""

import sys

from suites.training.advise import main

if __name__ == "__main__":
    sys.exit(main())
