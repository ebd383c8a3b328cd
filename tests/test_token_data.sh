# test_token_data.sh - a language model on real data: lstm32 trained on --dataset text (a text file
# Debian ships, read as bytes; its last 10% evaluates) and on --dataset tokens (llm.c token shards
# made by tests/make_data.py: a folder of *train* and *val* shards), on 1 and 2 ranks with the same
# parameters afterwards; --seq-len sets the model's input (the dry run's shape, the recorded
# config); every malformed corpus and --seq-len out of range is refused in one line, exit 2, no
# file left.
. "$(dirname "$0")/lib.sh"
cd "$WORK"

TEXT=/usr/share/common-licenses/GPL-3 # base-files: on every Debian system
[ -r "$TEXT" ] || TEXT="$TESTS_SRCDIR/../README.md"
# Tolerance: float32 sums of the gradient average in another order, over 4 SGD steps (the
# parameters are O(0.1)); test_dataparallel.sh's for LeNet.
TOL=2e-5
common="--model lstm32 --seq-len 16 --batch 8 --iters 4 --warmup 0 --lr 0.5 --seed 3 --sample-hz 0 --calibrate-iters 0"

# train NAME ARGS... : 1 and 2 ranks, finished files, the same parameters, evaluated at the end.
train() {
    local name=$1 np
    shift
    for np in 1 2; do
        run_np $np $common "$@" --output $name-$np.h5 --save-model $name-$np.params >$name-$np.out
        h5check finished $name-$np.h5 --ranks $np --iters 4
    done
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" $name-1.params $name-2.params
    # the evaluation windows' labels are their next tokens: 4 steps already predict some bytes
    h5check accuracy $name-1.h5 $name-2.h5 --min-accuracy 0.05
    grep -q "data $name \[1,1,16\]" $name-1.out || fail "$name: no [1,1,16] samples: $(cat $name-1.out)"
    "$PYTHON" - $name-2.h5 <<'EOF' || fail "$name: the file does not record seq-len 16"
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert str(f["config"].attrs["seq-len"]) == "16", f["config"].attrs["seq-len"]
EOF
    pass "$name: 1 and 2 ranks train the same parameters on windows of 16 tokens"
}

train text --dataset text --data-dir "$TEXT"
mkdir shards
"$PYTHON" "$TESTS_SRCDIR/make_data.py" tokens shards/gpl_train_000000.bin --text "$TEXT"
head -c 2000 "$TEXT" >val.txt
"$PYTHON" "$TESTS_SRCDIR/make_data.py" tokens shards/gpl_val_000000.bin --text val.txt
train tokens --dataset tokens --data-dir shards

# --seq-len: the model's input; at most its context, and only for a language model.
"$DTBENCH" --model lstm64 --dataset tokens --data-dir shards --seq-len 40 --dry-run >dry.out
grep -q "input \[1,1,40\]" dry.out || fail "--seq-len 40: $(head -1 dry.out)"
"$DTBENCH" --model lstm64 --dataset synthetic --dry-run >dry.out
grep -q "input \[1,1,64\]" dry.out || fail "no --seq-len: $(head -1 dry.out)"
pass "--seq-len 40 plans lstm64 on [1,1,40]; without it, its context of 64"

O="--model lstm32 --iters 1 --warmup 0 --batch 2 --output bad.h5"
expect_bad 0 "--seq-len: 33 is not accepted with --model lstm32: expected 1 to 32 (its context)" --seq-len 33 --dataset synthetic $O
expect_bad 0 "--seq-len: 8 is not accepted with --model lenet: not a language model" $O --model lenet --seq-len 8
expect_bad 0 "--dataset: 'text' is not accepted with lenet, a model of images" $O --model lenet --dataset text
expect_bad 0 "--dataset: 'cifar10' is not accepted with lstm32, a language model on token sequences: expected synthetic, text or tokens" --dataset cifar10 $O
# Malformed corpora, each refused before training with one line naming --data-dir.
shard() { # shard NAME ARGS... : a folder NAME holding one training shard made with ARGS
    mkdir -p "$1" && "$PYTHON" "$TESTS_SRCDIR/make_data.py" tokens "$1/x_train.bin" "${@:2}"
}
shard magic --count 100 --vocab 100 --magic 20240521
expect_bad 0 "--data-dir: magic/x_train.bin: not a token shard (magic 20240521, version 1" --dataset tokens --data-dir magic $O
shard version --count 100 --vocab 100 --version 2
expect_bad 2 "--data-dir: version/x_train.bin: not a token shard (magic 20240520, version 2" --dataset tokens --data-dir version $O
shard cut --count 100 --vocab 100 --header-count 101
expect_bad 0 "--data-dir: cut/x_train.bin: its header announces 101 tokens (1226 bytes in all), the file holds 1224 bytes: shorter than its header says" --dataset tokens --data-dir cut $O
shard short --count 16 --vocab 100
expect_bad 0 "--data-dir: short/x_train.bin: 16 tokens, fewer than one sequence needs (17: --seq-len 16" --dataset tokens --data-dir short --seq-len 16 $O
shard vocab --count 100 --vocab 100 --token 57:10000
expect_bad 0 "--data-dir: vocab/x_train.bin: token 10000 at position 57 is outside the model's vocabulary (0..9999)" --dataset tokens --data-dir vocab $O
mkdir empty
expect_bad 0 "--data-dir: empty has no \*train\*.bin file" --dataset tokens --data-dir empty $O
printf 'too short' >short.txt
expect_bad 2 "--data-dir: short.txt: 9 bytes, fewer than one sequence needs (33: --seq-len 32" --dataset text --data-dir short.txt $O
# No evaluation split (one shard folder, no *val*): nothing to evaluate, no target to reach.
shard noval --count 1000 --vocab 100
expect_bad 0 "--eval-every: 1 is not accepted with --dataset tokens --data-dir noval: it has no evaluation data" --dataset tokens --data-dir noval --eval-every 1 $O
expect_bad 0 "--target-acc: 0.5 is not accepted with --dataset tokens --data-dir noval" --dataset tokens --data-dir noval --target-acc 0.5 $O
