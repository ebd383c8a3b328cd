#!/usr/bin/env bash
# gpu_speed.sh - one command on a GPU machine (about 5 minutes): checks, then measures, the speed
# work of the CUDA backend (bench/README.md "Where the H100 ResNet-50 step went"). Run from the
# build tree:
#   bench/gpu_speed.sh [--out DIR] [--iters N] [--batch B] [--device cpu]
# 1. Correctness first: tests/test_cuda_bn (batch norm, plain and fused, against the CPU),
#    tests/test_cuda_nhwc (every NHWC 16-bit kernel against the CPU) and tests/test_gpu_fast.sh
#    (chosen algorithms and fused ResNet-8 against the CPU). A failure stops the script before
#    any figure is taken.
# 2. ResNet-50 at batch B (256), synthetic data, 10 warm-up and N (20) measured iterations, one
#    run each: fp32 --conv-algo find, fp32 --conv-algo heuristic, tf32, then bf16 and fp16 each in
#    NHWC 16-bit activations (--act-layout nhwc, what auto chooses) and in NCHW fp32 activations
#    (--act-layout nchw: 16-bit copies at every product, the path before NHWC), so one call
#    measures what NHWC storage gains (the ratio lines after the table). Per run: the median
#    data/forward/backward/update/total (ms) and samples/s from /iterations, the set-up seconds
#    (wall clock to the end minus the iterations), and /ranks/kernel_choices saved.
# 3. When dtbench has --profile-layers (the per-layer profile), fp32 find and bf16 NHWC again with
#    it, and the layers that take most time (dtbench-analyze summary) saved.
# Prints the table last. --device cpu runs the same steps on LeNet at batch 8 on the CPU (no GPU
# checks): a smoke test of the script itself, not a measurement.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DTBENCH=${DTBENCH:-src/dtbench}
PYTHON=${PYTHON:-$(command -v python3)}
ANALYZE=${ANALYZE:-$(command -v dtbench-analyze || echo .venv/bin/dtbench-analyze)}
OUT=gpu-speed-$(hostname -s)-$(date +%Y%m%d-%H%M%S)
ITERS=20
BATCH=256
DEVICE=cuda
while (($#)); do
    case $1 in
        --out) OUT=$2; shift 2 ;;
        --iters) ITERS=$2; shift 2 ;;
        --batch) BATCH=$2; shift 2 ;;
        --device) DEVICE=$2; shift 2 ;;
        -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
        *) echo "gpu_speed: unknown option $1" >&2; exit 2 ;;
    esac
done
die() { echo "gpu_speed: error: $*" >&2; exit 2; }
[ -x "$DTBENCH" ] || die "no $DTBENCH (run from the build tree, or set DTBENCH)"
help=$("$DTBENCH" --help) # whole, then grep: no SIGPIPE under pipefail
case $DEVICE in
    cuda) grep -q -- '--device {cpu,cuda' <<<"$help" || die "$DTBENCH was built without CUDA" ;;
    cpu) ;;
    *) die "--device: '$DEVICE' is not accepted: expected cuda or cpu" ;;
esac
[ -e "$OUT" ] && die "$OUT exists: name another --out"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE

if [ "$DEVICE" = cuda ]; then
    echo "== correctness"
    for t in test_cuda_bn test_cuda_nhwc; do
        tests/$t >"$OUT/$t.log" 2>&1 || die "tests/$t failed: $OUT/$t.log"
    done
    DTBENCH=$DTBENCH TESTS_SRCDIR=$(cd "$(dirname "$0")/../tests" && pwd) \
        bash tests/test_gpu_fast.sh >"$OUT/test_gpu_fast.log" 2>&1 ||
        die "tests/test_gpu_fast.sh failed: $OUT/test_gpu_fast.log"
    model=resnet50
    configs="fp32-find:--precision=fp32:--conv-algo=find fp32-heuristic:--precision=fp32:--conv-algo=heuristic tf32:--precision=tf32"
    configs+=" bf16-nhwc:--precision=bf16:--act-layout=nhwc bf16-nchw:--precision=bf16:--act-layout=nchw"
    configs+=" fp16-nhwc:--precision=fp16:--act-layout=nhwc fp16-nchw:--precision=fp16:--act-layout=nchw"
else
    model=lenet BATCH=8
    configs="fp32:--precision=fp32"
fi

# The medians of one result file's measured iterations, one line.
medians() {
    "$PYTHON" "$HERE/bench_read.py" gpu-speed "$1" "$2" "$BATCH"
}

echo "== $model batch $BATCH on $DEVICE, 10 warm-up + $ITERS iterations per run"
table="$OUT/table.txt"
printf '%-16s %9s %8s %9s %9s %7s %8s %8s\n' run samples/s data_ms forward_ms backward_ms \
    update total_ms setup_s >"$table"
for c in $configs; do
    name=${c%%:*}
    args=$(tr ':' ' ' <<<"${c#*:}")
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    "$DTBENCH" --model $model --dataset synthetic --batch "$BATCH" --warmup 10 --iters "$ITERS" \
        --device "$DEVICE" $args --sample-hz 0 --calibrate-iters 0 --output "$OUT/$name.h5" \
        >"$OUT/$name.log" 2>&1 || die "the $name run failed: $OUT/$name.log"
    t1=$(date +%s.%N)
    line=$(medians "$OUT/$name.h5" "$name")
    total_ms=$(awk '{print $NF}' <<<"$line")
    setup=$(awk -v a="$t0" -v b="$t1" -v t="$total_ms" -v n="$((ITERS + 10))" \
        'BEGIN { printf "%.1f", b - a - n * t / 1000 }')
    printf '%s %8s\n' "$line" "$setup" >>"$table"
    if [ "$DEVICE" = cuda ]; then
        "$PYTHON" "$HERE/bench_read.py" kernel-choices "$OUT/$name.h5" \
            >"$OUT/$name.kernel_choices.txt"
    fi
done

if grep -q -- '--profile-layers' <<<"$help"; then
    profiles="fp32:--precision=fp32"
    [ "$DEVICE" = cuda ] && profiles+=" bf16-nhwc:--precision=bf16:--act-layout=nhwc"
    for c in $profiles; do
        name=${c%%:*}
        args=$(tr ':' ' ' <<<"${c#*:}")
        echo "== per-layer profile ($name, --profile-layers 5)"
        # shellcheck disable=SC2086
        "$DTBENCH" --model $model --dataset synthetic --batch "$BATCH" --warmup 5 --iters 10 \
            --device "$DEVICE" $args --profile-layers 5 --sample-hz 0 --calibrate-iters 0 \
            --output "$OUT/profile-$name.h5" >"$OUT/profile-$name.log" 2>&1 ||
            die "the $name profile run failed: $OUT/profile-$name.log"
        "$ANALYZE" summary "$OUT/profile-$name.h5" >"$OUT/profile-$name-summary.txt" 2>&1 || true
    done
else
    echo "(no --profile-layers in this dtbench: per-layer profile skipped)" | tee "$OUT/profile-summary.txt"
fi
echo "== results in $OUT"
cat "$table"
# what NHWC 16-bit activations gain over NCHW fp32 ones, in the same call (samples/s ratios)
for p in bf16 fp16; do
    awk -v p="$p" '$1 == p "-nhwc" {a = $2} $1 == p "-nchw" {b = $2}
        END {if (a && b) printf "%s: NHWC 16-bit / NCHW fp32 activations = %.2f (samples/s %s vs %s)\n", p, a / b, a, b}' "$table"
done
