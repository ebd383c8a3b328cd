#!/usr/bin/env bash
# gpu_session.sh - one scripted validation and benchmark session on a GPU machine, run from the
# archive scripts/gpu_pack.sh made (scripts/gpu_lease.sh unpacks it and calls this):
#   dtbench-gpu/tree/scripts/gpu_session.sh [--log DIR] [--budget S] [--only STEP,...] [--plan]
# Probes the machine, sets up the packed Open MPI (quiet, PMIx plugins of its own build only),
# libraries and h5py, then runs the steps of STEPS below in order, each under a time limit, every
# output in one folder (default gpu-session-<host>-<date>): the cheap kernel tests first, then
# the GPU tests of the whole program, memcheck, one training step per model GPU against CPU, the
# layer-by-layer comparison of every model in every precision, the benchmark's headline cells
# against PyTorch (bench/gpu_bench.sh; without a GPU its rehearsal on the CPU instead), the
# memory-bound kernels alone against PyTorch's (bench/gpu_kernels.sh) and the per-layer profiles
# of ResNet-50 and GoogLeNet in bf16 at their benchmark batches. The order is the order of what
# each tells: no step starts after --budget seconds (default 490), so a budget that runs out
# loses the last ones. Each step's estimate comes from the H200 run of 2026-11-28 (docs/gpu.md);
# with every step they add up to about 8 minutes. --plan prints the steps, their estimates and
# limits, and stops. A step that cannot run says why. SUMMARY, printed last, has one line per
# step. Exit status 0 when every step that ran passed. --only runs the named steps (and the
# probe), also those the default leaves out (step-fcn8, step-lstm64, step-alexnet,
# gpu-bench-gpt2, cuda-algos). Nothing
# here needs a package registry or the network.
set -uo pipefail
PACK=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TREE=$PACK/tree
LOG=$PWD/gpu-session-$(hostname -s)-$(date +%Y%m%d-%H%M%S)
BUDGET=490
ONLY=""
PLAN=0
while (($#)); do
    case $1 in
    --log) LOG=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --only) ONLY=",$2,"; shift 2 ;;
    --plan) PLAN=1; shift ;;
    -h | --help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "gpu_session: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ $BUDGET =~ ^[0-9]+$ ]] ||
    { echo "gpu_session: --budget: '$BUDGET' is not accepted: expected seconds" >&2; exit 2; }
