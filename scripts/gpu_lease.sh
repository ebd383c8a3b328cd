#!/usr/bin/env bash
# gpu_lease.sh - validate and benchmark dtbench on a GPU machine in one command, within a time
# budget: unpack the archive scripts/gpu_pack.sh made, print the plan (each step's estimated
# time), run the session (scripts/gpu_session.sh) so that it ends in time, write its whole log
# folder as ONE archive into the folder named, and print SUMMARY last.
#   scripts/gpu_lease.sh [--pack FILE] [--out DIR] [--budget S] [--only STEP,...] [--dry-run]
# --pack: the archive (default .gpu/dtbench-gpu-pack.tar.xz, git-ignored: copy it to the GPU
#         machine beside a checkout, or name it here); --out: where the log archive goes
#         (default $OUT, else .gpu/out);
# --budget: seconds the whole command may take (default 540: 9 minutes). Unpacking takes ~10 s,
#         archiving a few; the session gets the rest less 25 s, starts no step after it, and cuts
#         each step's limit to what is left, so the command ends within the budget; with every
#         step the plan is about 8 minutes (the steps' estimates: gpu_session.sh);
# --only: the named steps only (gpu_session.sh --plan lists them);
# --dry-run: on a machine without a GPU (a rehearsal): the same, with the machine's own MPI out of
#         PATH and LD_LIBRARY_PATH, so what runs is the pack alone; the GPU steps say they skip.
# The archive leaves out result files over 2 MiB and is kept under 16 MiB (result files are
# dropped first). The exit status is the session's (0: every step that ran passed).
# Typical use, from a checkout on the GPU machine with the archive copied into .gpu/:
#   scripts/gpu_lease.sh --out /tmp/gpu-logs              # everything, within 9 minutes
#   scripts/gpu_lease.sh --only gpu-step,gpu-bench --budget 300 --out /tmp/gpu-logs
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKFILE=$HERE/.gpu/dtbench-gpu-pack.tar.xz
DEST=${OUT:-$HERE/.gpu/out}
BUDGET=540
ONLY=""
DRY=0
while (($#)); do
    case $1 in
    --pack) PACKFILE=$(realpath -m "$2"); shift 2 ;;
    --out) DEST=$(realpath -m "$2"); shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h | --help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "gpu_lease: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
say() { echo "gpu_lease: $*"; }
[[ $BUDGET =~ ^[0-9]+$ ]] && ((BUDGET >= 60)) ||
    { say "error: --budget: '$BUDGET' is not accepted: expected seconds, at least 60"; exit 2; }
[ -f "$PACKFILE" ] || { say "error: no $PACKFILE (scripts/gpu_pack.sh makes it)"; exit 2; }
mkdir -p "$DEST"
WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/dtbench-lease.XXXXXX")
trap 'rm -rf "$WORKDIR"' EXIT
t0=$(date +%s)
tar -C "$WORKDIR" -xJf "$PACKFILE" || { say "error: cannot unpack $PACKFILE"; exit 2; }
say "unpacked $(du -sh "$PACKFILE" | cut -f1) in $(($(date +%s) - t0))s: $(sed -n 's/^commit: //p' "$WORKDIR/dtbench-gpu/MANIFEST")"

if [ "$DRY" = 1 ]; then # the machine's own MPI out of reach: the pack must do with its own
    clean=()
    IFS=: read -r -a parts <<<"$PATH"
    for p in "${parts[@]}"; do
        if [ -x "$p/mpirun" ] || [ -x "$p/ompi_info" ]; then continue; fi
        clean+=("$p")
    done
    hidden=$WORKDIR/hidden-bin # bash, coreutils and the rest from /usr/bin, without MPI
    mkdir -p "$hidden"
    # one ln for thousands of tools (a process each took ~30 s on a loaded machine); /bin's that
    # /usr/bin has already stay /usr/bin's
    ln -s -t "$hidden" /usr/bin/* 2>/dev/null
    ln -s -t "$hidden" /bin/* 2>/dev/null
    rm -f "$hidden"/mpi* "$hidden"/orte* "$hidden"/ompi* "$hidden"/opal* "$hidden"/prte* "$hidden"/pmix*
    PATH=$(IFS=:; echo "${clean[*]}"):$hidden
    export PATH
    unset LD_LIBRARY_PATH OPAL_PREFIX PMIX_INSTALL_PREFIX
    for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z_]*\)=.*/\1/p; s/^\(PMIX_MCA_[A-Za-z_]*\)=.*/\1/p'); do unset "$v"; done
    say "dry run: mpirun on PATH: $(command -v mpirun || echo none) (the session puts the pack's first)"
fi

SESSION=$WORKDIR/dtbench-gpu/tree/scripts/gpu_session.sh
session_budget=$((BUDGET - ($(date +%s) - t0) - 25)) # 25 s: the last step's kill, the archive
say "the plan (estimates from the H200 run of 2026-11-28; the session's budget ${session_budget} s):"
"$SESSION" --plan --budget "$session_budget" ${ONLY:+--only "$ONLY"} | sed 's/^/  /' | tee "$WORKDIR/plan.txt"
planned=$(sed -n 's/.*session: about \([0-9]*\) s.*/\1/p' "$WORKDIR/plan.txt")
so_far=$(($(date +%s) - t0))
say "in all about ${so_far} s so far + ${planned:-?} s of session + ~5 s of archive =" \
    "$((so_far + ${planned:-0} + 5)) s of the ${BUDGET} s budget"

LOGDIR=$WORKDIR/gpu-session-$(hostname -s)-$(date +%Y%m%d-%H%M%S)
limit=$((session_budget + 15)) # the session ends by itself before; this only stops a hang
timeout -k 5 "$limit" "$SESSION" --log "$LOGDIR" \
    --budget "$session_budget" ${ONLY:+--only "$ONLY"} >"$WORKDIR/session.out" 2>&1
rc=$?
cp "$WORKDIR/plan.txt" "$LOGDIR/PLAN.lease" 2>/dev/null
[ "$rc" = 124 ] || [ "$rc" = 137 ] && echo "TIME  session: stopped by gpu_lease after ${limit}s" >>"$LOGDIR/SUMMARY"
cp "$WORKDIR/session.out" "$LOGDIR/session.out" 2>/dev/null

# ONE archive, under 16 MiB: result files over 2 MiB stay behind, listed in LEFT_OUT
name=$(basename "$LOGDIR")
(cd "$WORKDIR" && find "$name" -type f -size +2M -printf '%P %s bytes\n') >"$LOGDIR/LEFT_OUT"
(cd "$WORKDIR" && find "$name" -type f -size -2049k -print0 | tar --null -T - -czf "$DEST/$name.tgz")
bytes=$(stat -c %s "$DEST/$name.tgz")
if ((bytes > 16 * 1024 * 1024)); then # keep the logs: drop the result files instead
    (cd "$WORKDIR" && find "$name" -type f ! -name '*.h5' ! -name '*.params' -print0 |
        tar --null -T - -czf "$DEST/$name.tgz")
    echo "result files (*.h5, *.params) left out: the archive was $bytes bytes" >>"$LOGDIR/LEFT_OUT"
fi
say "archive: $DEST/$name.tgz ($(du -h "$DEST/$name.tgz" | cut -f1); left out: $(grep -c . "$LOGDIR/LEFT_OUT") file(s)); session exit $rc, $(($(date +%s) - t0))s in all"
echo "==== SUMMARY ($name)"
cat "$LOGDIR/SUMMARY"
exit "$rc"
