"""checkutil.py - what the shell tests' Python programs (tests/check_*.py, make_*.py) share.

A program is a set of sub-checks, one function each, whose docstring says what it asserts:

    ap, sub = checkutil.parser(__doc__)
    checkutil.command(sub, my_check, ("file",), ("--tol", {"type": float, "default": 1e-5}))
    checkutil.main(ap)

`main` runs the chosen function on the parsed arguments. A check that fails prints one line
`FAIL: ...` and exits 1 (`die`, `expect`); a file that is missing, is not HDF5 (`h5`), or lacks
what the check reads is one such line too, never a traceback.
"""
import argparse
import sys


def die(msg):
    print("FAIL: " + " ".join(str(msg).split()))  # one line, whatever arrays it quotes
    sys.exit(1)


def expect(cond, msg):
    """Fails with msg unless cond holds (an assert that neither -O nor a traceback changes)."""
    if not cond:
        die(msg)


def text(v):
    """An HDF5 string attribute as str, whether h5py hands it over as str or bytes."""
    return v.decode() if isinstance(v, bytes) else str(v)


def h5(path):
    """path opened for reading with h5py, or one line saying why it cannot be."""
    import h5py  # here: the programs that make data files do not need it

    try:
        return h5py.File(path, "r")
    except OSError as e:
        die(f"{path}: not a readable HDF5 file: {e}")


def parser(doc):
    ap = argparse.ArgumentParser(description=doc,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    return ap, ap.add_subparsers(dest="check", required=True, metavar="CHECK")


def command(sub, func, *args):
    """Sub-check func, named as the function (- for _), its docstring the help; each of args is
    (NAME...,) or (NAME..., {add_argument options})."""
    doc = func.__doc__ or ""
    first = " ".join(doc.split("\n\n")[0].split()).replace("%", "%%")  # argparse formats help
    p = sub.add_parser(func.__name__.replace("_", "-"), help=first, description=doc)
    for spec in args:
        opts = spec[-1] if isinstance(spec[-1], dict) else {}
        p.add_argument(*(n for n in spec if isinstance(n, str)), **opts)
    p.set_defaults(run=func)


def main(ap):
    a = ap.parse_args()
    try:
        a.run(a)
    except (OSError, KeyError, ValueError, IndexError) as e:  # a missing or unexpected file
        where = getattr(a, "file", None)
        die(f"{a.check}{' ' + where if where else ''}: {type(e).__name__}: {e}")
