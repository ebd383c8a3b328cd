#!/usr/bin/env bash
# setup.sh [--runtime] - brings a fresh Debian machine (or cluster node, as root) to a built dtbench:
#   1. installs the Debian packages that are missing,
#   2. makes a Python virtual environment .venv (seeing the system's packages) with the analysis
#      package (dtbench-analyze) and the campaign tool (dtbench-campaign, jobs/), both editable,
#      and their dependencies (h5py, numpy, pandas, matplotlib, scipy, pyarrow),
#   3. builds dtbench in the source tree (autoreconf, configure, make).
# With --runtime (scripts/quickstart.sh) only what a run and its analysis need: the compiler,
# autotools, Open MPI, parallel HDF5, OpenBLAS, oneDNN, zlib, the Fashion-MNIST data set and the
# Python side above. Without it (scripts/test.sh) also what only the tests need: pytest,
# pytest-xdist (the Python tests on every core) and hypothesis (the tools' fuzz tests) in .venv,
# and the Debian packages chromium (renders the HTML report in its tests), slurm-wlm and munge
# (the emulated Slurm clusters), iproute2 and util-linux (their network namespaces) and
# python3-torch (the tests against PyTorch). A machine set up with --runtime gets the rest from
# a later run without it; nothing is rebuilt for that.
# Idempotent: a second run only rebuilds what changed. CONFIGURE_FLAGS passes extra configure
# options (e.g. --without-cuda); CUDA_ARCHS the GPU architectures (default: this machine's GPUs',
# or 90 alone when it has none).
set -euo pipefail
runtime=0
for a in "$@"; do
    case $a in
    --runtime) runtime=1 ;;
    *) echo "usage: scripts/setup.sh [--runtime]" >&2; exit 2 ;;
    esac
done
cd "$(dirname "$0")/.."

# What dtbench, its analysis and the quickstart's job need.
DEB_PACKAGES="libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools libopenblas-dev libdnnl-dev zlib1g-dev
  autoconf automake libtool pkg-config make gcc python3 python3-venv dataset-fashion-mnist"
PY_PACKAGES="h5py numpy pandas matplotlib scipy pyarrow" # analysis/pyproject.toml's dependencies
PY_IMPORTS="h5py, numpy, pandas, matplotlib, scipy, pyarrow"
DEB_NORECOMMENDS=""
if [ "$runtime" = 0 ]; then
    # What only the tests need (the test extras of analysis/ and jobs/ pyproject.toml).
    DEB_PACKAGES="$DEB_PACKAGES chromium slurm-wlm munge iproute2 util-linux"
    PY_PACKAGES="$PY_PACKAGES pytest pytest-xdist hypothesis"
    PY_IMPORTS="$PY_IMPORTS, pytest, xdist, hypothesis"
    # PyTorch for the tests against it (tests/test_vs_torch.sh) and bench/vs_pytorch.sh: Debian's
    # CPU-only python3-torch, for /usr/bin/python3 (PyPI's torch wheel pulls ~3 GB of CUDA
    # packages). Without recommends: those add Qt, GStreamer and VA drivers.
    DEB_NORECOMMENDS="python3-torch"
fi

installed() { grep -q "install ok installed" <<<"$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)"; }
missing="" missing_norec=""
for p in $DEB_PACKAGES; do installed "$p" || missing="$missing $p"; done
for p in $DEB_NORECOMMENDS; do installed "$p" || missing_norec="$missing_norec $p"; done
if [ -n "$missing$missing_norec" ]; then
    echo "setup: installing Debian packages:$missing$missing_norec"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    apt_install() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null; }
    [ -z "$missing" ] || apt_install $missing
    [ -z "$missing_norec" ] || apt_install --no-install-recommends $missing_norec
fi
[ "$runtime" = 1 ] || /usr/bin/python3 -c "import torch" 2>/dev/null || echo "setup: warning: /usr/bin/python3 cannot import torch: tests/test_vs_torch.sh will skip"

