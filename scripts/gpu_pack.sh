#!/usr/bin/env bash
# gpu_pack.sh - prepares the one archive a GPU machine needs to validate and benchmark dtbench.
# Run on a normal build machine (CUDA toolkit, cuDNN, NCCL, Open MPI and parallel
# HDF5 installed, as scripts/setup.sh expects):
#   scripts/gpu_pack.sh [--out FILE] [--arch 90] [--python 3.12] [--no-wheel] [--max-mb 60]
# A GPU machine set up for deep learning has the CUDA driver, cuDNN, NCCL and PyTorch but often
# neither Open MPI nor parallel HDF5, and may have no network, so the archive carries:
#   bin/      dtbench and its GPU module beside it (src/dtbench-cuda.so: the CUDA backend and NCCL,
#             loaded when a run asks for them), the test and benchmark programs, built for
#             sm_<arch> (default 90, Hopper) from the committed tree (git archive HEAD) with
#             CUDA_ARCHS=<arch>, stamped with its commit (dtbench --version, the result files'
#             git_commit)
#   ompi/     the Open MPI runtime, relocatable with OPAL_PREFIX: mpirun, orted, its plugins
#             (without the InfiniBand/OFI/UCX/PSM ones a single node does not need), share/openmpi
#   lib/      every shared library those programs load that is not part of the C runtime or of
#             the CUDA installation (libmpi, parallel HDF5, OpenBLAS, hwloc, libevent, pmix, ...)
#   wheels/   h5py for the GPU machine's Python (default 3.12), fetched with pip (skipped with
#             --no-wheel or when pip cannot reach its index: the session then says so)
#   tree/     the repository's scripts, tests, bench and docs (what gpu_session.sh runs)
#   data/     a Fashion-MNIST slice (the 10000 test images; the session uses them for training
#             too), everything else synthetic
# and fails if the archive is larger than --max-mb (default 60). Default output:
# .gpu/dtbench-gpu-pack.tar.xz (git-ignored), which scripts/gpu_lease.sh unpacks and runs on the
# GPU machine in one call (see there and docs/gpu.md).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$HERE/.gpu/dtbench-gpu-pack.tar.xz # .gpu/: git-ignored, carried to the GPU machine
ARCH=90
PYVER=3.12
WHEEL=1
MAX_MB=60
while (($#)); do
    case $1 in
    --out) OUT=$(realpath -m "$2"); shift 2 ;;
    --arch) ARCH=$2; shift 2 ;;
    --python) PYVER=$2; shift 2 ;;
    --no-wheel) WHEEL=0; shift ;;
    --max-mb) MAX_MB=$2; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "gpu_pack: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
say() { echo "gpu_pack: $*"; }
die() { echo "gpu_pack: error: $*" >&2; exit 1; }
command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || die "no nvcc: CUDA is needed to build for sm_$ARCH"
command -v ompi_info >/dev/null || die "no ompi_info: Open MPI is needed"

