#!/usr/bin/env bash
# test_precision_bf16.sh - --precision bf16 on the CPU (docs/gpu.md "Precision"): the mode is in
# the printed configuration, the file's root attributes and config_json, and backend_info names
# the bf16 GEMM that ran; LeNet trained on Fashion-MNIST in bf16 reaches the fp32 run's test
# accuracy within 1 point (same seed, same data order; the runs differ only in the rounding of the
# GEMM and convolution inputs to bf16); --threads 2 gives the --threads 1 result bit for bit on
# dtbench's own engine, within 1e-4 on oneDNN's.
# Skips (exit 77, saying why) where dtbench refuses bf16: a CPU without AVX512-BF16 and an
# OpenBLAS without cblas_sbgemm (scripts/test.sh accepts that skip only when /proc/cpuinfo has no
# avx512_bf16).
. "$(dirname "$0")/lib.sh"
cd "$WORK"

if ! "$DTBENCH" --precision bf16 --dry-run >dry.txt 2>dry.err; then
    echo "SKIP: this machine cannot run bf16: $(cat dry.err)"
    exit 77
fi

# --threads 2: dtbench's own engine (avx512bf16) splits C's columns over 2 threads and sums every
# element in the same order, so the parameters are bit for bit those of --threads 1. oneDNN's
# (the default where it runs) splits reductions (the convolutions' weight gradients) over its
# threads: there --threads 2 must train to parameters within 1e-4 of --threads 1 (3 steps).
own=
grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null && own=avx512bf16
for e in $own default; do
    for t in 1 2; do
        DTBENCH_BF16_ENGINE=$([ "$e" = default ] || echo "$e") run_np 1 --model lenet \
            --dataset synthetic --batch 64 --iters 3 --warmup 0 --sample-hz 0 --precision bf16 \
            --threads $t --output "$e$t.h5" --save-model "$e$t.params" >/dev/null
    done
    "$PYTHON" - "${e}1.h5" "${e}2.h5" "${e}1.params" "${e}2.params" <<'PY' || fail "--threads 2 changed the bf16 result"
import re, sys, h5py, numpy as np
files = [h5py.File(p, "r") for p in sys.argv[1:3]]
info = files[0].attrs["backend_info"]
engine = re.search(r"GEMM engine ([^,]*),", info if isinstance(info, str) else info.decode()).group(1)
if engine != "onednn":
    h = [f["ranks/param_hash"][0] for f in files]
    assert h[0] == h[1], f"--threads 2 changed the bf16 result of {engine}: {h}"
    print(f"ok: bf16 ({engine}) with --threads 2 = --threads 1, bit for bit")
else:
    p = [np.fromfile(q, dtype="<f4", offset=64) for q in sys.argv[3:5]]
    d = float(np.abs(p[0] - p[1]).max())
    assert d <= 1e-4, f"--threads 2 moved oneDNN's bf16 parameters by {d}"
    print(f"ok: bf16 (onednn) with --threads 2 within {d:.1e} of --threads 1 (bound 1e-4)")
PY
done

run_np 2 --model lenet --dataset synthetic --batch 16 --iters 3 --warmup 0 --sample-hz 0 \
    --precision bf16 --output short.h5 >short.log
grep -Eq '^  precision +bf16$' short.log || fail "the printed configuration lacks precision bf16"
"$PYTHON" - short.h5 <<'PY'
import sys, json, h5py
with h5py.File(sys.argv[1], "r") as f:
    a = f.attrs
    s = lambda v: v.decode() if isinstance(v, bytes) else str(v)
    assert s(a["precision"]) == "bf16", a["precision"]
    assert json.loads(s(a["config_json"]))["precision"] == "bf16"
    info = s(a["backend_info"])
    assert any(f"precision bf16 (GEMM engine {e}" in info
               for e in ("onednn", "avx512bf16", "openblas-sbgemm")), info
    print("ok: root attribute precision=bf16, config_json, backend_info:", info.split(";")[-1])
PY

[ -e "$FMNIST_DIR/train-images-idx3-ubyte.gz" ] || fail "no Fashion-MNIST in $FMNIST_DIR"
# One epoch at batch 64 on one rank (~1 min for both runs on an idle core).
args=(--model lenet --dataset fashion-mnist --data-dir "$FMNIST_DIR" --batch 64 --iters 900
    --warmup 0 --sample-hz 0 --calibrate-iters 0 --flush-every 100)
run_np 1 "${args[@]}" --precision fp32 --output fp32.h5 >fp32.log
run_np 1 "${args[@]}" --precision bf16 --output bf16.h5 >bf16.log
"$PYTHON" - fp32.h5 bf16.h5 <<'PY'
import sys, h5py
acc = []
for p in sys.argv[1:]:
    with h5py.File(p, "r") as f:
        acc.append(float(f["eval/accuracy"][-1]))
f32, b16 = acc
print(f"LeNet Fashion-MNIST, 900 iterations: test accuracy fp32 {f32:.4f}, bf16 {b16:.4f}, "
      f"difference {100 * (b16 - f32):+.2f} points")
assert f32 > 0.80, f"fp32 did not learn ({f32})"
assert abs(b16 - f32) <= 0.01, "bf16 is more than 1 point from fp32"
PY
pass "bf16 LeNet within 1 point of fp32"
