# test_reliability_outputs.sh - output files are claimed before any work: one file named twice is
# refused (it was destroyed with exit 0), through symbolic links too, also one that becomes the
# other during the run; an unwritable --save-model is found before training; a path a running job
# writes is refused to a second job (--overwrite included); a failed run leaves nothing behind,
# and no run deletes a file it did not create (one named like its hidden build name).
. "$(dirname "$0")/lib.sh"
cd "$WORK"
S="--dataset synthetic --batch 4 --warmup 0"

# noleft : no results file and no hidden partial file in the current folder.
noleft() {
    [ -z "$(ls -A | grep -E '^(\.?o\.h5|\.o\.h5\..*\.partial|\.?m\.bin|\.m\.bin\..*\.tmp)' || true)" ] || fail "$*: left $(ls -A)"
}

# 1. The results file named again as --save-model, however spelled: exit 2, nothing written.
expect_bad 0 "--save-model: o.h5 is the results file (--output o.h5)" $S --iters 1 --output o.h5 --save-model o.h5
noleft "same name"
expect_bad 2 "--save-model: ./o.h5 is the results file (--output o.h5)" $S --iters 1 --output o.h5 --save-model ./o.h5
mkdir -p sub
expect_bad 0 "--save-model: sub/../o.h5 is the results file" $S --iters 1 --output o.h5 --save-model sub/../o.h5
noleft "same file, other spelling"
echo "earlier results" >o.h5 && ln o.h5 hard.h5
expect_bad 0 "--save-model: hard.h5 is the results file" $S --iters 1 --output o.h5 --save-model hard.h5 --overwrite
[ "$(cat o.h5)" = "earlier results" ] || fail "hard-linked results file modified"
rm -f o.h5 hard.h5

# A device or FIFO is never taken for (or replaced by) a results file.
expect_bad 0 "--output: /dev/null is not a regular file" $S --iters 1 --output /dev/null --overwrite
mkfifo fifo
expect_bad 0 "--save-model: fifo is not a regular file" $S --iters 1 --output o.h5 --save-model fifo --overwrite
[ -p fifo ] && rm fifo

# 2. --save-model where nothing can be written: refused before training (it was found after).
#    200000 iterations would train for many minutes here: found after training, this times out.
RUN_TIMEOUT=60 expect_bad 2 "--save-model: cannot create /proc/dtbench-model.bin" $S --iters 200000 --flush-every 1000 --output o.h5 --save-model /proc/dtbench-model.bin
noleft "unwritable --save-model"
expect_bad 0 "--save-model: cannot create /nonexistent/m.bin" $S --iters 1 --output o.h5 --save-model /nonexistent/m.bin
# A run that fails after the claim (bad data here) leaves neither file.
expect_bad 2 "--data-dir: /nonexistent has no" --iters 1 --data-dir /nonexistent --output o.h5 --save-model m.bin
noleft "failed run"

# H5Fcreate failing (here MPI-IO has no I/O component: MPI_File_open fails on every rank) names
# HDF5's own reason; it said "no HDF5 error on the stack" (the stack was read after H5Pclose
# cleared it). Nothing is left.
if grep -q "Open MPI" <<<"$("$MPIRUN" --version 2>&1)"; then
    OMPI_MCA_io=^ompio,romio321 expect_bad 2 "--output: cannot create o.h5: HDF5 H5Fcreate: MPI_File_open failed: MPI error string is" $S --iters 1 --output o.h5
    noleft "H5Fcreate failure"
else
    echo "note: $MPIRUN is not Open MPI: the H5Fcreate failure (made with OMPI_MCA_io) is not checked"
fi

# 2b. Links are followed to the file they name in the end. --save-model through a symbolic link
#     to the results file: the model was written over the results, exit 0. Refused now, whether
#     the results exist yet or not, and nothing is written.
ln -s o.h5 model.bin
expect_bad 0 "--save-model: model.bin is the results file (--output o.h5)" $S --iters 1 --output o.h5 --save-model model.bin
[ ! -e o.h5 ] || fail "the refused run created o.h5"
mkdir -p d1 sub && ln -s ../d1/o.h5 sub/d2 && ln -s sub/d2 chain.bin # a chain of relative links
echo "earlier results" >d1/o.h5
expect_bad 2 "--save-model: chain.bin is the results file (--output d1/o.h5)" $S --iters 1 --output d1/o.h5 --save-model chain.bin --overwrite
[ "$(cat d1/o.h5)" = "earlier results" ] || fail "results reached through links were modified"
rm -rf model.bin d1 sub/d2 chain.bin
#     --output through a link writes the file it points to (created if need be); the link stays.
ln -s real.h5 lnk.h5
run_np 2 $S --model lenet --iters 2 --output lnk.h5 >run.log 2>&1 || fail "--output through a link: $(cat run.log)"
[ -L lnk.h5 ] && [ -f real.h5 ] && pycheck run marks lnk.h5 --attr finished=1 ||
    fail "--output lnk.h5 -> real.h5: $(ls -la)"
expect_bad 2 "--output: lnk.h5 exists" $S --iters 1 --output lnk.h5
rm -f lnk.h5 real.h5
pass "links: a model through a link to the results refused; results through a link written where it points"

