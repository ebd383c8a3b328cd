# test_exchange.sh - the exchange strategies side by side (issue: asynchronous and mixed exchange):
#   1. each of sync, ssp, async, mixed trains LeNet on Fashion-MNIST to 80% test accuracy (on the
#      first 2000 test images) with 4 ranks (mixed: 2 "nodes" of 2), stopping through --target-acc
#      (which it also tests): the long checks;
#   2. with one straggler (100 ms late every iteration) of 4 ranks, async and mixed deliver more
#      samples per second than sync, measured in this same run (the long checks only);
#   3. async: the servers apply exactly the pushes the workers count, within the staleness bound;
#      mixed: each leader receives what the previous one sent, the staleness recorded is never
#      negative and says which node's parameters are old (the straggler's); every rank ends with
#      one model;
#      sync and ssp (S = 1, 2) on 2 and 4 ranks train the parameters one process trains with the
#      same global batch (applied once each, S iterations late), ssp's differ from sync's;
#   4. clean shutdown with 2, 3 and 4 ranks (quick suite: 3) and uneven speeds, and ssp with S=0 equals sync;
#   5. wait and transfer apart: with a straggler whose delay is known, the others' exchange_wait
#      holds it and their exchange_hidden does not.
. "$(dirname "$0")/lib.sh"

# The whole training set; the first 2000 test images (an accuracy of 0.80 measured within +-0.9
# points, one standard error): the evaluations every 50 iterations cost a fifth of 10000's.
common="--model lenet --dataset fashion-mnist --data-dir $(fmnist_small 2000) --warmup 0 --seed 5"

# 1. Time to 80%. Stale gradients add momentum of their own (Mitliagkas et al., 2016), so the
#    stale strategies (ssp, async) get less momentum and a larger step.
#    The long checks run these (the quick suite trains in every strategy below, to no target).
specs=""
long_part "sync, ssp, async and mixed to 80% test accuracy" &&
    specs="sync:--lr 0.02|ssp:--lr 0.05 --momentum 0.5 --staleness 1|async:--lr 0.05 --momentum 0.5 --staleness 2 --ps-ranks 1|mixed:--lr 0.02 --ranks-per-node 2 --sync-period 2"
IFS='|' read -ra specs <<<"$specs"
for spec in "${specs[@]}"; do
    x=${spec%%:*} args=${spec#*:}
    run_np 4 $common --exchange $x $args --batch 60 --iters 800 --eval-every 50 --target-acc 0.80 \
        --output "$WORK/acc-$x.h5" >"$WORK/acc-$x.log"
    pycheck run marks "$WORK/acc-$x.h5" --min-accuracy 0.80 --attr stop_reason=target --ranks status=2
done

# 2. + 3. A straggler on rank 1 of 4: throughput of every strategy in the same run.
#    A persistent straggler holds back asynchronous workers as soon as they are S ahead, so async
#    runs with a loose bound here (Downpour has none); mixed needs none. The delay is a fixed
#    100 ms, not a factor of the compute: with 4 ranks on 2 cores beside other tests, scheduling
#    can make every iteration as slow as a factor-3 straggler's (CI once saw mixed 0.99x sync).
for x in sync async mixed; do
    run_np 4 --model lenet --dataset synthetic --batch 48 --iters 30 --warmup 5 --straggler 1:+100 \
        --exchange $x --ranks-per-node 2 $([ $x = async ] && echo --staleness 50) --output "$WORK/strag-$x.h5" >/dev/null
done
# The rates are measured one run after another: other work on the machine skews them (mixed at
# 0.76x sync in a quick-suite run beside a build), so the comparison is a long check's, where
# nothing else runs (CI); the quick suite checks what the strategies did, not how fast.
if long_part "async and mixed faster than sync with a straggler"; then
    pycheck exchange throughput "$WORK/strag-sync.h5" "$WORK/strag-async.h5" "$WORK/strag-mixed.h5"
fi
for x in sync async mixed; do pycheck exchange invariants "$WORK/strag-$x.h5"; done
pycheck exchange mixed-lag "$WORK/strag-mixed.h5" 1

# 4. Shutdown with uneven speeds on 2, 3 and 4 ranks (the quick suite: 3), every strategy that fits.
nps=3
long_part "shutdown with uneven speeds on 2 and 4 ranks" && nps="2 3 4"
for np in $nps; do
    for x in sync ssp async mixed; do
        run_np $np --model lenet --dataset synthetic --batch 24 --iters 12 --warmup 0 \
            $(case $x in ssp | async) echo --staleness 2 ;; esac) \
            --straggler-random 0.3 --straggler $((np - 1)):+20 --exchange $x --ranks-per-node 1 \
            --output "$WORK/down-$np-$x.h5" >/dev/null
        pycheck exchange invariants "$WORK/down-$np-$x.h5"
    done
