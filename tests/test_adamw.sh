# test_adamw.sh - --optimizer adamw (PyTorch's AdamW; weight decay on the tensors of 2 or more
# dimensions only, nanoGPT's rule) end to end, on LeNet:
#   1. data parallelism: 2 ranks (sync: the gradient sum's 1/P folded into eps) train the
#      parameters 1 rank trains, and so do 2 pipeline stages (each updating its part, its decay
#      runs offset); ssp with S = 0 (its engine averages) those of sync, bit for bit;
#      async with one worker and two servers (each updating its shard, with the decay runs that
#      fall in it and its own moments) those of 1 rank, bit for bit;
#   2. the stale strategies train: ssp with S = 1 (its finish applies the last update, its step
#      counted on from the driver's) and async with 2 workers, one final model each; through the
#      host-staging wrapper (DTBENCH_CPU_AS_DEVICE=1, the second moment mirrored) ssp and async
#      train the parameters of their host runs, bit for bit; and the strategies on the sealed
#      fake device (tests/staged_check ... adamw); on the counting fake device, a step keeps its
#      rules (src/run/count_device.h) and trains the CPU run's parameters;
#   3. refusals, exit 2 in one line and no file: --momentum with adamw, --beta1, --beta2 or --eps
#      with sgd (also sgd as the zoo's auto), a beta of 1, an eps of 0; auto is sgd for the zoo;
#   4. against torch.optim.AdamW (nanoGPT's two parameter groups) from dtbench's initial
#      parameters: 10 steps, every loss and the final parameters (skipped without torch).
. "$(dirname "$0")/lib.sh"
cd "$WORK"

FMNIST_SMALL=$(fmnist_small)
common="--model lenet --dataset fashion-mnist --data-dir $FMNIST_SMALL --batch 16 --warmup 1 --seed 11 --optimizer adamw --weight-decay 0.1 --lr 0.001"
# eps 1e-4 (PyTorch's 1e-8 is the default): far above the rounding of the gradients, so that a
# rounding in the summation order of a near-zero gradient cannot decide the sign of its step; and
# the step then follows the gradients' scale, so a 1/P missed in eps shows (eps 2e-4 instead of
# 1e-4 moves LeNet's parameters by 8e-3 in 8 steps; two sums in another order: 1e-7).
TOL=2e-6
train() { # NAME NRANKS ARGS...: trains 8 iterations, saves NAME.params
    local name=$1 np=$2
    shift 2
    run_np "$np" $common --iters 7 "$@" --output "$name.h5" --save-model "$name.params" >/dev/null
}
compare() { "$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$@"; }

# 1. The same parameters.
train one 1 --eps 1e-4
train two 2 --eps 1e-4
h5check finished two.h5 --ranks 2 --iters 8
train stages 2 --eps 1e-4 --parallel model --microbatches 2
compare "$TOL" one.params two.params stages.params
train async-shards 3 --eps 1e-4 --exchange async --ps-ranks 2 --staleness 0
compare 0 one.params async-shards.params
pass "adamw: 2 ranks and 2 pipeline stages train the parameters of 1; async's 2 servers those of 1, bit for bit"
train sync-eps8 2
train ssp0-eps8 2 --exchange ssp --staleness 0
cmp -s sync-eps8.params ssp0-eps8.params || fail "adamw: ssp S=0 and sync differ"
pass "adamw with eps 1e-8: ssp S=0 (averaged) = sync (1/P in eps), bit for bit"
# The parameters did move.
run_np 1 $common --iters 1 --lr 0 --output init.h5 --save-model init.params >/dev/null
if compare 1e-3 init.params one.params >/dev/null; then
    fail "adamw: training moved no parameter by more than 1e-3"
fi

# 2. The stale strategies train, also through the host-staging wrapper.
if long_part "the stale strategies with adamw, and staged through the host"; then
    train ssp1 2 --exchange ssp --staleness 1
    pycheck exchange invariants ssp1.h5
    DTBENCH_CPU_AS_DEVICE=1 train ssp1-dev 2 --exchange ssp --staleness 1
    cmp -s ssp1.params ssp1-dev.params || fail "adamw: ssp staged through the host, other parameters"
    train async2 3 --exchange async --ps-ranks 1
    pycheck exchange invariants async2.h5
    DTBENCH_CPU_AS_DEVICE=1 train async-dev 3 --eps 1e-4 --exchange async --ps-ranks 2 --staleness 0
    cmp -s async-shards.params async-dev.params || fail "adamw: async staged through the host, other parameters"
    for p in ssp1 async2; do
        if compare 1e-3 init.params $p.params >/dev/null; then fail "adamw: $p moved no parameter"; fi
    done
    CHECK=$(dirname "$DTBENCH")/../tests/staged_check
    for x in ssp async; do
        out=$(timeout -k 5 120 "$MPIRUN" -np 2 "$CHECK" $x 0 6 adamw 2>&1) || { echo "$out"; fail "staged_check $x adamw"; }
        echo "$out"
    done
    pass "adamw: ssp (S=1) and async train, staged through the host as on it"
