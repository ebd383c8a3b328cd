"""check_precision.py - --precision on the CPU (docs/gpu.md "Precision"), from result and parameter
files, for test_precision.sh and test_precision_bf16.sh. Exit 0 when the check holds, 1 with one
line.

  loss-scaling PLAIN SCALED OVERFLOW
                       fp16's loss scaler in the training loop (8 iterations on 2 ranks):
                       scaling is exact; an overflow on one rank skips the step on every rank
  threads T1 T2 P1 P2  --threads 2 (T2, P2) against --threads 1 (T1, P1): bit for bit on
                       dtbench's own bf16 engine, within 1e-4 on oneDNN's
  recorded FILE        a bf16 run says so: root attribute, config_json, the GEMM engine
  accuracy FP32 BF16 --points D
                       bf16's final test accuracy within D points of fp32's, which learned
"""
import json
import re

import numpy as np

from checkutil import command, expect, h5, main, parser, text


def load(path):
    with h5(path) as f:
        it = f["iterations"]
        return {k: it[k][:, :] for k in ("loss", "loss_scale", "step_skipped")}, \
            f["ranks/param_hash"][:]


def loss_scaling(a):
    """PLAIN: precision fp32 (root attribute and backend_info), scale 1, nothing skipped.
    SCALED (DTBENCH_TEST_LOSS_SCALING=1): scale 65536 throughout, nothing skipped, losses and final
    parameters bit for bit PLAIN's (a power of two scales and unscales exactly). OVERFLOW (also
    DTBENCH_TEST_OVERFLOW=3,4: an inf in rank 0's gradient at steps 3 and 4): both ranks skip
    those steps, the scale halves at each (65536, 32768 at 4, 16384 from 5), losses before step 4
    equal PLAIN's and at step 4 differ, the final parameters differ from PLAIN's and agree
    between the ranks."""
    plain, hp = load(a.plain)
    scaled, hs = load(a.scaled)
    over, ho = load(a.overflow)
    with h5(a.plain) as f:
        prec = text(f.attrs["precision"])
        expect(prec == "fp32", f"{a.plain}: precision {prec}")
        info = str(f.attrs["backend_info"])
        expect("precision fp32" in info, f"{a.plain}: backend_info {info}")
    expect((plain["loss_scale"] == 1).all() and (plain["step_skipped"] == 0).all(),
           f"{a.plain}: loss_scale {plain['loss_scale']}, step_skipped {plain['step_skipped']}")
    expect((scaled["loss_scale"] == 65536).all(), f"{a.scaled}: loss_scale {scaled['loss_scale']}")
    expect((scaled["step_skipped"] == 0).all(),
           f"{a.scaled}: step_skipped {scaled['step_skipped']}")
    expect((hs == hp).all(), f"loss scaling changed the parameters: {hs} vs {hp}")
    expect((scaled["loss"] == plain["loss"]).all(), "loss scaling changed the losses")
    print("ok: scale 65536 and unscale: parameters and losses bit for bit the plain run's")
    skip = np.zeros(8)
    skip[[3, 4]] = 1
    scale = np.array([65536] * 4 + [32768] + [16384] * 3, dtype=float)
    for r in range(2):
        expect((over["step_skipped"][r] == skip).all(),
               f"rank {r}: step_skipped {over['step_skipped'][r]}")
        expect((over["loss_scale"][r] == scale).all(),
               f"rank {r}: loss_scale {over['loss_scale'][r]}")
    expect((over["loss"][:, :4] == plain["loss"][:, :4]).all(), "losses before the overflow differ")
    expect((over["loss"][:, 4] != plain["loss"][:, 4]).all(), "a skipped step changed nothing")
    expect((ho != hp).all() and ho[0] == ho[1], f"parameter hashes {ho}, plain run's {hp}")
    print("ok: an overflow on rank 0 skips steps 3 and 4 on both ranks; "
          "scale 65536 -> 32768 -> 16384")


def threads(a):
    """The GEMM engine named in T1's backend_info: oneDNN (which splits reductions over its
    threads): the parameters P1, P2 within 1e-4; any other (dtbench's own, which sums every
    element in the same order): the parameter hashes of T1 and T2 equal."""
    with h5(a.t1) as f1, h5(a.t2) as f2:
        info = text(f1.attrs["backend_info"])
        m = re.search(r"GEMM engine ([^,]*),", info)
        expect(m, f"{a.t1}: backend_info names no GEMM engine: {info}")
        engine = m.group(1)
        if engine != "onednn":
            h = [f["ranks/param_hash"][0] for f in (f1, f2)]
            expect(h[0] == h[1], f"--threads 2 changed the bf16 result of {engine}: {h}")
            print(f"ok: bf16 ({engine}) with --threads 2 = --threads 1, bit for bit")
            return
    p = [np.fromfile(q, dtype="<f4", offset=64) for q in (a.p1, a.p2)]
    d = float(np.abs(p[0] - p[1]).max())
    expect(d <= 1e-4, f"--threads 2 moved oneDNN's bf16 parameters by {d}")
    print(f"ok: bf16 (onednn) with --threads 2 within {d:.1e} of --threads 1 (bound 1e-4)")


def recorded(a):
    """Root attribute precision bf16, config_json's precision bf16, and backend_info naming the
    bf16 GEMM that ran: "precision bf16 (GEMM engine E" for E one of onednn, avx512bf16,
    openblas-sbgemm."""
    with h5(a.file) as f:
        at = f.attrs
        expect(text(at["precision"]) == "bf16", f"{a.file}: precision {at['precision']}")
        cfg = json.loads(text(at["config_json"]))
        expect(cfg.get("precision") == "bf16", f"{a.file}: config_json precision "
                                               f"{cfg.get('precision')}")
        info = text(at["backend_info"])
        expect(any(f"precision bf16 (GEMM engine {e}" in info
                   for e in ("onednn", "avx512bf16", "openblas-sbgemm")), f"backend_info {info}")
    print("ok: root attribute precision=bf16, config_json, backend_info:", info.split(";")[-1])


def accuracy(a):
    """The final test accuracies: FP32's above 0.80 (it learned), BF16's within D points of it."""
    acc = []
    for p in (a.fp32, a.bf16):
        with h5(p) as f:
            acc.append(float(f["eval/accuracy"][-1]))
    f32, b16 = acc
    print(f"test accuracy fp32 {f32:.4f}, bf16 {b16:.4f}, difference {100 * (b16 - f32):+.2f} "
          f"points")
    expect(f32 > 0.80, f"fp32 did not learn ({f32})")
    expect(abs(b16 - f32) <= a.points / 100, f"bf16 is more than {a.points:g} point from fp32")


if __name__ == "__main__":
    ap, sub = parser(__doc__)
    command(sub, loss_scaling, ("plain",), ("scaled",), ("overflow",))
    command(sub, threads, ("t1",), ("t2",), ("p1",), ("p2",))
    command(sub, recorded, ("file",))
    command(sub, accuracy, ("fp32",), ("bf16",), ("--points", {"type": float, "required": True}))
    main(ap)
