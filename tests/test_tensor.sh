# test_tensor.sh - tensor parallelism (--parallel tensor --tp N, docs/model-parallelism.md):
#   1. nanogpt-char on short sequences trains with SGD on groups of 2 and 3 ranks to the
#      parameters of 1 rank (the slices gathered by --save-model into the unsplit layout) and
#      evaluates as 1 rank does, and
#      with AdamW on a group of 2 and on 2 replicas of a group of 2 (data x tensor, 4 ranks, the
#      replicas exchanging over hier on 2 nodes of 2 ranks, with --overlap);
#      pipeline x tensor (GPipe on 2 stages of groups of 2) with SGD, and in the long checks 3D
#      (2 replicas x 2 stages x groups of 2 on 8 ranks, 1F1B);
#      FCN-5 (fc-ReLU-fc pairs) and LeNet (its classifier split, its convolutions replicated) on
#      Fashion-MNIST train on a group of 2 to the parameters of 1 rank and evaluate as it does;
#   2. the records: each rank's tensor-group allreduces (tp_comm, tp_bytes, tp_calls: 4 per block and
#      iteration), one loss per group, one set of parameters per group rank over the replicas,
#      slices that differ within a group; none without a group;
#   3. refusals in one line (exit 2, no file): a group the heads do not divide, a model without
#      pairs of fully connected rows (ResNet-50), --tp outside --parallel tensor, ranks that are not whole groups (or
#      groups x stages), micro-batches without stages;
#   4. the memory estimate per rank counts the rank's slices of the split rows.
. "$(dirname "$0")/lib.sh"
cd "$WORK"

# 1. = one process, within test_transformer.sh's bound: float32 sums in another order (the
# row-parallel outputs and the input gradients summed over the group) over 4 steps.
TOL=2e-5
common="--model nanogpt-char --seq-len 16 --batch 4 --iters 4 --warmup 0 --seed 5"
# The SGD runs read text (the head of a file Debian ships; its last 10% evaluates, every 2
# iterations): a group's ranks evaluate the same windows, which must count once.
TEXT=/usr/share/common-licenses/GPL-3 # base-files: on every Debian system
[ -r "$TEXT" ] || TEXT="$TESTS_SRCDIR/../README.md"
head -c 6000 "$TEXT" >text.txt
sgd="--optimizer sgd --lr 0.05 --momentum 0.9 --dataset text --data-dir text.txt --eval-every 2"
# AdamW divides by sqrt(v) + eps: a weight whose gradient is rounding noise (1e-10) moves by up to
# lr with eps 1e-8, in data parallelism as here (4e-4 on 2 ranks); eps 1e-5 keeps such noise from
# deciding a step (the largest difference is then about 2e-6).
adamw="--optimizer adamw --lr 1e-3 --eps 1e-5 --dataset synthetic"
run() {
    local name=$1 np=$2
    shift 2
    run_np "$np" $common "$@" --output "$name.h5" --save-model "$name.params" >/dev/null
}
run sgd1 1 $sgd
run sgd-tp2 2 $sgd --parallel tensor --tp 2
tp3=""
if long_part "a group of 3"; then
    run sgd-tp3 3 $sgd --parallel tensor --tp 3
    tp3=sgd-tp3
fi
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" sgd1.params sgd-tp2.params ${tp3:+$tp3.params}
pass "nanogpt-char, SGD: groups of 2 and 3 ranks train the parameters of 1 rank"
run adamw1 1 $adamw
run adamw-2x2 4 $adamw --parallel tensor --tp 2 --transport hier --ranks-per-node 2 --overlap
two=""
if long_part "AdamW on one group of 2 across 2 nodes (--tp-across-nodes)"; then
    run adamw-tp2 2 $adamw --parallel tensor --tp 2 --ranks-per-node 1 --tp-across-nodes
    two=adamw-tp2.params
fi
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" adamw1.params adamw-2x2.params $two
pass "nanogpt-char, AdamW: a group of 2 (the long checks: across 2 nodes), and 2 replicas of it, train the parameters of 1 rank"
run pipe-tp 4 $sgd --parallel tensor --tp 2 --stages 2 --microbatches 2
threed=""
if long_part "3D: 2 replicas x 2 stages x groups of 2 on 8 ranks"; then
    run 3d 8 $sgd --parallel tensor --tp 2 --stages 2 --microbatches 2 --schedule 1f1b
    threed=3d.params
