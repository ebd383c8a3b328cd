#!/usr/bin/env bash
# test.sh - sets everything up, test-only packages included (scripts/setup.sh, without
# --runtime: docs/building.md), and runs the whole test suite:
#   make check      C kernel/model tests and the MPI + HDF5 shell tests (2 and 4 ranks)
#   pytest          the analysis package (analysis/tests) and the campaign tool (jobs/tests)
#   make distcheck  with --long: the release tarball, configured --without-cuda (so CI builds
#                   both the tree's configuration and the CPU-only one), builds and passes the
#                   quick tests (with --full: all tests)
#   make check-sanitize-ci   with --sanitize (what CI runs): the tests again in an ASan/UBSan
#                   build, CPU-only, in sanitize/ (Makefile.am says which)
#   the scaling study with --study (what CI runs): tests/test_slurm_study.sh, 16 emulated nodes
#                   under Slurm (docs/scaling-study.md), not part of make check
#   the long checks with --long (what CI runs): make check runs every test whole (with
#                   DTBENCH_TEST_LONG=1 the tests also run their slower variations: more ranks,
#                   strategies and cases, runs to a target accuracy; tests/lib.sh: long_part),
#                   then LONG_TESTS below, tests whose subject make check covers more cheaply
#                   (Makefile.am: LONG_TESTS)
# and ends with the time each part took and the total, then one line "N passed, N failed,
# N skipped" over all of them. Tests run side by side, two more than there are cores (much of
# their time is waiting: MPI start-up, timeouts, Slurm; measured on 2 cores, the quick tests'
# processes kept the cores busy about half the time with one more than the cores, and with twice
# as many plus pytest beside them the cores were busy all the time but spent a quarter more CPU
# time on the same tests); TEST_JOBS=N sets how many; Makefile.am says which tests run one at a
# time: tests/run_test.sh). pytest runs beside make check, a worker per core.
# Every skip is printed with its reason. A skip counts as a failure unless this machine cannot run
# the test: only the GPU tests (GPU_TESTS below) may skip, and only where no GPU is visible
# (nvidia-smi -L fails), and the CPU bf16 tests (BF16_TESTS) only where /proc/cpuinfo lacks
# avx512_bf16; pytest may not skip at all once scripts/setup.sh has run.
set -uo pipefail
cd "$(dirname "$0")/.."
full=0 sanitize=0 study=0 long=0
for a in "$@"; do
    case $a in
    --full) full=1 ;;
    --sanitize) sanitize=1 ;;
    --study) study=1 ;;
    --long) long=1 ;;
    *) echo "usage: scripts/test.sh [--full] [--sanitize] [--study] [--long]" >&2; exit 2 ;;
    esac
done
t_begin=$(date +%s)
timings=""
# took NAME SINCE: appends "NAME M min S s" (since the epoch second SINCE) to the timings line
took() {
    local s=$(($(date +%s) - $2))
    timings="$timings${timings:+, }$1 $((s / 60)) min $((s % 60)) s"
}
cores=$(nproc 2>/dev/null || echo 2)
jobs=${TEST_JOBS:-$((cores + 2))}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=4
t=$(date +%s)
# (with --long, the CUDA kernels for every architecture configure builds by default, not only
# this machine's GPUs' or, with none, one)
[ "$long" = 0 ] || export CUDA_ARCHS=${CUDA_ARCHS:-80 90 100}
scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
took setup "$t"

# Tests that need a GPU (they exit 77 without one): shell patterns over make check's test names.
GPU_TESTS="tests/test_gpu_*.sh tests/test_cuda_kernels tests/test_cuda_zoo tests/test_cuda_precision
    tests/test_cuda_algos tests/test_cuda_bn tests/test_cuda_nhwc tests/test_cuda_transformer"
