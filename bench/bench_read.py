#!/usr/bin/env python3
"""bench_read.py - the figures the bench/ scripts read from dtbench result files.

    python3 bench/bench_read.py COMMAND ARGS...

One subcommand per script (or per line a script prints), each printing exactly what the
script's text or table needs. Every file is read with the analysis package (dtbench_analysis,
analysis/ beside bench/; it needs h5py, numpy and pandas): its ``load_run`` gives the measured
iterations (completed, warm-up excluded) as ``Run.measured(field)``, NaN elsewhere, so nothing
here crops warm-up columns by itself. What the package does not expose is read with h5py and
says so where it is read. A file the package refuses, or a missing package, is one line on
stderr and exit status 2.

  exchange-vs-mpi FILE     exch_ms wait_ms xfer_ms calib_ms nparams compute_ms total_ms
                           (medians pooled over ranks x measured iterations; exchange_vs_mpi.sh)
  grad-dtype FILE          xfer_ms calib_ms bytes_sent (grad_dtype.sh)
  overlap FILE             backward exposed hidden total, ms (overlap_dtbench.sh)
  median-ms FILE FIELD     the pooled median of one per-iteration field, ms, %.3f
                           (overlap_progress.sh's backward)
  gpu-speed FILE NAME BATCH
                           one row of gpu_speed.sh's table: rank 0's medians (no newline)
  nccl-exchange FILE...    one line per file: total, exposed exchange and effective bus
                           bandwidth (gpu_bench.sh)
  kernel-choices FILE [--line N]
                           rank 0's /ranks/kernel_choices, or its line N (0-based)
  backend-info FILE        the root attribute backend_info ("?" when absent)
  grow-cost DIR ROUNDS     grow_cost.sh's table of DIR/whole<r>.h5 against DIR/grow<r>.h5
  records-cost DIR ROUNDS  records_cost.sh's table of DIR/off<r>.h5 against DIR/on<r>.h5
  total-stats FILE...      "median_s count" of /iterations/total over the measured iterations of
                           every rank of every file (vs_pytorch.sh; EXPECT_MODEL, EXPECT_BATCH
                           in the environment are checked against the files' attributes)
  torch-stats FILE...      "median_s count" over the step_times_s of torch_peer.py JSON outputs
  torch-blas FILE          the BLAS a torch_peer.py JSON output names, one line
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def die(msg):
    print(f"bench_read: {msg}", file=sys.stderr)
    sys.exit(2)


def analysis():
    """The dtbench_analysis package: the installed one, else analysis/ beside bench/ (the
    repository, and the tree a GPU pack carries)."""
    try:
        import dtbench_analysis
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "..", "analysis"))
        try:
            import dtbench_analysis
        except ImportError as e:
            die(f"cannot import dtbench_analysis ({e}); it needs h5py, numpy and pandas")
    return dtbench_analysis


def run_of(path, fields=None):
    dta = analysis()
    try:
        return dta.load_run(path, fields)
    except dta.RunFileError as e:
        die(str(e))


def nanmedian(values):
    import numpy as np
    return float(np.nanmedian(values))


def iteration_group_attrs(path):
    """Attributes of the /iterations group (grow_step, extensions, extension_s_median): the
    package reads the root's attributes only."""
    import h5py
    from dtbench_analysis.schema import decode
    with h5py.File(path, "r") as f:
        return {k: decode(v) for k, v in f["iterations"].attrs.items()}


def rank_strings(path, name):
    """/ranks/NAME as str per rank (kernel_choices): the package reads the numeric and
    identity fields of /ranks only."""
    import h5py
    from dtbench_analysis.schema import decode
    with h5py.File(path, "r") as f:
        return [str(decode(v)) for v in f["ranks"][name][()]]


# ---- one figure line per file ------------------------------------------------------------------
def cmd_exchange_vs_mpi(a):
    r = run_of(a.file)
    x, wait = r.measured("exchange"), r.measured("exchange_wait")
    comp = sum(r.measured(k) for k in ("data", "forward", "backward", "update"))
    print("%.4f %.4f %.4f %.4f %d %.3f %.4f" % (
        nanmedian(x) * 1e3, nanmedian(wait) * 1e3, nanmedian(x - wait) * 1e3,
        float(r.attrs.get("calibration_exchange_s", float("nan"))) * 1e3,
        int(r.attrs["param_count"]), nanmedian(comp) * 1e3, nanmedian(r.measured("total")) * 1e3))


def cmd_grad_dtype(a):
    r = run_of(a.file)
    x = r.measured("exchange") - r.measured("exchange_wait")
    print("%.4f %.4f %.0f" % (nanmedian(x) * 1e3,
                              float(r.attrs.get("calibration_exchange_s", float("nan"))) * 1e3,
                              nanmedian(r.measured("bytes_sent"))))


def cmd_overlap(a):
    r = run_of(a.file)
    m = [nanmedian(r.measured(k)) * 1e3
         for k in ("backward", "exchange", "exchange_hidden", "total")]
    print("%.3f %.3f %.3f %.3f" % tuple(m))


