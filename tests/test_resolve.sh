# test_resolve.sh - the resolver (src/run/resolve.c) refuses every option given to components that
# do not read it and every combination a component does not support: through the real dtbench,
# exit status 2, one line naming the option and who accepts it, no file left behind. The same
# options with the components that read them are accepted (so the refusals are not blanket).
. "$(dirname "$0")/lib.sh"
cd "$WORK"

O="--dataset synthetic --iters 1 --warmup 0 --batch 8 --output bad.h5"
# --transport is not read by the parameter server (async pushes and pulls point to point).
expect_bad 0 "--transport: 'mpi' is not accepted with --exchange async (read only by --exchange " --exchange async --transport mpi $O
expect_bad 0 "--transport: 'hier' is not accepted with --exchange async" --exchange async --transport hier $O
# Strategy settings given to a strategy that has no such setting.
expect_bad 0 "--staleness: 2 is not accepted with --exchange sync (read only by --exchange async, --exchange ssp)" --staleness 2 $O
expect_bad 0 "--ps-ranks: 1 is not accepted with --exchange ssp (read only by --exchange async)" --exchange ssp --ps-ranks 1 $O
expect_bad 0 "--sync-period: 3 is not accepted with --exchange sync (read only by --exchange mixed)" --sync-period 3 $O
expect_bad 0 "--bucket-mb: 1 is not accepted with --exchange async" --exchange async --bucket-mb 1 $O
expect_bad 0 "--overlap: not accepted with --exchange ssp (read only by --exchange sync, --exchange zero2, --exchange zero3)" --exchange ssp --overlap $O
# --progress thread: only where a collective is in flight while compute runs.
expect_bad 0 "--progress: 'thread' is not accepted with --exchange sync without --overlap: no collective is in flight while compute runs; expected poll" --progress thread $O
expect_bad 0 "--progress: 'thread' is not accepted with --exchange ssp --staleness 0" --exchange ssp --staleness 0 --progress thread $O
expect_bad 0 "--progress: 'poll' is not accepted with --exchange async (read only by --exchange sync, --exchange ssp, --exchange zero2)" --exchange async --progress poll $O
expect_bad 0 "--progress: 'thread' is not accepted with --exchange mixed" --exchange mixed --progress thread $O
# Backend settings.
expect_bad 0 "--gpus-per-node: 1 is not accepted with --device cpu (read only by --device cuda)" --gpus-per-node 1 $O
expect_bad 0 "--conv-algo: 'heuristic' is not accepted with --device cpu (read only by --device cuda)" --conv-algo heuristic $O
expect_bad 0 "--conv-algo: 'guess' is not accepted" --conv-algo guess $O
expect_bad 0 "--act-layout: 'nhwc' is not accepted with --device cpu (read only by --device cuda)" --act-layout nhwc $O
expect_bad 0 "--act-layout: 'chw' is not accepted" --act-layout chw $O
# Schedules: pipeline schedules need a pipeline, a pipeline needs a pipeline schedule.
expect_bad 0 "--schedule: '1f1b' is not accepted with --parallel data: expected data" --schedule 1f1b $O
expect_bad 0 "--schedule: 'data' is not accepted with --parallel model: expected a pipeline schedule (gpipe or 1f1b)" --parallel model --schedule data $O
expect_bad 0 "--exchange: 'ssp' is not accepted with --parallel model: the replicas of a pipeline stage or tensor group exchange with sync" --parallel model --exchange ssp $O
expect_bad 0 "--microbatches: 1 is not accepted with --parallel data" --microbatches 1 $O
# Synthetic data have no test split: nothing to evaluate, no target to reach.
expect_bad 0 "--target-acc: 0.5 is not accepted with --dataset synthetic (no test split): expected fashion-mnist, mnist or cifar10" --target-acc 0.5 $O
expect_bad 0 "--eval-every: 5 is not accepted with --dataset synthetic (no test split)" --eval-every 5 $O
# Options that do nothing in the chosen mode: a data folder with generated data, the size of
# /samples without sampling (both were accepted and ignored).
expect_bad 0 "--data-dir: '/usr/share' is not accepted with --dataset synthetic (read only by --dataset fashion-mnist, mnist, cifar10, text or tokens)" --data-dir /usr/share $O
expect_bad 0 "--sample-max-s: 60 is not accepted with --sample-hz 0 (read only by --sample-hz above 0)" --sample-hz 0 --sample-max-s 60 $O
# Sampling rates no run can use: below one sample per 1000 s (1e-6 ran for ever), above 1 kHz.
for hz in 1e-06 1e-300 5000; do
    expect_bad 0 "--sample-hz: $hz is not accepted: expected 0 (no sampling) or a rate from 0.001 to 1000 samples per second" --sample-hz $hz $O
done
# A parameter server alone: what is needed, not "expected 1 to 0".
expect_bad 0 "--exchange: 'async' is not accepted on 1 rank: it needs at least 2 ranks (1 parameter server, --ps-ranks, and a worker)" --exchange async $O
expect_bad 1 "--exchange: 'async' is not accepted on 1 rank: it needs at least 3 ranks (2 parameter servers" --exchange async --ps-ranks 2 $O
# Under mpirun every rank agrees and one line is printed.
expect_bad 2 "--staleness: 3 is not accepted with --exchange mixed" --exchange mixed --staleness 3 $O

# The same options where they are read: accepted (a dry run resolves the whole plan).
ok() { # on 2 ranks, so that a parameter server leaves a worker
    run_np 2 "$@" --dry-run >out.txt 2>err.txt || fail "'$*' refused: $(cat err.txt)"
    pass "accepted: $*"
}
ok --dataset synthetic --exchange ssp --staleness 2 --bucket-mb 1 --transport hier
ok --dataset synthetic --exchange async --ps-ranks 1 --staleness 3
ok --dataset synthetic --exchange mixed --sync-period 3 --bucket-mb 2
ok --dataset synthetic --exchange sync --transport hier --overlap --bucket-mb 1 --threads 1
# MPI_THREAD_MULTIPLE is asked for before the options are parsed, from the same table: an
# abbreviated --prog=thread must get it too (else: refused for the thread level)
ok --dataset synthetic --exchange sync --overlap --prog=thread
ok --dataset synthetic --exchange ssp --staleness 2 --transport hier --progress thread
ok --dataset synthetic --parallel model --stages 2 --schedule 1f1b --microbatches 2
ok --dataset synthetic --schedule data
ok --dataset fashion-mnist --data-dir "$FMNIST_DIR" --eval-every 5 --target-acc 0.5
ok --dataset synthetic --sample-hz 0.001 --sample-max-s 60
ok --dataset synthetic --sample-hz 1000 --sample-max-s 1
[ ! -e bad.h5 ] && [ ! -e dtbench.h5 ] || fail "a refused or dry run left a file"
