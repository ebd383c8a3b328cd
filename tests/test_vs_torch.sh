# test_vs_torch.sh - whole models against PyTorch from the same initial weights (as llm.c checks its
# training against its PyTorch reference): LeNet on Fashion-MNIST and ResNet-8 (convolution, batch
# norm, ReLU, residual add with projection shortcuts, global average pooling, fc) on CIFAR-10-format
# data train 10 SGD steps with momentum in dtbench (1 rank) and in PyTorch (tests/torch_ref.py:
# torch.nn modules, torch.optim.SGD), starting from the parameters dtbench initialised (saved by a
# run with --lr 0). The transformers likewise on a text (tests/torch_gpt.py): nanogpt-char 10 SGD
# steps and 5 AdamW steps (nanoGPT's betas and weight decay), gpt2 at 16 tokens 3 SGD steps. The loss of every step and the final parameters must agree with PyTorch's
# float64 run within LOSS_TOL / PARAM_TOL, or 10x PyTorch's own float32 error where that is larger
# (a step where rounding decides the sign of a ReLU input); the test prints what it measured.
# The training set holds exactly one batch, so every step trains on all of it: the order dtbench
# visits it in does not matter (mean loss, summed gradients and batch statistics are
# order-independent), and PyTorch reads the same files in file order.
# PyTorch: Debian's python3-torch (CPU), installed by scripts/setup.sh; $TORCH_PYTHON, else the
# first of $PYTHON, /usr/bin/python3 that imports torch.
. "$(dirname "$0")/lib.sh"
cd "$WORK"

# Tolerances: float32 sums in another order (im2col + BLAS against PyTorch's convolutions), carried
# through 10 steps with momentum. Measured: < 1e-6 on the losses and parameters.
LOSS_TOL=1e-4  # absolute, on losses of order 0.01 .. 3
PARAM_TOL=1e-4 # absolute, on parameters of order 0.1 .. 1
ITERS=10

if ! find_torch_python; then
    echo "SKIP: no python imports torch (scripts/setup.sh installs Debian's python3-torch)"
    exit 77
fi
echo "PyTorch: $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__, torch.__file__)')"

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
vs_torch_gpt nanogpt-sgd nanogpt-char 32 4 10 sgd 0.01
vs_torch_gpt nanogpt-adamw nanogpt-char 32 4 5 adamw 0.001 --adamw
vs_torch_gpt gpt2-sgd gpt2 16 2 3 sgd 0.01
