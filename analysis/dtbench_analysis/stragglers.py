"""Stragglers (``dtbench-analyze stragglers``, the report's verdict): which ranks and nodes hold
the others up, and what it costs.

A rank's *busy* time in an iteration is the time it did not spend waiting for other ranks:
``total - exchange_wait`` when the file records the wait, else ``total - exchange`` (in a
synchronous exchange the fast ranks wait inside it for the slowest, so the slowest rank is the one
with the most time outside the exchange, not the one with the longest ``total``). Per iteration
(measured by every rank; by any rank for async/mixed runs):
- the slowest rank is the one with the largest busy time, when it exceeds the iteration's median
  over ranks (so iterations where all ranks are equal name no one); its *excess* is its busy time
  minus that median;
- the waiting it caused is the sum over the other ranks of ``exchange_wait`` when recorded, else
  (lockstep runs) the sum over ranks of (slowest busy - rank's busy), the time they idled until
  the slowest caught up;
- load imbalance of a phase = max over ranks / mean over ranks; its median and p95 over iterations.
Ranks and nodes are ranked by how often they were the slowest, then by their total excess.
In a model-parallel run (layout.py) a rank also waits for its tensor group inside the group's
blocking allreduces (``tp_comm``) and for its neighbouring stages in the bubble (``pipe_idle``):
its busy time leaves those out too. Ranks of different stages do different work, so a rank is
compared with its peers, the ranks of its stage (its tensor group and the stage's other
replicas): the median above is the median of its peers, the slowest is the rank furthest above
its peers' median, and the waiting it caused (lockstep estimate) is summed over its peers. Per
stage, ``stages`` gives the median busy time of its ranks: the pipeline's own imbalance, which
is no straggler. ``analyse(run)`` returns a StragglerAnalysis (seconds).
"""

from __future__ import annotations

import warnings
from dataclasses import field
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from . import layout, metrics
from .records import Record, absent, record
from .runfile import PHASES, Run


@record
class RankBlame(Record):
    """How often and by how much one rank was the slowest of an iteration."""
    rank: int
    host: str
    node: int
    slowest_count: int
    slowest_share: float
    median_excess_s: float
    total_excess_s: float
    wait_caused_s: Optional[float]      # None when the waiting cannot be told (async/mixed)
    busy_median_s: float
    place: str = absent()               # model-parallel runs: 'r1 s0 t1' (layout.places)


@record
class NodeBlame(Record):
    """The same summed over the ranks of one node."""
    node: int
    hosts: str
    ranks: List[int]
    slowest_count: int
    slowest_share: float
    total_excess_s: float
    wait_caused_s: Optional[float]
    busy_median_s: float


@record
class StragglerAnalysis(Record):
    """Everything ``stragglers`` reports about one run. ``iterations_with_slowest`` and
    ``wait_caused_total_s`` exist when the run has two ranks and a measured iteration."""
    file: str
    complete: bool
    incomplete: Optional[str]
    nranks: int
    nnodes: int
    iterations: int
    busy_definition: str
    wait_source: Optional[str]
    ranks: List[RankBlame] = field(default_factory=list)     # slowest first
    nodes: List[NodeBlame] = field(default_factory=list)     # slowest first
    iterations_with_slowest: int = absent()
    wait_caused_total_s: Optional[float] = absent()
    imbalance: Dict[str, Dict[str, float]] = field(default_factory=dict)
    injected_delay_s: Optional[Dict[int, float]] = None
    # model-parallel runs: the layout ('tp2 x pp2 x dp2'), whom a rank is compared with, and
    # per stage (pipelines) the median over its ranks of their median busy time
    layout: str = absent()
    peers: str = absent()
    stages: List[Dict[str, float]] = absent()


def busy(run: Run) -> np.ndarray:
    """metrics.busy, less the waiting for the tensor group and the neighbouring stages
    (``tp_comm``, ``pipe_idle``) where the run records them."""
    b = metrics.busy(run)
    for name in ("tp_comm", "pipe_idle"):
        if run.has(name):
            b = b - np.nan_to_num(run.iterations[name], nan=0.0)
    return b


