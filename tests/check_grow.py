"""check_grow.py - results files whose /iterations grow with the run (docs/hdf5-layout.md), for
test_grow.sh and test_grow_disk.sh. Exit 0 when the check holds, 1 with one line.

  stopped FILE SIZE --ranks P --iters N --min-completed K
                         a long run stopped early: small, every dataset growable to N, every
                         completed iteration written and nothing beyond
  index FILE --ranks P --step S
                         a run SIGKILLed after extensions: its extent, its chunks, and one
                         chunk-index node for all of them
  step FILE --ranks P --step S
                         the chunk step of /iterations/total
  killed FILE            a run killed at any moment: every completed iteration readable
  finalized CUT ORIG     CUT marked by dtbench --finalize, its completed iterations those of ORIG
  extent FILE STEP       a finished run's extent: its completed iterations rounded up to STEP
                         (0: allocated whole, contiguous)
  bytes-per-iteration FILE
                         prints the bytes one iteration of every rank takes in /iterations
"""
import math

import numpy as np

from checkutil import command, expect, h5, main, parser, text


def stopped(a):
    """Stopped by a signal after K or more of N iterations (every rank after the same one, status
    2): every /iterations dataset can grow to (P, N) and holds the completed iterations, written,
    NaN beyond; the file is under 8 MB."""
    with h5(a.file) as f:
        at = f.attrs
        expect(at["finished"] == 1 and at["stop_reason"] == "signal", f"not stopped: {dict(at)}")
        expect((f["ranks/status"][:] == 2).all(), f"status {f['ranks/status'][:]}")
        n = int(at["iters_total"])
        expect(n == a.iters, f"iters_total {n}, expected {a.iters}")
        done = f["ranks/completed"][:]
        expect(len(set(done)) == 1 and a.min_completed <= done[0] < n, f"completed {done}")
        for name, d in f["iterations"].items():
            expect(d.maxshape == (a.ranks, n), f"{name}: maxshape {d.maxshape}")
            expect(done[0] <= d.shape[1] < n, f"{name}: shape {d.shape}")
            v = d[:]
            expect(not np.isnan(v[:, :done[0]]).any(), f"{name}: a completed iteration missing")
            expect(np.isnan(v[:, done[0]:]).all(), f"{name}: values beyond the completed ones")
        whole = len(f["iterations"]) * a.ranks * n * 8
        expect(a.size < 8e6, f"{a.size / 1e6:.1f} MB after {done[0]} iterations")
        print(f"ok: stopped after {done[0]} of {n} iterations: file {a.size / 1e6:.2f} MB "
              f"(/iterations extent {f['iterations/total'].shape[1]}; allocated whole: "
              f"{whole / 1e6:.0f} MB of iterations)")


