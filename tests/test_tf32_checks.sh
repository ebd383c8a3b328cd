#!/usr/bin/env bash
# test_tf32_checks.sh - the GPU session's two TF32 checks, on inputs made here:
#   1. tests/check_kernel_choices.py, the math every convolution and GEMM of a run used
#      (/ranks/kernel_choices in the layout kernels/cuda/cuda.c writes): strict fp32 with direct-sum
#      algorithms under FMA passes (also with the times --conv-algo find measured and a fused
#      conv+bias+ReLU noted); an FFT or Winograd algorithm, a TENSOR_OP or DEFAULT math
#      type, cuBLAS in TF32 mode, a plan made inside a step or a file without kernel choices (a
#      CPU run) fails, naming what; tf32 may use tensor-op math; bf16 and fp16 may too, but only
#      deterministic direct sums: an FFT or an atomic ALGO_0 or ALGO_3 fails;
#   2. tests/compare_tf32_logs.py, a kernel test's results with and without
#      NVIDIA_TF32_OVERRIDE=0: the H100 session's logs (bench/results/2026-11-26-h100/session),
#      whose only differences were a timing line and a nondeterministic weight gradient (1.03e-4
#      against 9.16e-5) and which the whole-log diff called "TF32 was used", pass; an excerpt
#      with one result moved to TF32's error fails, naming it.
. "$(dirname "$0")/lib.sh"

make_file() { # make_file NAME PRECISION TEXT
    "$PYTHON" "$TESTS_SRCDIR/make_h5.py" kernel-choices "$WORK/$1.h5" "$2" "$3"
}
head32="precision fp32: cuBLAS sgemm, default math (no TF32); cuDNN fp32 tensors"
good="conv 8x64x56x56 k3 s1 p1 -> 64: fwd 1 IMPLICIT_PRECOMP_GEMM FMA, bwd_data 1 ALGO_1 FMA, bwd_filter 3 ALGO_3 FMA"
make_file good fp32 "$head32"$'\n'"$good"$'\n'"plans made inside a step: 0"
timed="conv 8x64x56x56 k3 s1 p1 -> 64: fwd 1 IMPLICIT_PRECOMP_GEMM FMA 0.512 ms, bwd_data 1 ALGO_1 FMA 0.430 ms, bwd_filter 3 ALGO_3 FMA 0.611 ms; conv+bias+ReLU fused"
make_file timed fp32 "$head32"$'\n'"$timed"$'\n'"plans made inside a step: 0"
make_file fft fp32 "$head32"$'\n'"${good/fwd 1 IMPLICIT_PRECOMP_GEMM/fwd 4 FFT}"$'\n'"plans made inside a step: 0"
make_file wino fp32 "$head32"$'\n'"${good/bwd_filter 3 ALGO_3/bwd_filter 5 WINOGRAD_NONFUSED}"
make_file tensor fp32 "$head32"$'\n'"${good/ALGO_1 FMA/ALGO_1 TENSOR_OP}"
make_file default fp32 "$head32"$'\n'"${good/ALGO_3 FMA/ALGO_3 DEFAULT}"
make_file tf32blas fp32 "${head32/default math (no TF32)/CUBLAS_TF32_TENSOR_OP_MATH}"$'\n'"$good"
make_file late fp32 "$head32"$'\n'"$good"$'\n'"plans made inside a step: 2"
make_file cpu fp32 ""
make_file tf32 tf32 "precision tf32: cuBLAS sgemm, CUBLAS_TF32_TENSOR_OP_MATH; cuDNN fp32 tensors"$'\n'"${good//FMA/TENSOR_OP}"
head16="precision bf16: cuBLAS cublasGemmEx on 16-bit activations, CUBLAS_COMPUTE_32F; cuDNN on NHWC 16-bit x/dy, KRSC 16-bit W, float compute; activations NHWC bf16"
good16="conv 8x64x56x56 k3 s1 p1 -> 64: fwd 1 IMPLICIT_PRECOMP_GEMM TENSOR_OP 0.101 ms, bwd_data 1 ALGO_1 TENSOR_OP 0.120 ms, bwd_filter 1 ALGO_1 DEFAULT 0.130 ms"
make_file bf16 bf16 "$head16"$'\n'"$good16"
make_file bf16fft bf16 "$head16"$'\n'"${good16/bwd_data 1 ALGO_1/bwd_data 3 FFT_TILING}"
make_file fp16atomic fp16 "${head16//bf16/fp16}"$'\n'"${good16/bwd_filter 1 ALGO_1/bwd_filter 3 ALGO_3}"

