# test_schedules.sh - the schedules of the one training driver (src/schedule_*.c): GPipe and 1F1B
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
    "$PYTHON" - "$WORK/lenet-$s-k2-m4.h5" "$s" <<'PY'
import sys, h5py, json
with h5py.File(sys.argv[1], "r") as f:
    got = json.loads(f.attrs["config_json"])["schedule"]
if got != sys.argv[2]:
    sys.exit(f"FAIL: {sys.argv[1]}: the stored configuration says schedule {got}, not {sys.argv[2]}")
PY
    pass "lenet, --schedule $s: 2 and 4 stages, micro-batches, 2x2 hybrid with --overlap train the parameters of one process"
done
run_np 1 $common --output "$WORK/lenet-data.h5" >/dev/null
"$PYTHON" -c "import sys, h5py, json; c = json.loads(h5py.File(sys.argv[1])['/'].attrs['config_json']); sys.exit(0 if c['schedule'] == 'data' else 'FAIL: data parallelism stored schedule ' + c['schedule'])" "$WORK/lenet-data.h5"
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
    "$PYTHON" - "$WORK/order-$s.txt" "$s" <<'PY'
import re, sys
path, sched = sys.argv[1], sys.argv[2]
K, M = 4, 8
stages = re.findall(r"^  stage (\d+): ((?:[FB]\d+ ?)+)$", open(path).read(), re.M)
if len(stages) != K:
    sys.exit(f"FAIL: {path}: {len(stages)} stage orders, expected {K}")
for k, order in stages:
    k, steps = int(k), order.split()
    if sorted(steps) != sorted([f"F{j}" for j in range(M)] + [f"B{j}" for j in range(M)]):
        sys.exit(f"FAIL: {sched} stage {k}: not each micro-batch's forward and backward once: {order}")
    flight, most = 0, 0
    for i, st in enumerate(steps):
        if st[0] == "B" and f"F{st[1:]}" not in steps[:i]:
            sys.exit(f"FAIL: {sched} stage {k}: {st} before its forward")
        flight += 1 if st[0] == "F" else -1
        most = max(most, flight)
    want = min(K - k, M) if sched == "1f1b" else M
    if most != want:
        sys.exit(f"FAIL: {sched} stage {k}: {most} micro-batches in flight, expected {want}: {order}")
print(f"ok: {sched}: every stage's order is valid, in flight at most {'min(K-k, M)' if sched == '1f1b' else 'M'}")
PY
done

# 4. --straggler in a pipeline: stage 1 of 2 sleeps 30 ms at the end of its backward pass every
#    iteration (recorded), and stage 0, which waits for its gradients, records that wait as idle.
run_np 2 --model lenet --dataset synthetic --batch 16 --iters 6 --warmup 1 --parallel model \
    --microbatches 2 --schedule 1f1b --straggler 1:+30 --output "$WORK/strag.h5" >/dev/null
"$PYTHON" - "$WORK/strag.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    d, idle = f["iterations/straggler_delay"][:], f["iterations/pipe_idle"][:]
if not (np.abs(d[1] - 0.030) < 1e-6).all() or (d[0] != 0).any():
    sys.exit(f"FAIL: straggler_delay per rank {d}: expected 0.030 on rank 1 only")
if np.median(idle[0]) < 0.025:
    sys.exit(f"FAIL: stage 0 idle {idle[0]}: it did not wait for the delayed stage")
print(f"ok: straggler_delay {d[1][0]:.3f} s on stage 1; stage 0 idle median {np.median(idle[0]) * 1e3:.1f} ms")
PY

# 5. --target-acc in a pipeline: evaluated through the stages every 2 iterations, a target every
#    model reaches (evaluated after iteration 2) stops every stage after the next iteration, the
#    one that carries the vote through the pipeline and the exchange, as in data parallelism; the
#    file says why.
run_np 2 --model lenet --dataset fashion-mnist --data-dir "$FMNIST_SMALL" --batch 16 --iters 20 \
    --warmup 0 --parallel model --schedule 1f1b --eval-every 2 --target-acc 0.01 \
    --output "$WORK/target.h5" >"$WORK/target.log"
"$PYTHON" - "$WORK/target.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    reason, done = f.attrs["stop_reason"], f["ranks/completed"][:]
    reason = reason.decode() if isinstance(reason, bytes) else reason
if reason != "target" or [int(n) for n in done] != [3, 3]:
    sys.exit(f"FAIL: stop_reason {reason}, completed {list(done)}: expected target after 3 on both")
print(f"ok: stopped by --target-acc after iteration 3 of 20 on both stages")
PY
pass "--straggler and --target-acc work in pipelines"
