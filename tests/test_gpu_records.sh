# test_gpu_records.sh - what the result file records about the GPU's kernel choices, checked on
# the CPU (no GPU needed): /ranks/kernel_choices (BackendOps.describe_kernels: cuDNN algorithms and
# math modes per convolution shape) is documented in docs/hdf5-layout.md, and absent from a CPU
# run's file (the CPU backend makes no per-layer choices), while the rest of /ranks is there.
# With a GPU, tests/test_gpu_train.sh's runs carry it.
. "$(dirname "$0")/lib.sh"

DOC="$TESTS_SRCDIR/../docs/hdf5-layout.md"
grep -q '^| `kernel_choices` |' "$DOC" ||
    fail "docs/hdf5-layout.md does not document /ranks/kernel_choices"
run_np 2 --model lenet --dataset synthetic --batch 16 --iters 2 --warmup 0 \
    --output "$WORK/cpu.h5" >"$WORK/cpu.log"
"$PYTHON" - "$WORK/cpu.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    assert "device_name" in f["ranks"], list(f["ranks"])
    assert "kernel_choices" not in f["ranks"], "a CPU run records kernel choices"
print("ok: CPU run: /ranks has device_name, no kernel_choices")
PY
pass "/ranks/kernel_choices documented; absent on CPU"
