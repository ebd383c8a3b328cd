"""compare_tf32_logs.py - did TF32 change a GPU kernel test's results?

Usage: compare_tf32_logs.py LOG LOG_WITH_NVIDIA_TF32_OVERRIDE_0

Both logs are one kernel test's output (test_cuda_kernels, test_cuda_zoo), the second run with
NVIDIA_TF32_OVERRIDE=0, which forbids TF32 in cuBLAS and cuDNN whatever the program asks. Every
result line says "<what>: max abs diff <X> ..." (its error against the reference); timing lines
and the rest are ignored. TF32 rounds each product's inputs to 10 mantissa bits, so a kernel that
used it shows an error 2^13 times larger than without: a line whose error moved by more than a
factor 4 (plus 1e-7) between the runs means TF32 was used there. Nondeterministic algorithms
(atomic adds) move by far less. Prints each such line, then one verdict line; exit 1 if TF32 was
used or the logs hold no common result line."""
import re
import sys

LINE = re.compile(r"^(.*?): max abs diff (\S+)")


def results(path):
    out = {}
    with open(path, errors="replace") as fh:
        for line in fh:
            m = LINE.match(line.strip())
            if m:
                try:
                    out[m.group(1)] = float(m.group(2))
                except ValueError:
                    out[m.group(1)] = float("nan")
    return out


def main():
    a, b = results(sys.argv[1]), results(sys.argv[2])
    common = [k for k in a if k in b]
    moved = []
    for k in common:
        x, y = a[k], b[k]
        if not (max(x, y) <= 4 * min(x, y) + 1e-7):
            moved.append(k)
            print(f"  {k}: max abs diff {x:.3g}, with NVIDIA_TF32_OVERRIDE=0 {y:.3g}")
    if not common:
        print("FAIL: no result line in common: nothing compared")
        sys.exit(1)
    if moved:
        print(f"FAIL: {len(moved)} of {len(common)} results change with NVIDIA_TF32_OVERRIDE=0: TF32 was used")
        sys.exit(1)
    print(f"ok: {len(common)} results within a factor 4 with and without NVIDIA_TF32_OVERRIDE=0: no TF32")


if __name__ == "__main__":
    main()
