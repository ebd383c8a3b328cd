#!/usr/bin/env python3
"""Writes the small result files bench/test_vs_pytorch_parse.sh checks vs_pytorch.sh --parse on:
    test_vs_pytorch_parse.py DIR   -> DIR/a.h5, b.h5, c.h5, d.h5 (what each holds: below)."""
import sys

import h5py
import numpy as np

d = sys.argv[1]
nan = np.nan


def make(fn, warmup, iters, completed, totals, finished=True, model="lenet", batch=64):
    nranks, T = len(totals), warmup + iters
    with h5py.File(f"{d}/{fn}", "w") as f:
        a = f.attrs
        a.update(dict(schema_version=1, model=model, dataset="synthetic", iters=iters,
                      warmup=warmup, iters_total=T, nranks=nranks, batch_per_rank=batch,
                      batch_global=batch * nranks))
        if finished:
            a.update(dict(finished=1, stop_reason="completed", end_time="2024-01-01T00:00:00Z"))
        g = f.create_group("ranks")
        g.create_dataset("completed", data=np.array(completed, dtype=np.int64))
        g.create_dataset("status", data=np.array([int(finished)] * nranks, dtype=np.int32))
        it = f.create_group("iterations")
        it.attrs["warmup"] = warmup
        for name in ("start", "data", "forward", "backward", "exchange", "update", "total",
                     "loss", "bytes_sent", "record"):
            ds = it.create_dataset(name, shape=(nranks, T), dtype="f8", fillvalue=nan)
            ds.attrs["units"] = "s"
            ds.attrs["description"] = name
        tot = np.full((nranks, T), nan)
        for r, row in enumerate(totals):
            tot[r, :len(row)] = row
        it["total"][...] = tot


# 1 rank, 2 warm-up columns (must be skipped), one NaN among the measured: median of 10,11,12,14 ms
make("a.h5", 2, 5, [7], [[1.0, 1.0, .010, .011, .012, nan, .014]])
# killed run: 4 of 7 completed; column 4 was written but its block not recorded -> 20, 30 ms
make("b.h5", 2, 5, [4], [[1.0, 1.0, .020, .030, 999.0]], finished=False)
# 2 ranks, 1 warm-up: 1..6 ms
make("c.h5", 1, 3, [4, 4], [[9, .001, .002, .003], [9, .004, .005, .006]])
# nothing measured yet (killed during warm-up)
make("d.h5", 2, 5, [2], [[1.0, 1.0]], finished=False)
