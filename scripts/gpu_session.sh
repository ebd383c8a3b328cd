#!/usr/bin/env bash
# gpu_session.sh - one scripted validation and benchmark session on a lent GPU machine (issue 13),
# run from the archive scripts/gpu_pack.sh made:
#   tar xJf dtbench-gpu-pack.tar.xz && dtbench-gpu/tree/scripts/gpu_session.sh [--log DIR] [--budget S]
# Probes the machine (nvidia-smi -q, topology, driver, CUDA/cuDNN/NCCL versions and where the
# libraries are), sets up the packed Open MPI, libraries and h5py, then runs in order, each step
# under a timeout, logging everything to one folder (default gpu-session-<host>-<date>):
#   1. the CUDA kernel tests (test_cuda_kernels, test_cuda_zoo; the CPU test of the device
#      arithmetic), once as they are and once with NVIDIA_TF32_OVERRIDE=0 (a difference means TF32);
#   2. compute-sanitizer memcheck of the zoo kernel test, where compute-sanitizer is found;
#   3. one training step on the GPU against the CPU backend for every model of the zoo;
#   4. the GPU training and exchange tests (tests/test_gpu_train.sh, test_gpu_exchange.sh);
#   5. bench/gpu_bench.sh (dtbench against PyTorch on this GPU, NCCL bus bandwidth).
# No new step starts after --budget seconds (default 540, ~9 minutes); a step that cannot run
# says why in the log and SUMMARY, and the next one runs. Exit status 0 when every step that ran
# passed. Nothing here needs a package registry or the network.
set -uo pipefail
PACK=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TREE=$PACK/tree
LOG=$PWD/gpu-session-$(hostname -s)-$(date +%Y%m%d-%H%M%S)
BUDGET=540
while (($#)); do
    case $1 in
    --log) LOG=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "gpu_session: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$LOG"
START=$(date +%s)
SUMMARY=$LOG/SUMMARY
: >"$SUMMARY"
failed=0
note() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - ($(date +%s) - START))); }

# step NAME LIMIT CMD...: runs CMD under min(LIMIT, time left) seconds, output to LOG/NAME.log.
# Exit 77 counts as skipped (the command said why); 124/137 as timed out.
step() {
    local name=$1 limit=$2
    shift 2
    local rest
    rest=$(left)
    if ((rest < 15)); then
        note "SKIP  $name: the session's ${BUDGET}s budget is spent"
        return 0
    fi
    ((limit > rest)) && limit=$rest
    local t0=$(date +%s) rc=0
    echo "== $name (limit ${limit}s): $*" >"$LOG/$name.log"
    timeout -k 10 "$limit" "$@" >>"$LOG/$name.log" 2>&1 || rc=$?
    local dt=$(($(date +%s) - t0))
    case $rc in
    0) note "PASS  $name (${dt}s)" ;;
    77) note "SKIP  $name: $(grep -m1 -i 'skip' "$LOG/$name.log" || echo 'skipped')" ;;
    124 | 137) note "TIME  $name: stopped after ${limit}s (log: $name.log)"; failed=1 ;;
    *) note "FAIL  $name: exit $rc (${dt}s; last line: $(tail -1 "$LOG/$name.log"))"; failed=1 ;;
    esac
    return 0
}

# gpu_step: a step that needs a GPU (skipped, saying so, when dtbench sees none)
gpu_step() {
    if [ "${NGPUS:-0}" -lt 1 ]; then
        note "SKIP  $1: no GPU visible to dtbench (see probe.log)"
        return 0
    fi
    step "$@"
}

# ---- environment -------------------------------------------------------------------------------
BIN=$PACK/bin
ompi_lib=$(find "$PACK/ompi" -name 'libmpi.so*' -printf '%h\n' 2>/dev/null | head -1)
export OPAL_PREFIX=$PACK/ompi
export PATH=$PACK/ompi/bin:$PATH
export LD_LIBRARY_PATH=$PACK/lib:${ompi_lib:+$ompi_lib:}$PACK/ompi/pmix/lib:${LD_LIBRARY_PATH:-}
if [ -d "$PACK/ompi/pmix/lib" ]; then
    export PMIX_INSTALL_PREFIX=$PACK/ompi/pmix
    export PMIX_MCA_mca_base_component_path=$PACK/ompi/pmix/lib/pmix
