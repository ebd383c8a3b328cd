# test_transformer.sh - the transformers from the command line:
#   1. --dry-run prints GPT-2's published parameter count and a table of its rows;
#   2. nanogpt-char (6 blocks, 6 heads, width 384) on short sequences trains data-parallel on 2 and
#      4 ranks to the parameters of 1 rank (SGD: only the order of the gradient sums differs), and
#      the parameters moved;
#   3. it trains, every rank finishing every iteration with a finite loss, in every exchange
#      strategy (sync over mpi and hier, with --overlap, ssp, async with a parameter server,
#      mixed; the quick suite runs sync over mpi), with AdamW, its default;
#   4. a pipeline trains it to the parameters of 1 rank (GPipe on 2 stages, 1F1B on 4, 2 replicas
#      of 2 stages): the head on the last stage multiplies by its copy of the token table, whose
#      gradient goes to stage 0 and whose update comes back (src/run/pipeline_tied.c);
#   5. a sequence longer than the context is refused in one line (exit 2, no file).
. "$(dirname "$0")/lib.sh"
cd "$WORK"

# 1. the dry run
out=$("$DTBENCH" --model gpt2 --dataset synthetic --dry-run)
grep -q "total parameters: 124439808 " <<<"$out" || fail "gpt2: $(grep total <<<"$out")"
grep -q 'h.11.attn .*attention .*\[1024,1,768\]' <<<"$out" || fail "gpt2's table: $out"
grep -q 'lm_head .*lm_head .*\[1024,1,50257\]' <<<"$out" || fail "gpt2's head: $out"
out=$("$DTBENCH" --model gpt2 --dataset synthetic --seq-len 64 --dry-run)
grep -q "total parameters: 124439808 " <<<"$out" || fail "gpt2 --seq-len 64: $(grep total <<<"$out")"
grep -q 'lm_head .*\[64,1,50257\]' <<<"$out" || fail "gpt2 --seq-len 64: $out"
pass "gpt2's dry runs: 124,439,808 parameters, at 1024 and 64 tokens"

# 2. data-parallel = one process. Tolerance: float32 sums in another order over 4 SGD steps with
# momentum; the parameters are O(0.02..1), the updates O(1e-3).
TOL=2e-5
common="--model nanogpt-char --dataset synthetic --seq-len 16 --batch 8 --iters 4 --warmup 0 --seed 5"
sgd="--optimizer sgd --lr 0.05 --momentum 0.9"
ranks="1 2"
long_part "nanogpt-char data-parallel on 4 ranks" && ranks="1 2 4"
for np in $ranks; do
    run_np "$np" $common $sgd --output "dp$np.h5" --save-model "dp$np.params" >/dev/null
    h5check finished "dp$np.h5" --ranks "$np" --iters 4
done
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" $(printf 'dp%s.params ' $ranks)
run_np 1 $common $sgd --iters 1 --lr 0 --output init.h5 --save-model init.params >/dev/null
if "$PYTHON" "$TESTS_SRCDIR/compare_params.py" 1e-3 init.params dp1.params >/dev/null; then
    fail "nanogpt-char: training moved no parameter by more than 1e-3"
fi
pass "nanogpt-char: $(echo $ranks | sed "s/ /, /g") ranks train the same parameters"

# 3. every exchange strategy, with AdamW (the transformers' default optimizer)
# strategy NAME RANKS ARGS...: trained; sync: finished as one model; the others: every worker
# completed its iterations, and each strategy's invariants hold (check_exchange.py)
strategy() {
    local name=$1 np=$2
    shift 2
    run_np "$np" $common --output "$name.h5" "$@" >/dev/null
    case $name in
    sync*) h5check finished "$name.h5" --ranks "$np" --iters 4 ;;
    *) pycheck exchange invariants "$name.h5" ;;
    esac
}
strategy sync 2 --exchange sync --transport mpi
if long_part "nanogpt-char with sync over hier, ssp, async and mixed"; then
    strategy sync-hier 4 --exchange sync --transport hier --ranks-per-node 2 --overlap
    strategy ssp 2 --exchange ssp --staleness 1
    strategy async 3 --exchange async --ps-ranks 1
    strategy mixed 4 --exchange mixed --ranks-per-node 2
fi
pass "nanogpt-char trains with sync (mpi), and in the long checks over hier, ssp, async and mixed"

# 4. pipelines = one process (the same SGD run as 2.; 2 micro-batches per replica or more)
pipe() {
    local name=$1 np=$2
    shift 2
    run_np "$np" $common $sgd "$@" --output "$name.h5" --save-model "$name.params" >/dev/null
}
pipe gpipe2 2 --parallel model --schedule gpipe --microbatches 2
pipe 1f1b4 4 --parallel model --schedule 1f1b --microbatches 4
pipe hybrid 4 --parallel hybrid --stages 2 --microbatches 2
"$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$TOL" dp1.params gpipe2.params 1f1b4.params hybrid.params
pass "nanogpt-char: GPipe on 2 stages, 1F1B on 4 and 2 x 2 hybrid train the parameters of 1 rank"

# 5. refusals
O="--output bad.h5"
expect_bad 0 "--seq-len: 512 is not accepted" --model nanogpt-char --dataset synthetic --seq-len 512 $O
pass "a sequence beyond the context is refused in one line"