# the tree: the unpacked archive's (PACK/tree), or the repository this script is in (--plan)
[ -d "$TREE/bench" ] || TREE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# ---- the steps, in the order they run ----------------------------------------------------------
# name, estimate (s), limit (s), what the step needs, what it checks. Estimates: the step's time
# in the H200 run of 2026-11-28 (its session logs); for a step cut short there, its time so far
# and the rest at the same pace (gpu-train: 5 of its 8 dtbench runs in 14 s; gpu-step: 8 of 14
# in 13 s; layer-compare: 22 of 53 comparisons in 84 s, the rest on small inputs at ~1.5 s); for
# a step made smaller since, its new size (step-vgg16 at batch 2: half of the CPU's 7 s;
# cuda-algos at ResNet-50's batch 2: a quarter of its float64 references, 68 s at batch 8);
# gpu-phases: short dtbench runs at gpu-precision's pace (4 runs in 8 s), 1.5 s each;
# layer-compare: 5 s more for its CPU 16-bit references (tests/check_chained.py);
# gpu-bench's from its own plan (bench/gpu_bench.py --plan-only) and 5 s of set-up (40 s in its
# limit). Not yet run on a GPU, estimated: kernel-bench, one round of 10 calls a case (PyTorch's
# start, 12 s in gpu_bench's plan, and 24 cases a side at ~0.2 s of allocation and calls);
# profile-resnet50 and -googlenet, 4 iterations each at the benchmark cell's pace and start-up
# (gpu_bench.py's DT_START_S); gpu-phases: 26 runs at 1.5 s. Needs: gpu (skipped without one),
# cpu (runs anywhere), h5 (reads result files: h5py), cs (compute-sanitizer), nogpu (only without
# a GPU), extra (only when --only names it).
STEPS="
mpi-runtime          2  30 cpu     the packed Open MPI runtime: 2 ranks plan a model, quietly
device-arith         1  30 cpu     the kernels' per-element arithmetic = the CPU backend's
cuda-plan            1  30 cpu     cuBLAS argument mapping; strict fp32's algorithm rule
layer-compare-cpu    1  30 cpu     the packed layer tool: LeNet, CPU against float64
device-nhwc          1  30 cpu     the NHWC 16-bit kernels' threads played on the CPU
cuda-kernels         4  60 gpu     every kernel against float64 or tests/ref_*.c
cuda-kernels-notf32  4  60 gpu     the same with NVIDIA_TF32_OVERRIDE=0
cuda-zoo             2  60 gpu     every zoo operation, GPU = CPU
cuda-zoo-notf32      2  60 gpu     the same with NVIDIA_TF32_OVERRIDE=0
cuda-kernels-tf32    1  30 cpu     a result that moves without TF32 was computed with it
cuda-zoo-tf32        1  30 cpu     the same for the zoo
cuda-precision       6  60 gpu     tf32, bf16, fp16 products within their bounds
cuda-nhwc            2  60 gpu     every NHWC 16-bit kernel against the CPU
cuda-transformer     3  60 gpu     the transformer's kernels, AdamW, in-place softmax vs float64, CPU
gpu-train           22  90 gpu,h5  GPU = CPU iterations; a run's phases, loss, metadata; 2 ranks
gpu-step            25  90 gpu,h5  prefetched and replayed steps = eager ones; evaluations; a stop
gpu-phases          39 120 gpu,h5  one rank, each model and precision: phases <= total, exch. <= 1%
gpu-exchange        12  60 gpu,h5  exchanges on GPU buffers: exact averages
gpu-precision        8  60 gpu,h5  LeNet in tf32, bf16, fp16 within 1 point of fp32
memcheck-zoo         2  60 gpu,cs  compute-sanitizer memcheck of test_cuda_zoo
memcheck-nhwc        3  60 gpu,cs  ... of test_cuda_nhwc
memcheck-step        3  60 gpu,cs  ... of a LeNet run with graphs and prefetch
step-resnet50       12  60 gpu     one dtbench step GPU = CPU, kernel math from the file (b8)
step-lenet           3  30 gpu     ... LeNet b64
step-googlenet       7  60 gpu     ... GoogLeNet b8
step-vgg16          10  60 gpu     ... VGG16 b2
step-alexnet         8  60 gpu,extra ... AlexNet b16
step-fcn5           10  60 gpu     ... FCN-5 b32
step-lstm32          3  30 gpu     ... LSTM-32 b8
step-fcn8           10  60 gpu,extra ... FCN-8 b32 (FCN-5's layer kinds)
step-lstm64          3  30 gpu,extra ... LSTM-64 b8 (LSTM-32's layers, 64 steps)
layer-compare      135 200 gpu     every model in every precision, layer by layer, GPU against CPU
gpu-bench            0   0 gpu,h5  the headline cells against PyTorch (every cell if --only names it)
gpu-bench-gpt2       0   0 gpu,h5,extra GPT-2 8 x 1024 tokens, bf16, against PyTorch's flash attention: tokens/s
gpu-bench-rehearsal 20 120 nogpu,h5 the benchmark's script on the CPU (no GPU: nothing measured)
kernel-bench        20  90 gpu     batch norm, pooling, LRN alone against PyTorch's
profile-resnet50     5  60 gpu     ResNet-50 bf16 b256 (its benchmark cell), layer by layer
profile-googlenet    3  60 gpu     GoogLeNet bf16 b128 (its benchmark cell), layer by layer
cuda-algos          25  90 gpu,extra every cuDNN algorithm against float64 (ResNet-50 at batch 2)
"
# step-fcn8 and step-lstm64 are left out by default (13 s): their layers are FCN-5's and
# LSTM-32's, and the layer comparison checks both models. gpu-bench-gpt2 (about 35 s: the
# benchmark's own plan) too: the default session is at its budget already; --only names it.
# step-vgg16 runs at batch 2, as the layer comparison does (batch 4 took 18 s, 7 of them the CPU's
# step). To fit the kernel benchmark and the 16-bit profiles, step-alexnet (AlexNet's layers: the
# layer comparison in every precision, its whole step: gpu-bench's cell and gpu-step's dropout
# replay) and cuda-algos (every algorithm's accuracy; the chosen ones are in the layer
# comparison) run only when --only names them.
PROBE_S=8 # the probe and the set-up before the first step (7 s in the H200 run)

# gpu-bench: the headline cells; named by --only, every cell as far as the budget allows
BENCH_ARGS=()
[[ $ONLY == *",gpu-bench,"* ]] && BENCH_ARGS=(--all)
GPT2_ARGS=(--models gpt2 --configs bf16) # gpu-bench-gpt2's cell
bench_plan() { # bench_plan ARGS: the total of gpu_bench.py's plan with ARGS, in seconds
    local t
    t=$(python3 "$TREE/bench/gpu_bench.py" --plan-only "$@" 2>/dev/null |
        sed -n 's/^total: est \([0-9]*\) s.*/\1/p')
    echo "${t:-140}"
}
needs() { [[ ,$2, == *",$1,"* ]]; } # needs WHAT NEEDS: whether a step's NEEDS name WHAT
wanted() { # wanted NAME NEEDS: asked for (--only), or in the default run
    if [ -n "$ONLY" ]; then [[ $ONLY == *",$1,"* ]]; else ! needs extra "$2"; fi
}
print_plan() { # the steps that run on a GPU machine, their estimates, limits and running total
    local name est limit needs what t=$PROBE_S bench
    bench=$(bench_plan "${BENCH_ARGS[@]}")
    printf '%-20s %5s %6s %8s  %-9s %s\n' step est limit "by then" needs "what it checks"
    printf '%-20s %5s %6s %8s  %-9s %s\n' probe "$PROBE_S" - "$PROBE_S" "" \
        "versions, libraries, what dtbench loads"
    while read -r name est limit needs what; do
        [ -n "$name" ] && wanted "$name" "$needs" && ! needs nogpu "$needs" || continue
        if [ "$name" = gpu-bench ]; then
            est=$((bench + 5)) limit=$((bench + 40))
            ((est <= BUDGET - t)) || est=$((BUDGET - t)) # --all: as far as the budget allows
        elif [ "$name" = gpu-bench-gpt2 ]; then
            est=$(($(bench_plan "${GPT2_ARGS[@]}") + 5)) limit=$((est + 35))
        fi
        t=$((t + est))
        printf '%-20s %5s %6s %8s  %-9s %s\n' "$name" "$est" "$limit" "$t" "$needs" "$what"
    done <<<"$STEPS"
    local over=""
    ((t <= BUDGET)) || over=": the last steps will not run"
    echo "session: about ${t} s on a GPU machine; no step starts after --budget ${BUDGET} s$over"
}
if [ "$PLAN" = 1 ]; then
    print_plan
    exit 0
fi

mkdir -p "$LOG"
LOG=$(cd "$LOG" && pwd)
START=$(date +%s)
SUMMARY=$LOG/SUMMARY
: >"$SUMMARY"
failed=0
note() { echo "$*" >>"$SUMMARY"; echo "$*"; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
cut_to_left() { local r; r=$(left); echo $(($1 < r ? $1 : r)); }

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
    local t0 rc=0 dt
    t0=$(date +%s)
    echo "== $name (limit ${limit}s): $*" >"$LOG/$name.log"
    timeout -k 10 "$limit" "$@" </dev/null >>"$LOG/$name.log" 2>&1 || rc=$?
    dt=$(($(date +%s) - t0))
    case $rc in
    0) note "PASS  $name (${dt}s)" ;;
    77) note "SKIP  $name: $(grep -m1 -i 'skip' "$LOG/$name.log" || echo 'skipped')" ;;
    124 | 137) note "TIME  $name: stopped after ${limit}s (log: $name.log)"; failed=1 ;;
    *) note "FAIL  $name: exit $rc (${dt}s; last line: $(tail -1 "$LOG/$name.log"))"; failed=1 ;;
    esac
    return 0
}

