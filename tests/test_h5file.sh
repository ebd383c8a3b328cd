# test_h5file.sh - the result file read back: shapes, no missing values, metadata, clocks,
# identical parameters on every rank; and dtbench-analyze summary reads it.
. "$(dirname "$0")/lib.sh"

run_np 2 --model lenet --dataset fashion-mnist --data-dir "$FMNIST_DIR" --batch 32 --iters 30 \
    --warmup 5 --flush-every 7 --output "$WORK/run.h5" --tag "h5 test" >"$WORK/out.txt"
h5check finished "$WORK/run.h5" --ranks 2 --iters 35
h5check accuracy "$WORK/run.h5" --min-accuracy 0.3
# The launcher is part of the configuration: mpirun here, none for a process started alone.
"$DTBENCH" --model lenet --dataset synthetic --batch 8 --iters 1 --warmup 0 --output "$WORK/alone.h5" >/dev/null
pycheck run marks "$WORK/run.h5" --attr launcher=mpirun
pycheck run marks "$WORK/alone.h5" --attr launcher=none

# 3 ranks (not a power of two) as 3 "nodes" of 1 rank (--ranks-per-node must divide the ranks);
# a batch of 15 splits evenly over 3 ranks, evaluated at the end on 256 test images
# (fmnist_small): this run checks the file. The long checks run FCN-5 (118M parameters) here.
model=lenet
long_part "FCN-5 on 3 ranks" && model=fcn5
run_np 3 --model $model --dataset fashion-mnist --data-dir "$(fmnist_small)" --batch 15 --iters 4 \
    --warmup 1 --ranks-per-node 1 --output "$WORK/fcn.h5" >/dev/null
h5check finished "$WORK/fcn.h5" --ranks 3 --iters 5
pycheck run marks "$WORK/fcn.h5" --attr nranks=3 --attr nnodes=3 --ranks node=0,1,2 \
    --ranks local_rank=0,0,0

summary=$(analyze summary "$WORK/run.h5")
echo "$summary"
grep -qi "samples/s" <<<"$summary" || fail "summary has no throughput"
grep -q "INCOMPLETE" <<<"$summary" && fail "complete run reported incomplete"
pass "dtbench-analyze summary on a real file"
