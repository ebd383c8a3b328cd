# test_vs_torch.sh - whole models against PyTorch from the same initial weights (as llm.c checks its
# training against its PyTorch reference): LeNet on Fashion-MNIST and ResNet-8 (convolution, batch
# norm, ReLU, residual add with projection shortcuts, global average pooling, fc) on CIFAR-10-format
# data train 10 SGD steps with momentum in dtbench (1 rank) and in PyTorch (tests/torch_ref.py:
# torch.nn modules, torch.optim.SGD), starting from the parameters dtbench initialised (saved by a
# run with --lr 0). The transformer nanogpt-char likewise on a text (tests/torch_gpt.py): 10 SGD
# steps (in the long checks) and 5 AdamW steps (nanoGPT's betas and weight decay); gpt2 itself, the same layers at
# GPT-2's size, is tests/test_vs_torch_gpt2.sh (scripts/test.sh --long). The loss of every step
# and the final parameters must agree with PyTorch's float64 run within LOSS_TOL / PARAM_TOL, or
# 10x PyTorch's own float32 error where that is larger (a step where rounding decides the sign of a
# ReLU input); the test prints what it measured.
# The training set holds exactly one batch, so every step trains on all of it: the order dtbench
# visits it in does not matter (mean loss, summed gradients and batch statistics are
# order-independent), and PyTorch reads the same files in file order.
# PyTorch: Debian's python3-torch (CPU), installed by scripts/setup.sh; $TORCH_PYTHON, else the
# first of $PYTHON, /usr/bin/python3 that imports torch (tests/torch_lib.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/torch_lib.sh"
cd "$WORK"

ITERS=10
# vs_torch NAME MODEL DATASET DATA_DIR BATCH LR: trains in both, compares.
vs_torch() {
    local name=$1 model=$2 dataset=$3 data=$4 batch=$5 lr=$6
    local c="--model $model --dataset $dataset --data-dir $data --batch $batch --warmup 0 --momentum 0.9 --seed 7"
    run_np 1 $c --iters 1 --lr 0 --output "$name-init.h5" --save-model "$name-init.params" >/dev/null
    run_np 1 $c --iters $ITERS --lr "$lr" --output "$name.h5" --save-model "$name.params" >/dev/null
    "$TORCH_PYTHON" "$TESTS_SRCDIR/torch_ref.py" "$model" "$data" "$name-init.params" $ITERS "$lr" 0.9 \
        "$name-torch.json" "$name-torch.params"
    pycheck torch train "$name" --loss-tol "$LOSS_TOL" --param-tol "$PARAM_TOL"
}

# LeNet: the first 32 training and test images of Fashion-MNIST.
fmnist_subset fmnist 32
vs_torch lenet lenet fashion-mnist fmnist 32 0.05

# ResNet-8: 16 CIFAR-10-format records (tests/make_cifar10.py).
mkdir -p cifar
"$PYTHON" "$TESTS_SRCDIR/make_cifar10.py" cifar 16 16
vs_torch resnet8 resnet8 cifar10 cifar 16 0.05

# nanogpt-char: every layer kind of GPT-2 (tests/torch_lib.sh: vs_torch_gpt), with AdamW (the
# transformers' default); with SGD too in the long checks.
vs_torch_gpt nanogpt-adamw nanogpt-char 32 4 5 adamw 0.001 --adamw
if long_part "nanogpt-char with SGD against PyTorch"; then
    vs_torch_gpt nanogpt-sgd nanogpt-char 32 4 10 sgd 0.01
fi
