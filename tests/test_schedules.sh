# test_schedules.sh - the schedules of the one training driver (src/run/schedule_*.c): GPipe and 1F1B
# (PipeDream-Flush) give the loss of every iteration and, after training, the parameters of one
# process training on the whole batch (2 and 4 stages, micro-batches, 2x2 hybrid, with --overlap;
# LeNet and LSTM-32); the 1F1B order keeps at most K-k micro-batches in flight on stage k where
# GPipe keeps all M (checked on the order --dry-run prints, against the definition); and the
# options the driver owns work in pipelines: --straggler delays the stage it names (and its
# neighbour waits for it), --target-acc stops every stage after the same iteration.
. "$(dirname "$0")/lib.sh"

TOL=2e-5      # as tests/test_pipeline.sh: float32 sums in another order, over 6 SGD steps
LOSS_TOL=1e-5

run_case() { # NAME NP ARGS... : parameters saved as $WORK/NAME.params
    local name=$1 np=$2
    shift 2
    run_np "$np" "$@" --output "$WORK/$name.h5" --save-model "$WORK/$name.params" >"$WORK/$name.log"
}

# 1. LeNet: both pipeline schedules against one process.
FMNIST_SMALL=$(fmnist_small)
common="--model lenet --dataset fashion-mnist --data-dir $FMNIST_SMALL --batch 16 --iters 6 --warmup 0 --lr 0.05 --seed 11"
run_case lenet-1 1 $common
for s in gpipe 1f1b; do
    run_case lenet-$s-k2-m4 2 $common --parallel model --microbatches 4 --schedule $s
    run_case lenet-$s-k4-m4 4 $common --parallel model --stages 4 --microbatches 4 --schedule $s
    run_case lenet-$s-h2x2-m2 4 $common --parallel hybrid --stages 2 --microbatches 2 --schedule $s \
        --overlap --bucket-mb 0.05
    h5check pipeline "$WORK/lenet-$s-k4-m4.h5"
    same_loss "$LOSS_TOL" "$WORK/lenet-1.h5" "$WORK"/lenet-$s-*.h5
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" "$WORK/lenet-1.params" "$WORK"/lenet-$s-*.params
    pycheck run marks "$WORK/lenet-$s-k2-m4.h5" --config schedule=$s
    pass "lenet, --schedule $s: 2 and 4 stages, micro-batches, 2x2 hybrid with --overlap train the parameters of one process"
done
run_np 1 $common --output "$WORK/lenet-data.h5" >/dev/null
pycheck run marks "$WORK/lenet-data.h5" --config schedule=data
pass "data parallelism stores the schedule it ran: data"

# 2. LSTM-32 (embedding and LSTM state between stages) with 1F1B.
common="--model lstm32 --dataset synthetic --batch 4 --iters 3 --warmup 0 --lr 0.5 --seed 5"
run_case lstm-1 1 $common
run_case lstm-1f1b-k2-m2 2 $common --parallel model --microbatches 2 --schedule 1f1b
same_loss "$LOSS_TOL" "$WORK/lstm-1.h5" "$WORK/lstm-1f1b-k2-m2.h5"
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" 1e-5 "$WORK/lstm-1.params" "$WORK/lstm-1f1b-k2-m2.params"
pass "lstm32: 1F1B over 2 stages x 2 micro-batches trains the parameters of one process"

# 3. The orders: each micro-batch forward then backward once per stage; in flight (forwards not yet
#    followed by their backward) at most min(K-k, M) on stage k with 1F1B, M with GPipe.
for s in gpipe 1f1b; do
    "$DTBENCH" --dataset synthetic --parallel model --stages 4 --microbatches 8 --batch 64 \
        --schedule $s --dry-run >"$WORK/order-$s.txt"
    pycheck pipeline order "$WORK/order-$s.txt" $s --stages 4 --microbatches 8
done

# 4. --straggler in a pipeline: stage 1 of 2 sleeps 100 ms at the end of its backward pass every
#    iteration (recorded), and stage 0, which waits for its gradients, records that wait as idle:
#    at least half of it (under a suite's load stage 0's own work between its last forward and
#    that wait took up to 10 ms of a 30 ms delay).
run_np 2 --model lenet --dataset synthetic --batch 16 --iters 6 --warmup 1 --parallel model \
    --microbatches 2 --schedule 1f1b --straggler 1:+100 --output "$WORK/strag.h5" >/dev/null
pycheck pipeline straggler "$WORK/strag.h5" --rank 1 --ms 100 --min-idle-ms 50

# 5. --target-acc in a pipeline: evaluated through the stages every 2 iterations, a target every
#    model reaches (evaluated after iteration 2) stops every stage after the next iteration, the
#    one that carries the vote through the pipeline and the exchange, as in data parallelism; the
#    file says why.
run_np 2 --model lenet --dataset fashion-mnist --data-dir "$FMNIST_SMALL" --batch 16 --iters 20 \
    --warmup 0 --parallel model --schedule 1f1b --eval-every 2 --target-acc 0.01 \
    --output "$WORK/target.h5" >"$WORK/target.log"
pycheck run marks "$WORK/target.h5" --attr stop_reason=target --ranks completed=3,3
pass "--straggler and --target-acc work in pipelines"