done

# ssp with S=0 is the synchronous exchange, bit for bit.
for x in sync ssp; do
    run_np 2 --model lenet --dataset synthetic --batch 16 --iters 6 --warmup 0 --exchange $x \
        $([ $x = ssp ] && echo --staleness 0) --output "$WORK/s0-$x.h5" --save-model "$WORK/s0-$x.params" >/dev/null
done
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" 0 "$WORK/s0-sync.params" "$WORK/s0-ssp.params"
pass "ssp --staleness 0 trains exactly the parameters of sync"

# 3b. sync and ssp against one process: no exchange there, so every gradient is applied once and
#     ssp's S iterations late by construction. A lost, doubled or differently delayed update on
#     P ranks changes the parameters.
small="--model lenet --dataset synthetic --batch 16 --iters 8 --warmup 0 --seed 3 --lr 0.05"
p_ranks=2 # the quick suite; 4 ranks through hier below
long_part "sync and ssp on 4 ranks through mpi" && p_ranks="2 4"
for spec in "sync 0" "ssp 1" "ssp 2"; do
    set -- $spec
    st=""
    [ "$1" = ssp ] && st="--staleness $2" # the resolver refuses --staleness with sync
    run_np 1 $small --exchange "$1" $st --output "$WORK/one-$1$2.h5" \
        --save-model "$WORK/one-$1$2.params" >/dev/null
    for np in $p_ranks; do
        run_np $np $small --exchange "$1" $st --output "$WORK/p$np-$1$2.h5" \
            --save-model "$WORK/p$np-$1$2.params" >/dev/null
        "$PYTHON" "$TESTS_SRCDIR/compare_params.py" 2e-5 "$WORK/one-$1$2.params" \
            "$WORK/p$np-$1$2.params"
    done
done
# ssp through the hierarchical transport (2 "nodes" of 2, several buckets): the same delayed
# updates as through the flat one
run_np 4 $small --exchange ssp --staleness 1 --transport hier --ranks-per-node 2 --bucket-mb 0.5 \
    --output "$WORK/p4h-ssp1.h5" --save-model "$WORK/p4h-ssp1.params" >/dev/null
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" 2e-5 "$WORK/one-ssp1.params" "$WORK/p4h-ssp1.params"
if "$PYTHON" "$TESTS_SRCDIR/compare_params.py" 2e-5 "$WORK/one-sync0.params" "$WORK/one-ssp1.params" >/dev/null; then
    fail "ssp --staleness 1 trained the parameters of sync: no delay"
fi
pass "sync and ssp (S = 1, 2) on 2 and 4 ranks (ssp also through hier) train one process's parameters; ssp's are not sync's"

# 5. A straggler 300 ms late after backward, with --overlap: rank 0 waits for it in the stop vote
#    after marking the end of its backward, so the wait is not counted as hidden exchange.
run_np 2 --model lenet --dataset synthetic --batch 16 --iters 6 --warmup 1 --overlap \
    --bucket-mb 0.2 --straggler 1:+300 --output "$WORK/late.h5" >/dev/null
pycheck exchange straggler "$WORK/late.h5" 300
pass "wait and hidden exchange measured apart with a known straggler"
