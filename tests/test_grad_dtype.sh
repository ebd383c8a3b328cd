#!/bin/bash
# test_grad_dtype.sh - --grad-dtype bf16/fp16: the gradient exchange in a 2-byte wire type.
#  1. The exchange alone (tests/grad_dtype_check.c) for every strategy over mpi and hier, flat and
#     hierarchical, with and without overlap: bit for bit what rounding predicts with 2 ranks,
#     within the rounding bound beyond, equal on every rank; async's parameters exactly.
#  2. Whole training runs on 2 and 4 ranks against single-process fp32 training: the parameters
#     after 4 iterations differ by more than fp32's exchange makes them (the rounding is there) and
#     less than a bound from the type's precision.
#  3. bytes_sent and the calibration's bucket bytes halve, read from the result files of fp32 and
#     bf16 runs of every strategy (and a hybrid pipeline's data-parallel groups).
#  4. Bad values are refused with one line.
. "$(dirname "$0")/lib.sh"
CHECK=${GRAD_DTYPE_CHECK:-$(dirname "$DTBENCH")/../tests/grad_dtype_check}

# chk NRANKS ARGS... : grad_dtype_check on NRANKS ranks; fails the test on any wrong exchange.
chk() { run_check 120 "$1" "$CHECK" "${@:2}"; }

# The quick suite: five cases in bf16 (each strategy, flat and through the hierarchy), three in
# fp16 (the conversions are the same code with another format: tests/test_grad_cast); the long
# checks every case in both.
every=0
long_part "the other three exchanges in bf16 and six in fp16" && every=1
for dt in ${GRAD_DTYPES-bf16 fp16}; do # GRAD_DTYPES="": whole runs only
    some=$([ $dt = bf16 ] || [ $every = 1 ] && echo 1 || echo 0)
    chk 2 sync mpi $dt 2
    [ $every = 1 ] && chk 2 sync hier $dt 1 --overlap # 2 nodes of 1: exact through the hierarchy
    [ $every = 1 ] && chk 4 sync mpi $dt 4 --overlap
    chk 4 sync hier $dt 2 --bucket 333       # tails through the scratch
    [ $every = 1 ] && chk 3 sync hier $dt 3 --nparams 20 --bucket 2
    [ $every = 1 ] && chk 2 ssp mpi $dt 2
    [ $some = 1 ] && chk 4 ssp hier $dt 2
    [ $some = 1 ] && chk 4 mixed mpi $dt 2    # 2 nodes of 2: the node's average, exact
    chk 3 async mpi $dt 3                     # 2 workers, 1 server
done
pass "exchange in bf16 and fp16: sync, ssp, mixed, async over mpi and hier as rounding predicts"

# --- whole runs against one fp32 process -------------------------------------------------------
FMNIST_SMALL=$(fmnist_small)
common="--model lenet --dataset fashion-mnist --data-dir $FMNIST_SMALL --batch 16 --iters 4 --warmup 0 --lr 0.05 --seed 11"
run_np 1 $common --output "$WORK/ref.h5" --save-model "$WORK/ref.params" >/dev/null
run_np 1 $common --iters 1 --lr 0 --output "$WORK/p0.h5" --save-model "$WORK/p0.params" >/dev/null
run_np 2 $common --output "$WORK/dp-fp32.h5" --save-model "$WORK/dp-fp32.params" >/dev/null
cases=()
train() { # NAME NRANKS ARGS...
    local name=$1 n=$2
    shift 2
    run_np "$n" $common "$@" --output "$WORK/$name.h5" --save-model "$WORK/$name.params" >/dev/null
    cases+=("$WORK/$name.params")
}
train sync-mpi-bf16 2 --grad-dtype bf16
train sync-mpi-fp16 2 --grad-dtype fp16
train sync-hier-bf16 4 --grad-dtype bf16 --transport hier --ranks-per-node 2 --overlap --bucket-mb 0.1
train ssp0-bf16 2 --grad-dtype bf16 --exchange ssp --staleness 0
train mixed-bf16 2 --grad-dtype bf16 --exchange mixed --ranks-per-node 2
# within the wire type's rounding of one fp32 process, moved by 4 iterations from p0
pycheck exchange rounding --ref "$WORK/ref.params" --init "$WORK/p0.params" \
    --fp32 "$WORK/dp-fp32.params" "${cases[@]}"
pass "training in bf16/fp16 exchange: within the type's rounding of one fp32 process"

# --- bytes_sent halves, from the files ---------------------------------------------------------
quick="--model lenet --dataset synthetic --batch 16 --iters 3 --warmup 1"
pair() { # NAME NRANKS ARGS... : the same run in fp32 and bf16
    local name=$1 n=$2
    shift 2
    for dt in fp32 bf16; do
        run_np "$n" $quick "$@" --grad-dtype $dt --output "$WORK/b-$name-$dt.h5" >/dev/null
    done
    pairs+=("$name")
}
pairs=()
pair sync-mpi 2 --calibrate-iters 2 --bucket-mb 0.2
pair async 3 --exchange async --ps-ranks 1
pair hybrid 4 --parallel hybrid --stages 2
if long_part "bytes_sent of sync over hier, ssp and mixed in bf16"; then
    pair sync-hier 4 --transport hier --ranks-per-node 2 --calibrate-iters 2
    pair ssp 2 --exchange ssp
    pair mixed 2 --exchange mixed --ranks-per-node 2
fi
for name in "${pairs[@]}"; do # sync calibrates its buckets: they halve too
    pycheck exchange halves "$WORK/b-$name-fp32.h5" "$WORK/b-$name-bf16.h5" \
        $(case $name in sync*) echo --calibrated ;; esac)
done
pass "bytes_sent halves with bf16 for sync, ssp, mixed, async and a hybrid pipeline's replicas"

# --- refusals ----------------------------------------------------------------------------------
cd "$WORK"
expect_bad 0 "grad-dtype.*fp32,bf16,fp16" --grad-dtype fp8 --dry-run
expect_bad 0 "grad-dtype.*fp32,bf16,fp16" --grad-dtype BF16 --dry-run
