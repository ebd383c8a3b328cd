# gpu_lib.sh - sourced by the GPU shell tests after lib.sh: exits 77 (skipped) unless dtbench was
# built with the CUDA backend and a GPU is visible; sets NGPUS.
CUDA_PROBE=${CUDA_PROBE:-$(dirname "$DTBENCH")/../tests/cuda_probe}
if [ ! -x "$CUDA_PROBE" ]; then
    echo "SKIP: dtbench was built without the CUDA backend"
    exit 77
fi
NGPUS=$("$CUDA_PROBE") || {
    echo "SKIP: no CUDA device visible"
    exit 77
}
echo "GPUs visible: $NGPUS"
# comm/'s test programs (tests/exchange_avg, grad_dtype_check, layer_compare) find the GPU parts
# in the GPU module as dtbench does (comm/parts.c); it lies beside the program, not beside them.
export DTBENCH_GPU_MODULE=${DTBENCH_GPU_MODULE:-$(dirname "$DTBENCH")/../src/dtbench-cuda.so}