def cmd_median_ms(a):
    r = run_of(a.file)
    if not r.has(a.field):
        die(f"{a.file}: no per-iteration field {a.field!r}")
    print("%.3f" % (nanmedian(r.measured(a.field)) * 1e3))


def cmd_gpu_speed(a):
    r = run_of(a.file)
    med = {p: 1e3 * nanmedian(r.measured(p)[0])
           for p in ("data", "forward", "backward", "update", "total")}
    print(f"{a.name:16s} {a.batch / med['total'] * 1e3:9.1f} {med['data']:8.2f} "
          f"{med['forward']:9.2f} {med['backward']:9.2f} {med['update']:7.2f} "
          f"{med['total']:8.2f}", end="")


def cmd_nccl_exchange(a):
    for fn in a.files:
        r = run_of(fn)
        p = r.nranks
        ex, tot = nanmedian(r.measured("exchange")), nanmedian(r.measured("total"))
        bus = 4.0 * r.attrs["param_count"] / ex * 2 * (p - 1) / p / 1e9 if ex > 0 \
            else float("nan")
        print(f"{fn.split('/')[-1]}: {p} GPUs, total {tot*1e3:.2f} ms, exposed exchange "
              f"{ex*1e3:.2f} ms (effective busbw {bus:.1f} GB/s)")


def cmd_kernel_choices(a):
    run_of(a.file, fields=())  # the package's checks: a dtbench file of a known schema
    text = rank_strings(a.file, "kernel_choices")[0]
    print(text if a.line is None else text.splitlines()[a.line])


def cmd_backend_info(a):
    print(run_of(a.file, fields=()).attrs.get("backend_info", "?"))


# ---- tables over rounds ------------------------------------------------------------------------
def grow_figures(path):
    import numpy as np
    r = run_of(path, fields=("record", "total"))
    w = r.warmup
    rec, tot = r.measured("record")[:, w:], r.measured("total")[:, w:]
    ga = iteration_group_attrs(path)
    step = int(ga.get("grow_step", 0))
    ext = float(ga.get("extension_s_median", np.nan))
    n_ext = int(ga.get("extensions", 0))
    # the extension at iteration k (k = step, 2 step, ...) is in the record of k + 1
    after = [k + 1 - w for k in range(step, rec.shape[1] + w - 1, step)] if step else []
    ext_rec = np.median(rec[:, after]) if after else np.nan
    rest = np.delete(rec, after, axis=1)
    return dict(rec=np.nanmean(rec), rest=np.nanmean(rest), tot=np.nanmedian(tot), ext=ext,
                n=n_ext, step=step, ext_rec=ext_rec)


def cmd_grow_cost(a):
    import numpy as np
    rows = []
    print("round  step  extensions  ext_ms  ext_rec_ms  rec_us(whole  grow  ratio  grow_other)  "
          "iter_ms(whole  grow)")
    for i in range(1, a.rounds + 1):
        p, q = grow_figures(f"{a.dir}/whole{i}.h5"), grow_figures(f"{a.dir}/grow{i}.h5")
        row = (q["ext"] * 1e3, q["ext_rec"] * 1e3, p["rec"] * 1e6, q["rec"] * 1e6,
               q["rec"] / p["rec"], q["rest"] * 1e6, p["tot"] * 1e3, q["tot"] * 1e3)
        rows.append(row)
        print(f"{i:5d}  {q['step']:5d}  {q['n']:10d}  {row[0]:6.2f}  {row[1]:10.2f}  "
              f"{row[2]:12.1f}  {row[3]:5.1f}  {row[4]:5.2f}  {row[5]:10.1f}  {row[6]:13.3f}  "
              f"{row[7]:5.3f}")
    m = np.median(np.array(rows), axis=0)
    print(f"median                         {m[0]:6.2f}  {m[1]:10.2f}  {m[2]:12.1f}  {m[3]:5.1f}  "
          f"{m[4]:5.2f}  {m[5]:10.1f}  {m[6]:13.3f}  {m[7]:5.3f}")


def cmd_records_cost(a):
    import numpy as np

    def stats(path):
        r = run_of(path, fields=("record", "total"))
        return np.nanmean(r.measured("record")) * 1e6, np.nanmedian(r.measured("total")) * 1e3
    rows = []
    print(f"{'round':>5} {'rec_us off':>10} {'on':>8} {'on-off':>8} {'iter_ms off':>11} "
          f"{'on':>8} {'ratio':>6}")
    for i in range(1, a.rounds + 1):
        (ro, io), (rn, i_n) = stats(f"{a.dir}/off{i}.h5"), stats(f"{a.dir}/on{i}.h5")
        rows.append((ro, rn, rn - ro, io, i_n, i_n / io))
        print(f"{i:>5} {ro:>10.1f} {rn:>8.1f} {rn - ro:>8.1f} {io:>11.3f} {i_n:>8.3f} "
              f"{i_n / io:>6.3f}")
    m = np.median(np.array(rows), axis=0)
    print(f"{'median':>6} {m[0]:>9.1f} {m[1]:>8.1f} {m[2]:>8.1f} {m[3]:>11.3f} {m[4]:>8.3f} "
          f"{m[5]:>6.3f}")