# ---- environment -------------------------------------------------------------------------------
BIN=$PACK/bin
ompi_lib=$(find "$PACK/ompi" -name 'libmpi.so*' -printf '%h\n' -quit 2>/dev/null)
export OPAL_PREFIX=$PACK/ompi
export PATH=$PACK/ompi/bin:$PATH
export LD_LIBRARY_PATH=$PACK/lib:${ompi_lib:+$ompi_lib:}$PACK/ompi/pmix/lib:${LD_LIBRARY_PATH:-}
# The packed runtime alone: PMIx loads no plugin library from anywhere (the packed libpmix has
# its components built in; a machine with another PMIx under the packed one's original prefix
# made every mpirun print a dozen "undefined symbol" lines), no compression banner, load errors
# not shown; Open MPI's plugins only from the pack (OPAL_PREFIX relocates its install tree).
export PMIX_MCA_mca_base_component_disable_dlopen=1 PMIX_MCA_pcompress_base_silence_warning=1
export PMIX_MCA_mca_base_component_show_load_errors=0 OMPI_MCA_mca_base_component_show_load_errors=0
if [ -d "$PACK/ompi/pmix/lib" ]; then
    export PMIX_INSTALL_PREFIX=$PACK/ompi/pmix
    export PMIX_MCA_mca_base_component_path=$PACK/ompi/pmix/lib/pmix
