# test_transport.sh - the gradient exchange averages exactly over every transport that runs on CPU
# ranks, flat and hierarchical, with and without overlap, on several "nodes" formed with
# --ranks-per-node (tests/exchange_avg.c: seeded gradients whose average is known exactly);
# then whole training runs with --transport hier / mpi and --overlap match single-process
# training; and the transport options' bad input.
. "$(dirname "$0")/lib.sh"
TEST_EXCHANGE=${TEST_EXCHANGE:-$(dirname "$DTBENCH")/../tests/exchange_avg}

# xchg NRANKS ARGS... : exchange_avg on NRANKS ranks; fails the test on any wrong average.
xchg() { run_check 120 "$1" "$TEST_EXCHANGE" "${@:2}"; }

# The cases: hier on 2 nodes x 2, 2 x 3 (P = 6: not a power of two), 1 node x 4, 4 nodes x 1, in
# buckets of 1000 floats over 10007 (a 7-float bucket; 1000 is not a multiple of 3: tails through
# the scratch); buckets smaller than a node (only tails), and a single bucket of 5 floats on
# 2-rank nodes; flat MPI; --progress thread (progress threads run the buckets started during
# backward: flat mpi's first bucket must be summed while the caller makes no MPI call; every level
# of hier too); buckets staged through host copies as on a GPU without CUDA-aware MPI (--device
# staged: the transport must hold every staging buffer from setup on, iteration 0 grows no heap).
# The quick suite runs one case of each kind, the long checks every case.
xchg 4 hier 2 --overlap
xchg 6 hier 3
xchg 6 hier 3 --nparams 20 --bucket 2 --overlap
xchg 4 hier 2 --nparams 5 --bucket 5
xchg 3 mpi 1
xchg 4 mpi 2 --overlap --progress-thread
xchg 4 hier 2 --device staged --nparams 400009 --bucket 40000 --overlap
if long_part "the other 11 exchanges of exchange_avg"; then
    xchg 4 hier 2
    xchg 6 hier 3 --overlap
    xchg 4 hier 4 --overlap
    xchg 4 hier 1
    xchg 4 mpi 2 --overlap
    xchg 3 mpi 1 --overlap --progress-thread --nparams 400009 --bucket 40000
    xchg 4 hier 2 --overlap --progress-thread
    xchg 6 hier 3 --nparams 20 --bucket 2 --overlap --progress-thread
    xchg 4 hier 2 --device staged --nparams 400009 --bucket 40000 --overlap --progress-thread
    xchg 4 mpi 1 --device staged --nparams 400009 --bucket 40000
    xchg 6 hier 3 --device staged --nparams 400009 --bucket 40000
fi
pass "exchange: exact averages for hier and mpi on 1-6 ranks, 1-4 nodes, with and without overlap (polled and on progress threads), host and staged buffers; staging allocated at setup"

# Whole runs: the hierarchy and overlap change only the order of float sums.
FMNIST_SMALL=$(fmnist_small)
common="--model lenet --dataset fashion-mnist --data-dir $FMNIST_SMALL --batch 16 --iters 4 --warmup 0 --lr 0.05 --seed 11"
run_np 1 $common --output "$WORK/ref.h5" --save-model "$WORK/ref.params" >/dev/null
run_np 4 $common --transport hier --ranks-per-node 2 --overlap --bucket-mb 0.1 \
    --output "$WORK/hier.h5" --save-model "$WORK/hier.params" >/dev/null
run_np 2 $common --transport mpi --overlap --bucket-mb 0.05 \
    --output "$WORK/mpi.h5" --save-model "$WORK/mpi.params" >/dev/null
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" 2e-5 "$WORK/ref.params" "$WORK/hier.params" "$WORK/mpi.params"
h5check finished "$WORK/hier.h5" --ranks 4 --iters 4
# nccl-tests' bus bandwidth factor: hier over 2 nodes of 2 ranks, 2(L-1)/L + 2(N-1)/N / L = 1.5;
# the allreduce over 2 ranks, 2(P-1)/P = 1
pycheck exchange busbw "$WORK/hier.h5" --factor 1.5
pycheck exchange busbw "$WORK/mpi.h5" --factor 1
pycheck exchange overlap "$WORK/hier.h5" --transport hier --ranks 4 --iters 4 \
    --bucket-bytes 104856 # --bucket-mb 0.1: 0.1 MiB of floats
pycheck exchange alone "$WORK/ref.h5"
# ranks sharing cores are recorded (one thread each here): 4, 2 and 1 against this host's cores
pycheck exchange host "$WORK/hier.h5" --ranks 4
pycheck exchange host "$WORK/mpi.h5" --ranks 2
pycheck exchange host "$WORK/ref.h5" --ranks 1
pass "lenet: 4 ranks (hier, 2 nodes, overlap) and 2 ranks (mpi, overlap) train the 1-rank parameters"

