#!/usr/bin/env bash
# test_pipefail_lint.sh - no pipeline under `set -o pipefail` ends in a reader that may stop early:
# `cmd | grep -q`, `| grep -m N`, `| grep -l`, `| head`, `| read`. The reader exits at its first
# match or line, the writer's next write then dies of SIGPIPE, and pipefail turns that into the
# pipeline's failure: bench/gpu_bench.sh's `"$DTBENCH" --help | grep -q ...` declared a CUDA build
# "built without the CUDA backend" on the first GPU it ran on. Write `grep -q PATTERN <<<"$(cmd)"`
# (or a reader that reads everything: `sed -n 1p`, `find -print -quit`) instead.
# Checked: every *.sh and *.sbatch under scripts/, bench/, tests/ and slurm/ that sets pipefail
# or sources tests/lib.sh (which does); heredoc bodies and comments are skipped. Prints each
# offending line as FILE:LINE: TEXT and fails if there is one.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
files=()
for f in "$ROOT"/scripts/*.sh "$ROOT"/bench/*.sh "$ROOT"/tests/*.sh "$ROOT"/slurm/*.sbatch; do
    [ -f "$f" ] || continue
    if grep -qE 'set -[a-z]*o pipefail|set -o pipefail|lib\.sh"?$|/lib\.sh' "$f"; then files+=("$f"); fi
done
[ "${#files[@]}" -gt 5 ] || { echo "FAIL: found only ${#files[@]} scripts to check under $ROOT"; exit 1; }
found=$(awk '
    FNR == 1 { term = "" }
    term != "" { t = $0; if (strip) sub(/^\t+/, "", t); if (t == term) term = ""; next }
    {
        line = $0
        if (line ~ /^[ \t]*#/) next
        sub(/[ \t]#[^"'\'']*$/, "", line)           # a trailing comment without quotes
        # a heredoc starts (<<WORD, <<-WORD, <<"WORD", not <<<): skip its body
        if (match(line, /<<-?[ \t]*["'\'']?[A-Za-z_][A-Za-z_0-9]*/) && substr(line, RSTART, 3) != "<<<") {
            h = substr(line, RSTART, RLENGTH); strip = h ~ /^<<-/
            gsub(/^<<-?[ \t]*["'\'']?/, "", h); term = h
        }
        # a single | (not ||) into an early-exiting reader
        t = line; gsub(/\|\|/, "  ", t)
        if (t ~ /\|[ \t]*(grep([ \t]+-[-a-zA-Z0-9=]*)*[ \t]+(-[a-zA-Z]*[qlm]|--quiet|--silent|--max-count|--files-with-matches)|head([ \t]|$)|read([ \t]|$))/)
            printf "%s:%d: %s\n", FILENAME, FNR, $0
    }' "${files[@]}")
if [ -n "$found" ]; then
    echo "$found" | sed "s|^$ROOT/||"
    echo "FAIL: $(wc -l <<<"$found") pipeline(s) under pipefail end in a reader that may stop early (see the top of $0)"
    exit 1
fi
echo "ok: ${#files[@]} scripts under pipefail, no pipeline ending in an early-exiting reader"