if nvidia-smi -L >/dev/null 2>&1; then have_gpu=1; else have_gpu=0; fi
# matches NAME PATTERNS: NAME matches one of the space-separated shell PATTERNS
matches() {
    local pat
    for pat in $2; do
        # shellcheck disable=SC2053 # the pattern is meant to match
        [[ $1 == $pat ]] && return 0
    done
    return 1
}
gpu_test() { matches "$1" "$GPU_TESTS"; }
# Tests that need bf16 arithmetic on the CPU (--precision bf16: AVX512-BF16 or an OpenBLAS with
# cblas_sbgemm): they may skip only where /proc/cpuinfo has no avx512_bf16.
BF16_TESTS="tests/test_precision_bf16.sh tests/test_precision_torch.sh"
if grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null; then have_bf16=1; else have_bf16=0; fi
bf16_test() { matches "$1" "$BF16_TESTS"; }
# skip_expected NAME: a GPU test on a machine without a GPU, or a bf16 test on a CPU without bf16
skip_expected() {
    { [ "$have_gpu" = 0 ] && gpu_test "$1"; } || { [ "$have_bf16" = 0 ] && bf16_test "$1"; }
}

# log_of TEST: its log, as automake names it (tests/test_x.sh -> tests/test_x.log)
log_of() { echo "${1%.sh}.log"; }

passed=0 failed=0 skipped=0 fail_logs=''
count() { # count NAME STATUS
    case $2 in
    pass) passed=$((passed + 1)) ;;
    skip) skipped=$((skipped + 1)) ;;
    *) failed=$((failed + 1)); echo "FAILED: $1" ;;
    esac
}

# pytest (analysis/tests, jobs/tests) beside make check: pytest-xdist, a worker per core, each
# test file whole on one worker (its module fixtures, real dtbench runs among them, made once).
# Much of its time is waiting (Chromium, dtbench starting MPI), and so is much of make check's.
# The tests marked long (real runs across emulated nodes, a report of real runs) run with --long,
# after make check: their emulated nodes and make check's Slurm tests' would share one network.
t_py=$(date +%s)
rm -f pytest.took
(
    .venv/bin/python -m pytest -q -rfEsx -p no:cacheprovider -n "$cores" \
        --dist loadfile -m "not long" analysis/tests jobs/tests --junitxml=pytest.xml >pytest.out 2>&1
    echo $(($(date +%s) - t_py)) >pytest.took
) &
py_pid=$!

echo "== make -j$jobs check"
# Build the test programs, then run the tests side by side (tests/run_test.sh keeps the Slurm
# clusters one at a time); each test's own time is in its .log's mtime order, its output in .log.
t=$(date +%s)
make -j"$jobs" check TESTS= >check.out 2>&1 &&
    DTBENCH_TEST_LONG=$long make -j"$jobs" check >>check.out 2>&1
took "make check" "$t"
grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR):' check.out
for t in $(sed -n 's/^PASS: //p' check.out); do count "$t" pass; done
for t in $(sed -n 's/^SKIP: //p' check.out); do
    # the reason: the test's last lines, without the driver's "SKIP name (exit status: 77)"
    why=$(grep -v -e '^SKIP .*(exit status: 77)$' -e '^ *$' "$(log_of "$t")" 2>/dev/null | tail -2 | tr '\n' ' ')
    if skip_expected "$t"; then
        echo "skipped (no GPU or no AVX512-BF16 here): $t: $why"
        count "$t" skip
    else
        echo "unexpected skip: $t: $why"
        count "$t (skipped$([ "$have_gpu" = 1 ] && echo ' with a GPU visible'))" fail
    fi
done
for t in $(sed -nE 's/^(FAIL|XPASS|ERROR): //p' check.out); do
    count "$t" fail
    tail -30 "$(log_of "$t")" 2>/dev/null
    fail_logs="$fail_logs $(log_of "$t")"
