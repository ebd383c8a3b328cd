# test_gpu_records.sh - what the result file records about the GPU's kernel choices, checked on
# the CPU (no GPU needed): /ranks/kernel_choices (BackendOps.describe_kernels: cuDNN algorithms and
# math modes per convolution shape) is documented in docs/hdf5-layout.md; on a CPU run it names
# the BLAS each rank loaded, its core and why (kernels/cpu_blas.c), and that core fits the CPU
# (the tests no longer export OPENBLAS_CORETYPE: dtbench chooses it). With a GPU,
# tests/test_gpu_train.sh's runs carry the cuDNN choices.
. "$(dirname "$0")/lib.sh"

DOC="$TESTS_SRCDIR/../docs/hdf5-layout.md"
grep -q '^| `kernel_choices` |' "$DOC" ||
    fail "docs/hdf5-layout.md does not document /ranks/kernel_choices"
run_np 2 --model lenet --dataset synthetic --batch 16 --iters 2 --warmup 0 \
    --output "$WORK/cpu.h5" >"$WORK/cpu.log"
avx512=$(grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo 1 || echo 0)
"$PYTHON" - "$WORK/cpu.h5" "$avx512" <<'PY'
import sys, h5py
generic = {"prescott", "nehalem", "core2", "katmai", "unknown"}
with h5py.File(sys.argv[1], "r") as f:
    assert "device_name" in f["ranks"], list(f["ranks"])
    kc = [k.decode() for k in f["ranks/kernel_choices"][:]]
    assert len(kc) == 2, kc
    for text in kc:
        lines = dict(l.split(": ", 1) for l in text.splitlines())
        assert lines["blas"].startswith("OpenBLAS /"), lines
        core, why = lines["blas core"].split(": ", 1)
        assert why, lines
        if sys.argv[2] == "1":  # an AVX-512 CPU: whatever OpenBLAS's version, no generic kernels
            assert core.lower() not in generic, text
    print("ok: CPU run: kernel_choices per rank:", kc[0].replace("\n", " | "))
PY
pass "/ranks/kernel_choices documented; on CPU it names the BLAS core and why"