fi
# one machine: shared memory and TCP only; no InfiniBand / OFI / UCX components were packed
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
export OMPI_MCA_rmaps_base_oversubscribe=1
# cuDNN and NCCL: the system's, else the ones PyTorch's wheels bring
PY=$(command -v python3 || echo python3)
for mod in nvidia.cudnn nvidia.nccl nvidia.cublas nvidia.cuda_runtime; do
    d=$("$PY" -c "import $mod, os; print(os.path.join(list($mod.__path__)[0], 'lib'))" 2>/dev/null) || continue
    [ -d "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
done
[ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
# h5py from the packed wheel, into the log folder (no index, no network)
PYLIB=$LOG/pylib
if ! "$PY" -c "import h5py" 2>/dev/null; then
    whl=$(ls "$PACK"/wheels/h5py-*.whl 2>/dev/null | head -1)
    if [ -n "$whl" ] && "$PY" -m pip install --no-index --no-deps --target "$PYLIB" "$whl" >"$LOG/h5py-install.log" 2>&1; then
        export PYTHONPATH=$PYLIB${PYTHONPATH:+:$PYTHONPATH}
    fi
fi
"$PY" -c "import h5py" 2>/dev/null && H5OK=1 || H5OK=0
export DTBENCH=$BIN/src/dtbench MPIRUN=mpirun TESTS_SRCDIR=$TREE/tests PYTHON=$PY
export CUDA_PROBE=$BIN/tests/cuda_probe BUSBW=$BIN/bench/nccl_busbw PROBE=$BIN/tests/cuda_probe
FMNIST=$LOG/fashion-mnist
if [ -d "$PACK/data/fashion-mnist" ]; then # the 10000-image slice serves as training set too
    mkdir -p "$FMNIST"
    for k in images-idx3 labels-idx1; do
        cp "$PACK/data/fashion-mnist/t10k-$k-ubyte.gz" "$FMNIST/t10k-$k-ubyte.gz"
        ln -sf "t10k-$k-ubyte.gz" "$FMNIST/train-$k-ubyte.gz"
    done
    export FMNIST_DIR=$FMNIST
fi

# ---- 0. probe ------------------------------------------------------------------------------------
{
    echo "# $(date -u +%FT%TZ) $(hostname)"
    cat "$PACK/MANIFEST" 2>/dev/null | head -8
    echo "# nvidia-smi"; nvidia-smi 2>&1 || echo "nvidia-smi: not found or failed"
    echo "# topology"; nvidia-smi topo -m 2>&1 || true
    echo "# nvcc"; nvcc --version 2>&1 || /usr/local/cuda/bin/nvcc --version 2>&1 || echo "no nvcc"
    echo "# torch"; "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None, 'gpus', torch.cuda.device_count())" 2>&1
    echo "# libraries"; ldconfig -p 2>/dev/null | grep -E 'libcudnn\.so|libnccl\.so|libcublas\.so|libcudart\.so|libnvidia-ml' || true
    echo "# what dtbench loads"; ldd "$DTBENCH" 2>&1
    echo "# what its GPU module loads"; ldd "$BIN/src/dtbench-cuda.so" 2>&1
    echo "# h5py: $H5OK  python: $("$PY" --version 2>&1)"
    echo "# compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo none)"
} >"$LOG/probe.log" 2>&1
nvidia-smi -q >"$LOG/nvidia-smi-q.log" 2>&1 || true
note "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo 'no nvidia-smi')"
if ldd "$DTBENCH" "$BIN/src/dtbench-cuda.so" 2>/dev/null | grep -q "not found"; then
    note "FAIL  libraries: dtbench cannot load $(ldd "$DTBENCH" "$BIN/src/dtbench-cuda.so" | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')"
    note "      (packed for CUDA $(grep -o 'CUDA [0-9.]*' "$PACK/MANIFEST" | head -1); re-pack with this machine's CUDA major version)"
    failed=1
fi
NGPUS=$("$CUDA_PROBE" 2>>"$LOG/probe.log") || NGPUS=0
note "GPUs visible to dtbench: $NGPUS; h5py: $([ $H5OK = 1 ] && echo yes || echo 'NO (checks reading result files are skipped)')"

# the packed Open MPI runtime: two ranks plan a model (no GPU needed)
step mpi-runtime 60 mpirun -np 2 "$DTBENCH" --device cpu --model lenet --dataset synthetic --dry-run

# ---- 1. kernel tests, with and without TF32 ------------------------------------------------------
step device-arith 60 "$BIN/tests/test_device_arith"
gpu_step cuda-kernels 120 "$BIN/tests/test_cuda_kernels"
gpu_step cuda-zoo 120 "$BIN/tests/test_cuda_zoo"
gpu_step cuda-kernels-notf32 120 env NVIDIA_TF32_OVERRIDE=0 "$BIN/tests/test_cuda_kernels"
gpu_step cuda-zoo-notf32 120 env NVIDIA_TF32_OVERRIDE=0 "$BIN/tests/test_cuda_zoo"
gpu_step cuda-precision 120 "$BIN/tests/test_cuda_precision" # --precision tf32/bf16/fp16 (issue 14)
for t in cuda-kernels cuda-zoo; do # identical numbers with TF32 forbidden: no TF32 was used
    if [ -f "$LOG/$t.log" ] && [ -f "$LOG/$t-notf32.log" ]; then
        if diff <(grep -v '^==' "$LOG/$t.log") <(grep -v '^==' "$LOG/$t-notf32.log") >"$LOG/$t-tf32.diff"; then
            note "PASS  $t: same results with NVIDIA_TF32_OVERRIDE=0 (no TF32)"
        else
            note "FAIL  $t: results change with NVIDIA_TF32_OVERRIDE=0: TF32 was used ($t-tf32.diff)"
            failed=1
        fi
    fi
done

# ---- 2. memcheck ---------------------------------------------------------------------------------
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$CS" ]; then
    gpu_step memcheck-zoo 150 "$CS" --tool memcheck --error-exitcode 3 "$BIN/tests/test_cuda_zoo"
else
    note "SKIP  memcheck: no compute-sanitizer on this machine"
fi

# ---- 3. one training step, GPU against CPU, every model -------------------------------------------
one_step() {
    local m=$1 b=$2 tol=$3 d=$LOG/step-$1
    mkdir -p "$d"
    for dev in cpu cuda; do
        mpirun -np 1 "$DTBENCH" --model "$m" --dataset synthetic --batch "$b" --iters 1 --warmup 0 \
            --lr 0.01 --seed 3 --device "$dev" --output "$d/$dev.h5" --save-model "$d/$dev.params" \
            || return 1
    done
    "$PY" "$TREE/tests/compare_params.py" "$tol" "$d/cpu.params" "$d/cuda.params"
}
for spec in lenet:64:1e-4 fcn5:32:1e-4 fcn8:32:1e-4 alexnet:16:1e-4 googlenet:8:1e-4 \
    resnet50:8:1e-4 vgg16:4:1e-4 lstm32:8:1e-4 lstm64:8:1e-4; do
    IFS=: read -r m b tol <<<"$spec"
    gpu_step "step-$m" 150 bash -c "$(declare -f one_step); LOG='$LOG' DTBENCH='$DTBENCH' PY='$PY' TREE='$TREE' one_step $m $b $tol"
done

# ---- 4. GPU training and exchange tests ------------------------------------------------------------
if [ $H5OK = 1 ]; then
    gpu_step gpu-train 240 bash "$TREE/tests/test_gpu_train.sh"
    gpu_step gpu-exchange 180 bash "$TREE/tests/test_gpu_exchange.sh"
    gpu_step gpu-precision 240 bash "$TREE/tests/test_gpu_precision.sh"
else
    note "SKIP  gpu-train, gpu-exchange: they read result files with h5py, which is missing"
fi
note "NCCL across GPUs: $([ "$NGPUS" -ge 2 ] && echo "exercised on $NGPUS GPUs of one machine" || echo 'NOT exercised (fewer than 2 GPUs: NCCL communicators of one rank only)')"

# ---- 5. benchmark against PyTorch --------------------------------------------------------------------
gpu_step gpu-bench 300 bash "$TREE/bench/gpu_bench.sh" --out "$LOG/bench" --rounds 3 --quick

note "log folder: $LOG ($(($(date +%s) - START))s)"
exit $failed
