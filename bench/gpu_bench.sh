#!/usr/bin/env bash
# gpu_bench.sh - the GPU benchmarks of issue 3, for a machine with NVIDIA GPUs, PyTorch and a
# CUDA build of dtbench (scripts/setup.sh finds CUDA by itself). Run from the build tree:
#   bench/gpu_bench.sh [--out DIR] [--rounds N] [--quick]
# 1. Training throughput on ONE GPU, dtbench --device cuda vs PyTorch on the same GPU, same layers,
#    fp32 (TF32 off on both sides): every model of the zoo at the batch sizes it is trained with
#    (ResNet-50 at 64, 128 and 256; bench/vs_pytorch.sh --device cuda, alternating rounds, median
#    time per step; samples/s = batch / median).
# 2. NCCL allreduce bus bandwidth at the gradient sizes of LeNet, FCN-5, FCN-8 and of dtbench's
#    25 MiB bucket, whole and in buckets (bench/nccl_busbw, one rank per GPU; with one GPU busbw
#    is 0 by definition and only the local copy is timed).
# 3. With 2 GPUs or more: dtbench's own exchange over NCCL (--transport nccl, with and without
#    --overlap) on those models, its median exchange time as an effective bus bandwidth, and the
#    exchange time hidden behind backward.
# Everything is written to DIR (default gpu-bench-<host>-<date>) and summarised on stdout.
# STATUS: ran once, on one H100 on 2026-11-26 (--quick, 1 round; bench/results/2026-11-26-h100,
# figures in bench/README.md), after its --help check (a SIGPIPE under pipefail) was fixed; to be
# rewritten with rounds and PyTorch's own configurations (issue 24).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DTBENCH=${DTBENCH:-src/dtbench}
BUSBW=${BUSBW:-bench/nccl_busbw}
PROBE=${PROBE:-tests/cuda_probe}
OUT=gpu-bench-$(hostname -s)-$(date +%Y%m%d-%H%M%S)
ROUNDS=3
QUICK=0
while (($#)); do
    case $1 in
        --out) OUT=$2; shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --quick) QUICK=1; shift ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) echo "gpu_bench: unknown option $1" >&2; exit 2 ;;
    esac
done
die() { echo "gpu_bench: error: $*" >&2; exit 2; }
[ -x "$DTBENCH" ] || die "no $DTBENCH (run from the build tree, or set DTBENCH)"
grep -q -- '--device {cpu,cuda' <<<"$("$DTBENCH" --help)" || die "$DTBENCH was built without the CUDA backend"
[ -x "$PROBE" ] || die "no $PROBE (make check builds it: make tests/cuda_probe)"
NGPUS=$("$PROBE") || die "no GPU visible"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
H5PY=${H5_PYTHON:-python3}
{
    echo "host $(hostname), $(date -u +%FT%TZ), $NGPUS GPU(s)"
    nvidia-smi -L 2>/dev/null || true
    nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm --format=csv 2>/dev/null || true
} | tee "$OUT/machine.txt"

# 1. one GPU: dtbench vs PyTorch, every model of the zoo at the batch sizes it is trained with
#    (GPU_BENCH_CONFIGS="model:batch ..." overrides; --quick: four small configurations)
CONFIGS=${GPU_BENCH_CONFIGS:-"lenet:64 fcn5:64 fcn8:64 alexnet:128 vgg16:64 googlenet:128 resnet50:64 resnet50:128 resnet50:256 lstm32:64 lstm64:64"}
iters=50 warm=10
if [ "$QUICK" = 1 ]; then
    CONFIGS=${GPU_BENCH_CONFIGS:-"lenet:64 fcn5:64 resnet50:64 lstm32:64"}
    iters=10 warm=3 ROUNDS=1
fi
echo "== 1. training step on one GPU: dtbench vs PyTorch (fp32, TF32 off), $CONFIGS"
: >"$OUT/vs_pytorch.txt"
for cfg in $CONFIGS; do
    m=${cfg%%:*} b=${cfg##*:}
    CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} "$HERE/vs_pytorch.sh" --dtbench "$DTBENCH" \
        --device cuda --models "$m" --batch "$m=$b" --iters "$m=$iters" --warmup "$m=$warm" \
        --rounds "$ROUNDS" --dtbench-args "--sample-hz 20" --keep 2>>"$OUT/vs_pytorch.log" |
        tee -a "$OUT/vs_pytorch.txt" || echo "  $m batch $b: failed (see $OUT/vs_pytorch.log)" | tee -a "$OUT/vs_pytorch.txt"
done
# rows: model batch threads dtbench-ms pytorch-ms pytorch/dtbench
awk '$1 ~ /^(lenet|fcn5|fcn8|alexnet|vgg16|googlenet|resnet50|lstm32|lstm64)$/ && NF == 6 && $4 > 0 && $5 > 0 {
    printf "  %s batch %s: dtbench %.0f samples/s, pytorch %.0f samples/s (time ratio pytorch/dtbench %s)\n",
        $1, $2, $2 * 1000 / $4, $2 * 1000 / $5, $6 }' "$OUT/vs_pytorch.txt" | tee "$OUT/samples_per_s.txt"

# 2. NCCL bus bandwidth at the models' gradient sizes
echo "== 2. NCCL allreduce at the gradient sizes ($NGPUS rank(s), one per GPU)"
mpirun -np "$NGPUS" "$BUSBW" --json --iters $([ "$QUICK" = 1 ] && echo 5 || echo 20) | tee "$OUT/nccl_busbw.txt"

# 3. dtbench's exchange over NCCL (needs 2 GPUs)
if [ "$NGPUS" -ge 2 ]; then
    echo "== 3. dtbench --transport nccl on $NGPUS GPUs"
    n=$([ "$QUICK" = 1 ] && echo 10 || echo 50)
    for m in lenet fcn5; do
        for ov in "" --overlap; do
            f="$OUT/dt-$m-nccl${ov:+-overlap}.h5"
            mpirun -np "$NGPUS" "$DTBENCH" --model $m --dataset synthetic --batch $((64 * NGPUS)) \
                --iters $n --warmup 5 --device cuda --transport nccl $ov --output "$f" --overwrite \
                >"$f.log" 2>&1 || { tail "$f.log"; die "dtbench $m nccl $ov failed"; }
        done
    done
    "$H5PY" - "$OUT"/dt-*-nccl*.h5 <<'PY' | tee "$OUT/dtbench_nccl.txt"
import sys, h5py, numpy as np
for fn in sys.argv[1:]:
    with h5py.File(fn, "r") as f:
        w, p = int(f.attrs["warmup"]), int(f.attrs["nranks"])
        it = f["iterations"]
        ex = np.median(it["exchange"][:, w:]); hid = np.median(it["exchange_hidden"][:, w:])
        tot = np.median(it["total"][:, w:]); b = 4.0 * f.attrs["param_count"]
        bus = b / ex * 2 * (p - 1) / p / 1e9 if ex > 0 else float("nan")
        print(f"{fn.split('/')[-1]}: {p} GPUs, total {tot*1e3:.2f} ms, exposed exchange "
              f"{ex*1e3:.2f} ms (effective busbw {bus:.1f} GB/s), hidden {hid*1e3:.2f} ms, "
              f"{f.attrs['batch_global'] / tot:.0f} samples/s")
PY
else
    echo "== 3. skipped: dtbench's NCCL exchange needs 2 GPUs or more (NCCL refuses two ranks on one GPU)"
fi
echo "results in $OUT"
