"""The prediction of ``dtbench-analyze predict``: a performance model fitted to measured runs,
validated on the largest measured scale, extrapolated with prediction intervals.

Steps (the model itself is in fit.py, its replay in sim.py, the collectives' costs in coll.py):
1. every run is reduced to an Observation (compute, transfer, waits, sizes, topology);
2. validation: for every strategy measured at two or more scales, the runs at its largest scale
   are held out, the model is fitted on all other runs and predicts them; the error of the median
   iteration time is printed. When the worst error exceeds ``--max-error`` the command refuses to
   extrapolate (exit status 1) unless ``--force``; forced or not, intervals are widened by it;
3. the model is fitted on every run and replayed at the requested node counts for each strategy.
``build(runs, ...)`` returns the whole result as a dict (what ``--json`` prints and the report
and ``plot.predict_fig.figure`` use; commands/predict_cmd.py prints it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import metrics
from ..runfile import Run
from .fit import (PARAMS, CommFit, Observation, core_share, exchange_terms, fit_comm,
                  fit_compute, observe, transfer_factors)
from .shard import ZERO, scales_for, zero_terms
from .tensor import check as tensor_check
from .sim import SLOW_FACTOR, STRATEGIES, Scenario, needs, simulate, summarise

DEFAULT_MAX_ERROR = 0.25


def unusable(run: Run) -> Optional[str]:
    """Why ``run`` cannot be fitted (one line), or None: the model is of data parallelism and
    needs measured iterations that took time, some of it compute (total - exchange)."""
    if str(run.attrs.get("parallel") or "data") != "data":
        return f"parallel={run.attrs.get('parallel')}: predict models data parallelism only"
    times = metrics.iteration_times(run)
    if not times.size:
        return "no measured iteration: nothing to fit"
    compute = (run.measured("total") - run.measured("exchange"))[run.trains]
    if not (times > 0).any() or not (compute > 0).any():
        return "no measured iteration with compute time (total - exchange > 0): nothing to fit"
    return None


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
                 algorithm: str, shared_cores: Optional[int] = None) -> Scenario:
    return Scenario(strategy=strategy, nnodes=nnodes, per_node=per_node, batch_per_rank=batch,
                    grad_bytes=o.grad_bytes, bucket_bytes=o.bucket_bytes,
                    algorithm=(o.hint_for(strategy, o.staleness if strategy == "ssp" else 1)
                               if algorithm == "auto" else algorithm),
                    staleness=o.staleness, sync_period=max(1, o.sync_period),
                    ps_ranks=max(1, o.ps_ranks),
                    compute_share=core_share(nnodes * per_node, o.threads, shared_cores),
                    hier=o.hier, scales=scales_for(strategy, o.scales if o.strategy == strategy
                                                   else None),
                    cores=shared_cores)


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
    terms = exchange_terms(strategy, algo, o.nnodes, o.per_node, o.grad_bytes, o.bucket_bytes,
                           o.cores)
    return comm.time(terms) / o.calibration - 1.0


def collective_errors(o: Observation, models: CommModels, algorithm: str) -> Optional[Dict]:
    """A held-out ZeRO run: per collective kind its measured median time per iteration
    predicted by the fit (shard.zero_terms), relative error; None for other strategies."""
    if o.strategy not in ZERO or not o.kinds:
        return None
    level = "inter" if o.nnodes > 1 else "intra"
    _, comm = models.for_strategy(o.strategy, level)
    if not comm.level_known(level):
        return None
    algo = o.algorithm_hint if algorithm == "auto" else algorithm
    out = {}
    for kind, secs in sorted(o.kinds.items()):
        terms = zero_terms(kind, o.hier, algo, o.nnodes, o.per_node, o.grad_bytes,
                           o.bucket_bytes, (o.scales or {}).get(kind, 1.0))
        if terms.any() and not (o.strategy == "zero2" and kind == "reduce_scatter"):
            out[kind] = comm.time(terms) / secs - 1.0
    return out or None


def validate(observations: List[Observation], algorithm: str, rng, draws: int,
             shared_cores: Optional[int] = None) -> List[Dict]:
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
            s = scenario_for(o, strategy, o.nnodes, o.per_node, o.batch_per_rank, algorithm,
                             shared_cores)
            pred, why = _run_scenario(s, o.key, comm, compute, tf, rng, draws)
            measured = float(np.median(o.iteration)) if o.iteration.size else float("nan")
            row = {"strategy": strategy, "file": o.path, "nodes": o.nnodes, "ranks": o.nranks,
                   "fitted_on": len(rest), "measured_s": measured,
                   "measured_transfer_s": float(np.median(o.transfer)) if o.transfer.size
                   else None, "predicted": pred, "error": None, "why": why}
            if pred is not None and measured > 0:
                row["error"] = pred["iteration_s"]["value"] / measured - 1.0
                row["transfer_error"] = (pred["comm_model_s"] / row["measured_transfer_s"] - 1.0
                                         if row["measured_transfer_s"] and strategy not in ZERO
                                         else None)
                row["calibration_error"] = _calibration_error(o, strategy, comm, algorithm)
                row["collective_errors"] = collective_errors(o, comm, algorithm)
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
    shared_cores: Optional[int] = None

    def predict(self, strategy: str, nnodes: int, batch: int, per_node: Optional[int] = None,
                widen: float = 0.0, draws: Optional[int] = None):
        s = scenario_for(self.ref, strategy, nnodes, per_node or self.per_node, batch,
                         self.algorithm, self.shared_cores)
        own = [o for o in self.obs if o.strategy == strategy and o.key == self.ref.key]
        if strategy in ZERO and own:
            top = max(own, key=_scale)
            s.scales, s.hier = scales_for(strategy, top.scales), top.hier
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
    s = scenario_for(ref, o.strategy, o.nnodes, o.per_node, b, model.algorithm,
                     model.shared_cores)
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


#: the first assumption where the ranks share one machine's cores (--shared-cores C)
SHARED_CORES_ASSUMPTION = (
    "compute c(b) = c0 + c1 b per rank alone, times max(1, ranks x threads / {cores}) at every "
    "scale, measured and predicted: every rank shares the same {cores} cores (nodes emulated on "
    "one machine), and all ranks compute at once")

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
          max_error: float = DEFAULT_MAX_ERROR, seed: int = 1, draws: int = 48,
          shared_cores: Optional[int] = None, tensor_runs: Sequence[Run] = ()) -> Dict:
    """The whole prediction as a dict (see the module doc); ``tensor_runs`` (left out of the
    fit): their tensor groups' allreduces against the model (tensor.check)."""
    rng = np.random.default_rng(seed)
    obs = [observe(r, shared_cores) for r in runs]
    ref = max(obs, key=lambda o: (o.nnodes, o.nranks, o.batch_per_rank))
    comm, compute, tf = _fit(obs, algorithm)
    model = Fitted(obs, ref, per_node or ref.per_node, algorithm, comm, compute, tf, rng, draws,
                   shared_cores)
    checks = validate(obs, algorithm, rng, draws, shared_cores)
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
        "shared_cores": shared_cores,
        "tensor": tensor_check(list(tensor_runs), comm),
        "assumptions": ([SHARED_CORES_ASSUMPTION.format(cores=shared_cores)] + ASSUMPTIONS[1:]
                        if shared_cores else ASSUMPTIONS),
    })
    return result