def analyse(run: Run) -> StragglerAnalysis:
    """Everything the command reports for one run (seconds)."""
    cols = metrics.iteration_columns(run)
    b = busy(run)[:, cols]
    n_iter = int(cols.sum())
    lay = layout.layout(run)
    waits = "".join(f" - {n}" for n in ("tp_comm", "pipe_idle") if run.has(n))
    out = StragglerAnalysis(
        file=run.path, complete=run.is_complete, incomplete=run.completeness_note(),
        nranks=run.nranks, nnodes=run.nnodes, iterations=n_iter,
        busy_definition=("total - exchange_wait" if run.has("exchange_wait")
                         else "total - exchange") + waits,
        wait_source=("recorded exchange_wait of the other ranks" if run.has("exchange_wait")
                     else "sum over ranks of (slowest busy - busy), estimated"
                     if run.lockstep else None))
    if n_iter == 0 or run.nranks < 2:
        return out

    peers = layout.peer_groups(run)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # a group with no rank measured
        peer_median = np.full(b.shape, np.nan)
        for g in np.unique(peers):
            peer_median[peers == g] = np.nanmedian(b[peers == g], axis=0)
        over = b - peer_median                  # each rank above its peers' median
        filled = np.where(np.isfinite(over), over, -np.inf)
        slowest = filled.argmax(axis=0)
        excess = filled.max(axis=0)
        has_slowest = np.isfinite(excess) & (excess > 0)
        if run.has("exchange_wait"):
            wait = run.measured("exchange_wait")[:, cols]
            wait_caused = np.nansum(wait, axis=0) - \
                np.where(has_slowest, wait[slowest, np.arange(b.shape[1])], 0.0)
        elif run.lockstep:
            top = b[slowest, np.arange(b.shape[1])]
            mates = peers[:, None] == peers[slowest][None, :]
            wait_caused = np.nansum(np.where(mates, top[None, :] - b, 0.0), axis=0)
        else:
            wait_caused = np.full(b.shape[1], np.nan)
    busy_median = pd.DataFrame(b.T).median().to_numpy()
    told = run.lockstep or run.has("exchange_wait")

    ranks = run.ranks[["rank", "host", "node"]].reset_index(drop=True)
    rows: List[RankBlame] = []
    for pos in range(run.nranks):
        mine = has_slowest & (slowest == pos)
        rows.append(RankBlame(
            rank=int(ranks["rank"][pos]), host=str(ranks["host"][pos]),
            node=int(ranks["node"][pos]), slowest_count=int(mine.sum()),
            slowest_share=float(mine.sum() / n_iter),
            median_excess_s=float(np.median(excess[mine])) if mine.any() else 0.0,
            total_excess_s=float(excess[mine].sum()),
            wait_caused_s=float(np.nansum(wait_caused[mine])) if told else None,
            busy_median_s=float(busy_median[pos])))
    if lay.model_parallel:
        for row, place in zip(rows, layout.places(run)):
            row.place = place
        out.layout, out.stages = lay.name(), _stages(peers, busy_median, lay.stages)
        out.peers = "the ranks of its stage" if lay.stages > 1 else "every rank"
    out.ranks = sorted(rows, key=lambda r: (-r.slowest_count, -r.total_excess_s, r.rank))
    out.nodes = sorted(_nodes(rows, n_iter),
                       key=lambda n: (-n.slowest_count, -n.total_excess_s, n.node))
    out.iterations_with_slowest = int(has_slowest.sum())
    out.wait_caused_total_s = float(np.nansum(wait_caused)) \
        if np.isfinite(wait_caused).any() else None
    out.imbalance = imbalance(run, cols)
    if run.has("straggler_delay"):
        delay = pd.DataFrame(run.measured("straggler_delay").T).sum().to_numpy()
        out.injected_delay_s = {int(r): float(d) for r, d in zip(ranks["rank"], delay) if d > 0}
    return out


def _stages(stage_of: np.ndarray, busy_median: np.ndarray, k: int) -> List[Dict[str, float]]:
    """Per stage: the median over its ranks of their median busy time (s)."""
    if k < 2:
        return []
    out = []
    for st in range(k):
        v = busy_median[stage_of == st]
        v = v[np.isfinite(v)]
        if v.size:
            out.append({"stage": st, "busy_median_s": float(np.median(v))})
    return out


def _nodes(rows: List[RankBlame], n_iter: int) -> List[NodeBlame]:
    """The ranks' blame summed per node, in node order."""
    out = []
    for node in sorted({r.node for r in rows}):
        part = [r for r in rows if r.node == node]
        count = sum(r.slowest_count for r in part)
        waits = [r.wait_caused_s for r in part]
        out.append(NodeBlame(
            node=node, hosts=",".join(sorted({r.host for r in part})),
            ranks=[r.rank for r in part], slowest_count=count,
            slowest_share=float(count / n_iter),
            total_excess_s=float(sum(r.total_excess_s for r in part)),
            wait_caused_s=None if any(w is None or np.isnan(w) for w in waits)
            else float(sum(waits)),
            busy_median_s=float(pd.Series([r.busy_median_s for r in part]).median())))
    return out


def imbalance(run: Run, cols: np.ndarray) -> Dict[str, Dict[str, float]]:
    """Per phase (and busy): median and p95 over iterations of max over ranks / mean over ranks."""
    out = {}
    fields = {p: run.measured(p) for p in PHASES}
    fields["busy"] = busy(run)
    for name, values in fields.items():
        v = values[:, cols]
        with np.errstate(all="ignore"):
            ratio = np.nanmax(v, axis=0) / np.nanmean(v, axis=0)
        ratio = ratio[np.isfinite(ratio)]
        if ratio.size:
            out[name] = {"median": float(np.median(ratio)),
                         "p95": float(np.percentile(ratio, 95))}
    return out
