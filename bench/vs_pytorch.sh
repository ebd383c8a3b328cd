#!/usr/bin/env bash
# dtbench vs PyTorch on the same machine, in the same run: one MPI rank of dtbench and the
# PyTorch peer (bench/torch_peer.py) train the same network on synthetic data with the same
# batch, threads, optimizer and loss; their median time per training step is compared.
#
# Run from the build tree (where src/dtbench is), e.g.
#   /work/main/bench/vs_pytorch.sh                         # lenet and fcn5, 1 thread
#   bench/vs_pytorch.sh --models "lenet fcn5 fcn8" --threads "1 2" --dtbench build/src/dtbench
#   bench/vs_pytorch.sh --models nanogpt-char --threads "1 2"   # a transformer: AdamW, seq 256
#   bench/vs_pytorch.sh --parse run1.h5 [run2.h5 ...]      # only print the median total of files
# See bench/README.md, or --help.
#
# What each side's time per step includes:
#   dtbench : the HDF5 /iterations/total of each measured iteration, i.e. from the iteration's
#             start to the end of its update: data (loading the synthetic batch into the input
#             buffer), forward + loss, backward, exchange (trivial with 1 rank), update (SGD with
#             momentum; the transformers: AdamW), plus the gaps between them. The recorder's own
#             cost is not in it.
#   pytorch : time.perf_counter around: copying the step's batch out of a pool of synthetic
#             samples generated before the run, zero_grad, forward, CrossEntropyLoss, backward,
#             optimizer.step (SGD with momentum; the transformers: AdamW with nanoGPT's groups).
#             Generating random data is outside both.
# The transformers (nanogpt-char, gpt2, gpt2-medium) train on windows of --seq-len random tokens
# (the same length on both sides) with AdamW, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on the
# tensors of 2 or more dimensions; the table adds their tokens/s (batch x seq-len per step).
# Rounds alternate (dtbench, torch, dtbench, torch, ...) so that neither side always runs on a
# warmer or cooler machine; each side's median is taken over its measured steps of all rounds.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PEER="$SCRIPT_DIR/torch_peer.py"

DTBENCH=src/dtbench
DEVICE=cpu
MODELS="lenet fcn5"
THREADS="1"
ROUNDS=2
MPIRUN=mpirun
MPIRUN_ARGS=""
DTBENCH_ARGS=""
TORCH_ARGS=""
TORCH_PYTHON=""
H5_PYTHON=""
KEEP=0
CORETYPE=""
STRICT=0
TOLERANCE=0
TRANSFORMERS="nanogpt-char gpt2 gpt2-medium"
ZOO="lenet fcn5 fcn8 alexnet vgg16 googlenet resnet50 lstm32 lstm64 $TRANSFORMERS"
declare -A ITERS=([lenet]=200 [fcn5]=10 [fcn8]=10 [alexnet]=8 [vgg16]=3 [googlenet]=6 [resnet50]=4
                  [lstm32]=10 [lstm64]=6 [nanogpt-char]=5 [gpt2]=3 [gpt2-medium]=2)
declare -A WARMUP=([lenet]=20 [fcn5]=3 [fcn8]=3 [alexnet]=2 [vgg16]=1 [googlenet]=2 [resnet50]=1
                  [lstm32]=2 [lstm64]=2 [nanogpt-char]=1 [gpt2]=1 [gpt2-medium]=1)
# Per-model batch: the 224x224 networks take seconds per step on one core at 64; so do the
# transformers at a few thousand tokens (nanogpt-char 8 x 256 tokens: ~150 GFLOP a step).
declare -A BATCHES=([lenet]=64 [fcn5]=64 [fcn8]=64 [alexnet]=16 [vgg16]=4 [googlenet]=8
                    [resnet50]=8 [lstm32]=32 [lstm64]=32 [nanogpt-char]=8 [gpt2]=2 [gpt2-medium]=1)
# Tokens per sample of the language models (--seq-len, both sides): nanogpt-char at its context,
# GPT-2 at 128 of its 1024 so that a step fits a CPU core in seconds. The LSTMs' are fixed.
declare -A SEQS=([lstm32]=32 [lstm64]=64 [nanogpt-char]=256 [gpt2]=128 [gpt2-medium]=128)
PARSE_FILES=()