# 2c. A file of the user's named like a run's hidden build name (.o.h5.partial for --output o.h5)
#     was deleted by that run. Runs build under names of their own now: the file stays, whether
#     the run completes, is refused after the claim or is killed.
echo "mine" >.o.h5.partial
echo "mine too" >.m.bin.tmp
run_np 2 $S --model lenet --iters 2 --output o.h5 --save-model m.bin >run.log 2>&1 || fail "run beside .o.h5.partial: $(cat run.log)"
expect_bad 2 "--data-dir: /nonexistent has no" --iters 1 --data-dir /nonexistent --output o2.h5 --save-model m2.bin
[ "$(cat .o.h5.partial)" = "mine" ] && [ "$(cat .m.bin.tmp)" = "mine too" ] ||
    fail "a user's file named like a hidden build name was changed or deleted: $(ls -A)"
[ -z "$(ls -A | grep -E '^\.(o|o2)\.h5\..+\.partial$|^\.(m|m2)\.bin\..+\.tmp$' || true)" ] ||
    fail "hidden build files left: $(ls -A)"
rm -f o.h5 m.bin .o.h5.partial .m.bin.tmp
pass "a user's files named .o.h5.partial and .m.bin.tmp survive runs on o.h5 and m.bin"

# 2d. --save-model that becomes the results file during the run (a link made after the claim):
#     refused at the save, exit 1, one line; the results stay.
timeout -k 10 200 "$MPIRUN" -np 2 "$DTBENCH" $S --model lenet --iters 1000000 --flush-every 10 \
    --output o.h5 --save-model m.bin >b.log 2>b.err &
job=$!
wait_completed o.h5 10 120 || { kill -9 $job; fail "the run did not start writing"; }
ln -sf o.h5 m.bin # (replacing what the run may have left there)
kill -TERM $(pids_of o.h5)
set +e
wait $job
rc=$?
set -e
[ "$rc" = 1 ] || fail "a model that became the results file: exit $rc: $(cat b.err)"
[ "$(grep -c '^dtbench: error: rank 0: --save-model m.bin was not saved: it has become the results file (--output o.h5); no model file left' b.err)" = 1 ] ||
    fail "not one line saying why: $(cat b.err)"
pycheck run marks o.h5 --attr stop_reason=signal || fail "the results were damaged"
[ -z "$(ls -A | grep -E '^\.m\.bin\..+\.tmp$' || true)" ] || fail "the model's hidden file was left: $(ls -A)"
rm -f o.h5 m.bin
pass "a --save-model that became the results file during the run: refused at the save, exit 1, results intact"

# 3. A second job on a path a running job writes: refused, --overwrite included; the first job's
#    results complete. (Two jobs with --overwrite both reported success while one's data was gone.)
# The first job runs until it is stopped (as scancel does: SIGTERM to its ranks), so the checks
# below do not depend on how fast this machine trains.
spawn timeout -k 10 200 "$MPIRUN" -np 2 "$DTBENCH" $S --iters 1000000 --flush-every 10 --output o.h5 >a.log 2>&1
job=$SPAWNED
wait_completed o.h5 10 120 || { kill -9 $job; fail "first job did not start writing"; }
expect_bad 0 "--output: o.h5 is being written by another running job" $S --iters 1 --output o.h5 --overwrite
expect_bad 2 "--output: o.h5 is being written by another running job" $S --iters 1 --output o.h5 --overwrite
expect_bad 0 "--output: .*o.h5" $S --iters 1 --output o.h5
kill -TERM $(pids_of o.h5)
wait $job
h5check stopped o.h5 --reason signal --lockstep --min-completed 10 || fail "first job's file: $(cat a.log)"
pass "a running job's file is refused to a second job; the first ends intact"

# 4. Two jobs started together on one path with --overwrite, several times: exactly one succeeds,
#    the other is refused with exit 2, and the file holds the successful job's complete results.
rounds=1
long_part "2 more rounds of two jobs on one path" && rounds="1 2 3"
for round in $rounds; do
    rm -f o.h5
    for j in 1 2; do
        # each mpirun its own session folder (two starting at once race on a shared one)
        mkdir -p "$WORK/ompi$j"
        # (the refused job's ranks all end by themselves: no wait before SIGKILL, as run_refused)
        (set +e; export OMPI_MCA_orte_tmpdir_base="$WORK/ompi$j" OMPI_MCA_odls_base_sigkill_timeout=0; timeout -k 10 200 "$MPIRUN" -np 2 "$DTBENCH" $S --iters 60 --flush-every 10 \
            --tag "job$j" --output o.h5 --overwrite >job$j.log 2>&1; echo $? >job$j.rc) &
    done
    wait
    rcs="$(cat job1.rc) $(cat job2.rc)"
    case "$rcs" in
    "0 2") winner=job1 ;;
    "2 0") winner=job2 ;;
    "0 0") winner=both ;; # one ran after the other had finished: both right, nothing lost
    *) fail "round $round: exit statuses $rcs: $(cat job1.log job2.log)" ;;
    esac
    if [ "$winner" != both ]; then
        loser=$([ $winner = job1 ] && echo job2 || echo job1)
        grep -q "^dtbench: error: --output: o.h5 is being written by another running job" $loser.log ||
            grep -q "^dtbench: error: --output: o.h5 exists" $loser.log ||
            fail "round $round: $loser: $(cat $loser.log)"
    fi
    # complete, and the winner's (either job's when both succeeded)
    pycheck run marks o.h5 --attr finished=1 --ranks completed=60 $([ "$winner" = both ] || echo "--attr tag=$winner")
done
! compgen -G ".o.h5.*.partial" >/dev/null || fail "a partial file was left behind: $(ls -A)"