fi
ompi_plugins=$(find "$PACK/ompi" -name 'mca_btl_self.so' -printf '%h\n' -quit 2>/dev/null)
[ -n "$ompi_plugins" ] && export OMPI_MCA_mca_base_component_path=$ompi_plugins
export HWLOC_PLUGINS_PATH=$PACK/ompi/hwloc-plugins # none: not the machine's (another hwloc's)
# one machine: shared memory and TCP only; no InfiniBand / OFI / UCX components were packed
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mtl=^ofi,psm,psm2 OMPI_MCA_osc=^ucx
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 HDF5_USE_FILE_LOCKING=FALSE
export OMPI_MCA_rmaps_base_oversubscribe=1
# OpenBLAS too old for the CPU falls back to generic kernels: pick the vector ones it has
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=SkylakeX
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null; then export OPENBLAS_CORETYPE=Haswell; fi
fi
# cuDNN and NCCL: the system's, else the ones PyTorch's wheels bring
PY=$(command -v python3 || echo python3)
for mod in nvidia.cudnn nvidia.nccl nvidia.cublas nvidia.cuda_runtime; do
    d=$("$PY" -c "import $mod, os; print(os.path.join(list($mod.__path__)[0], 'lib'))" 2>/dev/null) || continue
    [ -d "$d" ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$d
done
[ -d /usr/local/cuda/lib64 ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:/usr/local/cuda/lib64
# h5py from the packed wheel, beside the log folder (no index, no network; not archived)
PYLIB=$LOG.pylib
if ! "$PY" -c "import h5py" 2>/dev/null; then
    whls=("$PACK"/wheels/h5py-*.whl)
    if [ -f "${whls[0]}" ] && "$PY" -m pip install --no-index --no-deps --target "$PYLIB" "${whls[0]}" >"$LOG/h5py-install.log" 2>&1; then
        export PYTHONPATH=$PYLIB${PYTHONPATH:+:$PYTHONPATH}
    fi
fi
"$PY" -c "import h5py" 2>/dev/null && H5OK=1 || H5OK=0
export DTBENCH=$BIN/src/dtbench MPIRUN=mpirun TESTS_SRCDIR=$TREE/tests PYTHON=$PY
export CUDA_PROBE=$BIN/tests/cuda_probe BUSBW=$BIN/bench/nccl_busbw PROBE=$BIN/tests/cuda_probe
export LAYER_COMPARE=$BIN/tests/layer_compare
FMNIST=$LOG.fashion-mnist # beside the log folder (not archived)
if [ -d "$PACK/data/fashion-mnist" ]; then # the 10000-image slice serves as training set too
    mkdir -p "$FMNIST"
    for k in images-idx3 labels-idx1; do
        cp "$PACK/data/fashion-mnist/t10k-$k-ubyte.gz" "$FMNIST/t10k-$k-ubyte.gz"
        ln -sf "t10k-$k-ubyte.gz" "$FMNIST/train-$k-ubyte.gz"
    done
    export FMNIST_DIR=$FMNIST
fi

# ---- 1. probe ------------------------------------------------------------------------------------
{
    echo "# $(date -u +%FT%TZ) $(hostname)"
    sed -n 1,8p "$PACK/MANIFEST" 2>/dev/null
    echo "# nvidia-smi"; nvidia-smi 2>&1 || echo "nvidia-smi: not found or failed"
    echo "# topology"; nvidia-smi topo -m 2>&1 || true
    echo "# nvcc"; nvcc --version 2>&1 || /usr/local/cuda/bin/nvcc --version 2>&1 || echo "no nvcc"
    echo "# torch"; "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'cudnn', torch.backends.cudnn.version(), 'nccl', torch.cuda.nccl.version() if torch.cuda.is_available() else None, 'gpus', torch.cuda.device_count())" 2>&1
    echo "# libraries"; ldconfig -p 2>/dev/null | grep -E 'libcudnn\.so|libnccl\.so|libcublas\.so|libcudart\.so|libnvidia-ml'
    echo "# what dtbench loads"; ldd "$DTBENCH" 2>&1
    echo "# what its GPU module loads"; ldd "$BIN/src/dtbench-cuda.so" 2>&1
    echo "# mpirun: $(command -v mpirun)"
    echo "# h5py: $H5OK  python: $("$PY" --version 2>&1)  OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-}"
    echo "# compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo none)"
} >"$LOG/probe.log" 2>&1
nvidia-smi -q >"$LOG/nvidia-smi-q.log" 2>&1 || true
note "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed -n 1p || echo 'no nvidia-smi')"
note "dtbench: $("$DTBENCH" --version 2>&1 | sed -n 1p)"
missing=$(ldd "$DTBENCH" "$BIN/src/dtbench-cuda.so" 2>/dev/null | awk '/not found/ {print $1}' | sort -u | tr '\n' ' ')
if [ -n "$missing" ]; then
    note "FAIL  libraries: dtbench cannot load $missing"
    note "      (packed for $(grep -o 'CUDA [0-9.]*' "$PACK/MANIFEST" | sed -n 1p); re-pack with this machine's CUDA major version)"
    failed=1
fi
NGPUS=$("$CUDA_PROBE" 2>>"$LOG/probe.log") || NGPUS=0
note "GPUs visible to dtbench: $NGPUS; h5py: $([ $H5OK = 1 ] && echo yes || echo 'NO (checks reading result files are skipped)')"

# ---- the steps ------------------------------------------------------------------------------------
# Tolerance 1e-4 on the parameters after one step (lr 0.01), except ResNet-50 at batch 8: there the
# CPU backend against itself with float64 convolutions already differs by 5e-3 (ReLU and max-pooling
# switches amplified through batch norm; docs/gpu.md), so 2e-2; layer-compare checks it properly.
one_step() {
    local m=$1 b=$2 tol=$3 d=$LOG/step-$1
    mkdir -p "$d"
    for dev in cpu cuda; do
        # shellcheck disable=SC2046 # --threads (the CPU backend's option) or nothing
        mpirun -np 1 "$DTBENCH" --model "$m" --dataset synthetic --batch "$b" --iters 1 --warmup 0 \
            --lr 0.01 --seed 3 --device "$dev" --sample-hz 0 --output "$d/$dev.h5" \
            --save-model "$d/$dev.params" $([ "$dev" = cpu ] && echo --threads "$(nproc)") ||
            return 1 # (--threads: read by the CPU backend only)
    done
    "$PY" "$TREE/tests/compare_params.py" "$tol" "$d/cpu.params" "$d/cuda.params" || return 1
    [ "$H5OK" = 0 ] || "$PY" "$TREE/tests/check_kernel_choices.py" "$d/cuda.h5"
}
one_step_script() { # the script of step-MODEL: batch and tolerance per model
    local m=$1 b=8 tol=1e-4
    case $m in resnet50) tol=2e-2 ;; lenet) b=64 ;; vgg16) b=2 ;; alexnet) b=16 ;; fcn5 | fcn8) b=32 ;; esac
    echo "$(declare -f one_step); LOG='$LOG' DTBENCH='$DTBENCH' PY='$PY' TREE='$TREE' H5OK=$H5OK one_step $m $b $tol"
}

