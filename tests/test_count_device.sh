# test_count_device.sh - what a device step may do, proven on the counting fake device
# (src/run/count_device.h: DTBENCH_COUNT_DEVICE, the CPU backend's kernels on buffers declared device
# memory, every call counted per iteration, copies of prefetched batches deferred until the
# compute stream waits for them, graphs captured without running and replayed by running again
# with the same calls) through the real driver:
#   1. LeNet, ResNet-8, an LSTM and a transformer (nanogpt-char): no allocation and no host synchronisation inside a step, one
#      weight cast per step, the next batch's uploads queued while the step's kernels are and
#      never between the backward and exchange marks while the device has nothing to compute
#      (there it would sit idle, recorded as exchange: an eager launch-bound step's case),
#      graphs captured once per input slot and part and replayed after (tests/check_counts.py);
#      the saved parameters bit for bit those of the plain CPU run, with graphs and prefetch on
#      and with both off; AlexNet too, whose dropout masks follow the step's samples: its kernels
#      read the batch's origin from device memory, so a replayed step draws that step's mask (the
#      plain CPU run passes the origin as a value: a device run that drew a stale mask differs);
#      and a loss scale halved by an overflow, read from device memory: no graph captured again;
#   2. the modes: evaluation passes on Fashion-MNIST (their last chunk smaller), data parallelism
#      on 2 ranks, with --overlap (forward replayed, backward eager), a pipeline of 2 stages with
#      2 micro-batches (graphs refused, the reason in the file), and a stop while a batch is in
#      flight (no hang, the copy waited for);
#   3. --prefetch on and --graphs on are refused where they cannot run (the plain CPU backend).
. "$(dirname "$0")/lib.sh"

CHECK="$PYTHON $TESTS_SRCDIR/check_counts.py"
ITERS=4 # iterations in all: warm-up 1 + 3 measured
common="--dataset synthetic --batch 4 --warmup 1 --iters 3 --seed 5 --sample-hz 0"

# on NP ARGS...: dtbench on NP ranks (1: without mpirun, quicker to start)
on() {
    local np=$1
    shift
    if [ "$np" = 1 ]; then timeout -k 5 120 "$DTBENCH" "$@"; else run_np "$np" "$@"; fi
}
# counted NAME NP ARGS...: dtbench through the counting device; the report is $WORK/NAME.count
counted() {
    local name=$1 np=$2
    shift 2
    rm -f "$WORK/$name.count"
    DTBENCH_COUNT_DEVICE="$WORK/$name.count" on "$np" "$@" --output "$WORK/$name.h5" \
        --save-model "$WORK/$name.p" >"$WORK/$name.log" 2>&1 || {
        cat "$WORK/$name.log"
        fail "$name: dtbench on the counting device"
    }
}
plain() {
    local name=$1 np=$2
    shift 2
    on "$np" "$@" --output "$WORK/$name.h5" --save-model "$WORK/$name.p" >/dev/null
}
same() {
    cmp -s "$WORK/$1.p" "$WORK/$2.p" || fail "$1: other parameters than $2"
}
attr() { # attr FILE NAME: a root attribute of a result file
    "$PYTHON" -c 'import sys, h5py; print(h5py.File(sys.argv[1], "r").attrs[sys.argv[2]])' "$@"
}

# 1. the step's rules, four models (the transformer on 16-token sequences; the quick suite: LeNet
#    and the transformer)
models="lenet nanogpt-char"
long_part "the step's rules on resnet8 and lstm32" && models="lenet resnet8 lstm32 nanogpt-char"
for m in $models; do
    # the transformer with SGD: one update launch, as the zoo (AdamW: tests/test_adamw.sh)
    [ "$m" = nanogpt-char ] && m_args="--seq-len 16 --optimizer sgd" || m_args=""
    plain "$m-cpu" 1 --model "$m" $m_args $common
    counted "$m" 1 --model "$m" $m_args $common
    [ "$(attr "$WORK/$m.h5" prefetch)" = on ] || fail "$m: prefetch not used on the fake device"
    [ "$(attr "$WORK/$m.h5" graphs)" = forward,backward ] || fail "$m: graphs not used"
    $CHECK "$WORK/$m.count" --h5 "$WORK/$m.h5" --iters $ITERS --graphs 4 || fail "$m: a step rule (above)"
    same "$m" "$m-cpu"
    counted "$m-eager" 1 --model "$m" $m_args $common --graphs off --prefetch off
    $CHECK "$WORK/$m-eager.count" --iters $ITERS --eager --no-prefetch || fail "$m: eager rules"
    same "$m-eager" "$m-cpu"
    pass "$m: prefetched and replayed = eager = plain CPU, bit for bit; the step's rules hold"
done
ax="--model alexnet $common --batch 2"
plain alexnet-cpu 1 $ax
counted alexnet 1 $ax
[ "$(attr "$WORK/alexnet.h5" graphs)" = forward,backward ] ||
    fail "alexnet: graphs $(attr "$WORK/alexnet.h5" graphs) ($(attr "$WORK/alexnet.h5" graphs_reason))"
