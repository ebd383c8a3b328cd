#!/usr/bin/env bash
# test_gpu_bench_table.sh - the table of bench/gpu_bench.sh (bench/gpu_bench_table.py) on results
# folders made without a GPU (bench/test_gpu_bench_table.py): ratios, the exchange share and the
# phases of one rank, the misses and by how much, failed runs, first-version folders, tokens/s.
# Needs a python with h5py and numpy: $H5_PYTHON, else $PYTHON (make check sets it to the one
# configure found, .venv's), else python3. Prints "ok" and exits 0 on success; part of make check.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${H5_PYTHON:-${PYTHON:-python3}}
"$PY" -c "import h5py, numpy" 2>/dev/null || { echo "FAIL: $PY imports no h5py and numpy (set H5_PYTHON)"; exit 1; }
exec "$PY" "$HERE/test_gpu_bench_table.py"
