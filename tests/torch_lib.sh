# torch_lib.sh - what the tests against PyTorch share (sourced after lib.sh, in $WORK):
# tests/test_vs_torch.sh and tests/test_vs_torch_gpt2.sh. Skips the test (77) where no python
# imports torch; scripts/test.sh counts that as a failure once scripts/setup.sh has run.

# Tolerances: float32 sums in another order (im2col + BLAS against PyTorch's convolutions), carried
# through up to 10 steps with momentum. Measured: < 1e-6 on the losses and parameters.
LOSS_TOL=1e-4  # absolute, on losses of order 0.01 .. 3
PARAM_TOL=1e-4 # absolute, on parameters of order 0.1 .. 1

if ! find_torch_python; then
    echo "SKIP: no python imports torch (scripts/setup.sh installs Debian's python3-torch)"
    exit 77
fi
echo "PyTorch: $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__, torch.__file__)')"

# vs_torch_gpt NAME MODEL SEQ BATCH ITERS OPTIMIZER LR [--adamw]: a transformer on a text of exactly
# one batch of SEQ-byte windows (the first BATCH x SEQ + 1 bytes of the GPL), in both, compared.
vs_torch_gpt() {
    local name=$1 model=$2 seq=$3 batch=$4 iters=$5 opt=$6 lr=$7 check=${8:-}
    mkdir -p "$name-text"
    head -c $((batch * seq + 1)) /usr/share/common-licenses/GPL-3 >"$name-text/train.txt"
    local c="--model $model --dataset text --data-dir $name-text --seq-len $seq --batch $batch --warmup 0 --seed 7 --optimizer $opt"
    [ "$opt" = sgd ] && c="$c --momentum 0.9" || c="$c --weight-decay 0.1 --beta2 0.95"
    run_np 1 $c --iters 1 --lr 0 --output "$name-init.h5" --save-model "$name-init.params" >/dev/null
    run_np 1 $c --iters "$iters" --lr "$lr" --output "$name.h5" --save-model "$name.params" >/dev/null
    "$TORCH_PYTHON" "$TESTS_SRCDIR/torch_gpt.py" "$model" "$name-text/train.txt" "$seq" "$name-init.params" \
        "$iters" "$opt" "$lr" "$name-torch.json" "$name-torch.params"
    pycheck torch train "$name" --loss-tol "$LOSS_TOL" --param-tol "$PARAM_TOL" $check
}