$CHECK "$WORK/alexnet.count" --h5 "$WORK/alexnet.h5" --iters $ITERS --graphs 4 || fail "alexnet: a step rule (above)"
same alexnet alexnet-cpu
if long_part "alexnet eager"; then
    counted alexnet-eager 1 $ax --graphs off --prefetch off
    $CHECK "$WORK/alexnet-eager.count" --iters $ITERS --eager --no-prefetch || fail "alexnet: eager rules"
    same alexnet-eager alexnet-cpu
fi
pass "alexnet (dropout): replayed = eager = plain CPU, bit for bit: each step's own masks"

# fp16's loss scale read from device memory: an overflow forced in iteration 3 halves the scale
# (DTBENCH_TEST_LOSS_SCALING: the fp16 loss scaler on fp32, which the CPU runs); the graphs of
# iterations 1 and 2 replay under both scales, none is captured again in a timed step.
export DTBENCH_TEST_LOSS_SCALING=1 DTBENCH_TEST_OVERFLOW=3
ls="--model lenet --dataset synthetic --batch 4 --warmup 1 --iters 5 --seed 5 --sample-hz 0"
plain scale-cpu 1 $ls
counted scale 1 $ls
unset DTBENCH_TEST_LOSS_SCALING DTBENCH_TEST_OVERFLOW
"$PYTHON" "$TESTS_SRCDIR/check_scale_captures.py" "$WORK/scale.count" "$WORK/scale.h5" ||
    fail "loss scale: a graph captured again"
same scale scale-cpu
pass "fp16 loss scale: one graph per slot and part serves every scale; plain CPU's parameters"

# 2. modes: evaluations (10 test images in chunks of 4: the last one of 2), 2 data-parallel
# ranks, a pipeline, a stop with a batch in flight
fmnist_subset "$WORK/fm" 10
ev="--model lenet --dataset fashion-mnist --data-dir $WORK/fm --batch 4 --warmup 1 --iters 3"
ev="$ev --eval-every 2 --sample-hz 0 --seed 5"
plain eval-cpu 1 $ev
counted eval 1 $ev
$CHECK "$WORK/eval.count" --h5 "$WORK/eval.h5" --iters $ITERS --graphs 4 || fail "evaluations: a step rule"
same eval eval-cpu
acc() { # the evaluations' accuracies and losses, one line; fails on a missing dataset
    "$PYTHON" -c 'import sys, h5py; e = h5py.File(sys.argv[1], "r")["eval"]
print(list(e["accuracy"][:]), list(e["loss"][:]))' "$1"
}
a_dev=$(acc "$WORK/eval.h5") && a_cpu=$(acc "$WORK/eval-cpu.h5") || fail "evaluations: no /eval"
[ "$a_dev" = "$a_cpu" ] || fail "evaluations: $a_dev against $a_cpu"
echo "evaluations: $a_dev"
pass "evaluations between prefetched steps: the same accuracies and parameters"

plain dp-cpu 2 --model lenet $common --batch 8
counted dp 2 --model lenet $common --batch 8
$CHECK "$WORK/dp.count" --h5 "$WORK/dp.h5" --iters $ITERS --graphs 4 || fail "2 ranks: a step rule"
same dp dp-cpu
pass "data parallelism on 2 ranks: each rank's shard prefetched, the same parameters"

plain ov-cpu 2 --model lenet $common --batch 8 --overlap
counted ov 2 --model lenet $common --batch 8 --overlap
$CHECK "$WORK/ov.count" --h5 "$WORK/ov.h5" --iters $ITERS --graphs 2 --replays 1 || fail "--overlap: a step rule"
same ov ov-cpu
pass "--overlap on 2 ranks: the forward pass replayed, backward eager with the exchange's hook"

pp="--model lenet $common --batch 8 --parallel model --microbatches 2"
plain pipe-cpu 2 $pp
counted pipe 2 $pp
$CHECK "$WORK/pipe.count" --h5 "$WORK/pipe.h5" --iters $ITERS --pipeline || fail "pipeline: a step rule"
same pipe pipe-cpu
reason=$(attr "$WORK/pipe.h5" graphs_reason)
[ "$(attr "$WORK/pipe.h5" graphs)" = off ] && grep -q pipeline <<<"$reason" ||
    fail "pipeline: graphs $(attr "$WORK/pipe.h5" graphs) ($reason)"
pass "pipeline: samples prefetched on stage 0, labels on stage 1; graphs off: $reason"

# a stop after the first iteration, with the next batch queued: the run ends cleanly
counted stop 1 --model lenet --dataset synthetic --batch 4 --warmup 0 --iters 1000 \
    --duration 0.001 --sample-hz 0
[ "$(attr "$WORK/stop.h5" stop_reason)" = duration ] || fail "stop: $(attr "$WORK/stop.h5" stop_reason)"
pass "a stop with a batch in flight: closed as stopped, the copy waited for"

# 3. refusals
cd "$WORK"
expect_bad 0 "--prefetch: 'on' is not accepted with --device cpu" --model lenet \
    --dataset synthetic --prefetch on --output bad.h5
expect_bad 0 "--graphs: 'on' is not accepted with --device cpu" --model lenet \
    --dataset synthetic --graphs on --output bad.h5
pass "the counting fake device: the step's rules and the modes"
