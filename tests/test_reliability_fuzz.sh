# test_reliability_fuzz.sh - the reliability fuzz runs, bounded in time for CI
# (FUZZ_SECONDS each: 5 in the quick suite, 20 in the long checks; longer by hand, e.g. FUZZ_SECONDS=600 FUZZ_SEED=7):
#  1. the data readers: fuzz/fuzz_readers, a deterministic mutation driver over IDX and CIFAR-10
#     files, plain, gzip'd and with damaged gzip streams (the same target builds for libFuzzer
#     with `make fuzz-libfuzzer`); it aborts on any crash or broken promise (data.h);
#  2. the option parser, as a user meets it: random command lines (option names from --help, with
#     extreme, non-finite, empty, huge, non-UTF-8 and one-dash values) run by dtbench alone; each
#     must end with exit 0, or with exit 2 and exactly one line "dtbench: error: ..." and no file
#     left - never a crash, a hang, or another status.
. "$(dirname "$0")/lib.sh"
cd "$WORK"
SECONDS_EACH=${FUZZ_SECONDS:-5} # the quick suite; 20 in the long checks
[ -n "${FUZZ_SECONDS:-}" ] || ! long_part "fuzzing 20 s each instead of 5" || SECONDS_EACH=20
SEED=${FUZZ_SEED:-1}
FUZZ_READERS=${FUZZ_READERS:-$(dirname "$DTBENCH")/../fuzz/fuzz_readers}

TMPDIR=$WORK "$FUZZ_READERS" "$SECONDS_EACH" "$SEED" || fail "fuzz_readers found a crash (seed $SEED)"

"$DTBENCH" --help >help.txt
"$PYTHON" "$TESTS_SRCDIR/fuzz_options.py" "$DTBENCH" help.txt "$SECONDS_EACH" "$SEED"
pass "fuzz runs: readers and option parser, $SECONDS_EACH s each, seed $SEED"
