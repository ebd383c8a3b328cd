"""``dtbench-analyze predict RUNS... --nodes 32,64,...``: a performance model fitted to measured
runs, validated on the largest measured scale, extrapolated with prediction intervals.

Steps (the model itself is in predict_fit.py, its replay in predict_sim.py):
1. every run is reduced to an Observation (compute, transfer, waits, sizes, topology);
2. validation: for every strategy measured at two or more scales, the runs at its largest scale
   are held out, the model is fitted on all other runs and predicts them; the error of the median
   iteration time is printed. When the worst error exceeds ``--max-error`` the command refuses to
   extrapolate (exit status 1) unless ``--force``; forced or not, intervals are widened by it;
3. the model is fitted on every run and replayed at the requested node counts for each strategy.
``build(runs, ...)`` returns the whole result as a dict (what ``--json`` prints and the report
and ``predict_plot.figure`` use).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import inputs, jsonout, metrics, outputs
from .predict_fit import (ALGORITHM_HELP, ALGORITHMS, PARAMS, CommFit, Observation,
                          exchange_terms, fit_comm, fit_compute, observe, transfer_factors)
from .predict_sim import SLOW_FACTOR, STRATEGIES, Scenario, needs, simulate, summarise
from .runfile import Run

DEFAULT_MAX_ERROR = 0.25


def _scale(o: Observation):
    return (o.nnodes, o.nranks)


def transport_of(strategy: str) -> str:
    """The transport a strategy's exchange runs on: hier, or MPI's allreduce (mpi)."""
    return "hier" if strategy == "hier" else "mpi"


@dataclass
class CommModels:
    """A communication fit per transport (from that transport's runs), and one pooled over
    every run for what a transport's own runs do not determine."""
    by_transport: Dict[str, CommFit]
    pooled: CommFit

    def for_strategy(self, strategy: str, level: Optional[str]) -> Tuple[str, CommFit]:
        name = transport_of(strategy)
        own = self.by_transport.get(name)
        if own is not None and own.rows and (level is None or own.level_known(level)):
            return name, own
        return "pooled", self.pooled


def _fit(observations: Sequence[Observation], algorithm: str):
    groups: Dict[str, List[Observation]] = {}
    for o in observations:
        groups.setdefault(transport_of(o.strategy), []).append(o)
    comm = CommModels({k: fit_comm(v, algorithm) for k, v in groups.items()},
                      fit_comm(observations, algorithm))
    return comm, fit_compute(observations), transfer_factors(observations)


def _setting(obs: Sequence[Observation], strategy: str, name: str, default: int) -> int:
    same = [o for o in obs if o.strategy == strategy]
    if not same:
        return default
    return max(getattr(max(same, key=_scale), name), 0 if name == "staleness" else 1)


def scenario_for(o: Observation, strategy: str, nnodes: int, per_node: int, batch: int,
                 algorithm: str) -> Scenario:
    return Scenario(strategy=strategy, nnodes=nnodes, per_node=per_node, batch_per_rank=batch,
                    grad_bytes=o.grad_bytes, bucket_bytes=o.bucket_bytes,
                    algorithm=(o.hint_for(strategy, o.staleness if strategy == "ssp" else 1)
                               if algorithm == "auto" else algorithm),
                    staleness=o.staleness, sync_period=max(1, o.sync_period),
                    ps_ranks=max(1, o.ps_ranks))


def _run_scenario(s: Scenario, key, models: CommModels, compute, tf, rng, draws, widen=0.0):
    level = needs(s)
    name, comm = models.for_strategy(s.strategy, level)
    if level and not comm.level_known(level):
        return None, (f"no {'multi-node' if level == 'inter' else 'multi-rank'} run measured: "
                      f"{level}-node terms unknown")
    fit = compute.get(key)
    if fit is None:
        return None, "no compute measured for this model/dataset/device"
    out = summarise(simulate(s, comm, fit, tf, rng, draws=draws), widen)
    out["comm_fit"] = name
    return out, None


def _calibration_error(o: Observation, strategy: str, models: CommModels,
                       algorithm: str) -> Optional[float]:
    """The held-out run's calibration (its transport's blocking collectives alone on its
    buckets) predicted by the fit, relative error; None without a calibration."""
    if not o.calibration or strategy not in ("sync", "hier"):
        return None
    level = "inter" if o.nnodes > 1 else "intra"
    _, comm = models.for_strategy(strategy, level)
    if not comm.level_known(level):
        return None
    algo = o.calibration_hint if algorithm == "auto" else algorithm
    terms = exchange_terms(strategy, algo, o.nnodes, o.per_node, o.grad_bytes, o.bucket_bytes)
    return comm.time(terms) / o.calibration - 1.0


def validate(observations: List[Observation], algorithm: str, rng, draws: int) -> List[Dict]:
    out = []
    for strategy in sorted({o.strategy for o in observations}):
        group = [o for o in observations if o.strategy == strategy]
        scales = sorted({_scale(o) for o in group})
        if len(scales) < 2:
            continue
        top = scales[-1]
        held = [o for o in group if _scale(o) == top]
        rest = [o for o in observations if not (o.strategy == strategy and _scale(o) == top)]
        comm, compute, tf = _fit(rest, algorithm)
        for o in held:
            s = scenario_for(o, strategy, o.nnodes, o.per_node, o.batch_per_rank, algorithm)
            pred, why = _run_scenario(s, o.key, comm, compute, tf, rng, draws)
            measured = float(np.median(o.iteration)) if o.iteration.size else float("nan")
            row = {"strategy": strategy, "file": o.path, "nodes": o.nnodes, "ranks": o.nranks,
                   "fitted_on": len(rest), "measured_s": measured,
                   "measured_transfer_s": float(np.median(o.transfer)) if o.transfer.size
                   else None, "predicted": pred, "error": None, "why": why}
            if pred is not None and measured > 0:
                row["error"] = pred["iteration_s"]["value"] / measured - 1.0
                row["transfer_error"] = (pred["comm_model_s"] / row["measured_transfer_s"] - 1.0
                                         if row["measured_transfer_s"] else None)
                row["calibration_error"] = _calibration_error(o, strategy, comm, algorithm)
            out.append(row)
    return out


@dataclass
class Fitted:
    """The model fitted to every run, and what predicting with it needs."""
    obs: List[Observation]
    ref: Observation          # the largest run: gradient, buckets, model of the predictions
    per_node: int
    algorithm: str
    comm: CommModels
    compute: Dict
    tfactors: np.ndarray
    rng: np.random.Generator
    draws: int

    def predict(self, strategy: str, nnodes: int, batch: int, per_node: Optional[int] = None,
                widen: float = 0.0, draws: Optional[int] = None):
        s = scenario_for(self.ref, strategy, nnodes, per_node or self.per_node, batch,
                         self.algorithm)
        s.staleness = _setting(self.obs, "ssp", "staleness", 1)
        s.sync_period = _setting(self.obs, "mixed", "sync_period", 1)
        s.ps_ranks = _setting(self.obs, "async", "ps_ranks", 1)
        return _run_scenario(s, self.ref.key, self.comm, self.compute, self.tfactors, self.rng,
                             draws or self.draws, widen)


def _base(model: Fitted, runs: Sequence[Run], batch_per_rank, batch_global) -> Dict:
    """The speedup base: the smallest run of the reference's model (with the predictions'
    per-rank batch when one was measured), predicted by the model at its scale so that the
    model's own bias cancels, with the predictions' per-rank batch (weak scaling) or its share
    of the global batch (strong scaling)."""
    obs, ref = model.obs, model.ref
    b_pred = batch_per_rank or (None if batch_global else ref.batch_per_rank)
    cands = [r for r, o in zip(runs, obs) if o.key == ref.key]
    same_b = [r for r, o in zip(runs, obs) if o.key == ref.key and o.batch_per_rank == b_pred]
    run = min(same_b or cands, key=lambda r: (r.nranks, r.nnodes))
    o = obs[list(runs).index(run)]
    b = max(1, batch_global // o.nranks) if batch_global else \
        (batch_per_rank or ref.batch_per_rank)
    measured = metrics.throughput(run)["samples_per_s"]
    s = scenario_for(ref, o.strategy, o.nnodes, o.per_node, b, model.algorithm)
    pred, _ = _run_scenario(s, ref.key, model.comm, model.compute, model.tfactors, model.rng,
                            model.draws)
    return {"file": run.path, "ranks": run.nranks, "batch_per_rank": b,
            "samples_per_s": pred["samples_per_s"]["value"] if pred else measured,
            "measured_samples_per_s": measured}


def _curve(model: Fitted, predictions: List[Dict], nodes: Sequence[int]) -> List[Dict]:
    """The model of every predicted strategy at powers of two from the smallest measured node
    count to the largest requested one, at the predictions' settings: what the figure draws."""
    lo = min(o.nnodes for o in model.obs)
    grid = sorted({2 ** k for k in range(0, 21) if lo <= 2 ** k <= max(nodes)} | {lo})
    out = []
    for row in predictions:
        if row["nodes"] != nodes[0] or row["prediction"] is None:
            continue
        for n in grid:
            pred, _ = model.predict(row["strategy"], n, row["batch_per_rank"], draws=8)
            if pred is not None:
                out.append({"strategy": row["strategy"], "nodes": n,
                            "iteration_s": pred["iteration_s"]["value"]})
    return out


def _describe_comm(comm: CommFit) -> Dict:
    sd = np.sqrt(np.clip(np.diag(comm.cov), 0, None))
    return {"algorithm": comm.algorithm, "rows": comm.rows,
            "median_abs_rel_residual": comm.rel_residual, "notes": comm.notes,
            "params": {n: (float(v) if comm.determined[n] else None)
                       for n, v in zip(PARAMS, comm.params)},
            "sd": {n: (float(v) if comm.determined[n] else None) for n, v in zip(PARAMS, sd)}}


def _describe_fit(model: Fitted) -> Dict:
    waits = [o.wait for o in model.obs if o.wait.size]
    waits = np.concatenate(waits) if waits else np.array([])
    comm = {k: _describe_comm(v) for k, v in sorted(model.comm.by_transport.items()) if v.rows}
    if len(comm) != 1:
        comm["pooled"] = _describe_comm(model.comm.pooled)
    return {
        "runs": [{"file": o.path, "strategy": o.strategy, "nodes": o.nnodes, "ranks": o.nranks,
                  "batch_per_rank": o.batch_per_rank, "grad_bytes": o.grad_bytes,
                  "bucket_bytes": o.bucket_bytes,
                  "iteration_s": float(np.median(o.iteration)) if o.iteration.size else None,
                  "transfer_s": float(np.median(o.transfer)) if o.transfer.size else None,
                  "compute_s": o.compute_median, "calibration_s": o.calibration}
                 for o in model.obs],
        "compute": {"/".join(k): {
            "c0_s": f.c0, "c1_s_per_sample": f.c1, "per_sample_p5_p95_s": f.c1_ci,
            "batches": f.batches, "rank_factor_p95": float(np.percentile(f.rank_factors, 95)),
            "iteration_factor_p95": float(np.percentile(f.iter_factors, 95)),
            "p_slow_iteration": float(np.mean(f.iter_factors > SLOW_FACTOR)),
            "between_runs_rel_sd": f.rel_sd} for k, f in model.compute.items()},
        "comm": comm,
        "waits": {"n": int(waits.size),
                  "median_s": float(np.median(waits)) if waits.size else None,
                  "p95_s": float(np.percentile(waits, 95)) if waits.size else None},
    }


ASSUMPTIONS = [
    "compute c(b) = c0 + c1 b per rank, independent of the number of ranks",
    "rank and iteration factors drawn independently for every rank (no correlated slowdowns "
    "beyond those measured)",
    "collective cost: alpha-beta per level for the algorithm named (across nodes, messages above "
    "the 64 KiB eager limit with their own beta); a node's link is not shared by other jobs",
    f"a rank-iteration is slow when its compute exceeds {SLOW_FACTOR}x the median",
    "async: the measured number of parameter servers (1 when none was measured), whatever the "
    "scale",
    "intervals: 90 % over parameter draws (fit covariance), widened by the worst held-out error",
]


def build(runs: Sequence[Run], nodes: Sequence[int], strategies: Sequence[str] = STRATEGIES,
          algorithm: str = "auto", per_node: Optional[int] = None,
          batch_per_rank: Optional[int] = None, batch_global: Optional[int] = None,
          max_error: float = DEFAULT_MAX_ERROR, seed: int = 1, draws: int = 48) -> Dict:
    """The whole prediction as a dict (see the module doc)."""
    rng = np.random.default_rng(seed)
    obs = [observe(r) for r in runs]
    ref = max(obs, key=lambda o: (o.nnodes, o.nranks, o.batch_per_rank))
    comm, compute, tf = _fit(obs, algorithm)
    model = Fitted(obs, ref, per_node or ref.per_node, algorithm, comm, compute, tf, rng, draws)
    checks = validate(obs, algorithm, rng, draws)
    errors = [abs(c["error"]) for c in checks if c["error"] is not None]
    worst = max(errors) if errors else None
    base = _base(model, runs, batch_per_rank, batch_global)
    predictions = []
    for strategy in strategies:
        for n in nodes:
            p = n * model.per_node
            b = max(1, batch_global // p) if batch_global else \
                (batch_per_rank or ref.batch_per_rank)
            pred, why = model.predict(strategy, n, b, widen=worst or 0.0)
            row = {"strategy": strategy, "nodes": n, "ranks": p, "batch_per_rank": b,
                   "measured_strategy": strategy in {o.strategy for o in obs},
                   "prediction": pred, "why": why}
            if pred is not None and base["samples_per_s"]:
                row["speedup"] = pred["samples_per_s"]["value"] / base["samples_per_s"]
                row["efficiency"] = row["speedup"] * base["ranks"] / p
            predictions.append(row)
    used = set(strategies)
    settings = ", ".join(
        [f"ssp staleness {_setting(obs, 'ssp', 'staleness', 1)}"] * ("ssp" in used)
        + [f"async servers {_setting(obs, 'async', 'ps_ranks', 1)}"] * ("async" in used)
        + [f"mixed sync period {_setting(obs, 'mixed', 'sync_period', 1)}"] * ("mixed" in used))
    result = _describe_fit(model)
    result.update({
        "validation": checks, "worst_error": worst, "max_error": max_error,
        "refused": worst is not None and worst > max_error, "validated": worst is not None,
        "base": base,
        "reference": {"file": ref.path, "per_node": model.per_node, "grad_bytes": ref.grad_bytes,
                      "settings": settings, "bucket_bytes": ref.bucket_bytes,
                      "algorithm": comm.pooled.algorithm},
        "predictions": predictions,
        "curve": _curve(model, predictions, nodes),
        "assumptions": ASSUMPTIONS,
    })
    return result


# ---- text -------------------------------------------------------------------------------------
def _ms(x) -> str:
    return "n/a" if x is None or not np.isfinite(x) else f"{1e3 * x:.3f}"


def _fmt_param(name: str, value, sd, beta_known: bool = False) -> str:
    if value is None:
        return "0 (not separable, see the notes)" if beta_known else "not determined"
    if name.startswith("alpha"):
        return f"{value * 1e6:.2f} us (sd {sd * 1e6:.2f})"
    if value <= 0:
        return "0 (no measurable cost)"
    bw = 1.0 / value / 1e6
    return f"{value * 1e9:.4f} s/GB = {bw:.1f} MB/s (sd {sd * 1e9:.4f} s/GB)"


def format_text(result: Dict, simulate_mode: bool) -> str:
    lines = [f"predict: {len(result['runs'])} runs; model fitted to all of them, validated by "
             f"holding out each strategy's largest measured scale"]
    lines += [f"   left out: {x['file']}: {x['why']}" for x in result.get("left_out", [])]
    for r in result["runs"]:
        lines.append(f"   {r['strategy']:6s} {r['nodes']:4d} nodes {r['ranks']:5d} ranks  "
                     f"batch/rank {r['batch_per_rank']:4d}  iteration {_ms(r['iteration_s'])} ms  "
                     f"compute {_ms(r['compute_s'])} ms  transfer {_ms(r['transfer_s'])} ms  "
                     + (f"(collectives alone {_ms(r['calibration_s'])} ms)  "
                        if r.get("calibration_s") else "") + r["file"])
    for key, c in result["compute"].items():
        lines.append(f"compute ({key}): c(b) = {_ms(c['c0_s'])} ms + {_ms(c['c1_s_per_sample'])} "
                     f"ms/sample x b (per sample p5..p95 {_ms(c['per_sample_p5_p95_s'][0])}.."
                     f"{_ms(c['per_sample_p5_p95_s'][1])} ms; batches {c['batches']}; rank "
                     f"factor p95 {c['rank_factor_p95']:.3f}, iteration factor p95 "
                     f"{c['iteration_factor_p95']:.3f}, P(iteration > {SLOW_FACTOR}x median) "
                     f"{c['p_slow_iteration']:.4f})")
    for transport, cm in result["comm"].items():
        what = ("every run" if transport == "pooled" else
                f"the runs on the {transport} transport")
        lines.append(f"communication ({what}): algorithm {cm['algorithm']}, {cm['rows']} rows, "
                     f"median |relative residual| {100 * cm['median_abs_rel_residual']:.1f}%")
        for name in PARAMS:
            beta_known = cm["params"][name.replace("alpha", "beta")] is not None
            lines.append(f"   {name:12s} "
                         f"{_fmt_param(name, cm['params'][name], cm['sd'][name] or 0, beta_known)}")
        lines += [f"   note: {n}" for n in cm["notes"]]
    w = result["waits"]
    if w["n"]:
        lines.append(f"waits (measured exchange_wait): median {_ms(w['median_s'])} ms, p95 "
                     f"{_ms(w['p95_s'])} ms over {w['n']} rank-iterations")
    lines.append("validation (fit without the held-out runs, predict them):")
    if not result["validation"]:
        lines.append("   none possible: no strategy measured at two scales; predictions below "
                     "are NOT validated")
    for v in result["validation"]:
        if v["error"] is None:
            lines.append(f"   {v['strategy']} {v['nodes']}x{v['ranks'] // max(1, v['nodes'])}: "
                         f"not predicted ({v['why']})")
            continue
        pi = v["predicted"]["iteration_s"]
        te, ce = v.get("transfer_error"), v.get("calibration_error")
        lines.append(f"   {v['strategy']} {v['nodes']} nodes {v['ranks']} ranks "
                     f"(fitted on {v['fitted_on']} runs): measured {_ms(v['measured_s'])} ms, "
                     f"predicted {_ms(pi['value'])} ms [{_ms(pi['lo'])}, {_ms(pi['hi'])}]: "
                     f"error {100 * v['error']:+.1f}%"
                     + (f" (exchange transfer {100 * te:+.1f}%" if te is not None else "")
                     + (f"; collectives alone {100 * ce:+.1f}%" if ce is not None else "")
                     + (")" if te is not None else ""))
    if result["worst_error"] is not None:
        lines.append(f"   worst |error| {100 * result['worst_error']:.1f}% (bound --max-error "
                     f"{100 * result['max_error']:.0f}%)")
    ref = result["reference"]
    settings = f"{ref['settings']}, " if ref["settings"] else ""
    lines.append(f"predictions: {ref['per_node']} ranks per node, {settings}gradient "
                 f"{ref['grad_bytes'] / 1e6:.3f} MB in buckets of {ref['bucket_bytes'] / 2**20:g} "
                 f"MiB; speedup against the model at the scale of {result['base']['file']} "
                 f"({result['base']['ranks']} ranks, batch {result['base']['batch_per_rank']} "
                 f"per rank: {result['base']['samples_per_s']:.1f} samples/s; measured "
                 f"{result['base']['measured_samples_per_s']:.1f}); "
                 f"intervals 90 % (parameter draws), widened "
                 f"by the worst held-out error; * = strategy not measured (from the shared fit)")
    lines.append(f"   {'strategy':8s} {'nodes':>5s} {'ranks':>6s} {'b/rank':>6s}  "
                 f"{'time/iter ms [90% PI]':32s} {'exch.':>6s} {'samples/s [90% PI]':30s} "
                 f"{'speedup':>8s} {'effic.':>6s}")
    for p in result["predictions"]:
        name = p["strategy"] + ("" if p["measured_strategy"] else "*")
        if p["prediction"] is None:
            lines.append(f"   {name:8s} {p['nodes']:5d} {p['ranks']:6d} {p['batch_per_rank']:6d}  "
                         f"n/a: {p['why']}")
            continue
        it, tp = p["prediction"]["iteration_s"], p["prediction"]["samples_per_s"]
        span = f"{_ms(it['value'])} [{_ms(it['lo'])}, {_ms(it['hi'])}]"
        tspan = f"{tp['value']:.1f} [{tp['lo']:.1f}, {tp['hi']:.1f}]"
        sp, eff = p.get("speedup"), p.get("efficiency")
        sp_s = f"{sp:.3g}" if sp else "n/a"
        eff_s = f"{eff:.3g}" if eff else "n/a"
        lines.append(f"   {name:8s} {p['nodes']:5d} {p['ranks']:6d} {p['batch_per_rank']:6d}  "
                     f"{span:32s} {100 * p['prediction']['exchange_share']:5.1f}% {tspan:30s} "
                     f"{sp_s:>8s} {eff_s:>6s}")
    if simulate_mode:
        lines += simulation_lines(result)
    lines.append("assumptions: " + "; ".join(result["assumptions"]))
    return "\n".join(lines)


def simulation_lines(result: Dict) -> List[str]:
    lines = [f"simulation: replaying the fitted rank and iteration factors over every rank "
             f"(slow = compute > {SLOW_FACTOR}x median); slowdown = median compute of what "
             f"an iteration waits for / median compute of a rank",
             f"   {'strategy':8s} {'nodes':>5s} {'ranks':>6s} {'P(rank-iter slow)':>18s} "
             f"{'P(some rank slow in an iteration)':>34s}  {'who waits for it':24s} "
             f"{'slowdown':>8s}"]
    who = {"sync": "every rank", "hier": "every rank", "ssp": "every rank, S iters later",
           "async": "nobody", "mixed": "its node's ranks"}
    for p in result["predictions"]:
        pr = p["prediction"]
        if pr is None:
            continue
        lines.append(f"   {p['strategy']:8s} {p['nodes']:5d} {p['ranks']:6d} "
                     f"{pr['p_slow_rank_iteration']:18.4f} "
                     f"{pr['p_iteration_has_slow_rank']:34.4f}  {who[p['strategy']]:24s} "
                     f"{pr['straggler_slowdown']:8.3f}")
    return lines


# ---- command ------------------------------------------------------------------------------------
def _int_list(text: str) -> List[int]:
    values = [int(v) for v in text.split(",") if v.strip()]
    if not values or min(values) < 1:
        raise ValueError
    return values


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "predict", help="fit a performance model to the runs and predict larger scales",
        description="Fit compute, communication (alpha-beta per level) and straggler models to "
                    "measured runs, validate on the largest measured scale, and predict "
                    "iteration time, exchange share, speedup and efficiency of sync, hier, ssp, "
                    "async and mixed at the requested node counts.")
    inputs.add_inputs(p)
    p.add_argument("--nodes", required=True, metavar="N,N,...",
                   help="node counts to predict, e.g. 32,64,128,256,512,1024")
    p.add_argument("--strategies", default=",".join(STRATEGIES), metavar="S,S,...",
                   help=f"strategies to predict, of {','.join(STRATEGIES)} [all]")
    p.add_argument("--algorithm", choices=ALGORITHMS, default="auto",
                   help="allreduce algorithm of the communication model: "
                        + "; ".join(f"{k}: {v}" for k, v in ALGORITHM_HELP.items())
                        + "; auto: what each run did: with Open MPI, tuned for blocking "
                          "exchanges (sync, hier, mixed without --overlap; calibrations), tree "
                          "for MPI_Iallreduce (--overlap, ssp); rabenseifner with other "
                          "libraries [auto]")
    p.add_argument("--ranks-per-node", type=int, metavar="L",
                   help="ranks per node of the predictions [as the largest measured run]")
    batch = p.add_mutually_exclusive_group()
    batch.add_argument("--batch-per-rank", type=int, metavar="B",
                       help="per-rank batch of the predictions (weak scaling) [as the largest "
                            "measured run]")
    batch.add_argument("--batch-global", type=int, metavar="G",
                       help="global batch of the predictions (strong scaling: G / ranks each)")
    p.add_argument("--max-error", type=float, default=DEFAULT_MAX_ERROR, metavar="E",
                   help="refuse to extrapolate when the held-out relative error exceeds E "
                        f"[{DEFAULT_MAX_ERROR}]")
    p.add_argument("--force", action="store_true",
                   help="predict even when the held-out error exceeds --max-error")
    p.add_argument("--simulate", action="store_true",
                   help="also print what stragglers do at each scale (replay of the fitted "
                        "rank and iteration distributions)")
    p.add_argument("--seed", type=int, default=1, help="seed of the replay [1]")
    p.add_argument("--plot", metavar="OUT.png|OUT.svg",
                   help="figure: measured points, fitted curve, predictions with intervals")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    outputs.add_overwrite(p)
    p.set_defaults(func=run_command)


def run_command(args, report_error) -> int:
    try:
        nodes = _int_list(args.nodes)
    except ValueError:
        report_error(f"--nodes {args.nodes}: accepted: comma-separated node counts >= 1, "
                     f"e.g. 32,64,128")
        return 2
    strategies = [s for s in args.strategies.split(",") if s]
    bad = [s for s in strategies if s not in STRATEGIES]
    if bad or not strategies:
        report_error(f"--strategies {args.strategies}: accepted: comma-separated, of "
                     f"{','.join(STRATEGIES)}")
        return 2
    for opt, value in (("--ranks-per-node", args.ranks_per_node),
                       ("--batch-per-rank", args.batch_per_rank),
                       ("--batch-global", args.batch_global)):
        if value is not None and value < 1:
            report_error(f"{opt} {value}: accepted: an integer >= 1")
            return 2
    if not 0 < args.max_error < 10:
        report_error(f"--max-error {args.max_error}: accepted: a relative error in (0, 10), "
                     f"e.g. 0.25")
        return 2
    if args.plot:
        paths, _ = inputs.expand(args.inputs)
        err = outputs.check_output(args.plot, "--plot", (".png", ".svg"), args.overwrite, paths)
        if err:
            report_error(err)
            return 2
    runs, status = inputs.load_all(args.inputs, report_error)
    if status:
        return status
    pipelined = [r for r in runs if str(r.attrs.get("parallel") or "data") != "data"]
    runs = [r for r in runs if r not in pipelined]
    if not runs:
        report_error(f"predict: {pipelined[0].path}: parallel="
                     f"{pipelined[0].attrs.get('parallel')}: predict models data parallelism "
                     f"only (no run with parallel=data given)")
        return 2
    result = build(runs, nodes, strategies, args.algorithm, args.ranks_per_node,
                   args.batch_per_rank, args.batch_global, args.max_error, args.seed)
    refuse = result["refused"] and not args.force
    if refuse:
        result["predictions"], result["curve"] = [], []
    result["left_out"] = [{"file": r.path, "why": f"parallel={r.attrs.get('parallel')}: "
                                                  f"predict models data parallelism only"}
                          for r in pipelined]
    if args.json:
        print(jsonout.dumps(result))
    else:
        print(format_text(result, args.simulate))
    if refuse:
        report_error(f"predict: refusing to extrapolate: held-out error "
                     f"{100 * result['worst_error']:.1f}% exceeds --max-error "
                     f"{100 * args.max_error:g}% (--force predicts anyway, intervals widened)")
        return 1
    if args.plot:
        from .predict_plot import save
        save(result, args.plot)
        print(f"wrote {args.plot}")
    return 0
