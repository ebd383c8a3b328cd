"""Writes synthetic dtbench result files with h5py, following docs/hdf5-layout.md (schema 1).

The default run has known values so tests can assert exact numbers:
- every rank, every measured iteration: data 2, forward 10, backward 20, exchange 5, update 2 ms,
  total = their sum + 1 ms gap = 40 ms; bytes_sent 4 MB; record 0.1 ms, 5 ms on block writes
  (every flush_every = 4 iterations: 3 of the 10 measured ones);
- rank SLOW_RANK (2) is slow: backward 60 ms, so its total is 80 ms;
- warm-up iterations take 1000 ms per phase (so including them would show);
- batch_global 64, so the throughput is 64 / 0.080 s = 800 samples/s;
- exchange share = 4 * 5 / (3 * 40 + 80) = 0.1.
A killed run (``killed=True``) has no finished/end_time/stop_reason attributes, status 0, NaN
beyond ``completed`` and, for ranks given in ``unrecorded``, finite garbage in a block written
after ``completed`` (its completion was never recorded), which a reader must ignore.

Newer, optional content: ``overrides`` may add per-iteration fields that are not in the default
set (staleness, exchange_wait, straggler_delay, ...); ``samples`` writes a /samples group and
/ranks/samples_written; ``attrs`` adds or replaces root attributes (e.g. target_accuracy);
``config`` adds or replaces options in config_json and /config (e.g. seed, tag); ``memory``
writes the per-rank memory datasets (the plan's and the measured peak resident).
"""

from __future__ import annotations

import json
from typing import Dict, Optional, Sequence

import h5py
import numpy as np

PHASE_MS = {"data": 2.0, "forward": 10.0, "backward": 20.0, "exchange": 5.0, "update": 2.0}
GAP_MS = 1.0
TOTAL_MS = sum(PHASE_MS.values()) + GAP_MS          # 40
SLOW_RANK = 2
SLOW_BACKWARD_MS = 60.0
SLOW_TOTAL_MS = TOTAL_MS - PHASE_MS["backward"] + SLOW_BACKWARD_MS   # 80
WARMUP_PHASE_MS = 1000.0
BATCH_GLOBAL = 64
BYTES_SENT = 4_000_000.0
RECORD_MS, RECORD_FLUSH_MS = 0.1, 5.0
TIMER_OVERHEAD_S = 25e-9

#: /ranks/memory_<key> datasets (docs/hdf5-layout.md): the plan's bytes and the measured peak
MEMORY_KEYS = ("params", "grads", "optimizer", "peak_resident")

UNITS = {"start": "s", "data": "s", "forward": "s", "backward": "s", "exchange": "s",
         "update": "s", "total": "s", "loss": "-", "bytes_sent": "bytes", "record": "s"}


def default_iterations(nranks: int, warmup: int, iters_total: int, flush_every: int,
                       slow_rank: Optional[int] = SLOW_RANK) -> Dict[str, np.ndarray]:
    """Full (nranks, iters_total) arrays of the default run, in seconds."""
    shape = (nranks, iters_total)
    out = {p: np.full(shape, ms / 1e3) for p, ms in PHASE_MS.items()}
    if slow_rank is not None:
        out["backward"][slow_rank, :] = SLOW_BACKWARD_MS / 1e3
    out["data"][:, :warmup] = out["forward"][:, :warmup] = WARMUP_PHASE_MS / 1e3
    out["backward"][:, :warmup] = out["exchange"][:, :warmup] = WARMUP_PHASE_MS / 1e3
    out["update"][:, :warmup] = WARMUP_PHASE_MS / 1e3
    out["total"] = sum(out[p] for p in PHASE_MS) + GAP_MS / 1e3
    out["start"] = np.cumsum(out["total"], axis=1) - out["total"]
    out["loss"] = np.tile(2.0 / (1.0 + np.arange(iters_total)), (nranks, 1))
    out["bytes_sent"] = np.full(shape, BYTES_SENT)
    record = np.full(shape, RECORD_MS / 1e3)
    record[:, flush_every - 1::flush_every] = RECORD_FLUSH_MS / 1e3
    out["record"] = record
    return out


