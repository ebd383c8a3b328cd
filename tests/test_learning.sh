# test_learning.sh - learning really happens: LeNet on Fashion-MNIST, 2 data-parallel ranks,
# reaches at least 80% test accuracy (the data set's own baselines list ~90% for a small CNN
# trained much longer). 600 iterations of 64 samples = 0.64 epochs.
. "$(dirname "$0")/lib.sh"

run_np 2 --model lenet --dataset fashion-mnist --data-dir "$FMNIST_DIR" --batch 64 --iters 600 \
    --warmup 0 --lr 0.02 --momentum 0.9 --eval-every 200 --output "$WORK/learn.h5" | tail -1
h5check accuracy "$WORK/learn.h5" --min-accuracy 0.80
pycheck records learning "$WORK/learn.h5" --evals 3 # after 200, 400 and 600 iterations
