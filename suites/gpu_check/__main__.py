"""`python -m suites.gpu_check`, the same as `python -m suites gpu_check`."""

import sys

from suites.gpu_check.command import main

sys.exit(main())