fi
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" sgd1.params pipe-tp.params $threed
pass "nanogpt-char, SGD: 2 pipeline stages of groups of 2 train the parameters of 1 rank"
for f in sgd-tp2 $tp3 pipe-tp ${threed:+3d}; do pycheck tensor same-eval sgd1.h5 "$f.h5" --tol 1e-5; done
pass "their evaluations are those of 1 rank"

# fully connected pairs: FCN-5's hidden layers, LeNet's classifier (the test images: 256)
FMNIST_SMALL=$(fmnist_small)
models=lenet # the quick suite; FCN-5 (118M parameters) with --long
long_part "FCN-5 on a group of 2" && models="fcn5 lenet"
for model in $models; do
    images="--model $model --dataset fashion-mnist --data-dir $FMNIST_SMALL --batch 16 --iters 4"
    images="$images --warmup 0 --lr 0.05 --seed 11"
    run_np 1 $images --output "$model-1.h5" --save-model "$model-1.params" >/dev/null
    run_np 2 $images --parallel tensor --tp 2 --output "$model-tp2.h5" \
        --save-model "$model-tp2.params" >/dev/null
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" "$model-1.params" "$model-tp2.params"
    pycheck tensor same-eval "$model-1.h5" "$model-tp2.h5" --tol 1e-5
done
pass "FCN-5 and LeNet on a group of 2 train and evaluate as 1 rank"

# 2. the records
h5check finished sgd-tp2.h5 --ranks 2 --iters 4
[ -z "$tp3" ] || h5check finished sgd-tp3.h5 --ranks 3 --iters 4
h5check finished adamw-2x2.h5 --ranks 4 --iters 4
h5check finished pipe-tp.h5 --ranks 4 --iters 4
pycheck tensor records sgd-tp2.h5 --tp 2 --blocks 6 --width 384
[ -z "$tp3" ] || pycheck tensor records sgd-tp3.h5 --tp 3 --blocks 6 --width 384
pycheck tensor records adamw-2x2.h5 --tp 2 --blocks 6 --width 384
pycheck tensor records pipe-tp.h5 --tp 2 --blocks 6 --width 384
[ -z "$threed" ] || pycheck tensor records 3d.h5 --tp 2 --blocks 6 --width 384
pycheck tensor none sgd1.h5
pass "tp_comm and tp_bytes recorded per rank, groups and replicas consistent"

# 3. refusals
O="--output bad.h5"
expect_bad 0 "--tp: 4 is not accepted with --model nanogpt-char: .*6 heads.*expected one of 2,3,6" \
    $common --parallel tensor --tp 4 --dry-run --ranks 4 $O
expect_bad 0 "--tp: 2 is not accepted with --model resnet50: resnet50 does not split" \
    --model resnet50 --parallel tensor --tp 2 --dry-run --ranks 2 $O
expect_bad 0 "--tp: 2 is not accepted with --parallel data" $common --tp 2 $O
expect_bad 0 "--tp: 2 is not accepted on 3 ranks" $common --parallel tensor --tp 2 --dry-run --ranks 3 $O
expect_bad 0 "--stages: 2 is not accepted with --parallel tensor --tp 2 on 6 ranks" \
    $common --parallel tensor --tp 2 --stages 2 --dry-run --ranks 6 $O
expect_bad 0 "--microbatches: 2 is not accepted with --parallel tensor without --stages" \
    $common --parallel tensor --tp 2 --microbatches 2 --dry-run --ranks 2 $O
expect_bad 2 "--tp: 2 is not accepted on nodes of 1 rank: the tensor group of ranks 0-1 spans nodes 0 to 1.*--tp-across-nodes" \
    $common --parallel tensor --tp 2 --ranks-per-node 1 $O
expect_bad 0 "--tp-across-nodes: not accepted with --parallel data" $common --tp-across-nodes $O
pass "tensor groups that cannot be are refused in one line"

# 4. The memory estimate that refuses impossible runs counts this rank's slices of the split rows:
#    the same samples per rank need less on a group of 2 than on one process.
huge="--model nanogpt-char --dataset synthetic --batch 4000000 --iters 1 $O"
expect_bad 1 "--batch: this run needs about [0-9.]* GB of memory per rank" $huge
one=$(sed -n 's/.*needs about \([0-9.]*\) GB.*/\1/p' err.txt)
expect_bad 2 "--batch: this run needs about [0-9.]* GB of memory per rank" $huge --parallel tensor --tp 2
two=$(sed -n 's/.*needs about \([0-9.]*\) GB.*/\1/p' err.txt)
below "$two" "$one" || fail "the memory estimate of a group of 2 ($two GB) is not below one process's ($one GB)"
pass "memory estimate per rank: $one GB on one process, $two GB on a tensor group of 2 (the same samples per rank)"
