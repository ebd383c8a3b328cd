"""compare_params.py - compares parameter files written by dtbench --save-model.

Usage: compare_params.py TOLERANCE REFERENCE OTHER...; prints the largest absolute difference of
each OTHER from REFERENCE and exits 1 if any exceeds TOLERANCE or the files do not match in size.
"""
import sys

import numpy as np


def load(path):
    with open(path, "rb") as fh:
        header = fh.read(64)
        if header[:8] != b"DTBMODEL":
            sys.exit(f"FAIL: {path}: not a dtbench parameter file")
        n = int(np.frombuffer(header[16:24], dtype="<u8")[0])
        params = np.fromfile(fh, dtype="<f4")
    if params.size != n:
        sys.exit(f"FAIL: {path}: {params.size} parameters, header says {n}")
    return params


def main():
    tol, ref_path, others = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
    ref = load(ref_path)
    bad = 0
    for path in others:
        p = load(path)
        if p.shape != ref.shape:
            print(f"FAIL: {path}: {p.size} parameters, reference has {ref.size}")
            bad += 1
            continue
        diff = float(np.max(np.abs(p - ref)))
        moved = float(np.max(np.abs(ref)))
        ok = diff <= tol
        print(f"{'ok' if ok else 'FAIL'}: {path}: max |difference| {diff:.3g} from the reference "
              f"(tolerance {tol:g}; largest parameter {moved:.3g})")
        bad += not ok
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
