# test_gpu_staging.sh - --exchange ssp / async / mixed on device memory, without a GPU:
# tests/staged_check runs each strategy on 2 ranks twice, on the CPU backend and on a fake device
# backend (byte-swapped buffers reached only by upload/download), through the host-staging
# wrapper (comm/staged.c: ssp, async) or mixed's own host copy (2 nodes of 1: the ring's copy in
# finish; 1 node of 2: the gradient average on device memory through the mpi transport), and
# checks the final parameters bit for bit and the number of copies.
. "$(dirname "$0")/lib.sh"

CHECK=$(dirname "$DTBENCH")/../tests/staged_check
for spec in "ssp 0" "async 0" "mixed 1" "mixed 2"; do
    set -- $spec
    out=$(timeout -k 5 120 "$MPIRUN" -np 2 "$CHECK" $1 $2 6 2>&1) || { echo "$out"; fail "staged_check $spec"; }
    echo "$out"
done
pass "ssp, async and mixed on a fake device: the parameters of the host run, bit for bit"
