"""Fitting the performance model of ``dtbench-analyze predict`` to measured runs.

Three parts, each from the runs' per-rank, per-iteration records (measured cells only):
- compute: busy time per iteration ``c = total - exchange`` (data, forward, backward, update and
  gaps) against the per-rank batch b, ``c(b) = c0 + c1*b`` (least squares, non-negative; with one
  batch size c0 = 0 and c1 = median c / b), per model/dataset/device; with ``shared_cores`` C
  (every rank of the runs on one machine of C cores: nodes emulated on one host) each run's
  compute is first divided by its share of the cores, ``max(1, ranks x threads / C)``, so that
  c(b) is the compute of a rank alone (sim.py multiplies it back at the predicted scale);
- noise (stragglers and waits): every rank's persistent factor (its median / the run's median)
  and every iteration's factor (c / the rank's median), pooled as empirical distributions; the
  simulation replays them over N ranks (sim.py);
- communication: alpha-beta per topology level (``intra`` node, ``inter`` node), fitted by
  non-negative weighted least squares (weights 1/T: relative errors count) to the transfer time
  of every run with more than one rank: per iteration the max over ranks of
  ``exchange - exchange_wait``, i.e. the rank the allreduce completes last on (ranks it completed
  on earlier start the next iteration sooner and then wait in its stop vote); without
  ``exchange_wait``: the min over ranks of ``exchange``, the last rank to arrive waits least.
  The gradient is cut in buckets of ``bucket-mb``; each bucket is one allreduce whose cost is
  ``a*alpha + b*s*beta`` summed over the levels its steps cross, for the algorithm the run used
  (coll.py: Open MPI tuned's rules for the blocking exchange, libnbc's tree for
  MPI_Iallreduce); across nodes, bytes in messages above the eager limit have their own beta.
  With ``shared_cores`` C, a run of more than C ranks pays beta_inter_shared more per byte
  across nodes (coll.SHARED), fitted where some multi-node runs had C ranks or fewer.
  A calibration in the file (root attributes ``calibration_exchange_s``: the transport's
  collectives alone on the run's buckets, median over ``calibration_iters`` repetitions) stands
  in for the transfer time of ssp runs, whose exchange time hides the allreduce; for sync and
  hier it is shown beside the measured transfer.

Parameter uncertainty: the covariance of the weighted least-squares estimate,
``sigma^2 (X^T W X)^-1`` over the parameters the data determine; a level whose runs show one
message pattern only (alpha and beta collinear) is fitted with beta alone (alpha = 0, said so).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .coll import (EAGER_BYTES, NPARAMS, SHARED, collective_terms,  # noqa: F401
                   exchange_terms, hier_terms, tuned_allreduce)
from .shard import KINDS, ZERO, zero_terms
from ..runfile import Run


def nnls(*args, **kwargs):
    """scipy.optimize.nnls, imported on use: keeps the command line quick to start."""
    from scipy.optimize import nnls as scipy_nnls
    return scipy_nnls(*args, **kwargs)

LEVELS = ("intra", "inter")
PARAMS = ("alpha_intra", "beta_intra", "alpha_inter", "beta_inter", "beta_inter_rndv",
          "beta_inter_shared")
ALGORITHMS = ("auto", "tuned", "tree", "ring", "recursive_doubling", "rabenseifner")
ALGORITHM_HELP = {
    "tuned": "Open MPI 4.1 tuned's fixed decision (ompi_coll_tuned_allreduce_intra_dec_fixed) "
             "per bucket, buckets one after the other (blocking MPI_Allreduce)",
    "tree": "Open MPI libnbc's binomial reduce, then a broadcast sending to all children at "
            "once (MPI_Iallreduce)",
    "ring": "2(p-1) steps, 2(p-1)/p of the bucket per link",
    "recursive_doubling": "log2 p exchanges of the whole bucket",
    "rabenseifner": "halving reduce-scatter + doubling all-gather (distance 1 first, as Open "
                    "MPI's redscat_allgather), 2 log2 p steps, 2(p-1)/p of the bucket",
}
#: MPI_Allreduce/Iallreduce of ``bucket-mb`` when --bucket-mb is not in the file's options
DEFAULT_BUCKET_MB = 25.0


@dataclass
class Observation:
    """What the model needs from one run."""
    path: str
    strategy: str            # sync, hier, ssp, async, mixed
    key: Tuple[str, str, str]  # model, dataset, device
    nranks: int
    nnodes: int
    per_node: int
    batch_per_rank: int
    grad_bytes: float
    bucket_bytes: float
    algorithm_hint: str      # the algorithm "auto" means for this run's exchange
    staleness: int
    sync_period: int
    ps_ranks: int
    compute: np.ndarray      # (ranks, iterations) busy seconds, NaN outside measured cells
    transfer: np.ndarray     # per iteration transfer seconds (empty with one rank)
    iteration: np.ndarray    # the run's time-per-iteration sample (metrics.iteration_times)
    wait: np.ndarray         # exchange_wait of measured cells (empty when not recorded)
    calibration: Optional[float] = None  # the collectives alone on the run's buckets, s
    calibration_hint: str = "tuned"      # the algorithm the calibration ran (blocking)
    mpi_library: str = ""
    overlap: bool = False
    threads: int = 1                     # --threads of each rank
    share: float = 1.0                   # the core share its compute was divided by
    hier: bool = False                   # --transport hier
    kinds: Optional[Dict[str, float]] = None   # zero: median s per iteration per collective
    scales: Optional[Dict[str, float]] = None  # zero: shard.zero_terms's scale per kind
    cores: Optional[int] = None          # --shared-cores: every node's ranks on these cores

    def hint_for(self, strategy: str, staleness: int) -> str:
        """The algorithm ``auto`` means for ``strategy`` run as this run was (library, overlap)."""
        return auto_algorithm(self.mpi_library,
                              blocking_exchange(self.overlap, strategy, staleness))

    @property
    def compute_median(self) -> float:
        c = self.compute[np.isfinite(self.compute)]
        return float(np.median(c)) if c.size else float("nan")

    @property
    def label(self) -> str:
        return f"{self.strategy} {self.nnodes}x{self.per_node}"


def strategy_of(run: Run) -> str:
    """sync with --transport hier is the strategy ``hier``; the others are the exchange."""
    exchange = run.exchange
    if exchange == "sync" and _transport(run) == "hier":
        return "hier"
    return exchange


def _option(run: Run, name: str, default):
    for source in (run.config, run.config_attrs):
        for key in (name, name.replace("-", "_")):
            if key in source and source[key] not in (None, ""):
                try:
                    return type(default)(source[key])
                except (TypeError, ValueError):
                    pass
    return default


def overlap_of(run: Run) -> bool:
    return str(_option(run, "overlap", "no")).lower() in ("yes", "1", "true", "on")


def blocking_exchange(overlap: bool, strategy: str, staleness: int) -> bool:
    """Whether an exchange calls the blocking collectives: sync, hier and mixed switch to
    MPI_Allreduce when nothing was started during backward (no --overlap); ssp only with
    staleness 0; async has no collective; ZeRO's blocking (zero2's reduce-scatters started in
    backward are left out of its terms)."""
    if strategy in ZERO:
        return True
    if strategy in ("sync", "hier", "mixed"):
        return not overlap
    return strategy == "ssp" and staleness == 0


def auto_algorithm(mpi_library: str, blocking: bool = True) -> str:
    """The allreduce algorithm ``auto`` assumes. Open MPI: blocking MPI_Allreduce goes through
    the tuned component's fixed rules (``tuned``), MPI_Iallreduce through libnbc, whose in-place
    allreduce is always the binomial tree (``tree``). Other libraries: Rabenseifner (MPICH's
    choice for large reductions)."""
    if "open mpi" not in (mpi_library or "").lower():
        return "rabenseifner"
    return "tuned" if blocking else "tree"


def core_share(ranks: int, threads: int, shared_cores: Optional[int]) -> float:
    """How many times longer a rank computes when ``ranks`` ranks of ``threads`` threads share
    ``shared_cores`` cores (1 without sharing, or when every thread has a core)."""
    if not shared_cores:
        return 1.0
    return max(1.0, ranks * max(1, threads) / shared_cores)


def observe(run: Run, shared_cores: Optional[int] = None) -> Observation:
    """Extracts an Observation from a loaded run (its compute as of a rank alone where the
    ranks shared ``shared_cores`` cores)."""
    from ..metrics import iteration_times
    train = run.trains
    total = run.measured("total")[train]
    exchange = run.measured("exchange")[train]
    threads = max(1, _option(run, "threads", 1))
    share = core_share(run.nranks, threads, shared_cores)
    compute = (total - exchange) / share
    kinds = scales = None
    if strategy_of(run) in ZERO:
        compute, kinds, scales = zero_parts(run, total, share)
    wait = run.measured("exchange_wait")[train] if run.has("exchange_wait") else None
    transfer = np.array([])
    every = run.measured_by_all
    if run.nranks > 1 and every.any():
        if wait is not None:
            transfer = np.max((exchange - np.nan_to_num(wait))[:, every], axis=0)
        else:
            transfer = np.min(exchange[:, every], axis=0)
        transfer = transfer[np.isfinite(transfer)]
    params = int(run.attrs.get("param_count") or 0)
    grad_bytes = 4.0 * params
    if run.has("bytes_sent"):
        sent = run.measured("bytes_sent")
        sent = sent[np.isfinite(sent) & (sent > 0)]
        if sent.size and not params:
            grad_bytes = float(np.median(sent))
    nnodes = max(1, run.nnodes)
    nworkers = int(train.sum())
    strategy = strategy_of(run)
    staleness = int(run.attrs.get("staleness_bound") or _option(run, "staleness", 0))
    library = str(run.attrs.get("mpi_library", ""))
    return Observation(
        path=run.path, strategy=strategy,
        key=(str(run.attrs.get("model", "")), str(run.attrs.get("dataset", "")),
             str(run.attrs.get("device", ""))),
        nranks=run.nranks, nnodes=nnodes, per_node=max(1, run.nranks // nnodes),
        batch_per_rank=int(run.attrs.get("batch_per_rank") or
                           max(1, run.batch_global // max(1, nworkers))),
        grad_bytes=grad_bytes,
        bucket_bytes=_option(run, "bucket-mb", DEFAULT_BUCKET_MB) * 2 ** 20,
        algorithm_hint=auto_algorithm(library,
                                      blocking_exchange(overlap_of(run), strategy, staleness)),
        staleness=staleness,
        sync_period=int(run.attrs.get("sync_period") or _option(run, "sync-period", 1)),
        ps_ranks=int(run.attrs.get("ps_ranks") or 0),
        compute=compute, transfer=transfer, iteration=iteration_times(run),
        wait=(wait[np.isfinite(wait)] if wait is not None else np.array([])),
        calibration=read_calibration(run), calibration_hint=auto_algorithm(library, True),
        mpi_library=library, overlap=overlap_of(run), threads=threads, share=share,
        hier=_transport(run) == "hier", kinds=kinds, scales=scales,
        cores=shared_cores)


def _transport(run: Run) -> str:
    return str(run.attrs.get("transport") or run.config.get("transport") or "mpi")


def zero_parts(run: Run, total: np.ndarray, share: float):
    """A ZeRO run's compute (total less its collectives and the stop vote's wait: zero3's
    gathers lie inside forward and backward, the shard's update stays in), and per collective
    kind the median over iterations of the max over ranks (as sync's transfer: the rank the
    collectives complete last on; the min over ranks predicted real 4-node zero1 and zero3
    iterations 27-37 % short, the max within 12 %) and shard.zero_terms's scale from the
    recorded payloads."""
    train = run.trains
    busy = total.copy()
    if run.has("exchange_wait"):
        busy = busy - np.nan_to_num(run.measured("exchange_wait")[train])
    params = float(run.attrs.get("param_count") or 0) * 4.0
    nnodes = max(1, run.nnodes)
    per_node = max(1, run.nranks // nnodes)
    every = run.measured_by_all
    kinds, scales = {}, {}
    for kind in KINDS:
        if not run.has(f"exchange_{kind}"):
            continue
        t = run.measured(f"exchange_{kind}")[train]
        busy = busy - np.nan_to_num(t)
        if run.nranks > 1 and every.any():
            last = np.max(t[:, every], axis=0)
            last = last[np.isfinite(last)]
            if last.size and np.median(last) > 0:
                kinds[kind] = float(np.median(last))
        if params > 0 and run.has(f"bytes_{kind}"):
            b = run.measured(f"bytes_{kind}")
            b = b[np.isfinite(b) & (b > 0)]
            if b.size:
                scales[kind] = float(np.median(b)) / params * (per_node if kind == "allreduce"
                                                               else 1)
    return busy / share, kinds, scales


def read_calibration(run: Run) -> Optional[float]:
    """Seconds of the run's exchange with the transport's collectives alone (root attribute
    ``calibration_exchange_s`` when ``calibration_iters`` > 0), or None."""
    try:
        iters = int(run.attrs.get("calibration_iters") or 0)
        secs = float(run.attrs.get("calibration_exchange_s"))
    except (TypeError, ValueError):
        return None
    return secs if iters > 0 and np.isfinite(secs) and secs > 0 else None


def rows_of(obs: Observation, algorithm: str) -> List[Tuple[np.ndarray, float, str]]:
    """Least-squares rows (terms, measured seconds, what) of a run: its median transfer time
    (sync and hier; mixed: its allreduce inside the node; ssp and async hide or queue theirs, so
    their exchange time is no transfer time); for ssp the calibration, when recorded."""
    algo = obs.algorithm_hint if algorithm == "auto" else algorithm
    rows = []
    if obs.nranks > 1 and obs.strategy in ("sync", "hier") and obs.transfer.size:
        terms = exchange_terms(obs.strategy, algo, obs.nnodes, obs.per_node, obs.grad_bytes,
                               obs.bucket_bytes, obs.cores)
        rows.append((terms, float(np.median(obs.transfer)), "exchange"))
    elif obs.strategy == "mixed" and obs.per_node > 1 and obs.transfer.size:
        # mixed: every iteration an allreduce inside the node (the ring across nodes is
        # nonblocking); its broadcast every sync_period iterations is left in the noise
        terms = exchange_terms("sync", algo, 1, obs.per_node, obs.grad_bytes, obs.bucket_bytes)
        rows.append((terms, float(np.median(obs.transfer)), "exchange"))
    elif obs.strategy in ZERO:
        rows.extend(zero_rows(obs, algorithm))
    elif obs.strategy == "ssp" and obs.nranks > 1 and obs.calibration:
        # the calibration runs the blocking collectives whatever the strategy
        cal = obs.calibration_hint if algorithm == "auto" else algorithm
        terms = exchange_terms("sync", cal, obs.nnodes, obs.per_node, obs.grad_bytes,
                               obs.bucket_bytes, obs.cores)
        rows.append((terms, obs.calibration, "calibration"))
    return rows


def zero_rows(obs: Observation, algorithm: str) -> List[Tuple[np.ndarray, float, str]]:
    """A ZeRO run's rows: each collective kind's median time per iteration against its terms
    (zero2's reduce-scatters are left out: backward hides most of them)."""
    rows = []
    for kind, secs in sorted((obs.kinds or {}).items()):
        if obs.strategy == "zero2" and kind == "reduce_scatter":
            continue
        terms = zero_terms(kind, obs.hier, algorithm, obs.nnodes, obs.per_node,
                           obs.grad_bytes, obs.bucket_bytes, (obs.scales or {}).get(kind, 1.0))
        if terms.any():
            rows.append((terms, secs, kind))
    return rows


# ---- the fits --------------------------------------------------------------------------------
def _rank(a: np.ndarray) -> int:
    if not a.size:
        return 0
    return int(np.linalg.matrix_rank(a, tol=1e-9 * max(1e-30, float(np.abs(a).max()))))


@dataclass
class CommFit:
    algorithm: str
    params: np.ndarray            # PARAMS, NaN where not determined
    cov: np.ndarray               # NPARAMS x NPARAMS, zero where not determined
    determined: Dict[str, bool]   # per parameter
    notes: List[str]
    rows: int
    rel_residual: float           # median |relative residual| of the fitted rows

    def level_known(self, level: str) -> bool:
        return self.determined[f"beta_{level}"] or (
            level == "inter" and self.determined["beta_inter_rndv"])

    def time(self, terms: np.ndarray, params: Optional[np.ndarray] = None) -> float:
        p = np.nan_to_num(self.params if params is None else params)
        return float(terms @ p)


def fit_comm(observations: Sequence[Observation], algorithm: str) -> CommFit:
    rows = [r for o in observations for r in rows_of(o, algorithm)]
    used = sorted({o.algorithm_hint for o in observations if o.nranks > 1}) \
        if algorithm == "auto" else [algorithm]
    algo_name = algorithm if algorithm != "auto" else f"auto ({'/'.join(used) or 'tree'})"
    notes: List[str] = []
    params = np.full(NPARAMS, np.nan)
    cov = np.zeros((NPARAMS, NPARAMS))
    determined = {p: False for p in PARAMS}
    if not rows:
        return CommFit(algo_name, params, cov, determined,
                       ["no run with more than one rank: no communication terms"], 0, float("nan"))
    X = np.array([r[0] for r in rows])
    y = np.array([r[1] for r in rows])
    w = 1.0 / np.maximum(y, 1e-9)
    cols = [c for c in range(NPARAMS) if np.any(X[:, c] > 0)]
    # the surcharge is known when some multi-node runs had more ranks than the shared cores and
    # some not: its column then is no combination of the bytes across nodes
    if SHARED in cols and _rank(X[:, [3, 4]] * w[:, None]) == \
            _rank(X[:, [3, 4, SHARED]] * w[:, None]):
        cols.remove(SHARED)
        notes.append("beta_inter_shared not separable from the links' terms (the ranks "
                     "outnumber the shared cores in all or none of the multi-node runs): taken "
                     "as 0")
    # Drop what the rows cannot separate, least informative first: alpha inside, alpha across,
    # then beta inside (one multi-node pattern cannot split its time between the two levels).
    for c, why in ((0, "alpha_intra not separable from the other terms (one message pattern "
                       "inside nodes): taken as 0; runs with two --bucket-mb values separate it"),
                   (2, "alpha_inter not separable from the other terms (one message pattern "
                       "across nodes): taken as 0; runs with two --bucket-mb values separate it"),
                   (1, "beta_intra not separable from beta_inter (no run inside one node with "
                       "several ranks): not determined"),
                   (4, "beta_inter_rndv not separable from beta_inter (messages across nodes "
                       "above and below the eager limit in the same proportion): taken equal")):
        if c in cols and _rank(X[:, cols] * w[:, None]) < len(cols):
            cols.remove(c)
            notes.append(why)
    A = X[:, cols] * w[:, None]
    b = y * w
    coef, _ = nnls(A, b)
    params[cols] = coef
    for c in cols:
        determined[PARAMS[c]] = True
    for c in (0, 2):
        if determined[PARAMS[c + 1]] and not determined[PARAMS[c]]:
            params[c] = 0.0
    if not determined[PARAMS[SHARED]]:
        params[SHARED] = 0.0
    _share_regimes(params, cov, determined, notes)
    resid = b - A @ coef
    dof = max(1, len(b) - len(cols))
    sigma2 = float(resid @ resid) / dof if len(b) > len(cols) else 0.0
    try:
        sub_cov = sigma2 * np.linalg.pinv(A.T @ A)
    except np.linalg.LinAlgError:
        sub_cov = np.zeros((len(cols), len(cols)))
    cov[np.ix_(cols, cols)] = sub_cov
    if len(b) <= len(cols):
        notes.append(f"{len(b)} rows for {len(cols)} parameters: exact fit, no residual to "
                     f"estimate its uncertainty from")
    rel = float(np.median(np.abs(resid))) if resid.size else float("nan")
    return CommFit(algo_name, params, cov, determined, notes, len(rows), rel)


def _share_regimes(params, cov, determined, notes) -> None:
    """Across nodes, a message regime (eager: beta_inter, rendezvous: beta_inter_rndv) that no
    run measured takes the other's value: one link, one bandwidth, the best guess available."""
    for have, lack in ((3, 4), (4, 3)):
        if determined[PARAMS[have]] and not determined[PARAMS[lack]]:
            params[lack] = params[have]
            cov[lack, :], cov[:, lack] = cov[have, :], cov[:, have]
            cov[lack, lack] = cov[have, have]
            determined[PARAMS[lack]] = True
            notes.append(f"{PARAMS[lack]}: no message across nodes in its regime (eager limit "
                         f"{EAGER_BYTES} B) measured: taken equal to {PARAMS[have]}")
            return


@dataclass
class ComputeFit:
    key: Tuple[str, str, str]
    c0: float
    c1: float                   # seconds per sample
    c1_ci: Tuple[float, float]  # spread of per-sample time over the runs' iterations (p5, p95)
    batches: List[int]
    rank_factors: np.ndarray    # persistent per-rank factors (rank median / run median)
    iter_factors: np.ndarray    # per-iteration factors (cell / its rank's median)
    rel_sd: float               # relative spread of the runs' medians around the line

    def time(self, batch: float) -> float:
        return self.c0 + self.c1 * batch


def fit_compute(observations: Sequence[Observation]) -> Dict[Tuple[str, str, str], ComputeFit]:
    out = {}
    for key in sorted({o.key for o in observations}):
        obs = [o for o in observations if o.key == key and np.isfinite(o.compute_median)]
        if not obs:
            continue
        b = np.array([o.batch_per_rank for o in obs], dtype=float)
        c = np.array([o.compute_median for o in obs])
        if len(set(b.tolist())) >= 2:
            (c0, c1), _ = nnls(np.column_stack([np.ones_like(b), b]) / c[:, None],
                               np.ones_like(c))
        else:
            c0, c1 = 0.0, float(np.median(c / b))
        pred = c0 + c1 * b
        rel_sd = float(np.sqrt(np.mean((c / pred - 1) ** 2))) if len(c) > 1 else 0.0
        rank_f, iter_f, per_sample = [], [], []
        for o in obs:
            med = pd.DataFrame(o.compute.T).median().to_numpy()[:, None]  # NaN: rank without
            run_med = float(pd.Series(med.ravel()).median())             # a measured iteration
            with np.errstate(divide="ignore", invalid="ignore"):
                factors, cells = med.ravel() / run_med, o.compute / med
            rank_f.append(factors[np.isfinite(factors)])
            iter_f.append(cells[np.isfinite(cells)])
            ps = (o.compute - c0) / o.batch_per_rank
            per_sample.append(ps[np.isfinite(ps)])
        ps_all = np.concatenate(per_sample)
        out[key] = ComputeFit(key, float(c0), float(c1),
                              (float(np.percentile(ps_all, 5)), float(np.percentile(ps_all, 95))),
                              sorted({int(x) for x in b}),
                              np.concatenate(rank_f), np.concatenate(iter_f), rel_sd)
    return out


def transfer_factors(observations: Sequence[Observation]) -> np.ndarray:
    """Per-iteration factor of the transfer time around its run's median, pooled."""
    parts = [o.transfer / np.median(o.transfer) for o in observations
             if o.transfer.size and np.median(o.transfer) > 0]
    return np.concatenate(parts) if parts else np.ones(1)
