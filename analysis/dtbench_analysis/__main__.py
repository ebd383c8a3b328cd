"""Allows ``python -m dtbench_analysis ...``, the same as ``dtbench-analyze ...``."""

import sys

from .cli import main

sys.exit(main())
