# test_gpu_records.sh - what the result file records about the GPU's kernel choices, checked on
# the CPU (no GPU needed): /ranks/kernel_choices (BackendOps.describe_kernels: cuDNN algorithms and
# math modes per convolution shape) is documented in docs/hdf5-layout.md; on a CPU run it names
# the BLAS each rank loaded, its core and why (kernels/cpu/cpu_blas.c), and that core fits the CPU
# (the tests no longer export OPENBLAS_CORETYPE: dtbench chooses it). With a GPU,
# tests/test_gpu_train.sh's runs carry the cuDNN choices.
. "$(dirname "$0")/lib.sh"

DOC="$TESTS_SRCDIR/../docs/hdf5-layout.md"
grep -q '^| `kernel_choices` |' "$DOC" ||
    fail "docs/hdf5-layout.md does not document /ranks/kernel_choices"
run_np 2 --model lenet --dataset synthetic --batch 16 --iters 2 --warmup 0 \
    --output "$WORK/cpu.h5" >"$WORK/cpu.log"
avx512=() # an AVX-512 CPU: whatever OpenBLAS's version, no generic kernels
grep -qw avx512f /proc/cpuinfo 2>/dev/null && avx512=(--avx512)
pycheck records blas "$WORK/cpu.h5" --ranks 2 ${avx512[@]+"${avx512[@]}"}
pass "/ranks/kernel_choices documented; on CPU it names the BLAS core and why"
