# run_test.sh - how `make check` starts every test (LOG_COMPILER, SH_LOG_COMPILER): tests run side
# by side under `make -jN check` (scripts/test.sh: cores + 1 jobs), each in its own $WORK
# folder with its own Open MPI session (tests/lib.sh), except where Makefile.am says otherwise:
#   EXCLUSIVE_TESTS  run alone: it waits for the running tests and no other starts until it ends
#                    (every test holds a shared lock, these an exclusive one);
#   SERIAL_TESTS     run one at a time among themselves, beside the others.
# The test's log ends with one line "run_test.sh: NAME took S s, cpu C s" (the time it ran, not the
# time it waited for a lock; the CPU time of its processes), which scripts/test.sh reads to list
# the longest tests.
# Usage: run_test.sh [INTERPRETER] TEST: the test is the last argument, named as in Makefile.am's
# lists by its file name. The lock files live in $DTBENCH_TEST_LOCKS (the build's tests/ folder).
for test; do :; done
name=${test##*/}
if [ -n "${RUN_TEST_LOCKED:-}" ]; then # under the locks: run and time the test
    t0=$(date +%s.%N)
    "$@"
    rc=$?
    # the CPU time of the test and every process it waited for (mpirun waits for its ranks)
    # (times runs in this shell: in a command substitution it would count the subshell's children)
    times_file=$(mktemp)
    times >"$times_file"
    cpu=$(awk 'NR == 2 { s = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); s += 60 * t[1] + t[2] } printf "%.1f", s }' "$times_file")
    rm -f "$times_file"
    echo "run_test.sh: $name took $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s, cpu $cpu s"
    exit $rc
fi
export RUN_TEST_LOCKED=1
listed() { # listed LIST: the test is in LIST (paths as in Makefile.am)
    local t
    for t in $1; do [ "${t##*/}" = "$name" ] && return 0; done
    return 1
}
locks=${DTBENCH_TEST_LOCKS:-.}
mkdir -p "$locks"
self=${BASH:-sh}
if ! command -v flock >/dev/null 2>&1; then
    echo "run_test.sh: no flock(1): $name runs without the schedule's locks"
    exec "$self" "$0" "$@"
fi
listed "${EXCLUSIVE_TESTS:-}" && exec flock -x "$locks/suite.lock" "$self" "$0" "$@"
listed "${SERIAL_TESTS:-}" &&
    exec flock -s "$locks/suite.lock" flock -x "$locks/serial.lock" "$self" "$0" "$@"
exec flock -s "$locks/suite.lock" "$self" "$0" "$@"
