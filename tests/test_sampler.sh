# test_sampler.sh - /samples and the per-rank device metadata in a real result file: shapes,
# counts, timestamps on the iterations' clock, the CPU source's values, a full buffer, no
# sampling; and the sampler's own measurements (tests/sampler_check).
. "$(dirname "$0")/lib.sh"
SAMPLER_CHECK=${SAMPLER_CHECK:-$(dirname "$DTBENCH")/../tests/sampler_check}

"$SAMPLER_CHECK" || fail "sampler_check"
pass "the CPU sampler measures utilisation, memory and time"

run_np 2 --model lenet --dataset synthetic --batch 32 --iters 30 \
    --warmup 2 --flush-every 8 --sample-hz 100 --sample-max-s 60 --output "$WORK/s.h5" >/dev/null
h5check finished "$WORK/s.h5" --ranks 2 --iters 32
pycheck records samples "$WORK/s.h5" --ranks 2 --hz 100 --capacity 6000 # 60 s at 100 Hz

# A buffer of 0.05 s at 100 Hz (5 samples) fills: 5 kept, a warning, the file still complete.
run_np 1 --model lenet --dataset synthetic --batch 32 --iters 60 \
    --warmup 0 --sample-hz 100 --sample-max-s 0.05 --output "$WORK/full.h5" >/dev/null 2>"$WORK/err.txt"
grep -q 'warning: rank 0: /samples was full after 5 samples' "$WORK/err.txt" || fail "no full warning: $(cat "$WORK/err.txt")"
h5check finished "$WORK/full.h5" --ranks 1 --iters 60
pycheck records samples-full "$WORK/full.h5" --kept 5 || fail "full buffer"
# No sampling: no /samples group.
run_np 1 --dataset synthetic --iters 2 --warmup 0 --batch 4 --sample-hz 0 --output "$WORK/none.h5" >/dev/null
pycheck run marks "$WORK/none.h5" --no-group samples --ranks samples_written=0 --ranks sample_source= ||
    fail "--sample-hz 0"
pass "a full /samples keeps its capacity and warns; --sample-hz 0 makes none"
