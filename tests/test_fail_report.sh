#!/usr/bin/env bash
# test_fail_report.sh - a failed MPI call and a failed library check report the rank, the host,
# file:line, the call and the library's message in one line, and end every rank of the job
# (comm/mpi_check.c's mpi_check_start hands the rank and the job abort to base/fail.c's
# check_fail): tests/fail_report on 2 ranks, rank 1 failing while rank 0 waits in a barrier.
. "$(dirname "$0")/lib.sh"

PROG=$(dirname "$DTBENCH")/../tests/fail_report
host=$(hostname)
for mode in mpi check; do
    set +e
    timeout -k 5 60 "$MPIRUN" -np 2 "$PROG" "$mode" >"$WORK/$mode.out" 2>"$WORK/$mode.err"
    rc=$?
    set -e
    [ "$rc" != 124 ] && [ "$rc" != 137 ] || fail "$mode: the job was not ended (rank 0 left waiting)"
    [ "$rc" != 0 ] || fail "$mode: exit status 0 after a failure"
    ! grep -q "left the barrier" "$WORK/$mode.out" || fail "$mode: rank 0 went on after rank 1 failed"
    case $mode in
    mpi) want="^dtbench: rank 1 on $host: [^ ]*tests/fail_report.c:[0-9]+: MPI_Send\(.*\): .*[A-Za-z]" ;;
    check) want="^dtbench: rank 1 on $host: [^ ]*tests/fail_report.c:[0-9]+: probe: the message of the library$" ;;
    esac
    grep -Eq "$want" "$WORK/$mode.err" || { cat "$WORK/$mode.err"; fail "$mode: no report of rank 1's failure"; }
    pass "$mode: $(grep -m1 -E "$want" "$WORK/$mode.err" | cut -c1-140); job ended with $rc"
done
