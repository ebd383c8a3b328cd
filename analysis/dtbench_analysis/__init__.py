"""dtbench_analysis: read and analyse dtbench HDF5 result files (schema version 1).

Start with ``load(paths)`` (tables as DataFrames, figures: api.py) or ``load_run(path)`` (one
run, see runfile.py); the command line is ``dtbench-analyze``. The library computes (this
folder, ``predict/``), ``plot/`` draws, ``commands/`` holds the command line's options and text;
which module does what: analysis/README.md, "Modules".
"""

from .runfile import (ITERATION_FIELDS, PHASES, SCHEMA_VERSION, Run, RunFileError, SchemaError,
                      load_run)
from .api import Results, load

__version__ = "0.1.0"

__all__ = ["ITERATION_FIELDS", "PHASES", "SCHEMA_VERSION", "Run", "RunFileError", "SchemaError",
           "load_run", "load", "Results", "__version__"]