# The Python side (.venv) is made in the background while dtbench builds (configure only records
# the interpreter's path): most of its time is spent downloading. Then everything in .venv and the
# tree's Python is byte-compiled once (about 30 s of CPU): where PYTHONDONTWRITEBYTECODE is set, as
# on some machines, Python never writes the .pyc files it compiles on import, so that every
# dtbench-analyze or check script started afterwards compiled pandas, NumPy and h5py from source
# again (4.3 s of CPU for a summary instead of 1.6; a third of the test suite's CPU went to it).
python_side() {
    if [ ! -x .venv/bin/python ]; then
        echo "setup: creating .venv"
        python3 -m venv --system-site-packages .venv
    fi
    # The packages must come from this tree: .venv also sees the system's site-packages, where
    # another checkout may have installed them.
    from_here() { .venv/bin/python -c "import os, $1; assert $1.__file__.startswith(os.getcwd() + '/')" 2>/dev/null; }
    local pip=(.venv/bin/python -m pip install -q --no-compile --disable-pip-version-check)
    if ! .venv/bin/python -c "import $PY_IMPORTS" 2>/dev/null || ! from_here dtbench_analysis; then
        echo "setup: installing Python packages into .venv"
        "${pip[@]}" $PY_PACKAGES
        "${pip[@]}" -e analysis
    fi
    # The campaign tool (jobs/): .venv/bin/dtbench-campaign.
    if ! from_here dtbench_campaign; then
        echo "setup: installing dtbench-campaign into .venv"
        "${pip[@]}" -e jobs
    fi
    # (not the packages' own tests, pip or setuptools: 40% of the files, never imported here; its
    # status ignored: a file that does not compile fails where it is imported, if it ever is)
    .venv/bin/python -m compileall -q -j 0 -x '/(tests|pip|setuptools)/' .venv/lib analysis jobs \
        tests bench >/dev/null 2>&1 || true
}
python_side &
python_pid=$!
# python_done: waits for the Python side; exits on its failure
python_done() {
    wait "$python_pid" || {
        echo "setup: the Python packages could not be installed into .venv (above)"
        exit 1
    }
}
trap '[ -z "${python_pid:-}" ] || kill "$python_pid" 2>/dev/null' EXIT

if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt Makefile.in ]; then
    echo "setup: autoreconf"
    autoreconf -fi >/dev/null 2>&1 || autoreconf -fi
fi
# The GPU architectures the CUDA kernels are compiled for: CUDA_ARCHS if set, else those of the
# build already configured here (so that a set-up never undoes a choice, nor rebuilds for
# nothing), else this machine's GPUs' (nvidia-smi), else, with no GPU visible, one (90): the CUDA
# code is then only checked to build, and dtbench refuses in one line on a GPU it was not built
# for. To build here for a cluster's GPUs: CUDA_ARCHS="80 90 100" scripts/setup.sh (configure's
# own default).
[ -n "${CUDA_ARCHS:-}" ] || [ ! -f config.h ] ||
    CUDA_ARCHS=$(sed -n 's/^#define DTBENCH_CUDA_ARCHS "\(.*\)"$/\1/p' config.h)
if [ -z "${CUDA_ARCHS:-}" ]; then
    caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d '. ' |
        grep -E '^[0-9]+$' | sort -u | paste -sd' ' -) || caps=""
    CUDA_ARCHS=${caps:-90}
    [ -n "$caps" ] || echo "setup: no GPU visible: CUDA kernels for sm_90 only" \
        "(CUDA_ARCHS=\"80 90 100\" scripts/setup.sh builds for a cluster's GPUs)"
fi
# (a build for other architectures: nvcc's objects go, make does not see a change of flags)
if grep -q '^#define HAVE_CUDA 1' config.h 2>/dev/null &&
    ! grep -qF "#define DTBENCH_CUDA_ARCHS \"$CUDA_ARCHS\"" config.h; then
    rm -f config.status kernels/cuda/*_kernels.o
fi
if [ ! -f Makefile ] || [ ! -f config.status ] || [ configure -nt config.status ] ||
    [ -n "${CONFIGURE_FLAGS:-}" ]; then
    echo "setup: configure ${CONFIGURE_FLAGS:-} CUDA_ARCHS=\"$CUDA_ARCHS\""
    ./configure PYTHON="$PWD/.venv/bin/python" CUDA_ARCHS="$CUDA_ARCHS" ${CONFIGURE_FLAGS:-} \
        >config.out 2>&1 || {
        cat config.out
        python_done
        exit 1
    }
    sed -n '/configuration summary/,$p' config.out
fi
echo "setup: make"
make -j"$(nproc)" >make.out 2>&1 || {
    tail -40 make.out
    python_done
    exit 1
}
python_done
python_pid=""
echo "setup: dtbench built: $PWD/bin/dtbench (it runs the program, src/dtbench)"