# run_step NAME LIMIT: the step's command, under step()
run_step() {
    local n=$1 l=$2 t=$BIN/tests
    case $n in
    mpi-runtime) step "$n" "$l" mpirun -np 2 "$DTBENCH" --device cpu --model lenet --dataset synthetic --dry-run
        if grep -qiE 'pmix|compression|dlopen|component' "$LOG/mpi-runtime.log"; then
            note "FAIL  mpi-runtime: the runtime is not quiet ($(grep -ciE 'pmix|compression|dlopen|component' "$LOG/mpi-runtime.log") lines, see mpi-runtime.log)"
            failed=1
        fi ;;
    device-arith | cuda-plan | device-nhwc | cuda-kernels | cuda-zoo | cuda-precision | cuda-nhwc)
        step "$n" "$l" "$t/test_${n//-/_}" ;;
    cuda-transformer) step "$n" "$l" "$t/test_cuda_transformer" ;;
    layer-compare-cpu) step "$n" "$l" "$LAYER_COMPARE" --model lenet --a cpu --b cpu64 --quiet ;;
    *-notf32) step "$n" "$l" env NVIDIA_TF32_OVERRIDE=0 "$t/test_$(sed 's/-notf32//; s/-/_/g' <<<"$n")" ;;
    *-tf32) # a result that moves without TF32 was computed with it
        local base=${n%-tf32}
        [ -f "$LOG/$base.log" ] && [ -f "$LOG/$base-notf32.log" ] || return 0
        step "$n" "$l" "$PY" "$TREE/tests/compare_tf32_logs.py" "$LOG/$base.log" "$LOG/$base-notf32.log" ;;
    gpu-train | gpu-step | gpu-exchange | gpu-precision)
        step "$n" "$l" bash "$TREE/tests/test_${n//-/_}.sh" ;;
    layer-compare) step "$n" "$l" bash "$TREE/tests/test_gpu_layer_compare.sh" ;;
    gpu-phases) # tf32 runs fp32's step with other products; FCN-8 and LSTM-64 FCN-5's and
        # LSTM-32's layers; graphs off where the step differs most and where launches bound it
        # (LeNet, FCN-5, LSTM-32: the host's work beside the device; the full matrix: --only)
        if [[ $ONLY == *",gpu-phases,"* ]]; then
            step "$n" "$l" bash "$TREE/tests/test_gpu_phases.sh"
        else
            step "$n" "$l" env PHASES_PRECISIONS="fp32 bf16 fp16" \
                PHASES_MODELS="lenet fcn5 alexnet vgg16 googlenet resnet50 lstm32" \
                PHASES_OFF_MODELS="lenet fcn5 lstm32 googlenet resnet50" \
                bash "$TREE/tests/test_gpu_phases.sh"
        fi ;;
    memcheck-zoo | memcheck-nhwc)
        step "$n" "$l" "$CS" --tool memcheck --error-exitcode 3 "$t/test_cuda_${n#memcheck-}" ;;
    memcheck-step) step "$n" "$l" "$CS" --tool memcheck --error-exitcode 3 "$DTBENCH" --model lenet \
        --dataset synthetic --batch 64 --warmup 1 --iters 4 --device cuda --sample-hz 0 \
        --output "$LOG/memcheck-step.h5" ;;
    step-*) step "$n" "$l" bash -c "$(one_step_script "${n#step-}")" ;;
    gpu-bench) # its own budget within the step's limit: it ends itself, its table written
        l=$(cut_to_left "$l")
        step "$n" "$l" bash "$TREE/bench/gpu_bench.sh" --out "$LOG/bench" --budget $((l - 10)) \
            "${BENCH_ARGS[@]}" ;;
    gpu-bench-gpt2) l=$(cut_to_left "$l")
        step "$n" "$l" bash "$TREE/bench/gpu_bench.sh" --out "$LOG/bench-gpt2" --budget $((l - 10)) \
            "${GPT2_ARGS[@]}" ;;
    gpu-bench-rehearsal) l=$(cut_to_left "$l")
        step "$n" "$l" bash "$TREE/bench/gpu_bench.sh" --device cpu --out "$LOG/bench-rehearsal" \
            --budget $((l - 10)) ;;
    kernel-bench) step "$n" "$l" env GPU_KERNELS="$BIN/bench/gpu_kernels" bash \
        "$TREE/bench/gpu_kernels.sh" --rounds 1 --iters 10 --warmup 3 --torch-python "$PY" \
        --out "$LOG/kernels" ;;
    profile-*) # the benchmark's bf16 cells (bench/gpu_bench.py's HEADLINE), 2 profiled iterations
        local m=${n#profile-} b=256
        [ "$m" = googlenet ] && b=128
        step "$n" "$l" mpirun -np 1 "$DTBENCH" --model "$m" --dataset synthetic --batch "$b" \
            --precision bf16 --iters 2 --warmup 2 --profile-layers 2 --device cuda --sample-hz 0 \
            --output "$LOG/$n.h5" ;;
    cuda-algos) step "$n" "$l" "$t/test_cuda_algos" --batch 2 ;;
    *) note "FAIL  $n: no command for this step (gpu_session.sh's run_step)"; failed=1 ;;
    esac
}

