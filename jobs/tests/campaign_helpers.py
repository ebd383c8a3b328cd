"""Shared pieces of the campaign tool's tests: a dtbench --help text in the program's format,
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

# What `dtbench --help` prints, in its format (options.c), with the strategies of other branches.
HELP = textwrap.dedent("""\
    Usage: mpirun -np N dtbench [options]
    Trains a network data-parallel on every rank and records per-iteration timings of
    every rank into one HDF5 file.

    Options (default in brackets):
      --model {lenet,fcn5,fcn8,resnet50}
          network to train [lenet]
      --dataset {synthetic,fashion-mnist,mnist}
          training data (synthetic: seeded random samples of the model's input shape) [fashion-mnist]
      --data-dir TEXT
          folder with the IDX files (default: /usr/share/datasets/<dataset>) []
      --device {cpu,cuda}
          compute backend [cpu]
      --exchange {sync,async,mixed}
          gradient exchange strategy [sync]
      --batch N
          global batch per iteration, split evenly across ranks [64]
      --iters N
          measured training iterations [100]
      --warmup N
          warm-up iterations run before the measured ones, recorded and flagged [10]
      --lr X
          learning rate [0.01]
      --threads N
          BLAS threads per rank [1]
      --bucket-mb X
          gradient bucket size for the exchange, MiB [25]
      --seed N
          seed for initial parameters, data order and synthetic data [42]
      --flush-every N
          iterations buffered per block written to the HDF5 file [50]
      --ranks-per-node N
          group ranks into nodes of K consecutive ranks (0: detect shared-memory nodes) [0]
      --output TEXT
          HDF5 result file [dtbench.h5]
      --overwrite
          replace the output file if it exists [no]
      --tag TEXT
          free text stored with the results []
      --dry-run
          print the model (layers, shapes, parameters, FLOPs) and exit [no]
      --help
          print this help and exit
      --version
          print the version and exit
    """)


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
                nranks: int = 2) -> None:
    """A result file with what status and collect read (docs/hdf5-layout.md)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with h5py.File(path, "w") as f:
        f.attrs["iters_total"] = iters_total
        if finished:
            f.attrs["finished"] = 1
            f.attrs["stop_reason"] = stop_reason
        f.create_dataset("ranks/completed", data=np.full(nranks, completed, dtype=np.int64))


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
    """Prints HELP for --help; --dry-run refuses --model resnet50 with a real data set."""
    help_file = os.path.join(str(tmp_path), "help.txt")
    with open(help_file, "w") as f:
        f.write(HELP)
    return fake_program(tmp_path, "dtbench", f"""\
        case " $* " in *" --help "*) cat {help_file}; exit 0 ;; esac
        case " $* " in *"--model resnet50"*"--dataset mnist"*)
            echo "dtbench: --dataset: mnist is not accepted for resnet50; accepted: synthetic" >&2; exit 2 ;; esac
        exit 0
        """)
