#!/bin/bash
# test_setup_stop.sh - every wait of the set-up ends at a stop (src/run/main.c setup_stop_point), and
# a stop there ends the run at once, exit 0, nothing recorded and no file left:
#   1. a FIFO where a data file should be: refused at once in one line, exit 2, no file (it
#      blocked in open() for ever; SIGTERM did not stop it and a .o.h5.partial was left);
#   2. SIGTERM while a large data set loads (an IDX file of 1,000,000 images, 784 MB): the read
#      stops within a piece, the process never holds the whole set (the old program read it all,
#      built the model, created the file, then stopped);
#   3. SIGTERM while FCN-5 is built (1.4 GB of zeroed parameters, gradients and momentum, then
#      118M parameters initialised): stopped before the build ends (the old program took 19 s
#      here, 3.8-4.1 s on an idle machine, and created the file first);
#   4. a sampler sleeping between samples (--sample-hz 0.001: 1000 s) does not hold the run's end
#      (it did not before either: kept as a guard; what hung was a rate of 1e-300, now refused).
# The latencies are printed; bench/stop_latency.sh measures them against the set-up's length.
. "$(dirname "$0")/lib.sh"
cd "$WORK"
probe() { timeout -k 5 200 "$PYTHON" "$TESTS_SRCDIR/stop_probe.py" "$@"; }

# stopped_in_setup OUT RESULT : exit 0, no file, no hidden file, and the run said so.
stopped_in_setup() {
    read -r rc latency rss <<<"$2"
    [ "$rc" = rc=0 ] || { cat "$1.log"; fail "$1: $2"; }
    [ ! -e "$1" ] || fail "$1: a file was created: $(cat "$1.log")"
    [ -z "$(ls -A "$(dirname "$1")" | grep -F ".$(basename "$1")")" ] || fail "$1: a hidden file was left"
    grep -q "stopped during set-up (signal): nothing was recorded" "$1.log" ||
        { cat "$1.log"; fail "$1: the run does not say it stopped during set-up"; }
    latency=${latency#latency_s=} rss=${rss#maxrss_mib=}
}

# 1. A FIFO as the training images.
mkdir -p fifo
# make_data idx PATH MAGIC DIM...: an IDX header and the zeros it announces, gzip'd
make_data idx fifo/t10k-labels-idx1-ubyte.gz 0x801 10
make_data idx fifo/train-labels-idx1-ubyte.gz 0x801 10
make_data idx fifo/t10k-images-idx3-ubyte.gz 0x803 10 28 28
mkfifo fifo/train-images-idx3-ubyte
O=(--dataset mnist --data-dir fifo --iters 1 --warmup 0 --batch 4 --output bad.h5)
for n in 0 2; do
    set +e
    if [ $n = 0 ]; then timeout -k 5 60 "$DTBENCH" "${O[@]}" 2>err.txt; else RUN_TIMEOUT=60 run_refused 2 "${O[@]}" 2>err.txt; fi
    rc=$?
    set -e
    [ $rc = 2 ] || fail "a FIFO as data file ($n ranks): exit $rc (124: still waiting after 60 s)"
    [ "$(grep -c '^dtbench' err.txt)" = 1 ] || fail "not one line: $(cat err.txt)"
    grep -q "^dtbench: error: --data-dir: fifo/train-images-idx3-ubyte is a FIFO; expected a regular file" err.txt ||
        fail "$(cat err.txt)"
    [ -z "$(ls -A | grep -F bad.h5)" ] || fail "a file was left: $(ls -A)"
done
pass "a FIFO as data file: $(grep '^dtbench' err.txt)"

# 2. A large data set: 1,000,000 images of zeros (gzip: under 1 MB on disk, 784 MB in memory).
mkdir -p large
for split in t10k:10 train:1000000; do
    make_data idx "large/${split%:*}-labels-idx1-ubyte.gz" 0x801 "${split#*:}"
    make_data idx "large/${split%:*}-images-idx3-ubyte.gz" 0x803 "${split#*:}" 28 28 --level 1
done
out=$WORK/large.h5
res=$(probe --signal TERM --ranks 0 --when "fd:train-images-idx3" -- "$DTBENCH" --dataset mnist \
    --data-dir large --iters 5 --warmup 0 --batch 8 --output "$out" 2>"$out.log") || fail "$res"
stopped_in_setup "$out" "$res"
[ "${rss%.*}" -lt 700 ] || fail "the process held ${rss} MiB: it read the whole 784 MB data set"
pass "SIGTERM while 784 MB of data load: stopped after $latency s holding $rss MiB, no file"

# 3. FCN-5's set-up, alone (on 2 ranks its calibration is cut short the same way).
out=$WORK/fcn5.h5
res=$(probe --signal TERM --ranks 0 --when "rss:300" -- "$DTBENCH" --model fcn5 --dataset synthetic \
    --batch 16 --iters 5 --warmup 0 --output "$out" 2>"$out.log") || fail "$res"
stopped_in_setup "$out" "$res"
# parameters, gradients and momentum alone are 1350 MiB; the whole build also holds 450 MiB of
# initial values
[ "${rss%.*}" -lt 1400 ] || fail "the process held ${rss} MiB: FCN-5 was built whole"
pass "SIGTERM while FCN-5 is built: stopped after $latency s holding $rss MiB, no file"

# 4. A sampler that sleeps 1000 s between samples.
t0=$(date +%s)
run_np 1 --model lenet --dataset synthetic --batch 8 --iters 3 --warmup 0 --sample-hz 0.001 \
    --output "$WORK/slow.h5" >/dev/null
h5check finished "$WORK/slow.h5" --ranks 1 --iters 3
[ $(($(date +%s) - t0)) -lt 60 ] || fail "a run with --sample-hz 0.001 took $(($(date +%s) - t0)) s"
pass "--sample-hz 0.001: the run ended without waiting for the sampler"