fi
# On the counting fake device (src/run/count_device.h): a step with AdamW's update keeps the
# step's rules (nothing allocated or waited for inside it, graphs replayed) and trains the
# parameters of the plain CPU run, bit for bit.
c="--model lenet --dataset synthetic --batch 4 --warmup 1 --iters 3 --seed 5 --sample-hz 0 --optimizer adamw --weight-decay 0.1"
timeout -k 5 120 "$DTBENCH" $c --output cpu.h5 --save-model cpu.params >/dev/null
DTBENCH_COUNT_DEVICE="$WORK/adamw.count" timeout -k 5 120 "$DTBENCH" $c --output dev.h5 \
    --save-model dev.params >dev.log 2>&1 || { cat dev.log; fail "adamw on the counting device"; }
# (AdamW's update: one launch per run of the same decay, LeNet's 8 tensors, beside the 2 replays)
"$PYTHON" "$TESTS_SRCDIR/check_counts.py" adamw.count --h5 dev.h5 --iters 4 --graphs 4 --launches 10 ||
    fail "adamw: a step rule of the counting device"
cmp -s cpu.params dev.params || fail "adamw: the counting device trains other parameters"
pass "adamw on the counting device: the step's rules, the CPU's parameters"

# 3. Refusals: one line, exit 2, no file.
bad="--model lenet --dataset synthetic --batch 8 --iters 1 --output bad.h5"
expect_bad 1 "--momentum: 0.9 is not accepted with --optimizer adamw (read only by --optimizer sgd)" \
    $bad --optimizer adamw --momentum 0.9
expect_bad 1 "--beta1: 0.8 is not accepted with --optimizer sgd (read only by --optimizer adamw)" \
    $bad --optimizer sgd --beta1 0.8
expect_bad 1 "--beta2: 0.99 is not accepted with --optimizer sgd" $bad --beta2 0.99
expect_bad 1 "--eps: 1e-06 is not accepted with --optimizer sgd" $bad --exchange ssp --eps 1e-6
expect_bad 1 "--beta1: 1 is not accepted: expected a number from 0 to below 1" \
    $bad --optimizer adamw --beta1 1
expect_bad 1 "--eps: 0 is not accepted: expected a number above 0" $bad --optimizer adamw --eps 0
expect_bad 1 "--optimizer: 'adam' is not accepted: expected one of sgd,adamw,auto" $bad --optimizer adam
out=$(run_np 1 --model lenet --dataset synthetic --batch 8 --iters 1 --warmup 0 --momentum 0.5 --output auto.h5)
grep -q '^  optimizer  *sgd$' <<<"$out" || fail "--optimizer auto is not sgd for lenet: $out"
"$PYTHON" -c 'import sys, h5py; sys.exit(h5py.File(sys.argv[1])["config"].attrs["optimizer"] != "adamw")' \
    one.h5 || fail "/config/optimizer of an adamw run is not adamw"
pass "adamw: the other optimizer's options refused; auto is sgd for the zoo"

# 4. Against torch.optim.AdamW.
if ! find_torch_python; then
    echo "SKIP (4): no python imports torch (scripts/setup.sh installs Debian's python3-torch)"
    exit 0
fi
# LeNet on the first 32 training images, one batch: every step trains on all of it
# (tests/torch_ref.py). PyTorch's own float32 run strays from its float64 one by ~1e-4 here
# (AdamW's step is large for small gradients), which check_torch takes x10 as the tolerance.
fmnist_subset fm32 32
c="--model lenet --dataset fashion-mnist --data-dir fm32 --batch 32 --warmup 0 --seed 7 --optimizer adamw --weight-decay 0.1"
run_np 1 $c --iters 1 --lr 0 --output adamw-init.h5 --save-model adamw-init.params >/dev/null
run_np 1 $c --iters 10 --lr 0.003 --output adamw.h5 --save-model adamw.params >/dev/null
"$TORCH_PYTHON" "$TESTS_SRCDIR/torch_ref.py" lenet fm32 adamw-init.params 10 0.003 0 adamw-torch.json \
    adamw-torch.params adamw 0.9 0.95 1e-8 0.1
pycheck torch train adamw --loss-tol 1e-4 --param-tol 1e-4
