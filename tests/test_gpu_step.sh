# test_gpu_step.sh - batch prefetch and step replay on a GPU leave training what it was. Skipped
# (77) without the CUDA backend or without a GPU; the same rules are checked on the CPU by
# tests/test_count_device.sh.
#   1. LeNet, ResNet-8 and LSTM-32 in fp32, LeNet in bf16 and fp16, AlexNet (dropout: its
#      kernels read the step's sample origin from device memory) in fp32 and bf16, and the
#      transformer nanogpt-char in fp32 and bf16 (no convolutions: its plans list is empty): 6
#      iterations with the prefetch and graphs on (the defaults) against both off; the file says
#      what ran (prefetch on, graphs forward,backward). fp32: the parameters agree within 1e-5
#      (AlexNet's 61 million: 1e-4; strict fp32 admits cuDNN's atomic algorithms: two runs differ by fp32
#      rounding, 2.2e-8 on an H200). bf16 and fp16: bit for bit. Their rule admits only
#      deterministic algorithms (kernels/cuda/cuda_plan.h) and both runs choose by cuDNN's
#      heuristics (--conv-algo heuristic: timing could choose differently in each), so any
#      difference is the prefetch's or the graphs'; the two runs' choices are compared, and printed
#      on a failure. With atomic algorithms an H200 run ended 0.00193 apart in bf16: a 16-bit result
#      rounded from partial sums in another order moves by a whole 16-bit unit, which 6 steps
#      carry to the parameters;
#   2. the same with evaluations on Fashion-MNIST (the last test chunk smaller): the accuracies
#      agree, the run's stop after a --duration with a batch in flight ends cleanly.
. "$(dirname "$0")/lib.sh"
. "$TESTS_SRCDIR/gpu_lib.sh"

steps="--dataset synthetic --batch 32 --warmup 1 --iters 5 --lr 0.05 --seed 5 --sample-hz 0"
for spec in lenet:fp32:1e-5 resnet8:fp32:1e-5 lstm32:fp32:1e-5 lenet:bf16:0 lenet:fp16:0 \
    alexnet:fp32:1e-4 alexnet:bf16:0 nanogpt-char:fp32:1e-5 nanogpt-char:bf16:0; do
    IFS=: read -r m prec tol <<<"$spec"
    name=$m-$prec
    algo=()
    [ "$prec" = fp32 ] || algo=(--conv-algo heuristic)
    run_np 1 --model "$m" $steps --device cuda --precision "$prec" ${algo[@]+"${algo[@]}"} \
        --graphs off --prefetch off --output "$WORK/$name-eager.h5" \
        --save-model "$WORK/$name-eager.p" >/dev/null
    run_np 1 --model "$m" $steps --device cuda --precision "$prec" ${algo[@]+"${algo[@]}"} \
        --output "$WORK/$name.h5" --save-model "$WORK/$name.p" >/dev/null
    pycheck run marks "$WORK/$name.h5" --attr prefetch=on --attr graphs=forward,backward
    pycheck gpu conv-plans "$WORK/$name-eager.h5" "$WORK/$name-eager.choices"
    pycheck gpu conv-plans "$WORK/$name.h5" "$WORK/$name.choices"
    if [ "$prec" != fp32 ] && ! cmp -s "$WORK/$name-eager.choices" "$WORK/$name.choices"; then
        diff "$WORK/$name-eager.choices" "$WORK/$name.choices" || true
        fail "$name: the two runs chose different convolution algorithms by cuDNN's heuristics"
    fi
    "$PYTHON" "$TESTS_SRCDIR/compare_params.py" "$tol" "$WORK/$name-eager.p" "$WORK/$name.p" || {
        cat "$WORK/$name.choices"
        fail "$name: prefetched and replayed != eager (tolerance $tol)"
    }
    pass "$name: prefetched and replayed = eager within $tol ($(wc -l <"$WORK/$name.choices") convolution plans)"
done

fmnist_subset "$WORK/fm" 1000
ev="--model lenet --dataset fashion-mnist --data-dir $WORK/fm --batch 48 --warmup 1 --iters 8"
ev="$ev --eval-every 4 --sample-hz 0 --seed 5 --device cuda"
run_np 1 $ev --graphs off --prefetch off --output "$WORK/ev-eager.h5" >/dev/null
run_np 1 $ev --output "$WORK/ev.h5" >/dev/null
pycheck gpu same-accuracy "$WORK/ev-eager.h5" "$WORK/ev.h5" --evals 3 --atol 2e-3
pass "evaluations between prefetched, replayed steps: the same accuracies"
run_np 1 --model lenet --dataset synthetic --batch 64 --warmup 0 --iters 100000 --duration 2 \
    --device cuda --sample-hz 0 --output "$WORK/stop.h5" >/dev/null
pycheck run marks "$WORK/stop.h5" --attr stop_reason=duration
pass "a stop after --duration with a batch in flight: closed cleanly"
pass "prefetch and graphs on a GPU"
