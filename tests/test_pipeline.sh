# test_pipeline.sh - model parallelism computes what one process computes: a K-stage pipeline
# (K = 2, 4), with and without micro-batches, and hybrid replicas of a pipeline, give the same loss
# at every iteration and, after several iterations, the same parameters as single-process training
# on the same global batch, within float tolerance (only the order of some sums differs). Checked
# on LeNet (Fashion-MNIST), GoogLeNet on a small CIFAR-10-format data set written here (inception
# modules cut between modules, LRN, padded pools, seeded dropout) and LSTM-32 (embedding, LSTM);
# each file is also checked for the pipeline's own records (check_h5.py pipeline).
. "$(dirname "$0")/lib.sh"

# Tolerances: float32 sums in another order (micro-batch accumulation, replica averaging),
# amplified over the SGD steps with momentum; LeNet's parameters are O(0.1).
TOL=2e-5
LOSS_TOL=1e-5

# run_case NAME NP ARGS... : one run, its parameters saved as $WORK/NAME.params
run_case() {
    local name=$1 np=$2
    shift 2
    run_np "$np" "$@" --output "$WORK/$name.h5" --save-model "$WORK/$name.params" >"$WORK/$name.log"
}

# 1. LeNet: 2 and 4 stages, with and without micro-batches, and 2 replicas of 2 stages.
FMNIST_SMALL=$(fmnist_small)
common="--model lenet --dataset fashion-mnist --data-dir $FMNIST_SMALL --batch 16 --iters 6 --warmup 0 --lr 0.05 --seed 11"
run_case lenet-1 1 $common
run_case lenet-k2 2 $common --parallel model
run_case lenet-k4-m2 4 $common --parallel model --microbatches 2 --split 2,4,5
run_case lenet-h2x2-m2 4 $common --parallel hybrid --stages 2 --microbatches 2
cases="k2 k4-m2 h2x2-m2"
if long_part "lenet on 2 stages x 4 micro-batches and 4 stages without"; then
    run_case lenet-k2-m4 2 $common --parallel model --microbatches 4
    run_case lenet-k4 4 $common --parallel model --stages 4
    cases="$cases k2-m4 k4"
fi
for c in $cases; do h5check pipeline "$WORK/lenet-$c.h5"; done
same_loss "$LOSS_TOL" "$WORK/lenet-1.h5" "$WORK"/lenet-[kh]*.h5
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" "$WORK/lenet-1.params" "$WORK"/lenet-[kh]*.params
grep -q 'stage 3: layers 5-6 (relu1 .. ip2)' "$WORK/lenet-k4-m2.log" || fail "--split 2,4,5 not applied"
pass "lenet: 2 and 4 stages, micro-batches, 2x2 hybrid train the parameters of one process"

# 2. GoogLeNet on CIFAR-10-format data: a DAG cut between inception modules, with micro-batches.
mkdir -p "$WORK/cifar"
"$PYTHON" "$TESTS_SRCDIR/make_cifar10.py" "$WORK/cifar" 64 16
common="--model googlenet --dataset cifar10 --data-dir $WORK/cifar --batch 8 --iters 3 --warmup 0 --lr 0.01 --seed 5"
run_case goog-1 1 $common
run_case goog-k2-m2 2 $common --parallel model --microbatches 2
cases="k2-m2"
if long_part "googlenet on 4 stages"; then
    run_case goog-k4 4 $common --parallel model --split 24,67,110
    cases="$cases k4"
fi
for c in $cases; do h5check pipeline "$WORK/goog-$c.h5"; done
same_loss "$LOSS_TOL" "$WORK/goog-1.h5" "$WORK"/goog-k*.h5
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" 1e-5 "$WORK/goog-1.params" "$WORK"/goog-k*.params
pass "googlenet: 2 stages x 2 micro-batches and 4 stages train the parameters of one process"

# 3. LSTM-32: embedding and LSTM state through a pipeline of 2 stages and 2 micro-batches.
if long_part "lstm32 on 2 stages (tests/test_schedules.sh runs it with 1F1B)"; then
    common="--model lstm32 --dataset synthetic --batch 4 --iters 3 --warmup 0 --lr 0.5 --seed 5"
    run_case lstm-1 1 $common
    run_case lstm-k2-m2 2 $common --parallel model --microbatches 2
    h5check pipeline "$WORK/lstm-k2-m2.h5"
    same_loss "$LOSS_TOL" "$WORK/lstm-1.h5" "$WORK/lstm-k2-m2.h5"
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" 1e-5 "$WORK/lstm-1.params" "$WORK/lstm-k2-m2.params"
    pass "lstm32: 2 stages x 2 micro-batches train the parameters of one process"
fi

# The parameters did move: the comparisons are not of untouched initialisations.
run_case lenet-init 1 --model lenet --dataset fashion-mnist --data-dir "$FMNIST_SMALL" --batch 16 \
    --iters 1 --warmup 0 --lr 0 --seed 11
if "$PYTHON" "$TESTS_SRCDIR/compare_params.py" 1e-3 "$WORK/lenet-init.params" "$WORK/lenet-1.params" >/dev/null; then
    fail "lenet: training moved no parameter by more than 1e-3"
fi
pass "training moved the parameters"
