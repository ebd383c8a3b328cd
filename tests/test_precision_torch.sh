#!/usr/bin/env bash
# test_precision_torch.sh - dtbench's --precision bf16 against PyTorch's CPU autocast(bfloat16),
# from the same initial LeNet parameters (tests/torch_bf16_ref.py): 10 SGD steps with momentum on
# the first 32 Fashion-MNIST images (one batch, as tests/test_vs_torch.sh). The two bf16 schemes
# round at different places (autocast also rounds the activations it hands on; dtbench only the
# products' inputs), so they are not expected to agree bit for bit; checked instead:
#   - dtbench's bf16 losses differ from its fp32 ones (the rounding happened) by at most 3x (+1e-3)
#     what autocast's bf16 losses differ from PyTorch's fp32 ones: no more bf16 error than autocast;
#   - |dtbench bf16 - autocast bf16| <= 3x (+1e-3) the larger of those two deviations;
#   - the bf16 loss falls as fp32's does.
# Skips where dtbench refuses bf16 (scripts/test.sh accepts it only without avx512_bf16); a
# missing torch is a failure once scripts/setup.sh has run, as in tests/test_vs_torch.sh.
. "$(dirname "$0")/lib.sh"
cd "$WORK"

if ! "$DTBENCH" --precision bf16 --dry-run >dry.txt 2>dry.err; then
    echo "SKIP: this machine cannot run bf16: $(cat dry.err)"
    exit 77
fi
find_torch_python || fail "no python imports torch (scripts/setup.sh installs python3-torch)"

fmnist_subset fmnist 32
c=(--model lenet --dataset fashion-mnist --data-dir fmnist --batch 32 --warmup 0 --momentum 0.9
    --seed 7 --sample-hz 0 --calibrate-iters 0)
run_np 1 "${c[@]}" --iters 1 --lr 0 --output init.h5 --save-model init.params >/dev/null
for p in fp32 bf16; do
    run_np 1 "${c[@]}" --iters 10 --lr 0.05 --precision $p --output $p.h5 >/dev/null
done
"$TORCH_PYTHON" "$TESTS_SRCDIR/torch_bf16_ref.py" fmnist init.params 10 0.05 0.9 torch.json
pycheck torch autocast fp32.h5 bf16.h5 torch.json
pass "LeNet bf16: dtbench as close to fp32 as PyTorch autocast(bfloat16), and to autocast"
