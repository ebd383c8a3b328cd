"""The command line's commands, one module each (``add_parser`` and ``run_command``): options,
checks made before any work, text output and which figure to write. What they compute comes from
the library modules one level up; cli.py puts them together as ``dtbench-analyze``."""
