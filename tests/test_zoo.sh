# test_zoo.sh - the model zoo and model parallelism from the command line: --dry-run prints the
# published parameter totals of every model (and the CIFAR-10 variant of AlexNet for 32x32 data),
# the pipeline's stages; every bad combination of the new options gives one line naming the option
# and what is accepted, exit status 2 and no output file; a CIFAR-10-format data set written here
# trains (2 data-parallel ranks) and is evaluated.
. "$(dirname "$0")/lib.sh"
cd "$WORK"

# expect_total MODEL TOTAL ARGS... : --dry-run prints "total parameters: TOTAL"
expect_total() {
    local model=$1 total=$2
    shift 2
    out=$("$DTBENCH" --model "$model" --dry-run "$@")
    grep -q "total parameters: $total " <<<"$out" || fail "$model $*: $(echo "$out" | grep total)"
    pass "$model $*: $total parameters"
}
expect_total alexnet 61100840 --dataset synthetic
expect_total alexnet 89578 --dataset cifar10
expect_total vgg16 138357544 --dataset synthetic
expect_total googlenet 6998552 --dataset synthetic
expect_total resnet50 25557032 --dataset synthetic
expect_total resnet8 78042 --dataset synthetic
expect_total lstm32 6180624 --dataset synthetic
expect_total lstm64 6180624 --dataset synthetic
expect_total gpt2 124439808 --dataset synthetic
expect_total gpt2-medium 354823168 --dataset synthetic
out=$("$DTBENCH" --model googlenet --dataset synthetic --dry-run)
grep -q 'inception_3a/output .*concat .*\[256,28,28\]' <<<"$out" || fail "googlenet table"
out=$("$DTBENCH" --model resnet50 --dataset synthetic --parallel model --stages 4 --dry-run)
[ "$(echo "$out" | grep -c '^  stage [0-3]: layers')" = 4 ] || fail "resnet50 stages: $out"
pass "dry-run tables and a 4-stage split"
[ ! -e dtbench.h5 ] || fail "--dry-run created an output file"

O="--output bad.h5"
expect_bad 2 "--stages: 3 is not accepted with --parallel model on 2 ranks" --parallel model --stages 3 $O
expect_bad 4 "--stages: 3 is not accepted with --parallel hybrid on 4 ranks" --parallel hybrid --stages 3 $O
expect_bad 0 "--stages: 9 is not accepted: lenet can be split into at most 7 stages" --parallel hybrid --stages 9 $O
expect_bad 0 "--stages: 2 is not accepted with --parallel data" --stages 2 $O
expect_bad 0 "--microbatches: 3 is not accepted: it must divide the batch of each replica" --parallel model --batch 16 --microbatches 3 $O
expect_bad 0 "--microbatches: 2 is not accepted with --parallel data" --microbatches 2 $O
expect_bad 0 "--microbatches: '0' is not accepted: expected an integer from 1 to 1073741824" --microbatches 0 $O
expect_bad 4 "--batch: 7 is not accepted with 2 replicas of the pipeline" --parallel hybrid --batch 7 $O
expect_bad 2 "--split: 12 is not accepted: googlenet cannot be cut before layer 12" --model googlenet --dataset synthetic --parallel model --split 12 $O
expect_bad 2 "--split: '3,5' is not accepted: 2 stages take 1 indices" --parallel model --split 3,5 $O
expect_bad 0 "--split: '3' is not accepted: 1 stages take 0 indices" --parallel model --split 3 $O
expect_bad 0 "--split: 'abc' is not accepted" --parallel model --stages 2 --dry-run --split abc $O
expect_bad 0 "--split: 'x' is not accepted with --parallel data" --split x $O
expect_bad 0 "--parallel: 'bogus' is not accepted: expected one of data,model,hybrid,tensor" --parallel bogus $O
expect_bad 0 "--dataset: 'mnist' is not accepted with lstm32, a language model" --model lstm32 --dataset mnist $O
expect_bad 0 "--model: vgg16 does not fit the input \[1,28,28\]: maxpool pool5 would have an empty output" --model vgg16 $O

# CIFAR-10 reader: missing and malformed files.
mkdir -p cifar empty
"$PYTHON" "$TESTS_SRCDIR/make_cifar10.py" cifar 320 100 2
expect_bad 0 "--data-dir: empty has no data_batch_1.bin" --dataset cifar10 --data-dir empty $O
mkdir -p broken && head -c 5000 cifar/data_batch_1.bin >broken/data_batch_1.bin && cp cifar/test_batch.bin broken/
expect_bad 0 "data_batch_1.bin: 5000 bytes is not a CIFAR-10 binary batch" --dataset cifar10 --data-dir broken $O

# Training on it: AlexNet's CIFAR-10 variant, 2 data-parallel ranks, evaluated on the test batch.
run_np 2 --model alexnet --dataset cifar10 --data-dir cifar --batch 32 --iters 40 --warmup 0 \
    --lr 0.02 --eval-every 20 --output "$WORK/cifar.h5" | tail -1
h5check finished "$WORK/cifar.h5" --ranks 2 --iters 40
h5check accuracy "$WORK/cifar.h5" --min-accuracy 0.3
pass "alexnet (CIFAR-10 variant) trains on CIFAR-10-format files"
