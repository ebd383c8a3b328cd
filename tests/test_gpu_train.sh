# test_gpu_train.sh - training on the GPU matches training on the CPU. Skipped (77) without the
# CUDA backend or without a GPU.
#   1. One full iteration (forward, backward, SGD with momentum) of LeNet (Fashion-MNIST, batch 64)
#      and of FCN-5 (its native 26752-2048x3-26752, synthetic data, batch 16): the parameters of
#      --device cuda and --device cpu agree within 1e-5 (parameters are O(0.1); one step moves
#      them by lr * gradient, and the gradients differ only by float summation order).
#   2. A 30-iteration LeNet run on the GPU: the file is complete, phases are positive, the loss
#      falls, /ranks names the GPU and its libraries, /samples comes from NVML when it loads.
#   3. The exchange on device buffers: 2 ranks on one GPU with --transport mpi and hier (one rank
#      per "node": NCCL communicators of one rank, shards staged through pinned host memory);
#      with 2 GPUs or more also nccl, and hier with NCCL inside a node. Parameters as 1 rank's.
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/gpu_lib.sh"

TOL=1e-5
lenet="--model lenet --dataset fashion-mnist --data-dir $FMNIST_DIR --batch 64 --warmup 0 --lr 0.05 --seed 5"
fcn5="--model fcn5 --dataset synthetic --batch 16 --warmup 0 --lr 0.05 --seed 5"
for m in lenet fcn5; do
    args=${!m}
    run_np 1 $args --iters 1 --device cpu --output "$WORK/$m-cpu.h5" --save-model "$WORK/$m-cpu.params" >/dev/null
    run_np 1 $args --iters 1 --device cuda --output "$WORK/$m-gpu.h5" --save-model "$WORK/$m-gpu.params" >/dev/null
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" $TOL "$WORK/$m-cpu.params" "$WORK/$m-gpu.params"
    pass "$m: one training iteration on the GPU = on the CPU (tolerance $TOL)"
done

run_np 1 $lenet --iters 30 --device cuda --sample-hz 50 --output "$WORK/run.h5" >"$WORK/out.txt"
h5check finished "$WORK/run.h5" --ranks 1 --iters 30
pycheck gpu recorded "$WORK/run.h5"

common="$lenet --iters 3"
run_np 1 $common --device cpu --output "$WORK/ref.h5" --save-model "$WORK/ref.params" >/dev/null
others=()
for t in mpi hier; do
    run_np 2 $common --device cuda --gpus-per-node 1 --ranks-per-node 1 --transport $t --overlap \
        --bucket-mb 0.2 --output "$WORK/g2-$t.h5" --save-model "$WORK/g2-$t.params" >/dev/null
    others+=("$WORK/g2-$t.params")
done
if [ "$NGPUS" -ge 2 ]; then
    for t in nccl hier; do
        run_np 2 $common --device cuda --transport $t --overlap --bucket-mb 0.2 \
            --output "$WORK/n2-$t.h5" --save-model "$WORK/n2-$t.params" >/dev/null
        others+=("$WORK/n2-$t.params")
    done
fi
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" $TOL "$WORK/ref.params" "${others[@]}"
pass "data-parallel GPU training with the mpi/hier$([ "$NGPUS" -ge 2 ] && echo /nccl) transports = 1 CPU rank"
