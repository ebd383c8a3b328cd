#!/usr/bin/env bash
# start_stop.sh - how fast dtbench starts listening and how fast a stop during its set-up lands,
# for this tree's program against an older one (a peer measured in the same run):
#   held_ms     execve to the first system call that takes SIGTERM (rt_sigaction installing a
#               handler, or the front door's rt_sigprocmask blocking it), under strace -f -tt:
#               before it, a stop kills the process (median of --runs; strace slows every
#               system call, so compare the programs, not the absolute figure)
#   version_ms  wall time of `dtbench --version` (median of --runs)
#   stop_s      FCN-5 on one rank, SIGTERM once 300 MiB are resident (its model being built):
#               seconds to the process's end (median of --stops); setup_s beside it: the same
#               run's set-up unstopped, start to its first line "model fcn5: ..."
# and prints each figure with its ratio new/old.
#   bench/start_stop.sh [--old PATH] [--new PATH] [--runs N] [--stops N]
# Defaults: --new bin/dtbench of this tree (the front door) and src/dtbench (the program run
# directly) both measured; --old none (give e.g. a build of main: /work/main/src/dtbench). Needs
# strace and python3. Run on a quiet machine: the figures are times.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
OLD="" NEW=$here/bin/dtbench DIRECT=$here/src/dtbench RUNS=9 STOPS=3
while (($#)); do
    case $1 in
    --old) OLD=$2; shift 2 ;;
    --new) NEW=$2; DIRECT=""; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --stops) STOPS=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "start_stop: unknown option $1" >&2; exit 2 ;;
    esac
done
command -v strace >/dev/null || { echo "start_stop: strace is needed" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtbench-startstop.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{v[NR] = $1} END {print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

held_ms() { # PROGRAM
    for _ in $(seq "$RUNS"); do
        strace -f -tt -e trace=execve,rt_sigaction,rt_sigprocmask -o "$tmp/st" "$1" --version >/dev/null 2>&1
        awk '{split($2, t, ":"); s = t[1] * 3600 + t[2] * 60 + t[3]}
             NR == 1 {t0 = s}
             /rt_sigaction\(SIGTERM, \{sa_handler=0x/ || /rt_sigprocmask\(SIG_BLOCK, \[[^]]*TERM/ {
                 printf "%.3f\n", (s - t0) * 1000; exit }' "$tmp/st"
    done | median
}

version_ms() { # PROGRAM
    for _ in $(seq "$RUNS"); do
        python3 "$here/bench/proc_time.py" version-ms "$1"
    done | median
}

FCN5=(--model fcn5 --dataset synthetic --batch 16 --iters 3 --warmup 0)
stop_s() { # PROGRAM
    for i in $(seq "$STOPS"); do
        rm -f "$tmp/s$i.h5"
        python3 "$here/tests/stop_probe.py" --signal TERM --ranks 0 --when rss:300 -- "$1" \
            "${FCN5[@]}" --output "$tmp/s$i.h5" 2>/dev/null | sed -n 's/.*latency_s=\([0-9.]*\).*/\1/p'
    done | median
}

setup_s() { # PROGRAM
    for i in $(seq "$STOPS"); do
        rm -f "$tmp/u$i.h5"
        python3 "$here/bench/proc_time.py" setup-s "$1" "$tmp/u$i.h5" "${FCN5[@]}"
    done | median
}

progs=()
[ -z "$OLD" ] || progs+=("old=$OLD")
progs+=("new=$NEW")
[ -z "$DIRECT" ] || progs+=("direct=$DIRECT")
declare -A R
printf '%-8s %10s %11s %8s %8s  %s\n' program held_ms version_ms stop_s setup_s path
for p in "${progs[@]}"; do
    name=${p%%=*} path=${p#*=}
    R[$name.held]=$(held_ms "$path")
    R[$name.version]=$(version_ms "$path")
    R[$name.stop]=$(stop_s "$path")
    R[$name.setup]=$(setup_s "$path")
    printf '%-8s %10s %11s %8s %8s  %s\n' "$name" "${R[$name.held]}" "${R[$name.version]}" \
        "${R[$name.stop]}" "${R[$name.setup]}" "$path"
done
if [ -n "$OLD" ]; then
    for k in held version stop; do
        awk -v k="$k" -v n="${R[new.$k]}" -v o="${R[old.$k]}" \
            'BEGIN { if (o > 0) printf "%s: new/old = %.3f\n", k, n / o }'
    done
fi
awk -v s="${R[new.stop]}" -v u="${R[new.setup]}" \
    'BEGIN { if (u > 0) printf "stop during set-up / set-up (new): %.3f (%.2f s of %.2f s)\n", s / u, s, u }'
