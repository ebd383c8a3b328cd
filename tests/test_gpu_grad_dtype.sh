#!/bin/bash
# test_gpu_grad_dtype.sh - --grad-dtype bf16/fp16 on GPU buffers (tests/grad_dtype_check.c
# --device cuda): the same checks as test_grad_dtype.sh's on the CPU (bit for bit what rounding
# predicts with 2 ranks, within the rounding bound beyond, equal on every rank), here with the
# casts on the GPU and NCCL reducing in ncclBfloat16/ncclFloat16, or MPI on host copies. Skipped
# (77) without the CUDA backend or a GPU. One GPU: mpi (staged) and hier with one rank per node;
# two or more: nccl over all of them and hier with NCCL inside one node. Then a LeNet run on the
# GPU: bytes_sent halves against fp32.
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/gpu_lib.sh"
CHECK=${GRAD_DTYPE_CHECK:-$(dirname "$DTBENCH")/../tests/grad_dtype_check}

chk() { run_check 180 "$1" "$CHECK" "${@:2}" --device cuda; }

for dt in bf16 fp16; do
    chk 2 sync mpi $dt 1
    chk 2 sync hier $dt 1 --overlap
    if [ "$NGPUS" -ge 2 ]; then
        chk "$NGPUS" sync nccl $dt "$NGPUS"
        chk "$NGPUS" sync nccl $dt "$NGPUS" --overlap --bucket 333
        chk "$NGPUS" sync hier $dt "$NGPUS"
    fi
done
pass "bf16/fp16 exchange on GPU buffers as rounding predicts ($NGPUS GPU(s))"

tp=mpi
[ "$NGPUS" -ge 2 ] && tp=nccl
n=2
for dt in fp32 bf16; do
    timeout -k 5 300 "$MPIRUN" -np $n "$DTBENCH" --model lenet --dataset synthetic --device cuda \
        --transport $tp --iters 3 --grad-dtype $dt --output "$WORK/g-$dt.h5" >/dev/null
done
pycheck exchange halves "$WORK/g-fp32.h5" "$WORK/g-bf16.h5" --every
pass "GPU LeNet over $tp: bytes_sent halves with --grad-dtype bf16"
