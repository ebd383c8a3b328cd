"""Shared pieces of the campaign tool's tests: the built dtbench (its options come from it),
spec builders, and synthetic result files with the attributes status reads."""

from __future__ import annotations

import os
import stat
import sys
import textwrap

import h5py
import numpy as np

# The package from the source tree, installed or not (make distcheck runs from a copy).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The dtbench of this tree: the tests learn its options from the program itself, never from a
# copy of its help (which went stale once: models, strategies and options were missing).
REAL_DTBENCH = os.environ.get("DTBENCH") or os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "bin", "dtbench")


def real_dtbench() -> str:
    """The built dtbench; the test is skipped, saying why, when it is not built."""
    import pytest
    if not os.access(REAL_DTBENCH, os.X_OK):
        pytest.skip(f"dtbench is not built ({REAL_DTBENCH}): run make first")
    return REAL_DTBENCH


def real_help(flag: str = "--help") -> str:
    import subprocess
    return subprocess.run([real_dtbench(), flag], capture_output=True, text=True,
                          check=True).stdout


def write_spec(tmp_path, text: str, name: str = "spec.toml") -> str:
    path = os.path.join(str(tmp_path), name)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    return path


BASIC = """\
    [campaign]
    name = "t"
    output = "OUT"

    [resources]
    nodes = [1, 2]
    tasks_per_node = 2

    [options]
    model = "lenet"
    exchange = ["sync", "mixed"]
    batch = 64
    iters = 10
    """


def result_file(path: str, finished: bool, stop_reason: str, completed: int, iters_total: int,
                nranks: int = 2, servers: int = 0) -> None:
    """A result file with what status and collect read (docs/hdf5-layout.md); the last
    `servers` ranks are parameter servers (role 1, 0 iterations, as dtbench writes them)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w") as f:
        f.attrs["iters_total"] = iters_total
        if finished:
            f.attrs["finished"] = 1
            f.attrs["stop_reason"] = stop_reason
        done = np.full(nranks, completed, dtype=np.int64)
        done[nranks - servers:] = 0
        f.create_dataset("ranks/completed", data=done)
        f.create_dataset("ranks/role", data=(np.arange(nranks) >= nranks - servers).astype(np.int32))


def state_file(path: str, **kv) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for k, v in kv.items():
            f.write(f"{k}={v}\n")


def fake_program(tmp_path, name: str, body: str) -> str:
    """An executable shell script TMP/bin/NAME."""
    d = os.path.join(str(tmp_path), "bin")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + textwrap.dedent(body))
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


def fake_dtbench(tmp_path) -> str:
    """The real dtbench for --help and --dry-run (the campaign tool's checks), nothing otherwise:
    runs are not started by the tests that use it (Slurm is faked)."""
    real = real_dtbench()
    return fake_program(tmp_path, "dtbench", f"""\
        case " $* " in *" --help "*|*" --dry-run "*) exec {real} "$@" ;; esac
        exit 0
        """)
