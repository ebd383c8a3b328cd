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
