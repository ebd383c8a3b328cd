# test_sampler.sh - /samples and the per-rank device metadata in a real result file: shapes,
# counts, timestamps on the iterations' clock, the CPU source's values, a full buffer, no
# sampling; and the sampler's own measurements (tests/sampler_check).
. "$(dirname "$0")/lib.sh"
SAMPLER_CHECK=${SAMPLER_CHECK:-$(dirname "$DTBENCH")/../tests/sampler_check}

"$SAMPLER_CHECK" || fail "sampler_check"
pass "the CPU sampler measures utilisation, memory and time"

run_np 2 --model lenet --dataset synthetic --batch 32 --iters 30 \
    --warmup 2 --flush-every 8 --sample-hz 100 --sample-max-s 60 --output "$WORK/s.h5" >/dev/null
h5check finished "$WORK/s.h5" --ranks 2 --iters 32
"$PYTHON" - "$WORK/s.h5" <<'PY'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    g = f["samples"]
    assert g.attrs["sample_hz"] == 100 and g.attrs["capacity"] == 6000, dict(g.attrs)
    n = f["ranks/samples_written"][:]
    it = f["iterations"]
    for name, units in [("time", "s"), ("power_w", "W"), ("memory_mib", "MiB"), ("utilization", "%")]:
        assert g[name].shape == (2, 6000), g[name].shape
        assert g[name].attrs["units"] == units and g[name].attrs["description"]
    for r in range(2):
        assert n[r] >= 5, n  # 30 LeNet iterations last more than 50 ms
        t = g["time"][r, :n[r]]
        assert np.isfinite(t).all() and (np.diff(t) > 0).all(), "sample times do not increase"
        assert np.isnan(g["time"][r, n[r]:]).all(), "entries beyond samples_written"
        start, end = it["start"][r, 0], it["start"][r, -1] + it["total"][r, -1]
        # the sampler runs from just before the first iteration to after the last
        assert start - 0.5 < t[0] < start + 0.5, (t[0], start)
        assert t[-1] > end - 0.5, (t[-1], end)
        gap = np.median(np.diff(t))
        assert 0.5 / 100 < gap < 2.0 / 100, gap
        assert np.isnan(g["power_w"][r, :n[r]]).all(), "power on a CPU run"
        assert (g["memory_mib"][r, :n[r]] > 10).all()
        u = g["utilization"][r, :n[r]]
        assert np.isfinite(u).all() and (u >= 0).all() and np.median(u) > 1, u
    rk = f["ranks"]
    for key in ["device_name", "device_uuid", "device_pci_bus_id", "driver_version",
                "cuda_runtime_version", "cuda_driver_api_version", "cudnn_version",
                "cublas_version", "nccl_version", "sample_source"]:
        assert rk[key].shape == (2,), key
    assert all(s == b"procfs" for s in rk["sample_source"][:])
    assert all(len(s) > 0 for s in rk["device_name"][:]), "no CPU model name"
    assert all(s == b"" for s in rk["device_uuid"][:])
print(f"ok: /samples: {list(n)} samples per rank, times on the iteration clock, CPU values")
PY

# A buffer of 0.05 s at 100 Hz (5 samples) fills: 5 kept, a warning, the file still complete.
run_np 1 --model lenet --dataset synthetic --batch 32 --iters 60 \
    --warmup 0 --sample-hz 100 --sample-max-s 0.05 --output "$WORK/full.h5" >/dev/null 2>"$WORK/err.txt"
grep -q 'warning: rank 0: /samples was full after 5 samples' "$WORK/err.txt" || fail "no full warning: $(cat "$WORK/err.txt")"
h5check finished "$WORK/full.h5" --ranks 1 --iters 60
"$PYTHON" -c "
import sys, h5py, numpy as np
f = h5py.File(sys.argv[1], 'r')
assert f['ranks/samples_written'][0] == 5 and f['samples/time'].shape == (1, 5)
assert np.isfinite(f['samples/time'][0]).all()
" "$WORK/full.h5" || fail "full buffer"
# No sampling: no /samples group.
run_np 1 --dataset synthetic --iters 2 --warmup 0 --batch 4 --sample-hz 0 --output "$WORK/none.h5" >/dev/null
"$PYTHON" -c "
import sys, h5py
f = h5py.File(sys.argv[1], 'r')
assert 'samples' not in f and f['ranks/samples_written'][0] == 0 and f['ranks/sample_source'][0] == b''
" "$WORK/none.h5" || fail "--sample-hz 0"
pass "a full /samples keeps its capacity and warns; --sample-hz 0 makes none"