# --progress thread: the same training as polling. sync with --overlap (mpi, hier) against one
# process; ssp --staleness 1 (its allreduces in flight for an iteration) against ssp polled:
# on 2 ranks each sum is a + b whichever algorithm adds it, so the parameters are identical.
run_np 2 $common --transport mpi --overlap --progress thread --bucket-mb 0.05 \
    --output "$WORK/th-mpi.h5" --save-model "$WORK/th-mpi.params" >/dev/null
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" 2e-5 "$WORK/ref.params" "$WORK/th-mpi.params"
if long_part "--progress thread over hier, and with ssp"; then
    run_np 4 $common --transport hier --ranks-per-node 2 --overlap --progress thread --bucket-mb 0.1 \
        --output "$WORK/th-hier.h5" --save-model "$WORK/th-hier.params" >/dev/null
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" 2e-5 "$WORK/ref.params" "$WORK/th-hier.params"
    for pm in poll thread; do
        run_np 2 $common --exchange ssp --staleness 1 --progress $pm --bucket-mb 0.05 \
            --output "$WORK/ssp-$pm.h5" --save-model "$WORK/ssp-$pm.params" >/dev/null
    done
    cmp "$WORK/ssp-poll.params" "$WORK/ssp-thread.params" ||
        fail "ssp: --progress thread trained other parameters than poll"
fi
pycheck exchange progress "$WORK/th-mpi.h5" --ranks 2
pass "--progress thread: sync --overlap (mpi, hier) trains the 1-rank parameters, ssp the polled ones; recorded in the configuration"

# Hybrid parallelism: 2 replicas of a 2-stage pipeline on 4 ranks, every CPU transport; hier on 2
# "nodes" of 2 (each stage's replicas are one rank per node: the transport must take the
# topology of the stage's communicator, not the job's; that crashed with "malloc(): invalid
# size"), with and without overlap. Each must train the 1-rank parameters.
specs="hier:--ranks-per-node 2 --overlap" # the quick suite; the long checks all four
long_part "hybrid with mpi, and hier on 1 and 2 nodes without overlap" &&
    specs="mpi:|hier:--ranks-per-node 2|$specs|hier:--ranks-per-node 4"
IFS='|' read -ra specs <<<"$specs"
for spec in "${specs[@]}"; do
    tp=${spec%%:*} args=${spec#*:}
    name=$(echo "$tp$args" | tr -dc 'a-z0-9')
    run_np 4 $common --parallel hybrid --stages 2 --transport "$tp" $args --bucket-mb 0.1 \
        --output "$WORK/hy-$name.h5" --save-model "$WORK/hy-$name.params" >/dev/null
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" 2e-5 "$WORK/ref.params" "$WORK/hy-$name.params"
done
pass "hybrid (2 stages x 2 replicas) with mpi and hier (1, 2 nodes, overlap) trains the 1-rank parameters"

# Bad input: one line, exit status 2.
set +e
run_refused 2 --dataset synthetic --iters 1 --transport nccl --output "$WORK/bad.h5" >"$WORK/o.txt" 2>"$WORK/e.txt"
rc=$?
set -e
[ "$rc" = 2 ] || fail "--transport nccl on CPU: exit $rc"
# (a build without NCCL does not know the name: "--transport: 'nccl' is not accepted: expected ...")
grep -qE "^dtbench: error: --transport( nccl: .*--device cuda|: 'nccl' is not accepted: expected one of)" \
    "$WORK/e.txt" || fail "$(cat "$WORK/e.txt")"
[ ! -e "$WORK/bad.h5" ] || fail "--transport nccl on CPU left a file"
set +e
"$DTBENCH" --transport tcp --output "$WORK/bad.h5" >/dev/null 2>"$WORK/e.txt"
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "^dtbench: error: --transport: 'tcp' is not accepted: expected one of mpi" "$WORK/e.txt" \
    || fail "--transport tcp: exit $rc: $(cat "$WORK/e.txt")"
set +e
run_refused 2 --dataset synthetic --iters 1 --exchange ssp --calibrate-iters 3 --output "$WORK/bad.h5" >/dev/null 2>"$WORK/e.txt"
rc=$?
set -e
[ "$rc" = 2 ] && grep -q "^dtbench: error: --calibrate-iters: .*--exchange ssp" "$WORK/e.txt" && [ ! -e "$WORK/bad.h5" ] \
    || fail "--calibrate-iters with ssp: exit $rc: $(cat "$WORK/e.txt")"
pass "bad transports rejected with one line; --calibrate-iters refused where nothing calibrates"