usage() {
    cat <<EOF
usage: $0 [options]
       $0 --parse FILE.h5 [FILE.h5 ...]   (print the median measured 'total' of dtbench files)

  --dtbench PATH        dtbench binary (default: $DTBENCH, relative to the current directory)
  --device cpu|cuda     where both sides train (default: $DEVICE); cuda: one GPU, strict fp32
                        on both sides (torch_peer.py switches TF32 off), threads still apply
                        to the host side
  --models "LIST"       models among $ZOO
                        (default: "$MODELS")
  --threads "LIST"      thread counts (default: "$THREADS")
  --batch N | MODEL=N   batch size of both sides, for every model or one (defaults: lenet, fcn5,
                        fcn8 64; alexnet 16; vgg16 4; googlenet, resnet50 8; lstm32, lstm64 32;
                        nanogpt-char 8; gpt2 2; gpt2-medium 1)
  --seq-len N | MODEL=N tokens per sample of the transformers, both sides (defaults: nanogpt-char
                        256, its context; gpt2, gpt2-medium 128)
  --rounds N            alternating rounds per side (default: $ROUNDS)
  --iters MODEL=N       measured iterations of MODEL (defaults: lenet=200 fcn5=10 fcn8=10
                        alexnet=8 vgg16=3 googlenet=6 resnet50=4 lstm32=10 lstm64=6
                        nanogpt-char=5 gpt2=3 gpt2-medium=2)
  --warmup MODEL=N      warm-up iterations of MODEL (defaults: lenet=20 fcn5=3 fcn8=3, 1 or 2 for
                        the others, 1 for the transformers)
  --lenet-iters N, --lenet-warmup N, --fcn5-iters N, ... : same as above
  --mpirun CMD          mpirun to use (default: mpirun)
  --mpirun-args "ARGS"  extra mpirun arguments
  --dtbench-args "ARGS" extra dtbench arguments
  --torch-args "ARGS"   extra torch_peer.py arguments (e.g. --no-mkldnn)
  --torch-python PATH   interpreter with torch (default: first of /usr/bin/python3, python3,
                        python that imports torch)
  --h5-python PATH      interpreter with h5py + numpy (default: first of python3,
                        /usr/bin/python3 that imports them); the log's "dtbench BLAS" line
                        reads with dtbench_analysis, which needs pandas too
  --openblas-coretype NAME  set OPENBLAS_CORETYPE=NAME for both sides (e.g. SkylakeX): OpenBLAS
                        builds with DYNAMIC_ARCH fall back to slow Prescott kernels on CPUs they
                        do not recognise (default: unset, the library's own detection)
  --tolerance PCT       count dtbench as "not slower" when within PCT % of PyTorch (default 0)
  --strict              exit with status 1 when dtbench is slower for some model
  --keep                keep the temporary folder with the h5 files, JSON and logs
EOF
}

die() { echo "vs_pytorch: error: $*" >&2; exit 2; }
log() { echo "vs_pytorch: $*" >&2; }

set_count() {  # set_count ITERS|WARMUP|BATCHES|SEQS MODEL=N
    local arr=$1 kv=$2
    [[ $kv =~ ^([a-z0-9-]+)=([0-9]+)$ && " $ZOO " == *" ${BASH_REMATCH[1]} "* ]] \
        || die "bad $arr value '$kv' (want MODEL=N, MODEL among $ZOO)"
    if [[ $arr == SEQS && " $TRANSFORMERS " != *" ${BASH_REMATCH[1]} "* ]]; then
        die "--seq-len: ${BASH_REMATCH[1]} is not a transformer ($TRANSFORMERS)"
    fi
    case $arr in
        ITERS) ITERS[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]} ;;
        BATCHES) BATCHES[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]} ;;
        SEQS) SEQS[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]} ;;
        *) WARMUP[${BASH_REMATCH[1]}]=${BASH_REMATCH[2]} ;;
    esac
}