done
grep -q '^# TOTAL' check.out || count "make check (did not run: see check.out)" fail
# The longest tests (the last line tests/run_test.sh writes into each log): Makefile.am starts
# the shell tests longest first.
longest=$(sed -n 's/^run_test.sh: \(.*\) took \([0-9.]*\) s, cpu \([0-9.]*\) s$/\2 \1 \3/p' \
    tests/*.log bench/*.log 2>/dev/null |
    sort -rn | awk 'NR <= 8 { printf "%s%s %s s (cpu %s s)", (NR > 1 ? ", " : ""), $2, $1, $3 }')
cpu_sum=$(sed -n 's/^run_test.sh: .* took [0-9.]* s, cpu \([0-9.]*\) s$/\1/p' tests/*.log 2>/dev/null |
    awk '{ s += $1 } END { printf "%.0f", s }')
[ -z "$cpu_sum" ] || echo "make check: the tests' CPU time ${cpu_sum} s in all"
[ -z "$longest" ] || echo "longest tests: $longest"


# pytest_results OUT XML: pytest's failures, errors and skips with their reasons, its summary
# line, and its counts added to the totals. No pytest test needs a GPU or anything
# scripts/setup.sh does not install: a skip is a failure.
pytest_results() {
    local tests fails errs skips
    grep -E "^(SKIPPED|FAILED|ERROR|XFAIL)" "$1" # -rfEsx: each with its reason
    tail -1 "$1"
    read -r tests fails errs skips < <(.venv/bin/python - "$2" <<'PY'
import sys
import xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
    s = root if root.tag == "testsuite" else root.find("testsuite")
    print(s.get("tests"), s.get("failures"), s.get("errors"), s.get("skipped"))
except Exception:
    print(0, 1, 0, 0)
PY
)
    passed=$((passed + tests - fails - errs - skips))
    failed=$((failed + fails + errs))
    [ "$skips" = 0 ] || count "pytest: $skips skipped (unexpected: see SKIPPED above)" fail
    [ "$tests" -gt 0 ] || count "pytest ($2) ran no test" fail
}
echo "== pytest analysis/tests jobs/tests (beside make check)"
t=$(date +%s)
wait "$py_pid"
pytest_results pytest.out pytest.xml
echo "pytest took $(cat pytest.took 2>/dev/null || echo '?') s, beside make check"
took "pytest (left after make check)" "$t"
if [ "$long" = 1 ]; then
    echo "== pytest -m long"
    t=$(date +%s)
    .venv/bin/python -m pytest -q -rfEsx -p no:cacheprovider -n "$((2 * cores))" --dist loadfile \
        -m long analysis/tests jobs/tests --junitxml=pytest-long.xml >pytest-long.out 2>&1
    pytest_results pytest-long.out pytest-long.xml
    took "pytest -m long" "$t"
fi

# make distcheck (with --long) runs beside the long checks (not beside pytest -m long, whose
# prediction check times emulated nodes on these cores); its result is read after them.
t_dist=$(date +%s)
# (not test_bad_input.sh, 80 s under load: make check ran it on this same source just before)
quick="tests/test_cpu_conv tests/test_cpu_pool tests/test_model tests/test_cli.sh"
[ "$full" = 1 ] && quick=""
rm -f distcheck.rc
if [ "$long" = 1 ]; then
    (
        make -j"$jobs" distcheck ${quick:+TESTS="$quick"} >distcheck.out 2>&1
        echo $? >distcheck.rc
        echo $(($(date +%s) - t_dist)) >distcheck.took
    ) &
    dist_pid=$!
fi


# The long checks (Makefile.am: LONG_TESTS): gpt2 against PyTorch (make check's
# tests/test_vs_torch.sh checks nanogpt-char, the same layer kinds at a tenth of the size), and
# the tests whose subject make check covers more cheaply (Makefile.am says which covers what).
LONG_TESTS=$(make -s print-long-tests 2>/dev/null) || LONG_TESTS=""
[ -n "$LONG_TESTS" ] || count "make print-long-tests (no list of the long checks)" fail
if [ "$long" = 1 ]; then
    echo "== make check TESTS=\"$LONG_TESTS\" (the long checks; make distcheck beside them)"
    t_long=$(date +%s)
    make -j"$jobs" check TESTS="$LONG_TESTS" >long.out 2>&1
    grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR):' long.out
    for t in $LONG_TESTS; do
        if grep -q "^PASS: $t\$" long.out; then
            count "$t" pass
            grep -E '^ok' "$(log_of "$t")"
        elif grep -q "^SKIP: $t\$" long.out; then # no torch: not a machine's lack once set up
            echo "unexpected skip: $t: $(grep -v '^ *$' "$(log_of "$t")" | tail -2 | tr '\n' ' ')"
            count "$t (skipped)" fail
        else
            tail -30 "$(log_of "$t")" 2>/dev/null || tail -30 long.out
            count "$t" fail
            fail_logs="$fail_logs $(log_of "$t")"
        fi
    done
    took long "$t_long"
fi

if [ "$long" = 1 ]; then
    echo "== make distcheck (the release tarball, --without-cuda)"
    t=$(date +%s)
    wait "$dist_pid"
    if [ "$(cat distcheck.rc 2>/dev/null)" = 0 ]; then
        count "make distcheck" pass
    else
        tail -30 distcheck.out
        count "make distcheck" fail
    fi
    echo "make distcheck took $(cat distcheck.took 2>/dev/null || echo '?') s, beside pytest and the long checks"
    took "distcheck (left after the long checks)" "$t"
fi

if [ "$study" = 1 ]; then
    echo "== make check TESTS=tests/test_slurm_study.sh (the scaling study, 16 emulated nodes)"
    t=$(date +%s)
    make check TESTS=tests/test_slurm_study.sh >study.out 2>&1
    if grep -q '^PASS: tests/test_slurm_study.sh' study.out; then
        count "tests/test_slurm_study.sh" pass
        grep -E '^(ok|predict|n16x|fault|kept|test_slurm_study)' tests/test_slurm_study.log | tail -30
    elif grep -q '^SKIP: tests/test_slurm_study.sh' study.out; then # no root, Slurm or Chromium
        echo "unexpected skip: tests/test_slurm_study.sh: $(grep -v '^ *$' tests/test_slurm_study.log | tail -2 | tr '\n' ' ')"
        count "tests/test_slurm_study.sh (skipped)" fail
    else
        tail -40 tests/test_slurm_study.log 2>/dev/null || tail -30 study.out
        count "tests/test_slurm_study.sh" fail
    fi
    took study "$t"
fi

if [ "$sanitize" = 1 ]; then
    echo "== make check-sanitize-ci (ASan + UBSan, CPU-only build in sanitize/)"
    t_sanitize=$(date +%s)
    make -j"$jobs" check-sanitize-ci >sanitize.out 2>&1
    grep -E '^(PASS|FAIL|SKIP|XFAIL|XPASS|ERROR):' sanitize.out | sed 's/^/sanitize: /'
    for t in $(sed -n 's/^PASS: //p' sanitize.out); do count "sanitize: $t" pass; done
    for t in $(sed -n 's/^SKIP: //p' sanitize.out); do # a CPU-only build: the GPU tests skip
        why=$(grep -v -e '^SKIP .*(exit status: 77)$' -e '^ *$' "sanitize/tree/$(log_of "$t")" 2>/dev/null |
            tail -2 | tr '\n' ' ')
        if gpu_test "$t" || { [ "$have_bf16" = 0 ] && bf16_test "$t"; }; then
            echo "skipped (CPU-only build, or no AVX512-BF16): sanitize: $t: $why"
            count "sanitize: $t" skip
        else
            echo "unexpected skip: sanitize: $t: $why"
            count "sanitize: $t (skipped)" fail
        fi
    done
    for t in $(sed -nE 's/^(FAIL|XPASS|ERROR): //p' sanitize.out); do
        count "sanitize: $t" fail
        tail -30 "sanitize/tree/$(log_of "$t")" 2>/dev/null
        fail_logs="$fail_logs sanitize/tree/$(log_of "$t")"
    done
    grep -q '^# TOTAL' sanitize.out ||
        { tail -30 sanitize.out; count "make check-sanitize-ci (did not run: see sanitize.out)" fail; }
    took sanitize "$t_sanitize"
fi

took total "$t_begin"
# The failed tests' last lines once more, next to the summary (a CI page may show only the end).
for l in $fail_logs; do
    echo "-- $l (end):"
    grep -v -e '^ *$' -e '^run_test.sh: ' "$l" 2>/dev/null | tail -4 | cut -c1-240
done
echo "took: $timings ($jobs test jobs on $cores cores)"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