# ---- vs_pytorch.sh -----------------------------------------------------------------------------
def cmd_total_stats(a):
    """Read with h5py, not the package: vs_pytorch.sh --parse takes files of partial layouts too
    (its test, bench/test_vs_pytorch_parse.sh, writes only the datasets it reads, warm-up on
    the /iterations group, /ranks/completed optional), which load_run refuses as not schema 1.
    The same cells as Run.measured: rank r's columns warmup .. completed[r]-1, NaNs dropped."""
    import h5py
    import numpy as np

    def s(v):
        return v.decode() if isinstance(v, bytes) else str(v)
    vals = []
    for fn in a.files:
        with h5py.File(fn, "r") as f:
            at = f.attrs
            w = int(at["warmup"]) if "warmup" in at else int(f["/iterations"].attrs["warmup"])
            tot = f["/iterations/total"]
            nranks, ncols = tot.shape
            comp = f["/ranks/completed"][:] if "/ranks/completed" in f \
                else np.full(nranks, ncols)
            for r in range(nranks):
                end = min(int(comp[r]), ncols)
                row = np.asarray(tot[r, w:end], dtype=np.float64) if end > w else np.empty(0)
                vals.append(row[np.isfinite(row)])
            if "finished" not in at:
                print(f"vs_pytorch: warning: {fn}: no 'finished' attribute (run killed?)",
                      file=sys.stderr)
            if "stop_reason" in at and s(at["stop_reason"]) != "completed":
                print(f"vs_pytorch: warning: {fn}: stop_reason={s(at['stop_reason'])}",
                      file=sys.stderr)
            em, eb = os.environ.get("EXPECT_MODEL"), os.environ.get("EXPECT_BATCH")
            if em and "model" in at and s(at["model"]) != em:
                sys.exit(f"vs_pytorch: {fn}: model is {s(at['model'])}, expected {em}")
            if eb and "batch_per_rank" in at and int(at["batch_per_rank"]) != int(eb):
                sys.exit(f"vs_pytorch: {fn}: batch_per_rank is {int(at['batch_per_rank'])}, "
                         f"expected {eb}")
    v = np.concatenate(vals) if vals else np.empty(0)
    if v.size == 0:
        sys.exit("vs_pytorch: no measured iteration in " + " ".join(a.files))
    print(f"{np.median(v):.9g} {v.size}")


def cmd_torch_stats(a):
    import json
    import numpy as np
    v = []
    for fn in a.files:
        with open(fn) as f:
            v += json.load(f)["step_times_s"]
    if not v:
        sys.exit("vs_pytorch: no torch step times in " + " ".join(a.files))
    print(f"{np.median(v):.9g} {len(v)}")


def cmd_torch_blas(a):
    import json
    with open(a.file) as f:
        d = json.load(f)
    print(d.get("openblas_config") or d.get("blas_libraries"), "| corename",
          d.get("openblas_corename"), "| threads", d.get("openblas_threads"), "| oneDNN",
          d.get("mkldnn_enabled"))


#: subcommands that read no file with dtbench_analysis (they run without pandas)
NO_PACKAGE = ("total-stats", "torch-stats", "torch-blas")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="bench_read.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, fn in (("exchange-vs-mpi", cmd_exchange_vs_mpi), ("grad-dtype", cmd_grad_dtype),
                     ("overlap", cmd_overlap), ("backend-info", cmd_backend_info)):
        p = sub.add_parser(name)
        p.add_argument("file")
        p.set_defaults(fn=fn)
    p = sub.add_parser("median-ms")
    p.add_argument("file")
    p.add_argument("field")
    p.set_defaults(fn=cmd_median_ms)
    p = sub.add_parser("gpu-speed")
    p.add_argument("file")
    p.add_argument("name")
    p.add_argument("batch", type=int)
    p.set_defaults(fn=cmd_gpu_speed)
    p = sub.add_parser("nccl-exchange")
    p.add_argument("files", nargs="+")
    p.set_defaults(fn=cmd_nccl_exchange)
    p = sub.add_parser("kernel-choices")
    p.add_argument("file")
    p.add_argument("--line", type=int)
    p.set_defaults(fn=cmd_kernel_choices)
    for name, fn in (("grow-cost", cmd_grow_cost), ("records-cost", cmd_records_cost)):
        p = sub.add_parser(name)
        p.add_argument("dir")
        p.add_argument("rounds", type=int)
        p.set_defaults(fn=fn)
    for name, fn in (("total-stats", cmd_total_stats), ("torch-stats", cmd_torch_stats)):
        p = sub.add_parser(name)
        p.add_argument("files", nargs="+")
        p.set_defaults(fn=fn)
    p = sub.add_parser("torch-blas")
    p.add_argument("file")
    p.set_defaults(fn=cmd_torch_blas)
    a = ap.parse_args(argv)
    if a.cmd not in NO_PACKAGE:
        analysis()
    a.fn(a)


if __name__ == "__main__":
    main()
