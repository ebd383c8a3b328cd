#!/bin/bash
# test_campaign_dryrun.sh - dtbench --dry-run --ranks N (what dtbench-campaign plan runs for every
# run) checks a run as the N ranks it will have, from one process: rules that depend on the ranks
# (parameter servers, pipeline stages, the batch per worker, --ranks-per-node) are applied; --ranks
# without --dry-run is refused with exit 2 and one line.
. "$(dirname "$0")/lib.sh"
cd "$WORK"
L="--model lenet --dataset synthetic"

# accepted as N ranks, refused as one process (what the campaign check did before)
"$DTBENCH" $L --dry-run --exchange async --ps-ranks 1 --ranks 2 >ok.txt || fail "async on 2 ranks refused"
grep -q "on 2 ranks" ok.txt || fail "the dry run did not take 2 ranks"
expect_bad 0 "--exchange: 'async' is not accepted on 1 rank: it needs at least 2 ranks" $L --dry-run --exchange async --ps-ranks 1 --ranks 1
pass "--exchange async --ps-ranks 1: accepted with --ranks 2, refused with --ranks 1"

expect_bad 0 "--ps-ranks: 2 is not accepted with 2 ranks" $L --dry-run --exchange async --ps-ranks 2 --ranks 2
expect_bad 0 "--stages: 2 is not accepted with --parallel model on 3 ranks" $L --dry-run --parallel model --stages 2 --ranks 3
"$DTBENCH" $L --dry-run --parallel model --stages 2 --ranks 2 >/dev/null || fail "2 stages on 2 ranks refused"
expect_bad 0 "--batch: 10 is not accepted with 4 ranks" $L --dry-run --batch 10 --ranks 4
expect_bad 0 "--batch: 12 is not accepted with 5 workers" $L --dry-run --batch 12 --exchange async --ps-ranks 1 --ranks 6
expect_bad 0 "--ranks-per-node: 3 does not divide the 4 ranks" $L --dry-run --ranks-per-node 3 --ranks 4
pass "servers, stages, batch per worker and --ranks-per-node are judged on the given ranks"

expect_bad 0 "--ranks: 2 is only accepted with --dry-run" $L --ranks 2 --output x.h5
[ ! -e x.h5 ] || fail "a refused --ranks left a file"
expect_bad 0 "--ranks: 0 is not accepted: expected 1 or more" $L --dry-run --ranks 0
pass "--ranks is refused without --dry-run and below 1"