# every step of STEPS that this machine can run, in order
CS=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
print_plan >"$LOG/PLAN" # what this run was expected to take, beside what it took
while read -r name est limit needs what <&3; do # (fd 3: the steps' commands get no stdin)
    [ -n "$name" ] && wanted "$name" "$needs" || continue
    if [ "$name" = gpu-bench ]; then
        bp=$(bench_plan "${BENCH_ARGS[@]}")
        limit=$((bp + 40))
    elif [ "$name" = gpu-bench-gpt2 ]; then
        limit=$(($(bench_plan "${GPT2_ARGS[@]}") + 40))
    fi
    if needs nogpu "$needs" && [ "$NGPUS" -ge 1 ]; then continue; fi
    if needs gpu "$needs" && [ "$NGPUS" -lt 1 ]; then
        note "SKIP  $name: no GPU visible to dtbench (see probe.log)"
        continue
    fi
    if needs h5 "$needs" && [ "$H5OK" = 0 ]; then
        note "SKIP  $name: it reads result files with h5py, which is missing"
        continue
    fi
    if needs cs "$needs" && [ -z "$CS" ]; then
        note "SKIP  $name: no compute-sanitizer on this machine"
        continue
    fi
    run_step "$name" "$limit"
done 3<<<"$STEPS"
note "NCCL across GPUs: $([ "$NGPUS" -ge 2 ] && echo "exercised on $NGPUS GPUs of one machine" || echo 'NOT exercised (fewer than 2 GPUs: NCCL communicators of one rank only)')"
note "log folder: $LOG ($(($(date +%s) - START))s of a ${BUDGET}s budget)"
exit $failed
