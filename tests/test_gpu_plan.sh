#!/usr/bin/env bash
# test_gpu_plan.sh - the GPU session fits its promise without a GPU to run it on:
#   1. scripts/gpu_session.sh --plan lists every default step with an estimate, and their total
#      fits in the session budget scripts/gpu_lease.sh gives with its defaults (540 s less the
#      unpacking, ~10 s, and its 25 s reserve): the whole command in 9 minutes;
#   2. every step of the plan, and the ones only --only runs, has a command in run_step (else the
#      session would fail it on the GPU machine: "no command for this step");
#   2b. the default plan has the 16-bit figures: the per-layer profiles of ResNet-50 and GoogLeNet
#      in bf16 at the batches of their benchmark cells, and the kernel microbenchmark
#      (bench/gpu_kernels.sh); every test script run_step names is a GPU test that exists (the
#      layer comparison ran tests/test_layer_compare.sh, the CPU's, for a while);
#   3. the benchmark's step is its headline cells (bench/gpu_bench.py --plan-only: ResNet-50 b256
#      bf16 first, 8 cells), and --only gpu-bench gives it every cell;
#   4. a --budget that is not a number of seconds is refused (exit 2, one line).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
S=$ROOT/scripts/gpu_session.sh
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

plan=$("$S" --plan) || fail "gpu_session.sh --plan: exit $?"
total=$(sed -n 's/^session: about \([0-9]*\) s.*/\1/p' <<<"$plan")
[ -n "$total" ] || fail "no total in the plan: $plan"
lease_budget=$(sed -n 's/^BUDGET=\([0-9]*\)$/\1/p' "$ROOT/scripts/gpu_lease.sh")
((lease_budget == 540)) || fail "gpu_lease.sh's default budget is $lease_budget s, not 540"
((total <= lease_budget - 10 - 25)) || fail "the plan takes $total s: over the $((lease_budget - 35)) s the session gets"
ok "the default plan: $total s, within the $((lease_budget - 35)) s the session gets of 540"

# the steps of STEPS, their needs; the patterns run_step's case knows (not its catch-all)
steps=$(sed -n '/^STEPS="$/,/^"$/p' "$S" | awk 'NF >= 4 && $1 != "STEPS=\"" {print $1, $4}')
patterns=$(sed -n '/^run_step() {$/,/^}$/p' "$S" | sed -n 's/^    \([a-z0-9*|. -]*[a-z0-9*]\))\( .*\)\{0,1\}$/\1/p' |
    grep -vx '\*' | tr '\n' '|' | sed 's/ //g; s/|$//')
[ -n "$patterns" ] || fail "no case patterns found in run_step"
eval "covered() { case \$1 in $patterns) return 0 ;; esac; return 1; }"
n=0
while read -r name needs; do
    covered "$name" || fail "step $name has no command in run_step"
    if [[ ,$needs, != *,extra,* && ,$needs, != *,nogpu,* ]]; then
        grep -q "^$name " <<<"$plan" || fail "step $name is not in the plan"
    fi
    n=$((n + 1))
done <<<"$steps"
((n >= 30)) || fail "only $n steps read from STEPS"
covered no-such-step && fail "run_step's patterns match anything"
ok "$n steps, each with a command; the default ones in the plan"

for st in kernel-bench profile-resnet50 profile-googlenet; do
    grep -q "^$st " <<<"$plan" || fail "no $st in the default plan"
done
body=$(sed -n '/^run_step() {$/,/^}$/p' "$S")
grep -q -- '--precision bf16' <<<"$(grep -A6 '^    profile-\*)' <<<"$body")" ||
    fail "the profile steps do not run bf16"
grep -q 'googlenet ] && b=128' <<<"$body" && grep -q 'b=256' <<<"$body" ||
    fail "the profile steps are not at the benchmark's batches (256, GoogLeNet 128)"
for f in $(grep -o 'tests/test_[a-z0-9_]*\.sh' <<<"$body" | sort -u); do
    [ -f "$ROOT/$f" ] || fail "run_step runs $f, which does not exist"
    [[ $f == tests/test_gpu_* ]] || fail "run_step runs $f, not a GPU test"
done
grep -q '^    layer-compare) .*tests/test_gpu_layer_compare\.sh' <<<"$body" ||
    fail "the layer-compare step does not run tests/test_gpu_layer_compare.sh"
ok "kernel-bench and the bf16 profiles in the plan; run_step's test scripts: GPU tests"

cells=$(python3 "$ROOT/bench/gpu_bench.py" --plan-only | grep -E '^[a-z0-9]+-b[0-9]+-' | cut -d' ' -f1)
[ "$(sed -n 1p <<<"$cells")" = resnet50-b256-bf16 ] && [ "$(grep -c . <<<"$cells")" = 8 ] ||
    fail "gpu_bench's default cells: $(tr '\n' ' ' <<<"$cells")"
for c in resnet50-b256-fp32 googlenet-b128-bf16 vgg16-b64-bf16 alexnet-b128-bf16 lenet-b64-fp32 \
    fcn5-b64-fp32 lstm32-b64-fp32; do
    grep -qx "$c" <<<"$cells" || fail "no headline cell $c"
done
only=$("$S" --plan --only gpu-bench --budget 2000 | awk '$1 == "gpu-bench" {print $2}')
all=$(python3 "$ROOT/bench/gpu_bench.py" --plan-only --all | sed -n 's/^total: est \([0-9]*\) s.*/\1/p')
((only == all + 5)) || fail "--only gpu-bench: estimate $only s, not every cell's $all + 5"
ok "gpu-bench: the 8 headline cells by default, every cell with --only gpu-bench"

out=$("$S" --plan --budget 5m 2>&1) && fail "--budget 5m accepted"
[ "$(grep -c . <<<"$out")" = 1 ] || fail "--budget 5m: $out"
ok "--budget 5m refused in one line"
