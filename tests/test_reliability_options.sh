# test_reliability_options.sh - accepted values that ended in aborts or absurd allocations, and
# option messages that blamed the wrong word: an impossible run is refused before any
# allocation with exit 2, one line naming the option; no file is left.
. "$(dirname "$0")/lib.sh"
cd "$WORK"
S="--dataset synthetic --warmup 0 --output bad.h5"

# Memory estimated from the planned model before anything is allocated.
expect_bad 2 "--batch: this run needs about .* GB of memory per rank (activations of 536870912 samples per rank)" $S --batch 1073741824
expect_bad 2 "--staleness: this run needs about .* GB of memory per rank (1073741825 delayed gradients" $S --exchange ssp --staleness 1073741824
# 1073741824 iterations: 17 GB of timings per rank, 180 GB of results per rank.
expect_bad 2 "--iters: " $S --iters 1073741824
# Values past the parser's bound say the bound.
expect_bad 0 "--batch: '2147483648' is not accepted: expected an integer from 1 to 1073741824" $S --batch 2147483648
expect_bad 0 "--iters: '99999999999999999999' is not accepted: expected an integer from 1 to 1073741824" $S --iters 99999999999999999999
# Every integer option's refusal names its whole range, below or above it.
expect_bad 0 "--seed: '99999999999999999999' is not accepted: expected an integer from 0 to 9223372036854775807" $S --seed 99999999999999999999
expect_bad 0 "--seed: '-1' is not accepted: expected an integer from 0 to 9223372036854775807" $S --seed -1
expect_bad 0 "--threads: '0' is not accepted: expected an integer from 1 to 1073741824" $S --threads 0
expect_bad 0 "--target-acc: 'inf' is not accepted" $S --target-acc inf
expect_bad 0 "--lr: 'nan' is not accepted" $S --lr nan
# A one-dash option is named, not the word before it.
expect_bad 0 "-model: unknown option (options start with two dashes, e.g. --model" --output o.h5 -model lenet
[ ! -e o.h5 ] || fail "-model left o.h5"

# --flush-every larger than the run: one block at the end (it allocated flush_every records).
run_np 2 $S --batch 4 --iters 3 --flush-every 1073741824 --overwrite >out.txt 2>err.txt ||
    fail "--flush-every 1073741824: $(cat err.txt)"
pycheck run marks bad.h5 --attr finished=1 --ranks completed=3
pass "--flush-every 1073741824 --iters 3: completed, one block"
