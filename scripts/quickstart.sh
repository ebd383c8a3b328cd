#!/usr/bin/env bash
# quickstart.sh - installs and builds what the main job needs (scripts/setup.sh --runtime: no
# test-only packages such as Slurm, Chromium or PyTorch), then runs the main job: LeNet on
# Fashion-MNIST, data-parallel on 2 ranks, 500 measured iterations, into a new HDF5 file under
# results/ (never overwriting an earlier one), and prints its summary with dtbench-analyze.
# Extra arguments go to dtbench (e.g. --iters 100).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --runtime

# Open MPI as root on a small machine: allow root, more ranks than cores, and yield when idle.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_mpi_yield_when_idle=1

mkdir -p results
out="results/lenet-fashion-mnist-2ranks-$(date -u +%Y%m%dT%H%M%SZ).h5"
mpirun -np 2 bin/dtbench --model lenet --dataset fashion-mnist \
    --data-dir /usr/share/datasets/fashion-mnist --batch 64 --iters 500 --warmup 20 \
    --output "$out" "$@"
echo
.venv/bin/dtbench-analyze summary "$out"
