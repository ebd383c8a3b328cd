"""The library computes, the commands print: no module outside commands/ (and cli.py, the entry
point) defines a command's parser, prints, or imports a command module at import time; the
documented facade predict_plot.py only forwards to the module that draws."""

import ast
import os
import subprocess
import sys

import dtbench_analysis

PACKAGE = os.path.dirname(dtbench_analysis.__file__)
#: modules that belong to the command line or forward to it under a documented name
COMMAND_SIDE = {"cli.py", "__main__.py", "predict_plot.py"}


def library_modules():
    for root, _, names in os.walk(PACKAGE):
        rel = os.path.relpath(root, PACKAGE)
        if rel.split(os.sep)[0] == "commands":
            continue
        for name in sorted(names):
            if name.endswith(".py") and not (rel == "." and name in COMMAND_SIDE):
                yield os.path.join(root, name)


def test_library_defines_no_command_and_prints_nothing():
    found = []
    for path in library_modules():
        tree = ast.parse(open(path, encoding="utf-8").read())
        for node in ast.walk(tree):
            where = f"{os.path.relpath(path, PACKAGE)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.FunctionDef) and node.name in ("add_parser", "run_command"):
                found.append(f"{where}: defines {node.name}")
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                found.append(f"{where}: prints")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [getattr(node, "module", None) or ""] + [a.name for a in node.names]
                if any(n == "argparse" or n.split(".")[0] == "commands" or ".commands" in n
                       for n in names):
                    found.append(f"{where}: imports {', '.join(n for n in names if n)}")
    assert found == []


def test_loading_the_library_imports_no_command():
    """What a notebook imports (load, the tables, the figures) leaves commands/ unloaded."""
    code = ("import sys, dtbench_analysis as d, dtbench_analysis.plot.time, "
            "dtbench_analysis.plot.training, dtbench_analysis.predict, dtbench_analysis.tables\n"
            "print(sorted(m for m in sys.modules if m.startswith('dtbench_analysis.commands')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "[]"
