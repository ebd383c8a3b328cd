# test_gpu_matrix.sh - the GPU coverage matrix: `dtbench --device cuda --dry-run` (no GPU needed:
# a dry run plans the model and checks the options, it never initialises the backend) for every
# model x --parallel mode x --exchange strategy, against the table committed in docs/gpu.md
# ("GPU coverage matrix"). A cell "runs" must plan (exit 0); a cell "no: --opt ..." must be
# refused as a usage error (exit 2) with one line naming one of those options, and leave no file.
# Every model must run data-parallel with sync. Then --act-layout's choices and refusals. Skipped
# (77) when dtbench was built without the CUDA backend (--device cuda is then refused as unknown).
. "$(dirname "$0")/lib.sh"

DOC="$TESTS_SRCDIR/../docs/gpu.md"
[ -f "$DOC" ] || fail "no $DOC"
if ! "$DTBENCH" --device cuda --model lenet --dataset synthetic --dry-run >/dev/null 2>"$WORK/probe.err"; then
    if grep -q -- "--device" "$WORK/probe.err"; then
        echo "SKIP: dtbench was built without the CUDA backend: $(head -1 "$WORK/probe.err")"
        exit 77
    fi
fi

table=$(sed -n '/<!-- gpu-matrix: begin -->/,/<!-- gpu-matrix: end -->/p' "$DOC" | grep '^| ')
[ -n "$table" ] || fail "docs/gpu.md has no coverage matrix between its gpu-matrix markers"
IFS='|' read -r -a head <<<"$(sed -n 1p <<<"$table")"
# cell MODEL COLUMN WANT N: one dry run, checked against the table's cell (its files named N)
cell() {
    local model=$1 col=$2 want=$3 n=$4 parallel exchange extra rc=0 opt ok
    read -r parallel exchange extra <<<"$col"
    local args=(--model "$model" --dataset synthetic --device cuda --parallel "$parallel"
                --exchange "$exchange" --dry-run --output "$WORK/never$n.h5")
    [ -n "$extra" ] && args+=(--microbatches "${extra#mb}")
    timeout -k 5 60 "$DTBENCH" "${args[@]}" >"$WORK/out$n.txt" 2>"$WORK/err$n.txt" || rc=$?
    [ ! -e "$WORK/never$n.h5" ] || fail "$model $col: a dry run left a file"
    case "$want" in
    runs)
        [ $rc -eq 0 ] || fail "$model $col: the table says it runs; exit $rc: $(head -1 "$WORK/err$n.txt")"
        grep -q "FLOPs" "$WORK/out$n.txt" || fail "$model $col: no plan printed" ;;
    no:*)
        [ $rc -eq 2 ] || fail "$model $col: the table says refused; exit $rc"
        [ "$(grep -c 'dtbench: error:' "$WORK/err$n.txt")" -eq 1 ] || fail "$model $col: not one error line"
        ok=0
        for opt in ${want#no:}; do grep -q -- "error: $opt" "$WORK/err$n.txt" && ok=1; done
        [ $ok -eq 1 ] || fail "$model $col: refusal names none of ${want#no:}: $(head -1 "$WORK/err$n.txt")" ;;
    *) fail "$model $col: unknown cell '$want' in docs/gpu.md" ;;
    esac
}
# Three dry runs at a time: each spends most of its half second starting MPI and loading the CUDA
# libraries, not computing. A failing cell (its FAIL line above) fails the test once all have ended.
# The quick suite: every model in six columns (each kind of answer), every column for two models;
# the long checks: every cell.
all=0
long_part "the other cells of the GPU coverage matrix" && all=1
quick_cols=" data sync | data zero1 | model sync | model ssp | hybrid sync | hybrid zero2 "
cells=0
while IFS='|' read -r -a row; do
    model=$(echo "${row[1]}" | xargs)
    case "$model" in model | ---* | -*) continue ;; esac
    [ "$(echo "${row[2]}" | xargs)" = runs ] || fail "$model: the table must have it run data-parallel with sync"
    for ((i = 2; i < ${#head[@]}; i++)); do
        col=$(echo "${head[$i]}" | xargs) want=$(echo "${row[$i]}" | xargs)
        [ -n "$col" ] || continue
        [ $all = 1 ] || [[ $quick_cols == *" $col "* ]] || [ "$model" = lenet ] || [ "$model" = gpt2 ] ||
            continue
        if [ "$(jobs -rp | wc -l)" -ge 3 ]; then wait -n || true; fi
        { (cell "$model" "$col" "$want" $cells) || touch "$WORK/bad$cells"; } &
        cells=$((cells + 1))
    done
done <<<"$(echo "$table" | tail -n +2)"
wait
bad=$(find "$WORK" -maxdepth 1 -name 'bad*' | wc -l)
[ "$bad" -eq 0 ] || fail "$bad of $cells cells not as docs/gpu.md says (above)"
[ $cells -ge 9 ] || fail "only $cells cells checked"
pass "GPU coverage matrix: $cells model x parallel x exchange cells as docs/gpu.md says"

# --act-layout: NHWC 16-bit where the model and the precision allow it (docs/gpu.md "Activation
# format"), auto falling back to NCHW fp32 elsewhere, an explicit nhwc refused there
layout() { # layout WANT ARGS...: WANT runs, or the refusal's words
    local want=$1 rc=0
    shift
    "$DTBENCH" --dataset synthetic --device cuda --dry-run --output "$WORK/never.h5" "$@" \
        >"$WORK/out.txt" 2>"$WORK/err.txt" || rc=$?
    [ ! -e "$WORK/never.h5" ] || fail "$*: a dry run left a file"
    if [ "$want" = runs ]; then
        [ $rc -eq 0 ] || fail "$*: exit $rc: $(head -1 "$WORK/err.txt")"
    else
        [ $rc -eq 2 ] && [ "$(grep -c 'dtbench: error:' "$WORK/err.txt")" -eq 1 ] &&
            grep -q -- "error: --act-layout: 'nhwc' is not accepted with .*$want" "$WORK/err.txt" ||
            fail "$*: expected one --act-layout refusal naming '$want', exit $rc: $(cat "$WORK/err.txt")"
    fi
}
layout runs --model resnet50 --precision bf16 --act-layout nhwc
layout runs --model googlenet --precision fp16 --act-layout nhwc
layout runs --model lstm32 --precision bf16 # auto: NCHW fp32 for the LSTM
layout runs --model lenet --precision bf16 --act-layout nchw
layout "LSTM" --model lstm32 --precision bf16 --act-layout nhwc
layout "16-bit, for --precision bf16 or fp16" --model lenet --precision tf32 --act-layout nhwc
layout "pipeline stages" --model lenet --precision bf16 --act-layout nhwc --parallel model --ranks 2
pass "--act-layout: nhwc runs in bf16/fp16, auto falls back to NCHW fp32 for an LSTM, nhwc is refused in tf32, for an LSTM and for pipeline stages"
