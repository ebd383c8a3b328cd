#!/bin/bash
# test_gpu_module.sh - one build for CPU and GPU nodes. The program links no GPU library (CUDA
# runtime, cuBLAS(Lt), cuDNN, NCCL, NVML); the CUDA backend and NCCL live in the GPU module
# (src/dtbench-cuda.so, see comm/gpu_module.h), loaded only when a run asks for them:
#   1. no GPU library among what the program loads at start (ldd);
#   2. with the module's GPU libraries hidden (an empty file bind-mounted over each, in a mount
#      namespace of this test): a CPU run on 1 and 2 ranks trains and closes its file, exit 0;
#      --device cuda and --transport nccl are refused in one line naming the library, exit 2, no
#      file;
#   3. with the libraries but no GPU visible (CUDA_VISIBLE_DEVICES empty, so also on a GPU
#      machine): --device cuda is refused in one line, exit 2, no file, on 1 and 2 ranks; a dry
#      run (planning on a login node) still plans;
#   4. DTBENCH_GPU_MODULE naming a missing file, or a shared object that is not a module: refused
#      in one line, exit 2.
# Parts 2-4 need the module: a build configured without CUDA has none (said, not skipped: part 1
# is what such a build promises).
. "$(dirname "$0")/lib.sh"
cd "$WORK"
# The program behind the front door (bin/dtbench runs src/dtbench, see src/survival/start.c).
PROGRAM=$(dirname "$DTBENCH")/../src/dtbench
[ -x "$PROGRAM" ] || PROGRAM=$DTBENCH
RUN=(--model lenet --dataset synthetic --batch 8 --iters 2 --warmup 1)
GPU_LIBS='lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|nvidia-ml)\.so'

# 1. What the program loads at start.
loaded=$(ldd "$PROGRAM")
if grep -qE "$GPU_LIBS" <<<"$loaded"; then
    fail "dtbench loads GPU libraries at start: $(grep -E "$GPU_LIBS" <<<"$loaded" | awk '{print $1}' | tr '\n' ' ')"
fi
pass "dtbench loads no GPU library at start ($(wc -l <<<"$loaded") libraries)"

MODULE=$(dirname "$PROGRAM")/dtbench-cuda.so
if [ ! -e "$MODULE" ]; then
    pass "no GPU module next to dtbench (configured without CUDA): parts 2-4 do not apply"
    exit 0
fi

# one_line RC PATTERN [mpirun]: the last command's exit status RC was 2, it printed one line on
# stderr (err.txt) matching PATTERN (under mpirun: one dtbench line, beside mpirun's own), and
# left no bad.h5.
one_line() {
    [ "$1" = 2 ] || fail "exit $1, expected 2: $(cat err.txt)"
    [ "$(grep -c '^dtbench' err.txt)" = 1 ] || fail "not one dtbench line on stderr: $(cat err.txt)"
    [ "${3:-}" = mpirun ] || [ "$(grep -c . err.txt)" = 1 ] || fail "stderr is not one line: $(cat err.txt)"
    grep '^dtbench' err.txt | grep -E -- "$2" >/dev/null || fail "'$(cat err.txt)' does not match '$2'"
    [ ! -e bad.h5 ] || fail "a refused run left bad.h5"
}

# 2. The module's GPU libraries hidden.
libs=$(ldd "$MODULE" | awk -v re="$GPU_LIBS" '$1 ~ re && $3 ~ /^\// {print $3}')
[ -n "$libs" ] || fail "ldd finds no GPU library under the module: $(ldd "$MODULE")"
cat >hidden.sh <<'SH'
# hidden.sh LIB... -- CMD...: CMD with an empty file bind-mounted over each LIB (this mount
# namespace only).
set -e
: >empty.so
while [ "$1" != -- ]; do mount --bind empty.so "$1"; shift; done
shift
exec "$@"
SH
hidden() {
    # shellcheck disable=SC2086 # one library per word
    unshare -m bash hidden.sh $libs -- "$@"
}
if ! hidden true 2>mount.err; then
    fail "cannot hide the GPU libraries in a mount namespace (this test runs as root): $(cat mount.err)"
