"""check_kernel_choices.py - the math of every convolution and GEMM a GPU run recorded.

Usage: check_kernel_choices.py FILE.h5...

Reads /ranks/kernel_choices (kernels/cuda/cuda.c's describe_kernels: a first line naming cuBLAS's and
cuDNN's mode, then one line per convolution shape with its forward, backward-data and
backward-filter algorithm, number, name and math type) of each rank and checks it against the
file's `precision` attribute:
  fp32: cuBLAS in its default math (no TF32), every convolution algorithm under FMA math and a
        direct sum (no FFT or Winograd: strict fp32, kernels/cuda/cuda_plan.h), no plan made in a step;
  bf16, fp16: every convolution algorithm a deterministic direct sum, any math type (no FFT or
        Winograd, no atomic backward-data ALGO_0 or backward-filter ALGO_0 or ALGO_3: the 16-bit
        rule, kernels/cuda/cuda_plan.h);
  tf32, bf16, fp16: the first line names that precision.
Prints one line per file and exits 1 if any file fails (a file without kernel choices, i.e. a CPU
run, fails too: this checks GPU runs)."""
import re
import sys

import h5py

CONV = re.compile(r"^conv (\S+) k(\d+) s(\d+) p(\d+) -> (\d+): (.*)$")
# a direction's algorithm, its math type, and its time when it was timed (--conv-algo find)
ALGO = re.compile(r"(fwd|bwd_data|bwd_filter) (\d+) (\S+) (FMA|DEFAULT|TENSOR_OP)( [\d.]+ ms)?$")
TRANSFORMS = ("FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED")
# what cuDNN documents as non-deterministic (atomic adds), per direction
ATOMIC = {"bwd_data": ("ALGO_0",), "bwd_filter": ("ALGO_0", "ALGO_3")}


def problems(text, precision):
    lines = [l for l in text.splitlines() if l.strip()]
    if not lines:
        return ["no kernel choices recorded (a CPU run?)"]
    bad = []
    if not lines[0].startswith(f"precision {precision}:"):
        bad.append(f"first line does not name precision {precision}: {lines[0]!r}")
    if precision == "fp32" and "default math (no TF32)" not in lines[0]:
        bad.append(f"cuBLAS is not in its default math: {lines[0]!r}")
    convs = 0
    for line in lines[1:]:
        m = CONV.match(line)
        if not m:
            if line.startswith("plans made inside a step:") and precision == "fp32":
                if line.split(":")[1].strip() != "0":
                    bad.append(line)
            continue
        convs += 1
        # the three directions; after "; " how a conv+bias+ReLU forward ran (fused or not)
        parts = [p.strip() for p in m.group(6).split(";")[0].split(",")]
        found = [ALGO.match(p) for p in parts]
        if len(parts) != 3 or not all(found):
            bad.append(f"unreadable: {line!r}")
            continue
        for a in found:
            direction, _, name, math, _ = a.groups()
            if precision == "fp32" and (math != "FMA" or name in TRANSFORMS):
                bad.append(f"{m.group(1)} k{m.group(2)}: {direction} {name} under {math}")
            if precision in ("bf16", "fp16") and (
                    name in TRANSFORMS or name in ATOMIC.get(direction, ())):
                bad.append(f"{m.group(1)} k{m.group(2)}: {direction} {name} in {precision}")
    return bad


def main():
    failed = 0
    for path in sys.argv[1:]:
        try:
            with h5py.File(path, "r") as f:
                precision = f.attrs.get("precision", b"fp32")
                precision = precision.decode() if isinstance(precision, bytes) else str(precision)
                texts = [t.decode() for t in f["ranks/kernel_choices"][:]] \
                    if "kernel_choices" in f["ranks"] else [""]
        except (OSError, KeyError) as e:
            print(f"FAIL: {path}: {e}")
            failed += 1
            continue
        bad = [p for t in texts for p in problems(t, precision)]
        convs = len({l for t in texts for l in t.splitlines() if l.startswith("conv ")})
        if bad:
            print(f"FAIL: {path} ({precision}): " + "; ".join(sorted(set(bad))[:8]))
            failed += 1
        else:
            print(f"ok: {path} ({precision}): {len(texts)} rank(s), {convs} convolution shape(s) "
                  f"x 3 directions and the GEMMs in the math {precision} allows")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
