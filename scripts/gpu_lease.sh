#!/usr/bin/env bash
# gpu_lease.sh - the one command a lent GPU machine runs: unpack the archive scripts/gpu_pack.sh
# made, run the session (scripts/gpu_session.sh) under a time limit, write its whole log folder as
# ONE archive into the folder the caller names, and print SUMMARY last.
#   scripts/gpu_lease.sh [--pack FILE] [--out DIR] [--budget S] [--only STEP,...] [--dry-run]
# --pack: the archive (default .gpu/dtbench-gpu-pack.tar.xz, git-ignored: name it in the device
#         tool's `carry`); --out: where the log archive goes (default $OUT, else .gpu/out);
# --budget: seconds after which the session starts no new step (default 450);
# --dry-run: on a machine without a GPU (a rehearsal): the same, with the machine's own MPI out of
#         PATH and LD_LIBRARY_PATH, so what runs is the pack alone; the GPU steps say they skip.
# Time on a 15-minute lease: start-up 1-2 min, unpacking ~10 s, the session --budget (its steps
# are limited so that none runs past it), archiving a few seconds, the trip back; so give the
# device call timeout_s = budget + 90 (at most 600). The archive leaves out result files over
# 2 MiB and is kept under 16 MiB (the device tool returns files up to that size). The exit status
# is the session's (0: every step that ran passed).
#
# The device `run` call, from the repository root with the pack built (scripts/gpu_pack.sh):
#   run(command="scripts/gpu_lease.sh --out \"$OUT\"", carry=[".gpu/dtbench-gpu-pack.tar.xz"],
#       timeout_s=540)
# The benchmark against PyTorch (bench/gpu_bench.sh: the cells that fit, in the order of what
# they tell; its results folder inside the archive, under bench/), after the GPU checks of the
# batch prefetch and the graphs (tests/test_gpu_step.sh):
#   run(command="scripts/gpu_lease.sh --only gpu-step,gpu-bench --budget 500 --out \"$OUT\"",
#       carry=[".gpu/dtbench-gpu-pack.tar.xz"], timeout_s=590)
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PACKFILE=$HERE/.gpu/dtbench-gpu-pack.tar.xz
DEST=${OUT:-$HERE/.gpu/out}
BUDGET=450
ONLY=""
DRY=0
while (($#)); do
    case $1 in
    --pack) PACKFILE=$(realpath -m "$2"); shift 2 ;;
    --out) DEST=$(realpath -m "$2"); shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h | --help) sed -n '2,25p' "$0"; exit 0 ;;
    *) echo "gpu_lease: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
say() { echo "gpu_lease: $*"; }
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
    for tool in /usr/bin/* /bin/*; do
        case $(basename "$tool") in mpi* | orte* | ompi* | opal* | prte* | pmix*) continue ;; esac
        [ -e "$hidden/$(basename "$tool")" ] || ln -s "$tool" "$hidden/$(basename "$tool")"
    done
    PATH=$(IFS=:; echo "${clean[*]}"):$hidden
    export PATH
    unset LD_LIBRARY_PATH OPAL_PREFIX PMIX_INSTALL_PREFIX
    for v in $(env | sed -n 's/^\(OMPI_MCA_[A-Za-z_]*\)=.*/\1/p; s/^\(PMIX_MCA_[A-Za-z_]*\)=.*/\1/p'); do unset "$v"; done
    say "dry run: mpirun on PATH: $(command -v mpirun || echo none) (the session puts the pack's first)"
fi

LOGDIR=$WORKDIR/gpu-session-$(hostname -s)-$(date +%Y%m%d-%H%M%S)
limit=$((BUDGET + 60))
timeout -k 15 "$limit" "$WORKDIR/dtbench-gpu/tree/scripts/gpu_session.sh" --log "$LOGDIR" \
    --budget "$BUDGET" ${ONLY:+--only "$ONLY"} >"$WORKDIR/session.out" 2>&1
rc=$?
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