fi
hidden bash -c "ldd '$MODULE' | grep 'file too short\|not found' >/dev/null || ! '$DTBENCH' --device cuda --dry-run --dataset synthetic >/dev/null 2>&1" ||
    fail "the libraries were not hidden"
# A crash inside libpmix's own thread (a known race of Open MPI's PMIx, seen once in a loaded
# suite run: SIGSEGV in pmix_ptl_base_process_msg, no dtbench frame) is said and run again once;
# any other failure, or a second one, fails the test.
cpu_run() {
    rm -f "cpu$1.h5" .cpu"$1".h5.*.partial
    hidden timeout -k 5 120 "$MPIRUN" -np "$1" "$DTBENCH" "${RUN[@]}" --output "cpu$1.h5" >out.txt 2>&1
}
for n in 1 2; do
    if ! cpu_run $n; then
        grep -q 'libpmix\.so' out.txt && ! grep -q 'dtbench' <(grep '^\[.*\] \[ *[0-9]*\]' out.txt) ||
            fail "a CPU run on $n rank(s) without the GPU libraries: $(cat out.txt)"
        echo "note: libpmix crashed in its own thread on $n rank(s); run again once: $(cat out.txt)"
        cpu_run $n || fail "a CPU run on $n rank(s) without the GPU libraries: $(cat out.txt)"
    fi
    h5check finished "cpu$n.h5"
done
pass "a CPU run on 1 and 2 ranks trains with the GPU libraries hidden"
for opt in "--device cuda" "--transport nccl"; do
    set +e
    # shellcheck disable=SC2086 # the option and its value
    hidden "$DTBENCH" "${RUN[@]}" $opt --output bad.h5 >out.txt 2>err.txt
    rc=$?
    set -e
    one_line $rc "^dtbench: error: ${opt%% *}: '${opt#* }' is not accepted on .*: cannot load the GPU module: (/.*/)?lib[a-zA-Z_]+\.so"
    pass "$opt without the GPU libraries: $(cat err.txt)"
done

# 3. No GPU visible.
for n in 0 1 2; do
    set +e
    if [ $n = 0 ]; then
        CUDA_VISIBLE_DEVICES= "$DTBENCH" "${RUN[@]}" --device cuda --output bad.h5 >out.txt 2>err.txt
    else
        CUDA_VISIBLE_DEVICES= run_refused $n "${RUN[@]}" --device cuda --output bad.h5 >out.txt 2>err.txt
    fi
    rc=$?
    set -e
    one_line $rc "^dtbench: error: --device: 'cuda' is not accepted on .*: no GPU is visible" \
        "$([ $n = 0 ] || echo mpirun)"
done
pass "--device cuda without a GPU, alone and on 1 and 2 ranks: $(cat err.txt)"
CUDA_VISIBLE_DEVICES= "$DTBENCH" "${RUN[@]}" --device cuda --dry-run >out.txt 2>err.txt ||
    fail "--dry-run --device cuda without a GPU: $(cat err.txt)"
grep -q FLOPs out.txt || fail "--dry-run --device cuda printed no plan"
pass "--dry-run --device cuda plans without a GPU"

# 4. A module that is not there, or not a module.
for m in "$WORK/nothing.so" "$(ldd "$PROGRAM" | awk '$1 ~ /^libz\.so/ {print $3}')"; do
    set +e
    DTBENCH_GPU_MODULE=$m "$DTBENCH" "${RUN[@]}" --device cuda --output bad.h5 >out.txt 2>err.txt
    rc=$?
    set -e
    one_line $rc "^dtbench: error: --device: 'cuda' is not accepted on .*(cannot load the GPU module|is not a dtbench GPU module)"
    pass "DTBENCH_GPU_MODULE=$m: $(cat err.txt)"
done
