# test_vs_torch.sh - whole models against PyTorch from the same initial weights (as llm.c checks its
# training against its PyTorch reference): LeNet on Fashion-MNIST and ResNet-8 (convolution, batch
# norm, ReLU, residual add with projection shortcuts, global average pooling, fc) on CIFAR-10-format
# data train 10 SGD steps with momentum in dtbench (1 rank) and in PyTorch (tests/torch_ref.py:
# torch.nn modules, torch.optim.SGD), starting from the parameters dtbench initialised (saved by a
# run with --lr 0). The loss of every step and the final parameters must agree with PyTorch's
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
    "$PYTHON" - "$name" "$LOSS_TOL" "$PARAM_TOL" <<'PY'
import json, sys, h5py, numpy as np
name, loss_tol, param_tol = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
with h5py.File(f"{name}.h5", "r") as f:
    dt = f["iterations/loss"][0].astype(np.float64)
ref = json.load(open(f"{name}-torch.json"))
t32, t64 = np.array(ref["losses"]), np.array(ref["losses_f64"])
read = lambda path: np.fromfile(path, "<f4", offset=64).astype(np.float64)
p_dt, p_init, p32 = read(f"{name}.params"), read(f"{name}-init.params"), read(f"{name}-torch.params")
p64 = np.fromfile(f"{name}-torch.params64", "<f8")
assert dt.shape == t32.shape and p_dt.shape == p64.shape, (dt.shape, t32.shape, p_dt.shape)
# Tolerances against the float64 run: LOSS_TOL / PARAM_TOL, or 10x PyTorch's own float32 error
# where the run is that sensitive to rounding (a ReLU input crossing 0 by a rounding error).
ltol = np.maximum(loss_tol, 10 * np.abs(t32 - t64))
ptol = max(param_tol, 10 * float(np.max(np.abs(p32 - p64))))
dloss, dparam = np.abs(dt - t64), float(np.max(np.abs(p_dt - p64)))
moved = float(np.max(np.abs(p_dt - p_init)))
print(f"{name}: losses dtbench {np.round(dt, 5).tolist()}")
print(f"{name}: losses PyTorch {np.round(t32, 5).tolist()} (torch {ref['torch']}, batch {ref['batch']})")
print(f"{name}: {len(dt)} steps: loss max |dtbench - PyTorch float32| {np.max(np.abs(dt - t32)):.3g}; "
      f"|dtbench - PyTorch float64| {dloss.max():.3g} (tolerance {ltol.min():.3g} .. {ltol.max():.3g}; "
      f"PyTorch float32 - float64: {np.max(np.abs(t32 - t64)):.3g})")
print(f"{name}: {ref['parameters']} final parameters: max |dtbench - PyTorch float32| "
      f"{np.max(np.abs(p_dt - p32)):.3g}; |dtbench - PyTorch float64| {dparam:.3g} (tolerance "
      f"{ptol:.3g}); training moved them by up to {moved:.3g}")
# Training moved the parameters far beyond the fixed tolerance and the one actually applied.
ok = (bool(np.all(dloss <= ltol)) and dparam <= ptol and dt[-1] < 0.8 * dt[0]
      and moved > 100 * param_tol and moved > 10 * ptol)
print(("ok: " if ok else "FAIL: ") + f"{name} trains as in PyTorch")
sys.exit(0 if ok else 1)
PY
}

# LeNet: the first 32 training and test images of Fashion-MNIST.
fmnist_subset fmnist 32
vs_torch lenet lenet fashion-mnist fmnist 32 0.05

# ResNet-8: 16 CIFAR-10-format records (tests/make_cifar10.py).
mkdir -p cifar
"$PYTHON" "$TESTS_SRCDIR/make_cifar10.py" cifar 16 16
vs_torch resnet8 resnet8 cifar10 cifar 16 0.05