check() { # check NAME STATUS PATTERN
    set +e
    out=$("$PYTHON" "$TESTS_SRCDIR/check_kernel_choices.py" "$WORK/$1.h5")
    rc=$?
    set -e
    [ "$rc" = "$2" ] || fail "$1: exit status $rc, expected $2: $out"
    grep -q -- "$3" <<<"$out" || fail "$1: output does not say '$3': $out"
    pass "$1: $out"
}
check good 0 "1 convolution shape"
check timed 0 "1 convolution shape"
check fft 1 "fwd FFT under FMA"
check wino 1 "bwd_filter WINOGRAD_NONFUSED under FMA"
check tensor 1 "bwd_data ALGO_1 under TENSOR_OP"
check default 1 "bwd_filter ALGO_3 under DEFAULT"
check tf32blas 1 "cuBLAS is not in its default math"
check late 1 "plans made inside a step: 2"
check cpu 1 "no kernel choices recorded"
check tf32 0 "(tf32)"
check bf16 0 "(bf16)"
check bf16fft 1 "bwd_data FFT_TILING in bf16"
check fp16atomic 1 "bwd_filter ALGO_3 in fp16"

# 2. numbers with and without NVIDIA_TF32_OVERRIDE=0
H100="$TESTS_SRCDIR/../bench/results/2026-11-26-h100/session"
for t in cuda-kernels cuda-zoo; do
    "$PYTHON" "$TESTS_SRCDIR/compare_tf32_logs.py" "$H100/$t.log" "$H100/$t-notf32.log" >"$WORK/cmp.txt" ||
        fail "the H100 $t logs taken for TF32: $(cat "$WORK/cmp.txt")"
    pass "H100 $t: $(tail -1 "$WORK/cmp.txt")"
done
cat >"$WORK/a.log" <<'LOG'
fc_forward n=64 in=800 out=500: max abs diff 8.82e-06 (tolerance 1e-04*max(1,|ref|)) ok
conv_backward dw n=64 c_in=1 28x28 c_out=20 k=5 stride=1 pad=0: max abs diff 0.000103 (tolerance 1e-03*max(1,|ref|)) ok
relu_forward n=1000: max abs diff 0 (tolerance 0e+00*max(1,|ref|)) ok
timer: 20 ReLUs over 4M floats took 0.232 ms on the GPU timeline ok
LOG
sed -e 's/0.000103/9.16e-05/' -e 's/0.232 ms/0.228 ms/' "$WORK/a.log" >"$WORK/b.log"
sed -e 's/8.82e-06/0.0113/' "$WORK/a.log" >"$WORK/tf32.log"
"$PYTHON" "$TESTS_SRCDIR/compare_tf32_logs.py" "$WORK/a.log" "$WORK/b.log" >"$WORK/cmp.txt" ||
    fail "timing and nondeterminism taken for TF32: $(cat "$WORK/cmp.txt")"
pass "same numbers: $(tail -1 "$WORK/cmp.txt")"
set +e
"$PYTHON" "$TESTS_SRCDIR/compare_tf32_logs.py" "$WORK/tf32.log" "$WORK/b.log" >"$WORK/cmp.txt"
rc=$?
set -e
[ "$rc" = 1 ] && grep -q "fc_forward n=64 in=800 out=500: max abs diff 0.0113" "$WORK/cmp.txt" ||
    fail "a result at TF32's error not found: $(cat "$WORK/cmp.txt")"
pass "TF32 found: $(tail -1 "$WORK/cmp.txt")"