STAGE=$(mktemp -d "${TMPDIR:-/tmp}/dtbench-gpu-pack.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
PACK=$STAGE/dtbench-gpu
mkdir -p "$PACK"/{bin,lib,ompi,wheels,tree,data}

# ---- 1. build for sm_ARCH from a clean copy of the committed tree --------------------------------
say "building for sm_$ARCH in $STAGE/build (a few minutes)"
FULL_COMMIT=$(cd "$HERE" && git rev-parse HEAD) # what is built and packed, whatever happens later
COMMIT=${FULL_COMMIT:0:12}
(cd "$HERE" && git archive "$FULL_COMMIT") | (mkdir -p "$STAGE/build" && cd "$STAGE/build" && tar xf -)
(
    cd "$STAGE/build"
    autoreconf -fi >autoreconf.log 2>&1 || { cat autoreconf.log; exit 1; }
    ./configure CUDA_ARCHS="$ARCH" PYTHON=python3 DTBENCH_GIT_COMMIT="$COMMIT" >configure.log 2>&1 ||
        { tail -30 configure.log; exit 1; }
    grep -q "^#define HAVE_CUDA 1" config.h || { grep -A12 "^  CUDA" configure.log; exit 1; }
    nice make -j"$(nproc)" >make.log 2>&1 || { tail -30 make.log; exit 1; }
    nice make -j"$(nproc)" check TESTS= >make-check.log 2>&1 || { tail -30 make-check.log; exit 1; }
) || die "the sm_$ARCH build failed (logs above)"
B=$STAGE/build
progs=(src/dtbench src/dtbench-cuda.so tests/cuda_probe tests/test_cuda_kernels tests/test_cuda_zoo tests/test_cuda_plan
       tests/test_device_arith tests/exchange_avg tests/sampler_check bench/nccl_busbw
       tests/test_cuda_precision tests/test_cuda_algos tests/layer_compare
       tests/test_device_nhwc tests/test_device_bn16 tests/test_cuda_nhwc bench/gpu_kernels
       tests/test_cuda_transformer
       tests/test_cpu_{backend,gemm,conv,pool,norm,elementwise,optim,recurrent})
"$B/src/dtbench" --version | grep "($COMMIT)" >/dev/null || die "the build is not stamped with $COMMIT"
for p in "${progs[@]}"; do
    [ -x "$B/$p" ] || die "the build made no $p"
    mkdir -p "$PACK/bin/$(dirname "$p")"
    cp "$B/$p" "$PACK/bin/$p"
done
strip --strip-unneeded "$PACK"/bin/*/* 2>/dev/null || true
[[ $(grep -m1 -- "-gencode" "$B/Makefile") == *"sm_$ARCH"* ]] || die "NVCCFLAGS do not name sm_$ARCH"

# ---- 2. Open MPI runtime, relocatable with OPAL_PREFIX --------------------------------------------
libdir=$(ompi_info --path libdir --parsable | cut -d: -f3)
pkglibdir=$(ompi_info --path pkglibdir --parsable | cut -d: -f3)
pkgdatadir=$(ompi_info --path pkgdatadir --parsable | cut -d: -f3)
prefix=$(ompi_info --path prefix --parsable | cut -d: -f3)
O=$PACK/ompi
mkdir -p "$O/bin" "$O/${libdir#"$prefix"/}" "$O/${pkglibdir#"$prefix"/}" "$O/share" "$O/etc"
cp -L "$(command -v mpirun)" "$O/bin/mpirun"
cp -L "$(command -v orted)" "$O/bin/orted"
# (libdir itself holds only development symlinks; libmpi and friends come with the closure below)
# plugins: everything but high-speed-network and Java ones (one GPU machine: shared memory and TCP)
for f in "$pkglibdir"/*.so; do
    case $(basename "$f") in
    *ucx* | *ofi* | *psm* | *verbs* | *openib* | *usnic* | *portals* | *java* | *_cuda*) continue ;;
    esac
    cp -L "$f" "$O/${pkglibdir#"$prefix"/}/"
done
cp -a "$pkgdatadir" "$O/share/openmpi"
[ -d /etc/openmpi ] && cp -a /etc/openmpi "$O/etc/openmpi"
# PMIx (Debian builds Open MPI against an external PMIx with plugins of its own)
pmix=$(ompi_info 2>/dev/null | sed -n "s/.*--with-pmix=\([^']*\)'.*/\1/p" | sed -n 1p)
if [ -n "$pmix" ] && [ -d "$pmix" ]; then
    mkdir -p "$O/pmix"
    cp -a "$pmix"/lib "$O/pmix/"
    echo "${pmix}" >"$O/pmix/original-prefix"
fi

# ---- 3. shared libraries: the closure of what the programs and plugins load -----------------------
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|libpthread\.|librt\.|libresolv\.|libgcc_s\.|libstdc\+\+\.|libcuda\.|libnvidia-ml\.|libcudart|libcublas|libcudnn|libnccl|libnvrtc|libnvJitLink|libcufft|libcurand|libcusparse|libcusolver|libutil\.|libmvec\.)'
declare -A seen=()
queue=("$PACK"/bin/*/* "$O"/bin/* "$O/${pkglibdir#"$prefix"/}"/*.so)
[ -d "$O/pmix/lib" ] && while IFS= read -r f; do queue+=("$f"); done < <(find "$O/pmix/lib" -name '*.so*' -type f)
while ((${#queue[@]})); do
    f=${queue[0]}
    queue=("${queue[@]:1}")
    while read -r name path; do
        [[ $name =~ $skip ]] && continue
        [ -n "$path" ] && [ -f "$path" ] || continue
        [[ $path == /usr/local/cuda* ]] && continue
        [ -n "${seen[$name]:-}" ] && continue
        seen[$name]=1
        cp -L "$path" "$PACK/lib/$name"
        queue+=("$path")
    done < <(ldd "$f" 2>/dev/null | awk '$2 == "=>" {print $1, $3}')
done
strip --strip-unneeded "$PACK"/lib/*.so* 2>/dev/null || true

# ---- 4. h5py for the GPU machine's Python ----------------------------------------------------------
if [ "$WHEEL" = 1 ]; then
    pyabi=cp${PYVER/./}
    if python3 -m pip download h5py --only-binary=:all: --no-deps --python-version "$PYVER" \
        --implementation cp --abi "$pyabi" --platform manylinux_2_17_x86_64 -d "$PACK/wheels" \
        >"$STAGE/pip.log" 2>&1; then
        say "h5py wheel: $(ls "$PACK/wheels")"
    else
        say "warning: no h5py wheel for Python $PYVER (pip: $(tail -1 "$STAGE/pip.log")); the session will say which checks need it"
    fi
fi

# ---- 5. the tree's scripts, tests and benchmarks; a data slice -------------------------------------
(cd "$HERE" && git archive "$FULL_COMMIT" scripts tests bench docs analysis/dtbench_analysis \
    analysis/pyproject.toml README.md) | (cd "$PACK/tree" && tar xf -)
FM=${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}
if [ -f "$FM/t10k-images-idx3-ubyte.gz" ]; then
    mkdir -p "$PACK/data/fashion-mnist"
    cp "$FM"/t10k-*-idx*-ubyte.gz "$PACK/data/fashion-mnist/"
else
    say "warning: no Fashion-MNIST in $FM: the session's LeNet test on it will be skipped"
fi
{
    echo "dtbench GPU pack"
    echo "built: $(date -u +%FT%TZ) on $(hostname) for sm_$ARCH"
    echo "commit: $FULL_COMMIT$(cd "$HERE" && git diff --quiet "$FULL_COMMIT" || echo ' (uncommitted changes NOT included)')"
    echo "version: $("$B/src/dtbench" --version | sed -n 1p)"
    echo "open mpi: $(ompi_info --version 2>/dev/null | sed -n 1p)"
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"
    echo "python for h5py: $PYVER"
    grep -m1 "GPU architectures" "$B/configure.log" || true
} >"$PACK/MANIFEST"
(cd "$PACK" && find . -type f | sort) >>"$PACK/MANIFEST"

# ---- 6. archive and size check ---------------------------------------------------------------------
mkdir -p "$(dirname "$OUT")"
tar -C "$STAGE" -cf - dtbench-gpu | xz -T0 -6 >"$OUT"
bytes=$(stat -c %s "$OUT")
mb=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}')
say "wrote $OUT: $mb MiB ($(grep -c '^\./' "$PACK/MANIFEST") files; unpacked $(du -sh "$PACK" | cut -f1))"
awk -v b="$bytes" -v m="$MAX_MB" 'BEGIN {exit !(b <= m * 1048576)}' ||
    die "the archive is $mb MiB, over the ${MAX_MB} MiB limit"
say "copy it to the GPU machine; there, from a checkout: scripts/gpu_lease.sh --pack FILE --out DIR (docs/gpu.md)"
