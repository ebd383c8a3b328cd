# test_gpu_phases.sh - on a GPU the phases mean what they say: every model of the zoo on ONE rank,
# in every precision (fp32, tf32, bf16, fp16), with graphs as the defaults decide and, in bf16,
# off: every iteration's phases add up to no more than its total, and the exchange, with nothing
# to send, is at most 1% of the measured iterations' total (tests/check_h5.py phases). Skipped (77)
# without the CUDA backend or without a GPU; the same is checked on the CPU by
# tests/test_load_phases.sh. PHASES_MODELS, PHASES_PRECISIONS and PHASES_OFF_MODELS (the models
# also run with graphs off) narrow the matrix (default: all).
# A model and precision the program refuses (exit 2: e.g. fp16 where a layer cannot run it) is
# listed with the reason and not counted as a failure; any other failed run is.
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/gpu_lib.sh"

models=${PHASES_MODELS:-"lenet fcn5 fcn8 alexnet vgg16 googlenet resnet50 lstm32 lstm64"}
precisions=${PHASES_PRECISIONS:-"fp32 tf32 bf16 fp16"}
off_models=${PHASES_OFF_MODELS:-$models}
# batch MODEL: a batch that keeps the step short, but not so short that launches dominate
batch() {
    case $1 in
    lenet) echo 64 ;;
    alexnet | googlenet | resnet50) echo 32 ;;
    vgg16) echo 16 ;;
    *) echo 32 ;;
    esac
}
common="--dataset synthetic --warmup 3 --iters 3 --seed 5 --sample-hz 0 --conv-algo heuristic"
refused="" ran=0
for m in $models; do
    for p in $precisions; do
        for g in auto off; do
            [ "$g" = auto ] || { [ "$p" = bf16 ] && [[ " $off_models " == *" $m "* ]]; } ||
                continue
            name=$m-$p-graphs-$g
            rc=0
            run_np 1 --model "$m" --batch "$(batch "$m")" --precision "$p" --graphs "$g" \
                --device cuda $common --output "$WORK/$name.h5" >"$WORK/$name.log" 2>&1 || rc=$?
            if [ "$rc" = 2 ]; then
                refused="$refused$name: $(tail -n 1 "$WORK/$name.log")"$'\n'
                continue
            fi
            [ "$rc" = 0 ] || {
                cat "$WORK/$name.log"
                fail "$name: dtbench exited $rc"
            }
            h5check phases "$WORK/$name.h5" || fail "$name: (above)"
            ran=$((ran + 1))
        done
    done
done
[ -z "$refused" ] || printf 'refused by the program (not run):\n%s' "$refused"
[ "$ran" -gt 0 ] || fail "no run"
pass "$ran runs on one GPU: phases within each total, the exchange at most 1%"
