"""The tensor group's allreduces (``--parallel tensor --tp N``) for ``dtbench-analyze predict``.

Each split layer pair allreduces [batch, seq, C] floats over the group of N ranks, after the
row-parallel fc's forward and after the column-parallel fc's backward (docs/model-parallelism.md):
``tp_calls`` blocking ``MPI_Allreduce`` per iteration, each of ``tp_bytes / tp_calls`` bytes,
which scale with the replica's batch. Each is costed as coll.py costs an allreduce with Open
MPI tuned's rules over the group (inside a node unless the group spans nodes:
``--tp-across-nodes``), with the parameters fitted on the data-parallel runs. The check compares
the measured ``tp_comm`` (median over iterations of the max over the ranks) with the model for
every tensor run; ``tensor_time`` predicts a layout (group size, ranks per node, batch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import numpy as np

from .coll import NPARAMS, collective_terms
from ..runfile import Run


@dataclass
class TensorObservation:
    path: str
    tp: int
    per_node: int
    batch: int               # the samples one allreduce carries (the replica's, or a micro-batch)
    calls: float             # allreduces per iteration
    bytes_per_sample: float  # of one allreduce, per sample of the batch
    measured: float          # s per iteration (median over iterations of the max over ranks)


def observe_tensor(run: Run) -> Optional[TensorObservation]:
    """The tensor group's allreduces of a run, or None (not a tensor run, or no tp_calls)."""
    tp = int(run.attrs.get("tp") or 1)
    if str(run.attrs.get("parallel") or "") != "tensor" or tp < 2:
        return None
    if not all(run.has(f) for f in ("tp_comm", "tp_bytes", "tp_calls")):
        return None
    train, every = run.trains, run.measured_by_all
    if not every.any():
        return None
    secs = np.min(run.measured("tp_comm")[train][:, every], axis=0)
    calls = run.measured("tp_calls")[train]
    sent = run.measured("tp_bytes")[train]
    ok = np.isfinite(calls) & (calls > 0) & np.isfinite(sent)
    secs = secs[np.isfinite(secs)]
    if not ok.any() or not secs.size:
        return None
    # one call carries a micro-batch of the replica's batch (the replica's batch without stages)
    replicas = max(1, int(run.attrs.get("replicas") or 1))
    staged = int(run.attrs.get("stages") or 1) > 1
    micro = max(1, int(run.attrs.get("microbatches") or 1)) if staged else 1
    batch = max(1, int(run.batch_global // replicas // micro))
    ncalls = float(np.median(calls[ok]))
    per_call = float(np.median(sent[ok] / calls[ok]))
    nnodes = max(1, run.nnodes)
    return TensorObservation(run.path, tp, max(1, run.nranks // nnodes), batch, ncalls,
                             per_call / batch, float(np.median(secs)))


def tensor_terms(tp: int, per_node: int, calls: float, size: float) -> np.ndarray:
    """Terms of ``calls`` allreduces of ``size`` bytes over a group of ``tp`` ranks filled node
    by node (inside one node when tp <= per_node)."""
    if tp <= 1 or calls <= 0:
        return np.zeros(NPARAMS)
    nnodes, inside = (1, tp) if tp <= per_node else (tp // per_node, per_node)
    return calls * collective_terms("tuned", nnodes, inside, size)


def tensor_time(comm, tp: int, per_node: int, calls: float, bytes_per_sample: float,
                batch: int) -> float:
    """Predicted seconds per iteration of a layout's tensor-group allreduces."""
    return comm.time(tensor_terms(tp, per_node, calls, bytes_per_sample * batch))


def check(runs: List[Run], models) -> List[Dict]:
    """Every tensor run's measured tensor-group time against the model (the fit of the sync
    transport, at the level the group's steps cross)."""
    out = []
    for run in runs:
        o = observe_tensor(run)
        if o is None:
            continue
        level = "intra" if o.tp <= o.per_node else "inter"
        _, comm = models.for_strategy("sync", level)
        row = {"file": o.path, "tp": o.tp, "per_node": o.per_node, "batch": o.batch,
               "calls": o.calls, "bytes_per_call": o.bytes_per_sample * o.batch,
               "measured_s": o.measured, "predicted_s": None, "error": None}
        if comm.level_known(level):
            pred = tensor_time(comm, o.tp, o.per_node, o.calls, o.bytes_per_sample, o.batch)
            row["predicted_s"] = pred
            row["error"] = pred / o.measured - 1.0 if o.measured > 0 else None
        out.append(row)
    return out
