# test_gpu_exchange.sh - exact averages (tests/exchange_avg.c) on device buffers. Skipped (77)
# without the CUDA backend or a GPU. One GPU: 2 ranks share it, with mpi (staged through the
# host) and hier with one rank per node (NCCL communicators of one rank, inter-node MPI on pinned
# host copies). Two GPUs or more: nccl over all of them, hier with NCCL inside one node. Then
# two ranks on one GPU with nccl: refused (usage error) before NCCL starts.
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/gpu_lib.sh"
EXCHANGE_AVG=${EXCHANGE_AVG:-$(dirname "$DTBENCH")/../tests/exchange_avg}

xchg() { run_check 180 "$1" "$EXCHANGE_AVG" "${@:2}" --device cuda; }

xchg 2 mpi 1
xchg 2 mpi 1 --overlap
xchg 2 hier 1
xchg 2 hier 1 --overlap --nparams 4099 --bucket 300
if [ "$NGPUS" -ge 2 ]; then
    n=$NGPUS
    xchg "$n" nccl 0
    xchg "$n" nccl 0 --overlap
    xchg "$n" hier "$n" --overlap
    xchg "$n" hier "$n" --nparams 20 --bucket 3
    [ "$n" -ge 4 ] && xchg "$n" hier 2 --overlap
fi
pass "exchange on GPU buffers: exact averages ($NGPUS GPU(s))"

# Two ranks on one GPU in one NCCL communicator: refused before ncclCommInitRank (NCCL would
# abort with "Duplicate GPU"), as a usage error naming the GPU, with no result file.
rc=0
timeout -k 5 120 "$MPIRUN" -np 2 "$DTBENCH" --model lenet --dataset synthetic --device cuda \
    --gpus-per-node 1 --transport nccl --iters 2 --output "$WORK/dup.h5" >"$WORK/dup.out" 2>&1 || rc=$?
[ $rc -eq 2 ] || { cat "$WORK/dup.out"; fail "two ranks on one GPU with nccl: exit $rc, expected 2"; }
grep -q "error: --transport: ranks 0 and 1 of an NCCL communicator share GPU GPU-" "$WORK/dup.out" ||
    { cat "$WORK/dup.out"; fail "two ranks on one GPU: no refusal naming the ranks and the GPU"; }
[ ! -e "$WORK/dup.h5" ] || fail "two ranks on one GPU: a result file was left"
pass "two ranks on one GPU with --transport nccl: refused before NCCL starts"
