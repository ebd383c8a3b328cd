#!/usr/bin/env python3
"""gemm_share.py - how close dtbench's GEMM layers come to the machine's sgemm peak, per layer, in a
run made with --profile-layers N (bench/gemm_share.sh makes one for nanogpt-char and calls this).

    python3 bench/gemm_share.py RUN.h5 [--kinds fc,attention,lm_head] [--json]

Reads /profile (docs/hdf5-layout.md): each layer's forward and backward times over the profiled
iterations, the FLOPs of one forward and one backward call, and the peak the run measured at start
(/profile/peak_flops: an n x n x n product through the fully connected layer's forward, OpenBLAS
on the run's --threads; its method is printed). A layer's rate is its FLOPs over its mean time,
as dtbench-analyze summary's GFLOP/s and %FLOP columns (the same figures, forward and backward
together; here also each apart). Prints every fully connected (fc) layer's share of the peak,
then for the fc layers and for all GEMM layers (--kinds: fc, the attention's batched products
with their softmax, the tied head): the FLOP-weighted mean of the layers' shares (sum of
FLOPs x share over the sum of FLOPs) and the aggregate (their FLOPs over their time, over the
peak; lower than the weighted mean when slow layers carry many FLOPs). Reads the file with
dtbench_analysis (Run.profile): needs h5py, numpy and pandas.
"""
import argparse
import json
import os
import sys

import numpy as np


def mean_cells(values):
    """Mean over ranks and profiled iterations of the finite cells, per layer (NaN: none)."""
    finite = np.isfinite(values)
    count = finite.sum(axis=(0, 1))
    total = np.where(finite, values, 0.0).sum(axis=(0, 1))
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def analysis():
    """dtbench_analysis: the installed package, else analysis/ beside bench/."""
    try:
        import dtbench_analysis
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "analysis"))
        try:
            import dtbench_analysis
        except ImportError as e:
            sys.exit(f"gemm_share: cannot import dtbench_analysis ({e}); it needs h5py, numpy "
                     "and pandas")
    return dtbench_analysis


def layers_of(path):
    """Per layer: name, kind, forward and backward FLOPs and mean seconds; the run's peak."""
    dta = analysis()
    try:
        r = dta.load_run(path, fields=())
    except dta.RunFileError as e:
        sys.exit(f"gemm_share: {e}")
    p = r.profile
    if "peak_flops" not in p:
        sys.exit(f"gemm_share: {path}: no /profile with peaks (run dtbench with "
                 "--profile-layers N)")
    fwd_t, bwd_t = mean_cells(p["forward"]), mean_cells(p["backward"])
    fwd_f = np.nanmean(p["forward_flop"], axis=0)
    bwd_f = np.nanmean(p["backward_flop"], axis=0)
    peak = float(np.nanmedian(p["peak_flops"]))
    method = str(p["peak_flops_method"][0])
    names, kinds = [str(x) for x in p["layer"]], [str(x) for x in p["kind"]]
    run = {k: str(r.attrs[k]) if k in r.attrs else "?"
           for k in ("model", "batch_per_rank", "precision")}
    run.update({k.replace("-", "_"): r.config_attrs.get(k, "?")
                for k in ("seq-len", "threads", "optimizer")})
    run["profiled_iterations"] = int(p["forward"].shape[1])
    rows = [{"layer": names[j], "kind": kinds[j], "fwd_flop": float(fwd_f[j]),
             "bwd_flop": float(bwd_f[j]), "fwd_s": float(fwd_t[j]), "bwd_s": float(bwd_t[j])}
            for j in range(len(names))]
    return rows, peak, method, run


def share(flop, seconds, peak):
    return flop / seconds / peak if seconds > 0 and np.isfinite(seconds) else float("nan")


def summarise(rows, peak, kinds):
    """The FLOP-weighted mean share and the aggregate share of the rows of KINDS."""
    sel = [r for r in rows if r["kind"] in kinds and r["fwd_s"] + r["bwd_s"] > 0]
    flop = sum(r["fwd_flop"] + r["bwd_flop"] for r in sel)
    secs = sum(r["fwd_s"] + r["bwd_s"] for r in sel)
    if not sel or flop <= 0:
        return None
    weighted = sum((r["fwd_flop"] + r["bwd_flop"]) * r["share"] for r in sel) / flop
    return {"kinds": sorted(kinds), "layers": len(sel), "gflop": flop / 1e9, "ms": secs * 1e3,
            "flop_weighted_share": weighted, "aggregate_share": flop / secs / peak}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", help="a dtbench result file made with --profile-layers N")
    ap.add_argument("--kinds", default="fc,attention,lm_head",
                    help="the layer kinds that count as GEMMs (default fc,attention,lm_head)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = ap.parse_args(argv)
    rows, peak, method, run = layers_of(a.file)
    if not peak > 0:
        sys.exit(f"gemm_share: {a.file}: the run's peak is not known ({method})")
    for r in rows:
        r["share"] = share(r["fwd_flop"] + r["bwd_flop"], r["fwd_s"] + r["bwd_s"], peak)
        r["fwd_share"] = share(r["fwd_flop"], r["fwd_s"], peak)
        r["bwd_share"] = share(r["bwd_flop"], r["bwd_s"], peak)
    gemm_kinds = set(a.kinds.split(","))
    out = {"file": a.file, "run": run, "peak_gflops": peak / 1e9, "peak_method": method,
           "fc_layers": [r for r in rows if r["kind"] == "fc"],
           "fc": summarise(rows, peak, {"fc"}), "gemm": summarise(rows, peak, gemm_kinds),
           "per_kind": {k: summarise(rows, peak, {k}) for k in sorted(gemm_kinds)}}
    if a.json:
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    print(f"{a.file}: {run['model']}, batch {run['batch_per_rank']}, seq {run['seq_len']}, "
          f"{run['threads']} thread(s), {run['precision']}, {run['optimizer']}, "
          f"{run['profiled_iterations']} profiled iterations")
    print(f"peak: {peak / 1e9:.1f} GFLOP/s ({method})")
    print(f"{'layer':24} {'GFLOP':>8} {'fwd ms':>9} {'bwd ms':>9} {'GFLOP/s':>8} {'%peak':>6} "
          f"{'fwd%':>6} {'bwd%':>6}")
    for r in out["fc_layers"]:
        secs = r["fwd_s"] + r["bwd_s"]
        print(f"{r['layer']:24} {(r['fwd_flop'] + r['bwd_flop']) / 1e9:8.3f} "
              f"{r['fwd_s'] * 1e3:9.2f} {r['bwd_s'] * 1e3:9.2f} "
              f"{(r['fwd_flop'] + r['bwd_flop']) / secs / 1e9 if secs > 0 else float('nan'):8.1f} "
              f"{r['share'] * 100:6.1f} {r['fwd_share'] * 100:6.1f} {r['bwd_share'] * 100:6.1f}")
    for label, s in [("fc layers", out["fc"])] + [(f"kind {k}", v) for k, v in
                                                   out["per_kind"].items() if k != "fc"] \
            + [("GEMM layers (" + ",".join(sorted(gemm_kinds)) + ")", out["gemm"])]:
        if s:
            print(f"{label}: {s['layers']} layers, {s['gflop']:.2f} GFLOP in {s['ms']:.1f} ms: "
                  f"FLOP-weighted mean {s['flop_weighted_share'] * 100:.1f}% of the peak, "
                  f"aggregate {s['aggregate_share'] * 100:.1f}%")
    print("(%peak: forward + backward FLOPs over their mean time, over the peak; fwd%, bwd%: each "
          "apart)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
