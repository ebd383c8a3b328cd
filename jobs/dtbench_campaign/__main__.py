"""Allows ``python -m dtbench_campaign ...``, the same as ``dtbench-campaign ...``."""

import sys

from .cli import main

sys.exit(main())