while (($#)); do
    case $1 in
        --dtbench) DTBENCH=$2; shift 2 ;;
        --models) MODELS=$2; shift 2 ;;
        --threads) THREADS=$2; shift 2 ;;
        --batch)
            if [[ $2 == *=* ]]; then set_count BATCHES "$2"
            else
                [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--batch must be a positive integer or MODEL=N"
                for m in $ZOO; do BATCHES[$m]=$2; done
            fi
            shift 2 ;;
        --seq-len)
            if [[ $2 == *=* ]]; then set_count SEQS "$2"
            else
                [[ $2 =~ ^[1-9][0-9]*$ ]] || die "--seq-len must be a positive integer or MODEL=N"
                for m in $TRANSFORMERS; do SEQS[$m]=$2; done
            fi
            shift 2 ;;
        --rounds) ROUNDS=$2; shift 2 ;;
        --iters) set_count ITERS "$2"; shift 2 ;;
        --warmup) set_count WARMUP "$2"; shift 2 ;;
        --lenet-iters|--fcn5-iters|--fcn8-iters)
            m=${1#--}; set_count ITERS "${m%-iters}=$2"; shift 2 ;;
        --lenet-warmup|--fcn5-warmup|--fcn8-warmup)
            m=${1#--}; set_count WARMUP "${m%-warmup}=$2"; shift 2 ;;
        --device) DEVICE=$2; shift 2 ;;
        --mpirun) MPIRUN=$2; shift 2 ;;
        --mpirun-args) MPIRUN_ARGS=$2; shift 2 ;;
        --dtbench-args) DTBENCH_ARGS=$2; shift 2 ;;
        --torch-args) TORCH_ARGS=$2; shift 2 ;;
        --torch-python) TORCH_PYTHON=$2; shift 2 ;;
        --h5-python) H5_PYTHON=$2; shift 2 ;;
        --tolerance) TOLERANCE=$2; shift 2 ;;
        --openblas-coretype) CORETYPE=$2; shift 2 ;;
        --strict) STRICT=1; shift ;;
        --keep) KEEP=1; shift ;;
        --parse) shift; PARSE_FILES=("$@"); (($#)) || die "--parse needs files"; break ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown option '$1'" ;;
    esac
done

[[ $DEVICE == cpu || $DEVICE == cuda ]] || die "--device must be cpu or cuda"
for v in ROUNDS; do
    [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "--${v,,} must be a positive integer"
done
[[ $TOLERANCE =~ ^[0-9]+([.][0-9]+)?$ ]] || die "--tolerance must be a number"

# ---------------------------------------------------------------- interpreters
find_python() {  # find_python "import mods" candidates...
    local code=$1; shift
    local c
    for c in "$@"; do
        [[ -n $c ]] || continue
        command -v "$c" >/dev/null 2>&1 || continue
        if "$c" -c "$code" >/dev/null 2>&1; then command -v "$c"; return 0; fi
    done
    return 1
}

if [[ -n $H5_PYTHON ]]; then
    "$H5_PYTHON" -c "import h5py, numpy" 2>/dev/null || die "$H5_PYTHON cannot import h5py and numpy"
else
    H5_PYTHON=$(find_python "import h5py, numpy" python3 /usr/bin/python3 python) \
        || die "no python3 with h5py and numpy found (use --h5-python)"
fi

# ---------------------------------------------------------------- statistics helpers
# h5_stats FILE...   -> prints "median_s count": dtbench's /iterations/total over the measured
# iterations of every rank of every file (rank r: columns warmup .. completed[r]-1, NaNs
# dropped), following docs/hdf5-layout.md. Warnings (killed run, stop_reason) go to stderr.
# EXPECT_MODEL / EXPECT_BATCH in the environment are checked against the file's attributes.
h5_stats() {
    "$H5_PYTHON" "$SCRIPT_DIR/bench_read.py" total-stats "$@"
}

# json_stats FILE... -> "median_s count" over the step_times_s of torch_peer JSON outputs
json_stats() {
    "$H5_PYTHON" "$SCRIPT_DIR/bench_read.py" torch-stats "$@"
}

if ((${#PARSE_FILES[@]})); then
    for f in "${PARSE_FILES[@]}"; do [[ -f $f ]] || die "no file $f"; done
    for f in "${PARSE_FILES[@]}"; do
        read -r med n < <(h5_stats "$f") || exit 1
        printf '%s: median total %.3f ms over %d measured iterations\n' "$f" "$(awk -v x="$med" 'BEGIN{print x*1000}')" "$n"
    done
    if ((${#PARSE_FILES[@]} > 1)); then
        read -r med n < <(h5_stats "${PARSE_FILES[@]}") || exit 1
        printf 'all files: median total %.3f ms over %d measured iterations\n' "$(awk -v x="$med" 'BEGIN{print x*1000}')" "$n"
    fi
    exit 0
fi

# ---------------------------------------------------------------- checks
[[ -x $DTBENCH ]] || die "dtbench binary '$DTBENCH' not found or not executable (use --dtbench PATH)"
[[ -f $PEER ]] || die "$PEER not found"
command -v "$MPIRUN" >/dev/null || die "mpirun '$MPIRUN' not found (use --mpirun)"
if [[ -n $TORCH_PYTHON ]]; then
    "$TORCH_PYTHON" -c "import torch" 2>/dev/null || die "$TORCH_PYTHON cannot import torch"
else
    TORCH_PYTHON=$(find_python "import torch" /usr/bin/python3 python3 python) \
        || die "no python with torch found (Debian: apt-get install python3-torch; or --torch-python)"
fi
for m in $MODELS; do
    [[ " $ZOO " == *" $m "* ]] || die "unknown model '$m' (models: $ZOO)"
    [[ ${ITERS[$m]} -ge 1 ]] || die "iterations of $m must be >= 1"
done
for t in $THREADS; do [[ $t =~ ^[1-9][0-9]*$ ]] || die "bad thread count '$t'"; done

MPI=("$MPIRUN" -np 1)
if grep -q "Open MPI" <<<"$("$MPIRUN" --version 2>&1)"; then
    # no core binding: with several threads, Open MPI's default bind-to-core (np <= 2) would
    # squeeze every dtbench thread onto one core while the PyTorch peer is not bound at all
    MPI+=(--oversubscribe --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS)
    if [[ -n $CORETYPE ]]; then MPI+=(-x OPENBLAS_CORETYPE); fi
    if [[ $(id -u) -eq 0 ]]; then MPI+=(--allow-run-as-root); fi
fi
# shellcheck disable=SC2206
MPI+=($MPIRUN_ARGS)

if [[ -n $CORETYPE ]]; then export OPENBLAS_CORETYPE=$CORETYPE; fi

TMPDIR_RUN=$(mktemp -d "${TMPDIR:-/tmp}/vs_pytorch.XXXXXX")
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
    if ((KEEP)); then log "kept $TMPDIR_RUN"; else rm -rf "$TMPDIR_RUN"; fi
}
trap cleanup EXIT

log "dtbench: $DTBENCH"
log "torch:   $TORCH_PYTHON $PEER ($("$TORCH_PYTHON" -c 'import torch; print("torch", torch.__version__)'))"
log "h5py:    $H5_PYTHON"
log "cpus:    $(nproc) online; models: $MODELS; threads: $THREADS; rounds $ROUNDS"
loadavg() { cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?"; }
if awk -v l="$(loadavg)" 'BEGIN{exit !(l+0 > 0.5)}'; then
    log "warning: load average $(loadavg) before starting: other work shares the CPUs, timings will be noisy"
fi

# The transformers' sequence length and optimizer, the same on both sides (dtbench's AdamW
# defaults written out: betas 0.9, 0.95, eps 1e-8)
TRANSFORMER_ARGS=(--optimizer adamw --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1)
model_args() {  # model_args MODEL: the transformer's arguments of both sides, else nothing
    if [[ " $TRANSFORMERS " == *" $1 "* ]]; then echo --seq-len "${SEQS[$1]}" "${TRANSFORMER_ARGS[@]}"; fi
}

run_dtbench() {  # model threads round -> writes $TMPDIR_RUN/dt_<m>_<t>_<r>.h5
    local m=$1 t=$2 r=$3
    local out="$TMPDIR_RUN/dt_${m}_t${t}_r${r}.h5" lg="$TMPDIR_RUN/dt_${m}_t${t}_r${r}.log"
    # shellcheck disable=SC2086,SC2046
    if ! OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "${MPI[@]}" "$DTBENCH" --model "$m" \
            --dataset synthetic --batch "${BATCHES[$m]}" --iters "${ITERS[$m]}" --warmup "${WARMUP[$m]}" \
            $(model_args "$m") \
            $([[ $DEVICE == cpu ]] && echo --threads "$t") --device "$DEVICE" --output "$out" --overwrite $DTBENCH_ARGS >"$lg" 2>&1; then
        tail -n 30 "$lg" >&2
        die "dtbench failed ($m, $t threads, round $r); log above"
    fi
    [[ -f $out ]] || die "dtbench wrote no $out"
}

run_torch() {  # model threads round -> writes $TMPDIR_RUN/pt_<m>_<t>_<r>.json
    local m=$1 t=$2 r=$3
    local out="$TMPDIR_RUN/pt_${m}_t${t}_r${r}.json" lg="$TMPDIR_RUN/pt_${m}_t${t}_r${r}.log"
    # shellcheck disable=SC2086,SC2046
    if ! OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$TORCH_PYTHON" "$PEER" --model "$m" \
            --batch "${BATCHES[$m]}" --iters "${ITERS[$m]}" --warmup "${WARMUP[$m]}" --threads "$t" \
            $(model_args "$m") --device "$DEVICE" $TORCH_ARGS >"$out" 2>"$lg"; then
        cat "$lg" >&2
        die "torch peer failed ($m, $t threads, round $r)"
    fi
}

ms() { awk -v x="$1" 'BEGIN{printf "%.3f", x*1000}'; }
tok_s() { awk -v b="${BATCHES[$1]}" -v s="${SEQS[$1]}" -v x="$2" 'BEGIN{printf "%.1f", b*s/x}'; }

ROWS=()
declare -A VERDICT=()
for m in $MODELS; do
    for t in $THREADS; do
        dt_files=() pt_files=()
        for ((r = 1; r <= ROUNDS; r++)); do
            log "$m, $t thread(s), round $r/$ROUNDS: dtbench (${ITERS[$m]} iters + ${WARMUP[$m]} warm-up; load $(loadavg))"
            run_dtbench "$m" "$t" "$r"
            f="$TMPDIR_RUN/dt_${m}_t${t}_r${r}.h5"; dt_files+=("$f")
            read -r med n < <(EXPECT_MODEL=$m EXPECT_BATCH=${BATCHES[$m]} h5_stats "$f")
            log "    dtbench median $(ms "$med") ms/step ($n steps)"
            log "$m, $t thread(s), round $r/$ROUNDS: pytorch (load $(loadavg))"
            run_torch "$m" "$t" "$r"
            f="$TMPDIR_RUN/pt_${m}_t${t}_r${r}.json"; pt_files+=("$f")
            read -r med n < <(json_stats "$f")
            log "    pytorch median $(ms "$med") ms/step ($n steps)"
            if ((r == 1)); then  # which BLAS kernels each side got
                blas=$("$H5_PYTHON" "$SCRIPT_DIR/bench_read.py" backend-info "${dt_files[0]}" 2>&1) || true
                log "    dtbench BLAS: $blas"
                log "    pytorch BLAS: $("$H5_PYTHON" "$SCRIPT_DIR/bench_read.py" torch-blas "$f")"
            fi
        done
        read -r dt_med dt_n < <(EXPECT_MODEL=$m EXPECT_BATCH=${BATCHES[$m]} h5_stats "${dt_files[@]}")
        read -r pt_med pt_n < <(json_stats "${pt_files[@]}")
        log "$m, $t thread(s): pooled medians over $dt_n dtbench and $pt_n pytorch steps"
        ratio=$(awk -v p="$pt_med" -v d="$dt_med" 'BEGIN{printf "%.3f", p/d}')
        ok=$(awk -v r="$ratio" -v tol="$TOLERANCE" 'BEGIN{print (r >= 1 - tol/100) ? "yes" : "no"}')
        seq=${SEQS[$m]:--} dt_tok=- pt_tok=-
        if [[ $seq != - ]]; then  # tokens per second: batch x seq-len over the median step
            dt_tok=$(tok_s "$m" "$dt_med") pt_tok=$(tok_s "$m" "$pt_med")
            log "$m, $t thread(s): dtbench $dt_tok tokens/s, pytorch $pt_tok tokens/s"
        fi
        ROWS+=("$(printf '%-12s %5s %5s %7s %16s %16s %15s %13s %13s' "$m" "${BATCHES[$m]}" "$seq" "$t" \
            "$(ms "$dt_med")" "$(ms "$pt_med")" "$ratio" "$dt_tok" "$pt_tok")")
        if [[ -z ${VERDICT[$m]:-} || $ok == no ]]; then VERDICT[$m]=$ok; fi
    done
done

echo
echo "[$DEVICE] dtbench (1 MPI rank) vs PyTorch $("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)'), median time per training step over $ROUNDS rounds"
printf '%-12s %5s %5s %7s %16s %16s %15s %13s %13s\n' model batch seq threads "dtbench ms/step" \
    "pytorch ms/step" "pytorch/dtbench" "dtbench tok/s" "pytorch tok/s"
for row in "${ROWS[@]}"; do echo "$row"; done
echo "(ratio > 1: dtbench is faster; < 1: PyTorch is faster; tok/s: batch x seq over the median step)"
echo
status=0
for m in $MODELS; do
    echo "$m (threads $THREADS): dtbench not slower than PyTorch: ${VERDICT[$m]}"
    [[ ${VERDICT[$m]} == yes ]] || status=1
done
((STRICT)) && exit $status
exit 0