def index(a):
    """Killed after extensions of S iterations: the extent covers every rank's completed
    iterations, is at least 60 and short of the whole run; chunks of (P, S); and the chunk
    B-tree's K in the superblock (version 1: bytes 24-25) half the whole run's chunk count, so
    that one index node holds every chunk and never splits."""
    with h5(a.file) as f:
        done, extent = f["ranks/completed"][:], f["iterations/total"].shape[1]
        n = int(f.attrs["iters_total"])
        expect((done <= extent).all() and 60 <= extent < n, f"completed {done}, extent {extent}")
        chunks = f["iterations/total"].chunks
        expect(chunks == (a.ranks, a.step), f"chunks {chunks}, expected {(a.ranks, a.step)}")
        k = (-(-n // a.step) + 1) // 2  # half the chunks: 2501 -> 1251
    with open(a.file, "rb") as fh:
        raw = fh.read(28)
    got = int.from_bytes(raw[24:26], "little")
    expect(raw[8] == 1 and got == k, f"superblock version {raw[8]}, chunk B-tree K {got}, "
                                     f"expected version 1 and K {k}")
    print(f"ok: {a.file}: extent {extent} in chunks of {a.step}, completed {done.tolist()}; "
          f"one index node of K {k}")


def step(a):
    """/iterations/total is chunked in (P, S)."""
    with h5(a.file) as f:
        c = f["iterations/total"].chunks
    expect(c == (a.ranks, a.step), f"chunks {c}, not {(a.ranks, a.step)}")
    print(f"ok: {a.file}: chunks {c}")


def killed(a):
    """Every rank's completed iterations lie within the extent and are written in every
    quantity (the loss aside: a run may diverge to NaN)."""
    with h5(a.file) as f:
        done = f["ranks/completed"][:]
        extent = f["iterations/total"].shape[1]
        expect((done <= extent).all(), f"completed {done}, extent {extent}")
        for name, d in f["iterations"].items():
            v = d[:, :done.max()]
            for r, n in enumerate(done):
                expect(name == "loss" or not np.isnan(v[r, :n]).any(),
                       f"{name}: rank {r} misses iterations before {n}")
        print(f"ok: killed: completed {done.tolist()}, extent {extent}")


def finalized(a):
    """CUT has stop_reason peer_lost, and every /iterations dataset's completed columns equal
    ORIG's bit for bit."""
    with h5(a.cut) as f, h5(a.orig) as e:
        expect(text(f.attrs.get("stop_reason")) == "peer_lost", f"{a.cut}: {dict(f.attrs)}")
        n = int(f["ranks/completed"][:].max())
        for name, d in f["iterations"].items():
            same = np.array_equal(d[:, :n], e["iterations"][name][:, :n], equal_nan=True)
            expect(same, f"{a.cut}: /iterations/{name} differs from {a.orig} before {n}")
        print(f"ok: {a.cut} after --finalize: marked, its {n} completed iterations as before")


def extent(a):
    """A finished run: STEP > 0, every dataset chunked (P, STEP), growable to (P, N), of the
    extent its most completed iterations rounded up to STEP (N at most); STEP 0, contiguous and
    (P, N). Every worker's completed iterations written (the loss aside: a strategy may diverge to
    NaN; ssp --staleness 2 does after ~85 iterations, whole allocation or not)."""
    with h5(a.file) as f:
        expect(f.attrs["finished"] == 1, f"{a.file}: not finished: {dict(f.attrs)}")
        p, n = int(f.attrs["nranks"]), int(f.attrs["iters_total"])
        workers = f["ranks/role"][:] == 0
        done = f["ranks/completed"][:]
        most = int(done.max())
        for name, d in f["iterations"].items():
            if a.step:
                expect(d.chunks == (p, a.step) and d.maxshape == (p, n),
                       f"{name}: chunks {d.chunks}, maxshape {d.maxshape}")
                want = min(n, math.ceil(most / a.step) * a.step)
            else:
                expect(d.chunks is None, f"{name}: chunks {d.chunks}, expected contiguous")
                want = n
            expect(d.shape == (p, want), f"{name}: shape {d.shape}, expected {(p, want)} "
                                         f"(completed {done.tolist()})")
            v = d[:]
            for r in np.flatnonzero(workers):
                expect(name == "loss" or not np.isnan(v[r, :done[r]]).any(),
                       f"{name}: rank {r} misses completed iterations")
        print(f"ok: {a.file}: {f.attrs['exchange']}, {p} ranks, completed {done.tolist()} of {n}, "
              f"/iterations {d.shape}, chunks {d.chunks}")


def bytes_per_iteration(a):
    """Prints the bytes of one column of every (ranks, iterations) dataset of /iterations."""
    with h5(a.file) as f:
        g = f["iterations"]
        n = g["total"].shape[1]
        print(sum(d.size * d.dtype.itemsize for d in g.values()
                  if hasattr(d, "ndim") and d.ndim == 2 and d.shape[1] == n) / n)


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    ranks = ("--ranks", {"type": int, "required": True})
    steps = ("--step", {"type": int, "required": True})
    command(sub, stopped, ("file",), ("size", {"type": int}), ranks,
            ("--iters", {"type": int, "required": True}),
            ("--min-completed", {"type": int, "required": True}))
    command(sub, index, ("file",), ranks, steps)
    command(sub, step, ("file",), ranks, steps)
    command(sub, killed, ("file",))
    command(sub, finalized, ("cut",), ("orig",))
    command(sub, extent, ("file",), ("step", {"type": int}))
    command(sub, bytes_per_iteration, ("file",))
    main(ap)
