"""check_chained.py - a 16-bit whole step (layer_compare --chained) on the GPU against the CPU's
fp32, bounded by the CPU's own 16-bit storage model (configuration fake) on the same step.

Usage: check_chained.py GPU.txt FAKE.txt [--factor K]

Both files are layer_compare --chained outputs (without --quiet: one line per tensor) of the same
model, batch and seed with A = cpu: GPU.txt with B = cuda:PREC:nhwc, FAKE.txt with B = fake:PREC.
Each tensor of GPU.txt must lie within max(its printed tolerance, K x the same tensor's norm rel in
FAKE.txt) of the CPU's fp32 (K = 4 by default). A whole step in 16 bits drifts from fp32 by an
amount that depends on the network's depth (a GoogLeNet's first weight gradient: 0.37 of its norm
on the fake, where the fixed chained tolerance is 0.25); the fake rounds the activations as the
GPU stores them, the GPU also rounds each product's weight copy, so its drift may be larger by
about the number of rounding sources, and K leaves room for that. Both runs must have finished
and name the same tensors. Exit status 0 when every tensor holds, 1 with one line per breach.
"""
import argparse
import re
import sys

LINE = re.compile(r"^(\d+ .*?)\s+max abs .*norm rel (\S+)\s+\(tolerance (\S+)\)")


def tensors(path):
    rows, done = {}, False
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                rows[" ".join(m.group(1).split())] = (float(m.group(2)), float(m.group(3)))
            elif re.match(r"^(PASS|FAIL): \d+ tensor", line):
                done = True
    if not done:
        raise ValueError("no final PASS/FAIL line: the comparison did not finish")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("gpu")
    p.add_argument("fake")
    p.add_argument("--factor", type=float, default=4.0)
    a = p.parse_args()
    try:
        gpu, fake = tensors(a.gpu), tensors(a.fake)
    except (OSError, ValueError) as e:
        print(f"FAIL: {e}")
        return 1
    bad = [f"{k}: in one run only" for k in sorted(set(gpu) ^ set(fake))]
    worst = 0.0
    for k in sorted(set(gpu) & set(fake), key=lambda k: int(k.split()[0])):
        got, tol = gpu[k]
        bound = max(tol, a.factor * fake[k][0])
        worst = max(worst, got / bound)
        if not got <= bound:
            bad.append(f"{k}: norm rel {got:.3g} beyond {bound:.3g} (tolerance {tol:g}, fake "
                       f"{fake[k][0]:.3g} x {a.factor:g})")
    for b in bad:
        print(f"FAIL: {b}")
    if not bad:
        print(f"ok: {len(gpu)} tensors within max(tolerance, {a.factor:g} x the fake's drift); "
              f"largest {worst:.2f} of its bound")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
