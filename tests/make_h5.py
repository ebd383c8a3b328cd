"""make_h5.py - small HDF5 files standing in for what a run or a GPU session writes, for the shell
tests of the programs that read them (docs/hdf5-layout.md).

  ranks PATH HOST... [--latest] [--hold S]
      /ranks/status (0 on every rank) and /ranks/host, one rank per HOST: what a finalizer
      (dtbench --finalize) reads of a run's file
  kernel-choices PATH PRECISION TEXT
      the root attribute precision, and TEXT as /ranks/kernel_choices of 2 ranks (none when TEXT
      is empty), as kernels/cuda/cuda.c records the math its convolutions and GEMMs used
"""
import os
import time

import h5py
import numpy as np

from checkutil import command, main, parser


def ranks(a):
    """/ranks/status and /ranks/host of len(HOST) ranks. --latest: the newest file format
    (superblock version 3). --hold S: kept open for writing S seconds, then the process ends
    without closing it, as a run's dying writer does; PATH.ready exists while the file is made,
    renamed PATH.open once its content is flushed."""
    if a.hold is not None:
        with open(a.path + ".ready", "w"):
            pass
    f = h5py.File(a.path, "w", libver="latest" if a.latest else None)
    f.create_dataset("ranks/status", data=np.zeros(len(a.host), dtype=np.int32))
    f.create_dataset("ranks/host", data=np.array([h.encode() for h in a.host], dtype="S64"))
    if a.hold is None:
        f.close()
        return
    f.flush()
    os.rename(a.path + ".ready", a.path + ".open")
    time.sleep(a.hold)
    os._exit(0)  # as a survivor ends: no close


def kernel_choices(a):
    """The precision attribute and, unless TEXT is empty, TEXT as every rank's kernel choices (a
    file without them is a CPU run's)."""
    with h5py.File(a.path, "w") as f:
        f.attrs["precision"] = a.precision
        g = f.create_group("ranks")
        if a.text:
            g.create_dataset("kernel_choices", data=np.array([a.text.encode()] * 2))


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, ranks, ("path",), ("host", {"nargs": "+"}), ("--latest", {"action": "store_true"}),
            ("--hold", {"type": float, "metavar": "S"}))
    command(sub, kernel_choices, ("path",), ("precision",), ("text",))
    main(ap)
