"""check_records.py - what a run recorded as it went: its evaluations, losses and /samples, and
the CPU kernels it chose (docs/hdf5-layout.md). Exit 0 when the check holds, 1 with one line.

  learning FILE --evals N      N evaluations in time order; the loss of the last 50 iterations
                               under half that of the first 50
  samples FILE --ranks P --hz H --capacity C
                               /samples of a CPU run on P ranks: shapes, units, sample times on the
                               iterations' clock at about H per second, the CPU source's values;
                               the device metadata of /ranks
  samples-full FILE --kept N   a /samples buffer that filled: N samples kept, all of them timed
  blas FILE --ranks P [--avx512]
                               a CPU run's /ranks/kernel_choices: the BLAS each rank loaded, its
                               core and why; on an AVX-512 CPU no generic core
"""
import numpy as np

from checkutil import command, expect, h5, main, parser, text

GENERIC_CORES = {"prescott", "nehalem", "core2", "katmai", "unknown"}


def learning(a):
    """N evaluations (/eval/accuracy), their times increasing; the mean training loss of the
    last 50 iterations (every rank) under half that of the first 50."""
    with h5(a.file) as f:
        acc = f["eval/accuracy"][:]
        loss = f["iterations/loss"][:]
        expect(len(acc) == a.evals and np.all(np.diff(f["eval/time"][:]) > 0),
               f"evaluations {acc}: expected {a.evals}, in time order")
        first, last = loss[:, :50].mean(), loss[:, -50:].mean()
        expect(last < 0.5 * first, f"training loss {first:.3f} -> {last:.3f}: not halved")
        print(f"ok: accuracy at the {a.evals} evaluations {np.round(acc, 4)}; training loss "
              f"{first:.3f} -> {last:.3f}")


def samples(a):
    """/samples: sample_hz H and capacity C; time, power_w, memory_mib, utilization of shape
    (P, C) with units and a description. Each rank wrote at least 5 samples, their times finite,
    increasing, NaN beyond samples_written, the first within 0.5 s of the first iteration's start
    and the last no earlier than 0.5 s before the last iteration's end, median spacing within
    0.5/H to 2/H; no power (a CPU), memory > 10 MiB, utilisation finite, >= 0, median > 1%.
    /ranks: every device field of shape (P,), sample_source procfs, a CPU model name, no UUID."""
    with h5(a.file) as f:
        g, p = f["samples"], a.ranks
        expect(g.attrs["sample_hz"] == a.hz and g.attrs["capacity"] == a.capacity,
               f"/samples attributes {dict(g.attrs)}")
        n = f["ranks/samples_written"][:]
        it = f["iterations"]
        for name, units in [("time", "s"), ("power_w", "W"), ("memory_mib", "MiB"),
                            ("utilization", "%")]:
            expect(g[name].shape == (p, a.capacity), f"/samples/{name} shape {g[name].shape}")
            expect(g[name].attrs["units"] == units and g[name].attrs["description"],
                   f"/samples/{name}: units {g[name].attrs.get('units')} or no description")
        for r in range(p):
            expect(n[r] >= 5, f"samples written {n}")  # 30 LeNet iterations last more than 50 ms
            t = g["time"][r, :n[r]]
            expect(np.isfinite(t).all() and (np.diff(t) > 0).all(), "sample times do not increase")
            expect(np.isnan(g["time"][r, n[r]:]).all(), "entries beyond samples_written")
            start, end = it["start"][r, 0], it["start"][r, -1] + it["total"][r, -1]
            # the sampler runs from just before the first iteration to after the last
            expect(start - 0.5 < t[0] < start + 0.5, f"rank {r}: first sample at {t[0]}, "
                                                     f"first iteration at {start}")
            expect(t[-1] > end - 0.5, f"rank {r}: last sample at {t[-1]}, run's end {end}")
            gap = np.median(np.diff(t))
            expect(0.5 / a.hz < gap < 2.0 / a.hz, f"rank {r}: median spacing {gap} s")
            expect(np.isnan(g["power_w"][r, :n[r]]).all(), "power on a CPU run")
            expect((g["memory_mib"][r, :n[r]] > 10).all(), f"rank {r}: memory_mib at most 10")
            u = g["utilization"][r, :n[r]]
            expect(np.isfinite(u).all() and (u >= 0).all() and np.median(u) > 1,
                   f"rank {r}: utilization {u}")
        rk = f["ranks"]
        for key in ["device_name", "device_uuid", "device_pci_bus_id", "driver_version",
                    "cuda_runtime_version", "cuda_driver_api_version", "cudnn_version",
                    "cublas_version", "nccl_version", "sample_source"]:
            expect(rk[key].shape == (p,), f"/ranks/{key} shape {rk[key].shape}")
        expect(all(s == b"procfs" for s in rk["sample_source"][:]),
               f"sample_source {rk['sample_source'][:]}")
        expect(all(len(s) > 0 for s in rk["device_name"][:]), "no CPU model name")
        expect(all(s == b"" for s in rk["device_uuid"][:]), f"device_uuid {rk['device_uuid'][:]}")
    print(f"ok: /samples: {n.tolist()} samples per rank, times on the iteration clock, CPU values")


def samples_full(a):
    """Rank 0 wrote N samples, /samples/time is (1, N) (the buffer's capacity) and finite."""
    with h5(a.file) as f:
        n, shape = f["ranks/samples_written"][0], f["samples/time"].shape
        expect(n == a.kept and shape == (1, a.kept),
               f"samples_written {n}, /samples/time {shape}: expected {a.kept}")
        expect(np.isfinite(f["samples/time"][0]).all(), "a kept sample untimed")
    print(f"ok: {a.file}: a full /samples keeps its {a.kept} samples")


def blas(a):
    """/ranks has device_name and P kernel_choices; each rank's lines "NAME: VALUE" hold "blas:
    OpenBLAS /..." and "blas core: CORE: WHY" with a reason; --avx512 (the CPU has AVX-512,
    whatever OpenBLAS's version): CORE none of the generic ones."""
    with h5(a.file) as f:
        expect("device_name" in f["ranks"], f"{a.file}: /ranks without device_name: "
                                            f"{list(f['ranks'])}")
        kc = [text(k) for k in f["ranks/kernel_choices"][:]]
    expect(len(kc) == a.ranks, f"{a.file}: {len(kc)} kernel choices, not {a.ranks}: {kc}")
    for choices in kc:
        lines = dict(l.split(": ", 1) for l in choices.splitlines())
        expect(lines["blas"].startswith("OpenBLAS /"), f"{a.file}: blas {lines['blas']!r}")
        core, why = lines["blas core"].split(": ", 1)
        expect(why, f"{a.file}: blas core {core} without a reason")
        if a.avx512:
            expect(core.lower() not in GENERIC_CORES, f"{a.file}: a generic core on an AVX-512 "
                                                      f"CPU: {choices!r}")
    print("ok: CPU run: kernel_choices per rank:", kc[0].replace("\n", " | "))


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, learning, ("file",), ("--evals", {"type": int, "required": True}))
    command(sub, samples, ("file",), ("--ranks", {"type": int, "required": True}),
            ("--hz", {"type": float, "required": True}),
            ("--capacity", {"type": int, "required": True}))
    command(sub, samples_full, ("file",), ("--kept", {"type": int, "required": True}))
    command(sub, blas, ("file",), ("--ranks", {"type": int, "required": True}),
            ("--avx512", {"action": "store_true", "help": "the CPU has AVX-512"}))
    main(ap)
