#!/usr/bin/env bash
# Checks the HDF5 parsing of vs_pytorch.sh (--parse) on small files written by h5py in the
# layout of docs/hdf5-layout.md: warm-up columns skipped, NaNs dropped, only the first
# /ranks/completed[r] iterations of each rank read, several ranks and files pooled; the per-model
# options (--iters MODEL=N, --seq-len MODEL=N) take the transformers' names.
# Needs a python with h5py and numpy: $H5_PYTHON, else $PYTHON (make check sets it to the one
# configure found, .venv's), else python3. Prints "ok" and exits 0 on success; part of make check.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${H5_PYTHON:-${PYTHON:-python3}}
T=$(mktemp -d "${TMPDIR:-/tmp}/vs_pytorch_test.XXXXXX")
trap 'rm -rf "$T"' EXIT

"$PY" "$HERE/test_vs_pytorch_parse.py" "$T"

fail=0
check() {  # check EXPECTED_SUBSTRING command...
    local want=$1; shift
    local got
    got=$("$@" 2>&1) || true
    if [[ $got == *"$want"* ]]; then echo "pass: $*"; else echo "FAIL: $*: want '$want', got: $got"; fail=1; fi
}
P=("$HERE/vs_pytorch.sh" --h5-python "$PY" --parse)
check "median total 11.500 ms over 4 measured" "${P[@]}" "$T/a.h5"
check "median total 25.000 ms over 2 measured" "${P[@]}" "$T/b.h5"
check "run killed?" "${P[@]}" "$T/b.h5"
check "median total 3.500 ms over 6 measured" "${P[@]}" "$T/c.h5"
check "all files: median total 5.500 ms over 10 measured" "${P[@]}" "$T/c.h5" "$T/a.h5"
check "no measured iteration" "${P[@]}" "$T/d.h5"
check "no file" "${P[@]}" "$T/missing.h5"
# per-model options: a transformer's name (with a hyphen) is a model; --seq-len only a transformer's
V=("$HERE/vs_pytorch.sh" --h5-python "$PY")
check "median total 11.500 ms" "${V[@]}" --iters nanogpt-char=2 --seq-len gpt2=64 --batch gpt2-medium=1 --parse "$T/a.h5"
check "--seq-len: lenet is not a transformer" "${V[@]}" --seq-len lenet=8 --parse "$T/a.h5"
check "bad ITERS value 'gpt3=2'" "${V[@]}" --iters gpt3=2 --parse "$T/a.h5"
((fail == 0)) && echo ok
exit $fail
