# test_dataparallel.sh - data-parallel training equals single-process training on the same
# global batch: after several iterations, the parameters of 2 and 4 ranks match those of 1 rank
# within a float tolerance (only the summation order of the gradient average differs), and all
# ranks of a run hold bitwise identical parameters (the same FNV hash in /ranks/param_hash).
. "$(dirname "$0")/lib.sh"

# Tolerance: float32 rounding of sums in another order, amplified over 8 SGD steps with momentum;
# the parameters themselves are O(0.1), the updates O(1e-3).
TOL=2e-5
FMNIST_SMALL=$(fmnist_small)

models=lenet # the quick suite; FCN-5 (118M parameters) with --long
long_part "FCN-5 on 1, 2 and 4 ranks" && models="lenet fcn5"
for model in $models; do
    common="--model $model --dataset fashion-mnist --data-dir $FMNIST_SMALL --batch 16 --iters 8 --warmup 0 --lr 0.05 --seed 11"
    for np in 1 2 4; do
        run_np "$np" $common --output "$WORK/$model-$np.h5" --save-model "$WORK/$model-$np.params" >/dev/null
        h5check finished "$WORK/$model-$np.h5" --ranks "$np" --iters 8
    done
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" "$WORK/$model-1.params" "$WORK/$model-2.params" "$WORK/$model-4.params"
    # The parameters did move: the comparison is not of two untouched initialisations.
    run_np 1 --model $model --dataset fashion-mnist --data-dir "$FMNIST_SMALL" --batch 16 --iters 1 --warmup 0 \
        --lr 0 --seed 11 --output "$WORK/$model-init.h5" --save-model "$WORK/$model-init.params" >/dev/null
    if "$PYTHON" "$TESTS_SRCDIR/compare_params.py" 1e-3 "$WORK/$model-init.params" "$WORK/$model-1.params" >/dev/null; then
        fail "$model: training moved no parameter by more than 1e-3"
    fi
    pass "$model: 1, 2 and 4 ranks train the same parameters"
done
