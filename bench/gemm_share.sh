#!/usr/bin/env bash
# gemm_share.sh - the GEMMs' share of the machine's sgemm peak, layer by layer, for a transformer
# on the CPU: one dtbench run with --profile-layers (per-layer times, FLOPs and the peak measured
# at start), then bench/gemm_share.py on its file: each fully connected layer's share of the
# peak (forward + backward, and each apart) and the FLOP-weighted mean over the GEMM layers.
# Run from the build tree (where src/dtbench is):
#   bench/gemm_share.sh [--model nanogpt-char] [--batch 8] [--seq-len 256] [--threads 1]
#                       [--iters 4] [--warmup 1] [--out FILE.h5] [--dtbench PATH]
# Defaults: nanogpt-char at batch 8 x 256 tokens (its context), 1 thread, AdamW with weight decay
# 0.1 (as bench/vs_pytorch.sh runs it), 4 measured iterations, 3 of them profiled. Without --out
# the file goes to a temporary folder, removed at the end. For figures, a quiet machine with
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (env -u ...). dtbench-analyze summary FILE.h5 shows
# the same rates for every layer (GFLOP/s, %FLOP). Python with h5py, numpy and pandas (the file is
# read with dtbench_analysis): H5_PYTHON, else the first of python3, .venv/bin/python,
# /usr/bin/python3 that imports them.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DTBENCH=${DTBENCH:-src/dtbench}
MODEL=nanogpt-char BATCH=8 SEQ=256 THREADS=1 ITERS=4 WARMUP=1 OUT=""
while (($#)); do
    case $1 in
    --model) MODEL=$2; shift 2 ;;
    --batch) BATCH=$2; shift 2 ;;
    --seq-len) SEQ=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --dtbench) DTBENCH=$2; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "gemm_share: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
die() { echo "gemm_share: error: $*" >&2; exit 2; }
[ -x "$DTBENCH" ] || die "no $DTBENCH (run from the build tree, or --dtbench PATH)"
[[ $ITERS =~ ^[1-9][0-9]*$ ]] || die "--iters must be a positive integer"
PY=${H5_PYTHON:-}
if [ -z "$PY" ]; then
    for p in python3 .venv/bin/python /usr/bin/python3; do
        if command -v "$p" >/dev/null && "$p" -c "import h5py, numpy, pandas" 2>/dev/null; then
            PY=$p
            break
        fi
    done
fi
[ -n "$PY" ] || die "no Python imports h5py, numpy and pandas (set H5_PYTHON)"
if [ -z "$OUT" ]; then
    TMP=$(mktemp -d "${TMPDIR:-/tmp}/gemm_share.XXXXXX")
    trap 'rm -rf "$TMP"' EXIT
    OUT=$TMP/profile.h5
fi
PROFILED=$((ITERS > 3 ? 3 : ITERS))
MPI=(mpirun -np 1)
if grep -q "Open MPI" <<<"$(mpirun --version 2>&1)"; then
    MPI+=(--bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS)
    if [ "$(id -u)" -eq 0 ]; then MPI+=(--allow-run-as-root); fi
fi
echo "gemm_share: $MODEL, batch $BATCH x $SEQ tokens, $THREADS thread(s), $ITERS iterations" \
    "($PROFILED profiled) after $WARMUP; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS "${MPI[@]}" "$DTBENCH" --model "$MODEL" \
    --dataset synthetic --batch "$BATCH" --seq-len "$SEQ" --threads "$THREADS" --iters "$ITERS" \
    --warmup "$WARMUP" --profile-layers "$PROFILED" --optimizer adamw --weight-decay 0.1 \
    --sample-hz 0 --output "$OUT" --overwrite >"$OUT.log" 2>&1 ||
    { tail -20 "$OUT.log" >&2; die "dtbench failed (log above)"; }
"$PY" "$HERE/gemm_share.py" "$OUT"
