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

"$PY" - "$T" <<'PYEOF'
import sys, h5py, numpy as np
d = sys.argv[1]
nan = np.nan
def make(fn, warmup, iters, completed, totals, finished=True, model="lenet", batch=64):
    nranks, T = len(totals), warmup + iters
    with h5py.File(f"{d}/{fn}", "w") as f:
        a = f.attrs
        a.update(dict(schema_version=1, model=model, dataset="synthetic", iters=iters,
                      warmup=warmup, iters_total=T, nranks=nranks, batch_per_rank=batch,
                      batch_global=batch * nranks))
        if finished:
            a.update(dict(finished=1, stop_reason="completed", end_time="2024-01-01T00:00:00Z"))
        g = f.create_group("ranks")
        g.create_dataset("completed", data=np.array(completed, dtype=np.int64))
        g.create_dataset("status", data=np.array([int(finished)] * nranks, dtype=np.int32))
        it = f.create_group("iterations")
        it.attrs["warmup"] = warmup
        for name in ("start", "data", "forward", "backward", "exchange", "update", "total",
                     "loss", "bytes_sent", "record"):
            ds = it.create_dataset(name, shape=(nranks, T), dtype="f8", fillvalue=nan)
            ds.attrs["units"] = "s"
            ds.attrs["description"] = name
        tot = np.full((nranks, T), nan)
        for r, row in enumerate(totals):
            tot[r, :len(row)] = row
        it["total"][...] = tot
# 1 rank, 2 warm-up columns (must be skipped), one NaN among the measured: median of 10,11,12,14 ms
make("a.h5", 2, 5, [7], [[1.0, 1.0, .010, .011, .012, nan, .014]])
# killed run: 4 of 7 completed; column 4 was written but its block not recorded -> 20, 30 ms
make("b.h5", 2, 5, [4], [[1.0, 1.0, .020, .030, 999.0]], finished=False)
# 2 ranks, 1 warm-up: 1..6 ms
make("c.h5", 1, 3, [4, 4], [[9, .001, .002, .003], [9, .004, .005, .006]])
# nothing measured yet (killed during warm-up)
make("d.h5", 2, 5, [2], [[1.0, 1.0]], finished=False)
PYEOF

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
