# test_bad_input.sh - every kind of bad input gives ONE line "dtbench: error: --option: ..."
# naming the accepted values, exit status 2, and leaves no output file behind.
. "$(dirname "$0")/lib.sh"
cd "$WORK"

O="--output bad.h5"
# Singleton (no mpirun) and under mpirun.
MODELS=lenet,fcn5,fcn8,alexnet,vgg16,googlenet,resnet50,lstm32,lstm64
expect_bad 0 "--model: 'resnet9' is not accepted: expected one of $MODELS" --model resnet9 $O
expect_bad 2 "--model: 'resnet9' is not accepted: expected one of $MODELS" --model resnet9 $O
expect_bad 0 "--dataset: 'cifar' is not accepted: expected one of synthetic,fashion-mnist,mnist,cifar10" --dataset cifar $O
expect_bad 0 "--exchange: 'allgather' is not accepted: expected one of sync,async,ssp,mixed,zero1,zero2,zero3" --exchange allgather $O
expect_bad 0 "--device: 'tpu' is not accepted" --device tpu $O
expect_bad 0 "--bogus: unknown option" --bogus $O
expect_bad 0 "--iters: a value is required" $O --iters
expect_bad 0 "--batch: '0' is not accepted: expected an integer from 1 to 1073741824" --batch 0 $O
expect_bad 0 "--batch: '-3' is not accepted: expected an integer from 1 to 1073741824" --batch -3 $O
expect_bad 0 "--batch: 'abc' is not accepted: expected an integer from 1 to 1073741824" --batch abc $O
expect_bad 0 "--iters: '0' is not accepted: expected an integer from 1 to 1073741824" --iters 0 $O
expect_bad 0 "--warmup: '-1' is not accepted: expected an integer from 0 to 1073741824" --warmup -1 $O
expect_bad 0 "--threads: '0' is not accepted" --threads 0 $O
expect_bad 0 "--lr: '-0.1' is not accepted: expected a number >= 0" --lr -0.1 $O
expect_bad 0 "--bucket-mb: 'x' is not accepted" --bucket-mb x $O
expect_bad 0 "unexpected argument" stray $O
expect_bad 2 "--batch: 63 is not accepted with 2 ranks" --batch 63 $O
expect_bad 2 "--ranks-per-node: 3 does not divide the 2 ranks" --ranks-per-node 3 $O
expect_bad 2 "--ps-ranks: 2 is not accepted with 2 ranks for --exchange async: expected 1 to 1" --exchange async --ps-ranks 2 $O
expect_bad 2 "--batch: 64 is not accepted with 3 workers" --exchange async --ps-ranks 1 --batch 64 $O --np4
expect_bad 0 "--straggler: '3' is not accepted: expected RANK:FACTOR" --straggler 3 $O
expect_bad 0 "--straggler: '1:0.5' is not accepted" --straggler 1:0.5 $O
expect_bad 2 "--straggler: rank 5 is not accepted: the job has ranks 0 to 1" --straggler 5:2 $O
expect_bad 0 "--target-acc: '1.5' is not accepted: expected a number from 0 to 1" --target-acc 1.5 $O
expect_bad 0 "--staleness: '-1' is not accepted: expected an integer from 0 to 1073741824" --staleness -1 $O

# Data: a missing folder, a missing file, a malformed file.
expect_bad 2 "--data-dir: /nonexistent/fmnist has no train-images-idx3-ubyte" --data-dir /nonexistent/fmnist $O
mkdir -p broken && printf 'not an idx file at all' | gzip >broken/train-images-idx3-ubyte.gz
cp "$FMNIST_DIR/train-labels-idx1-ubyte.gz" broken/
expect_bad 2 "not an IDX image file" --data-dir broken $O
# Labels that do not match the images.
mkdir -p mismatched && cp "$FMNIST_DIR/train-images-idx3-ubyte.gz" mismatched/
cp "$FMNIST_DIR/t10k-labels-idx1-ubyte.gz" mismatched/train-labels-idx1-ubyte.gz
expect_bad 2 "not an IDX label file matching" --data-dir mismatched $O

# Output: never overwritten silently; the existing file is left exactly as it was.
echo "earlier results" >exists.h5
set +e
run_refused 2 --dataset synthetic --iters 1 --output exists.h5 >out.txt 2>err.txt
rc=$?
set -e
[ "$rc" = 2 ] || fail "existing output: exit $rc"
grep -q "^dtbench: error: --output: exists.h5 exists; .*--overwrite" err.txt || fail "existing output message: $(cat err.txt)"
[ "$(cat exists.h5)" = "earlier results" ] || fail "existing output was modified"
pass "existing output kept, exit 2"
echo "earlier parameters" >exists.params
expect_bad 2 "--save-model: exists.params exists; .*--overwrite" --dataset synthetic --iters 1 $O --save-model exists.params
[ "$(cat exists.params)" = "earlier parameters" ] || fail "existing --save-model file was modified"
expect_bad 2 "--output: cannot create /nonexistent-dir/x.h5" --dataset synthetic --iters 1 --output /nonexistent-dir/x.h5
expect_bad 2 "--output: an empty file name is not accepted" --output ""
# --overwrite really replaces it.
run_np 2 --dataset synthetic --iters 1 --warmup 0 --batch 4 --output exists.h5 --overwrite >/dev/null
h5check finished exists.h5
pass "--overwrite replaces the file"