def write_run(path, *, nranks: int = 4, nnodes: int = 2, warmup: int = 2, iters: int = 10,
              flush_every: int = 4, killed: bool = False,
              completed: Optional[Sequence[int]] = None, status: Optional[Sequence[int]] = None,
              stop_reason: str = "completed", unrecorded: Sequence[int] = (),
              slow_rank: Optional[int] = SLOW_RANK,
              overrides: Optional[Dict[str, np.ndarray]] = None,
              evals: Optional[Sequence[tuple]] = None, schema_version=1,
              drop: Sequence[str] = (), batch_global: int = BATCH_GLOBAL,
              exchange: str = "sync", tag: str = "test", config: Optional[Dict] = None,
              attrs: Optional[Dict] = None,
              samples: Optional[Dict[str, np.ndarray]] = None,
              samples_written: Optional[Sequence[int]] = None,
              memory: Optional[Dict[str, Sequence[float]]] = None) -> str:
    """Write one result file; returns its path as str. ``overrides`` replaces whole
    (nranks, iters_total) arrays (seconds); ``evals`` is a list of (iteration, accuracy, loss)
    (default: three evaluations, the last at iters_total with accuracy 0.9; one slot left NaN);
    ``drop`` names root attributes or objects (e.g. "iterations/total") to leave out;
    ``memory`` writes /ranks/memory_<key> (bytes per rank, float64) for keys of MEMORY_KEYS
    (none by default, as older files)."""
    iters_total = warmup + iters
    completed = np.array([iters_total] * nranks if completed is None else completed, np.int64)
    if status is None:
        status = [0] * nranks if killed else [1] * nranks
    data = default_iterations(nranks, warmup, iters_total, flush_every, slow_rank)
    data.update(overrides or {})
    if evals is None:
        evals = [(iters_total // 2, 0.5, 1.5), (iters_total - 1, 0.7, 1.0),
                 (iters_total, 0.9, 0.5)]
    if killed:   # evaluations after the stop never happened
        evals = [e for e in evals if e[0] <= completed.max()]
    config = dict({"model": "mlp", "dataset": "synthetic", "exchange": exchange,
                   "device": "cpu", "iters": iters, "warmup": warmup, "batch": batch_global,
                   "lr": 0.1, "flush_every": flush_every, "tag": tag, "seed": 42},
                  **(config or {}))

    with h5py.File(path, "w") as f:
        a = f.attrs
        a["schema_version"] = np.int32(schema_version) if isinstance(schema_version, int) \
            else schema_version
        a["dtbench_version"] = "0.1.0"
        a["git_commit"] = "0123456789abcdef"
        a["command_line"] = "dtbench --model mlp --iters %d" % iters
        a["config_json"] = json.dumps(config)
        a["mpi_library"], a["hdf5_version"], a["backend_info"] = "Open MPI 4.1", "1.14.3", "OpenBLAS"
        a["start_time"] = "2024-01-01T00:00:00Z"
        if not killed:
            a["end_time"] = "2024-01-01T00:01:00Z"
            a["finished"] = np.int32(1)
            a["stop_reason"] = stop_reason
        a["slurm_job_id"] = ""
        a["nranks"], a["nnodes"] = np.int32(nranks), np.int32(nnodes)
        a["iters"], a["warmup"], a["iters_total"] = np.int32(iters), np.int32(warmup), \
            np.int32(iters_total)
        a["batch_global"] = np.int32(batch_global)
        a["batch_per_rank"] = np.int32(batch_global // nranks)
        # fixed-length strings, as a C writer may produce them
        a["model"], a["dataset"] = np.bytes_(b"mlp"), np.bytes_(b"synthetic")
        a["exchange"], a["device"], a["tag"] = exchange, "cpu", tag
        a["param_count"] = np.int64(1_000_000)
        a["flush_every"] = np.int32(flush_every)
        a["timer_overhead_s"] = np.float64(TIMER_OVERHEAD_S)
        a["clock_sync_rounds"] = np.int32(10)
        for k, v in (attrs or {}).items():
            a[k] = v

        cfg = f.create_group("config")
        for k, v in config.items():
            cfg.attrs[k] = str(v)

        r = f.create_group("ranks")
        r["rank"] = np.arange(nranks, dtype=np.int32)
        r["host"] = np.array([f"node{i * nnodes // nranks}".encode() for i in range(nranks)],
                             dtype="S64")
        r["node"] = np.array([i * nnodes // nranks for i in range(nranks)], dtype=np.int32)
        r["local_rank"] = np.array([i % max(1, nranks // nnodes) for i in range(nranks)],
                                   dtype=np.int32)
        r["pid"] = np.arange(1000, 1000 + nranks, dtype=np.int64)
        r["clock_offset_start"] = np.zeros(nranks)
        r["clock_offset_end"] = np.full(nranks, 1e-6)
        r["clock_rtt"] = np.full(nranks, 2e-6)
        r["completed"] = completed
        r["status"] = np.array(status, dtype=np.int32)
        for key, values in (memory or {}).items():
            assert key in MEMORY_KEYS, key
            r[f"memory_{key}"] = np.asarray(values, dtype=np.float64)

        g = f.create_group("iterations")
        g.attrs["warmup"] = np.int32(warmup)
        for name, array in data.items():
            out = np.full((nranks, iters_total), np.nan)
            for rank in range(nranks):
                n = completed[rank]
                out[rank, :n] = array[rank, :n]
                if rank in unrecorded:   # a block written, its completion never recorded
                    out[rank, n:n + flush_every] = 10.0
            ds = g.create_dataset(name, data=out)
            ds.attrs["units"] = UNITS.get(name, "")
            ds.attrs["description"] = f"synthetic {name}"

        if samples is not None:
            sg = f.create_group("samples")
            for k, v in samples.items():
                sg[k] = np.asarray(v, dtype=np.float64)
            cap = next(iter(samples.values())).shape[1]
            r["samples_written"] = np.array([cap] * nranks if samples_written is None
                                            else samples_written, dtype=np.int64)

        e = f.create_group("eval")
        n_evals = len(evals) + 1
        cols = {k: np.full(n_evals, np.nan) for k in ("iteration", "time", "accuracy", "loss")}
        for i, (iteration, acc, loss) in enumerate(evals):
            cols["iteration"][i], cols["time"][i] = iteration, iteration * 0.04
            cols["accuracy"][i], cols["loss"][i] = acc, loss
        for k, v in cols.items():
            e[k] = v

        for name in drop:
            if name in f.attrs:
                del f.attrs[name]
            else:
                del f[name]
    return str(path)


def add_profile(path, forward: np.ndarray, backward: np.ndarray, layers: Sequence[str],
                kinds: Sequence[str], first_iteration: int = 2) -> str:
    """Add a /profile group as --profile-layers writes it (docs/hdf5-layout.md): ``forward`` and
    ``backward`` (nranks, N, nlayers) in s, names and kinds as fixed 64-byte strings."""
    with h5py.File(path, "a") as f:
        g = f.create_group("profile")
        g.attrs["first_iteration"] = np.int64(first_iteration)
        g.attrs["iterations"] = np.int64(forward.shape[1])
        g["forward"], g["backward"] = forward, backward
        g["layer"] = np.array([x.encode() for x in layers], dtype="S64")
        g["kind"] = np.array([x.encode() for x in kinds], dtype="S64")
        g["flops"] = np.ones(len(layers))
    return str(path)


def add_roofline(path, amounts: Dict[str, np.ndarray], peak_bandwidth: np.ndarray,
                 peak_flops: np.ndarray, methods: Sequence[str] = ("triad", "sgemm")) -> str:
    """Add /profile's roofline as newer dtbench versions write it (docs/hdf5-layout.md):
    ``amounts`` forward_flop, backward_flop, forward_bytes, backward_bytes (nranks, nlayers);
    the peaks (nranks,) in B/s and FLOP/s, and how each was found (the same on every rank)."""
    with h5py.File(path, "a") as f:
        g = f["profile"]
        for name, values in amounts.items():
            g[name] = values
        g["peak_bandwidth"], g["peak_flops"] = peak_bandwidth, peak_flops
        for name, text in zip(("peak_bandwidth_method", "peak_flops_method"), methods):
            g[name] = np.array([text.encode()] * len(peak_flops), dtype="S256")
    return str(path)
