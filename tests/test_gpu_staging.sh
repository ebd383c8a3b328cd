# test_gpu_staging.sh - --exchange ssp / async / mixed on device memory, without a GPU:
# tests/staged_check runs each strategy on 2 ranks twice, on the CPU backend and on a fake device
# backend (byte-swapped buffers reached only by upload/download), through the host-staging
# wrapper (comm/staged.c: ssp, async) or mixed's own host copy (2 nodes of 1: the ring's copy in
# finish; 1 node of 2: the gradient average on device memory through the mpi transport), and
# checks the final parameters bit for bit and the number of copies.
# Then the whole program: dtbench with DTBENCH_CPU_AS_DEVICE=1 (the CPU backend declares device
# memory, so the resolver picks the staging wrapper, the transports, mixed and the pipeline stage
# through the host, and the driver synchronises as on a GPU) must train the parameters the plain
# CPU run trains, bit for bit: ssp, async, mixed (2 nodes; the ring off, so the timing is free),
# --parallel model with 2 micro-batches, hybrid, and sync with a straggler (its delay read from
# the device marks).
. "$(dirname "$0")/lib.sh"

CHECK=$(dirname "$DTBENCH")/../tests/staged_check
for spec in "ssp 0" "async 0" "mixed 1" "mixed 2"; do
    set -- $spec
    out=$(timeout -k 5 120 "$MPIRUN" -np 2 "$CHECK" $1 $2 6 2>&1) ||
        { echo "$out"; fail "staged_check $spec"; }
    echo "$out"
done

common="--model lenet --dataset synthetic --batch 32 --iters 4 --warmup 0 --seed 3"
for spec in "ssp:2:--exchange ssp --staleness 1" "async:2:--exchange async --ps-ranks 1" \
    "mixed:2:--exchange mixed --ranks-per-node 1 --sync-period 1000" \
    "model:2:--parallel model --microbatches 2" "hybrid:4:--parallel hybrid --microbatches 2" \
    "straggler:2:--straggler 1:2"; do
    IFS=: read -r name np args <<<"$spec"
    run_np "$np" $common $args --output "$WORK/$name-host.h5" \
        --save-model "$WORK/$name-host.p" >/dev/null
    DTBENCH_CPU_AS_DEVICE=1 run_np "$np" $common $args \
        --output "$WORK/$name-dev.h5" --save-model "$WORK/$name-dev.p" >/dev/null
    cmp -s "$WORK/$name-host.p" "$WORK/$name-dev.p" ||
        fail "$name: staged through the host, other parameters"
    echo "ok: $name: staged run = host run, bit for bit"
done
pass "ssp, async and mixed on a fake device, and dtbench's staging paths: the host run's parameters"
