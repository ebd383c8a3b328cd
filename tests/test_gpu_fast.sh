# test_gpu_fast.sh - the GPU's speed work leaves training what it was: chosen convolution
# algorithms, batch norm at memory speed and the fused batch-norm rows. Skipped (77) without the
# CUDA backend or without a GPU.
#   1. LeNet, one iteration, --conv-algo find and --conv-algo heuristic: the parameters of each
#      agree with the CPU backend's within 1e-5; /ranks/kernel_choices says how the algorithms
#      were chosen and within what budget, gives every convolution shape three algorithms with a
#      measured time each under find and none under heuristic, strict fp32 math only (FMA), and
#      no plan made inside a step.
#   2. ResNet-8 (synthetic 3x32x32, batch 16), one iteration: every batch norm runs fused with its
#      ReLU or its residual add and ReLU on the GPU, unfused on the CPU; the parameters agree
#      within 1e-4 (batch-norm statistics summed in another order, through 8 layers).
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/gpu_lib.sh"

lenet="--model lenet --dataset synthetic --batch 64 --warmup 0 --lr 0.05 --seed 5 --iters 1"
run_np 1 $lenet --device cpu --output "$WORK/lenet-cpu.h5" --save-model "$WORK/lenet-cpu.params" >/dev/null
for how in find heuristic; do
    run_np 1 $lenet --device cuda --conv-algo $how --output "$WORK/lenet-$how.h5" \
        --save-model "$WORK/lenet-$how.params" >/dev/null
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" 1e-5 "$WORK/lenet-cpu.params" "$WORK/lenet-$how.params"
    pycheck gpu conv-algo "$WORK/lenet-$how.h5" $how
    pass "lenet --conv-algo $how: one iteration = the CPU's (1e-5); choices, times and budget recorded"
done

resnet8="--model resnet8 --dataset synthetic --batch 16 --warmup 0 --lr 0.05 --seed 5 --iters 1"
run_np 1 $resnet8 --device cpu --output "$WORK/r8-cpu.h5" --save-model "$WORK/r8-cpu.params" >/dev/null
run_np 1 $resnet8 --device cuda --output "$WORK/r8-gpu.h5" --save-model "$WORK/r8-gpu.params" >/dev/null
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" 1e-4 "$WORK/r8-cpu.params" "$WORK/r8-gpu.params"
pass "resnet8: one iteration with fused batch-norm rows on the GPU = unfused on the CPU (1e-4)"
