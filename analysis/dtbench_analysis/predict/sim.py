"""Replaying the fitted model over N ranks (``dtbench-analyze predict``, its ``--simulate`` mode).

A scenario is one strategy at one scale (nodes x ranks per node, per-rank batch). For each of
``draws`` parameter sets (communication parameters drawn from the fit's covariance, clipped at
0; the compute line scaled by its relative spread across runs) ``iters`` iterations are replayed:
every rank gets a persistent factor (drawn from the measured ranks' factors) and every iteration
a factor (drawn from the measured iterations), so compute = c(b) x rank factor x iteration
factor (x the scenario's core share where the ranks share a machine's cores); the transfer time
is the fitted collective cost times a measured iteration factor.

Per strategy, one iteration:
- sync / hier / zero1-3: max over the p ranks of compute, then the collectives (everybody
  waits for the slowest: the max of p draws grows with p; zero: shard.py's reduce-scatters,
  all-gathers and hier's allreduce of the shards);
- ssp (bound S): rank r's iteration i ends at max(own compute end, completion of allreduce i-S);
  allreduces run one after another, each starting when the last rank finished that iteration;
- async (parameter servers, fixed count): each worker alone, compute + a round trip of the
  gradient through the servers; a server link carries workers x gradient / servers per round,
  which bounds every worker's iteration from below;
- mixed: each node alone: max over its ranks of compute + the allreduce inside the node + its
  broadcast every sync-period iterations; the ring across nodes is nonblocking and not waited for.
The drawn rank and iteration factors are assumed independent across ranks (the measured runs
cannot show correlations beyond their own size).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional

import numpy as np

from .coll import EAGER_BYTES, NPARAMS, collective_terms, exchange_terms
from .fit import CommFit, ComputeFit
from .shard import ZERO, zero_exchange_terms

STRATEGIES = ("sync", "hier", "ssp", "async", "mixed")
#: an iteration of a rank is "slow" when its compute exceeds this multiple of the median
SLOW_FACTOR = 1.5
#: cap on simulated rank-iterations per parameter draw (memory), draws are reduced beyond it
CELL_BUDGET = 4_000_000


@dataclass
class Scenario:
    strategy: str
    nnodes: int
    per_node: int
    batch_per_rank: int
    grad_bytes: float
    bucket_bytes: float
    algorithm: str
    staleness: int = 1
    sync_period: int = 1
    ps_ranks: int = 1
    compute_share: float = 1.0  # fit.core_share at this scale: 1 on nodes of their own
    hier: bool = False          # zero: --transport hier (HYBRID_SHARD)
    scales: Optional[Dict[str, float]] = None  # zero: shard.zero_terms's scale per kind
    cores: Optional[int] = None  # --shared-cores: the host term counts (coll.HOST)

    @property
    def ranks(self) -> int:
        return self.nnodes * self.per_node

    @property
    def workers(self) -> int:
        return self.ranks - self.ps_ranks if self.strategy == "async" else self.ranks


def needs(s: Scenario) -> Optional[str]:
    """The topology level whose terms the scenario needs and may lack, or None."""
    if s.strategy == "mixed":
        return "intra" if s.per_node > 1 else None
    if s.ranks <= 1:
        return None
    if s.nnodes > 1:
        return "inter"
    return "intra"


def comm_terms(s: Scenario) -> np.ndarray:
    """Collective-cost terms (see fit.PARAMS) of the exchange of one iteration."""
    if s.strategy in ZERO:
        return zero_exchange_terms(s.strategy, s.hier, s.algorithm, s.nnodes, s.per_node,
                                   s.grad_bytes, s.bucket_bytes, s.scales or {})
    if s.strategy in ("sync", "ssp"):
        return exchange_terms("sync", s.algorithm, s.nnodes, s.per_node, s.grad_bytes,
                              s.bucket_bytes, s.cores)
    if s.strategy == "hier":
        return exchange_terms("hier", s.algorithm, s.nnodes, s.per_node, s.grad_bytes,
                              s.bucket_bytes, s.cores)
    if s.strategy == "mixed":
        inside = exchange_terms("sync", s.algorithm, 1, s.per_node, s.grad_bytes, s.bucket_bytes)
        bcast = collective_terms("tree", 1, s.per_node, s.grad_bytes) / 2.0  # half a reduce+bcast
        return inside + bcast / max(1, s.sync_period)
    # async: a worker's push and pull of its shard to each server
    t = np.zeros(NPARAMS)
    level = 2 if s.nnodes > 1 else 0
    t[level] = 2 * s.ps_ranks
    t[_beta_col(s, s.grad_bytes / max(1, s.ps_ranks))] = 2 * s.grad_bytes
    return t


def _beta_col(s: Scenario, message: float) -> int:
    if s.nnodes <= 1:
        return 1
    return 4 if message > EAGER_BYTES else 3


def server_terms(s: Scenario) -> np.ndarray:
    """async: one round of every worker's push and pull through one server's link."""
    t = np.zeros(NPARAMS)
    t[_beta_col(s, s.grad_bytes / max(1, s.ps_ranks))] = \
        2 * s.grad_bytes * s.workers / max(1, s.ps_ranks)
    return t


def _draw_params(comm: CommFit, rng, draws: int) -> np.ndarray:
    mean = np.nan_to_num(comm.params)
    if draws <= 1 or not np.any(comm.cov):
        return np.tile(mean, (max(1, draws), 1))
    out = rng.multivariate_normal(mean, comm.cov, size=draws, method="svd")
    out[0] = mean  # the first draw is the point estimate
    return np.clip(out, 0.0, None)


def simulate(s: Scenario, comm: CommFit, compute: ComputeFit, tfactors: np.ndarray,
             rng: np.random.Generator, draws: int = 48, iters: int = 32) -> Dict[str, object]:
    """Replays the scenario. Returns per-draw medians (arrays over draws) of the iteration time,
    the exchange part, throughput, and straggler figures."""
    ranks = s.ranks
    draws = max(2, min(draws, CELL_BUDGET // max(1, ranks * iters)))
    params = _draw_params(comm, rng, draws)
    c_mid = compute.time(s.batch_per_rank) * s.compute_share
    scale = np.clip(1 + compute.rel_sd * rng.standard_normal(draws), 0.5, None)
    scale[0] = 1.0
    terms = comm_terms(s)
    t_comm = params @ terms                                            # (draws,)
    rank_f = rng.choice(compute.rank_factors, size=(draws, 1, ranks))
    iter_f = rng.choice(compute.iter_factors, size=(draws, iters, ranks))
    c = (c_mid * scale)[:, None, None] * rank_f * iter_f               # (draws, iters, ranks)
    eta = rng.choice(tfactors, size=(draws, iters))
    comm_i = t_comm[:, None] * eta                                     # (draws, iters)
    med_c = np.median(c, axis=(1, 2))
    slow = c > SLOW_FACTOR * (c_mid * scale)[:, None, None]
    out: Dict[str, object] = {
        "p_slow_rank_iteration": float(slow.mean()),
        "p_iteration_has_slow_rank": float(slow.any(axis=2).mean()),
        "comm_model_s": float(terms @ np.nan_to_num(comm.params)),
        "compute_model_s": float(c_mid),
    }
    if s.strategy in ("sync", "hier") + ZERO:
        busy = c.max(axis=2)
        t_iter = busy + comm_i
        exch = comm_i
        rate = ranks * s.batch_per_rank / np.median(t_iter, axis=1)
        slowdown = np.median(busy, axis=1) / med_c
    elif s.strategy == "ssp":
        t_iter, exch = _ssp(c, comm_i, max(0, s.staleness))
        rate = ranks * s.batch_per_rank / np.median(t_iter, axis=1)
        slowdown = np.median(t_iter - exch, axis=1) / med_c
    elif s.strategy == "async":
        w = max(1, s.workers)
        c = c[:, :, :w]
        floor = (params @ server_terms(s))[:, None, None]
        own = c + comm_i[:, :, None]
        t_rank = np.maximum(own, floor)                               # (draws, iters, workers)
        t_iter = t_rank.reshape(draws, -1)
        exch = (t_rank - c).reshape(draws, -1)
        rate = (s.batch_per_rank / np.median(t_rank, axis=1)).sum(axis=1)
        slowdown = np.ones(draws)
    else:  # mixed
        L = s.per_node
        nodes = c.reshape(draws, iters, s.nnodes, L).max(axis=3)      # (draws, iters, nodes)
        t_node = nodes + comm_i[:, :, None]
        t_iter = t_node.reshape(draws, -1)
        exch = np.broadcast_to(comm_i[:, :, None], t_node.shape).reshape(draws, -1)
        rate = (L * s.batch_per_rank / np.median(t_node, axis=1)).sum(axis=1)
        slowdown = np.median(nodes, axis=(1, 2)) / med_c
    t_med = np.median(t_iter, axis=1)
    out.update({
        "iteration_s": t_med,                       # per draw
        "iteration_p95_s": np.percentile(t_iter, 95, axis=1),
        "exchange_share": np.median(exch, axis=1) / t_med,
        "samples_per_s": rate,
        "straggler_slowdown": slowdown,
    })
    return out


def _ssp(c: np.ndarray, comm_i: np.ndarray, S: int):
    """Stale-synchronous recurrence over iterations, vectorised over draws and ranks."""
    draws, iters, ranks = c.shape
    end = np.zeros((draws, ranks))
    done = np.zeros((draws, iters))         # completion time of allreduce j
    prev_done = np.zeros(draws)
    t = np.zeros((draws, iters))
    blocked = np.zeros((draws, iters))
    for i in range(iters):
        ready = end + c[:, i, :]                        # compute of i ends
        start = ready.max(axis=1)
        prev_done = np.maximum(start, prev_done) + comm_i[:, i]
        done[:, i] = prev_done
        gate = done[:, i - S] if i - S >= 0 else np.zeros(draws)
        new_end = np.maximum(ready, gate[:, None])
        blocked[:, i] = np.median(new_end - ready, axis=1)
        t[:, i] = np.median(new_end - end, axis=1)
        end = new_end
    return t, blocked


def summarise(sim: Dict[str, object], widen: float = 0.0) -> Dict[str, object]:
    """The median over the draws, and a 90 % interval over them widened by ``widen`` (the
    held-out relative error) on each side."""
    def band(a):
        a = np.asarray(a, dtype=float)
        lo, mid, hi = np.percentile(a, [5, 50, 95])
        return {"value": float(mid), "lo": float(lo * (1 - widen)), "hi": float(hi * (1 + widen))}
    return {
        "iteration_s": band(sim["iteration_s"]),
        "iteration_p95_s": float(np.median(sim["iteration_p95_s"])),
        "exchange_share": float(np.median(sim["exchange_share"])),
        "samples_per_s": band(sim["samples_per_s"]),
        "straggler_slowdown": float(np.median(sim["straggler_slowdown"])),
        "p_iteration_has_slow_rank": sim["p_iteration_has_slow_rank"],
        "p_slow_rank_iteration": sim["p_slow_rank_iteration"],
        "comm_model_s": sim["comm_model_s"],
        "compute_model_s": sim["compute_model_s"],
    }
