"""Where each rank sits in a model-parallel run, and how its iterations split into compute and
the three kinds of communication (summary's per-rank table, stragglers' peers, the timeline's
labels, the report's layout figure).

The layout is read from the root attributes ``tp`` (ranks per tensor group, 1 or absent outside
``--parallel tensor``) and ``stages`` (K, 1 or absent in data parallelism); R = nranks / (tp x K)
replicas. Ranks are numbered as dtbench numbers them (docs/model-parallelism.md): rank =
(replica x K + stage) x tp + tensor rank (tp = 1: replica x K + stage). A file whose rank count is
not a multiple of tp x K (a parameter server's extra ranks) reads as data parallelism.

The split of one rank's iteration (seconds, ``split``), from the fields the run records (0 where
a field is absent, as in data parallelism):
- tensor: ``tp_comm``, the tensor group's allreduces (inside forward and backward);
- bubble: ``pipe_idle``, waiting for a neighbouring stage that had not started sending;
- pipe transfer: ``pipe_send + pipe_recv``, moving activations and gradients between stages;
- exchange: ``exchange``, the data-parallel exchange among the replicas;
- compute: forward + backward less the tensor, bubble and pipe-transfer parts;
- other: total less all of the above (loading the batch, the update, the recording).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

import numpy as np
import pandas as pd

from .runfile import Run

#: the split's parts in drawing order, and how figures and tables name them
PARTS = ("compute", "tensor", "bubble", "pipe_transfer", "exchange", "other")
PART_NAMES = {"compute": "compute", "tensor": "tensor-group allreduce",
              "bubble": "pipeline bubble", "pipe_transfer": "pipeline transfer",
              "exchange": "data-parallel exchange", "other": "data, update, other"}


@dataclass(frozen=True)
class Layout:
    """tp x stages x replicas = nranks."""
    tp: int
    stages: int
    replicas: int

    @property
    def model_parallel(self) -> bool:
        return self.tp > 1 or self.stages > 1

    def name(self) -> str:
        """'dp8', 'tp2 x dp4', 'pp2 x dp4', 'tp2 x pp2 x dp2' (factors above 1, dp always)."""
        parts = [f"tp{self.tp}"] if self.tp > 1 else []
        parts += [f"pp{self.stages}"] if self.stages > 1 else []
        return " x ".join(parts + [f"dp{self.replicas}"])


def _int_attr(run: Run, name: str) -> int:
    try:
        value = int(run.attrs.get(name) or 1)
    except (TypeError, ValueError):
        return 1
    return value if value >= 1 else 1


def layout(run: Run) -> Layout:
    """The run's tp x stages x replicas (data parallelism where the attributes do not fit)."""
    tp, k = _int_attr(run, "tp"), _int_attr(run, "stages")
    if run.nranks < 1 or run.nranks % (tp * k):
        return Layout(1, 1, max(run.nranks, 1))
    return Layout(tp, k, run.nranks // (tp * k))


def coords(run: Run) -> pd.DataFrame:
    """One row per rank position: rank, replica, stage, tensor (the rank in its tensor group)."""
    lay = layout(run)
    rank = run.ranks["rank"].to_numpy().astype(np.int64)
    return pd.DataFrame({"rank": rank, "replica": rank // (lay.tp * lay.stages),
                         "stage": (rank // lay.tp) % lay.stages, "tensor": rank % lay.tp})


def places(run: Run) -> List[str]:
    """Per rank position its place, e.g. 'r1 s0 t1': replica 1, stage 0, tensor rank 1 (stage
    and tensor only where the layout has them; '' in data parallelism)."""
    lay = layout(run)
    if not lay.model_parallel:
        return [""] * run.nranks
    return [" ".join([f"r{c.replica}"] + ([f"s{c.stage}"] if lay.stages > 1 else []) +
                     ([f"t{c.tensor}"] if lay.tp > 1 else []))
            for c in coords(run).itertuples()]


def labels(run: Run) -> List[str]:
    """Per rank position: 'rank 5', in a model-parallel run with its place: 'rank 5 (r1 s0 t1)'."""
    return [f"rank {r}" + (f" ({p})" if p else "")
            for r, p in zip(run.ranks["rank"], places(run))]


def peer_groups(run: Run) -> np.ndarray:
    """Per rank position, the id of the ranks that do the same work: in a pipeline the ranks of
    its stage (its tensor group's ranks, which hold equal slices of the stage's rows, and the
    stage's other replicas); in data and pure tensor parallelism every rank (one group: 0)."""
    return coords(run)["stage"].to_numpy()


def _field(run: Run, name: str) -> np.ndarray:
    """``name`` with 0 where the run does not record it; NaN where ``total`` is NaN."""
    done = np.isfinite(run.iterations["total"])
    values = np.nan_to_num(run.iterations[name], nan=0.0) if run.has(name) else 0.0
    return np.where(done, values, np.nan)


def split(run: Run) -> Dict[str, np.ndarray]:
    """PARTS -> (nranks, extent) seconds (NaN where ``total`` is); see the module's text."""
    f = {n: _field(run, n) for n in ("tp_comm", "pipe_idle", "pipe_send", "pipe_recv")}
    out = {"tensor": f["tp_comm"], "bubble": f["pipe_idle"],
           "pipe_transfer": f["pipe_send"] + f["pipe_recv"],
           "exchange": run.iterations["exchange"]}
    out["compute"] = run.iterations["forward"] + run.iterations["backward"] - out["tensor"] - \
        out["bubble"] - out["pipe_transfer"]
    out["other"] = run.iterations["total"] - sum(out[p] for p in PARTS if p in out)
    return {p: out[p] for p in PARTS}


def split_per_iteration(run: Run) -> Dict[str, float]:
    """PARTS -> seconds per iteration: per part the median over the measured iterations of the
    mean over the ranks that measured it (their sum is the mean rank's iteration)."""
    mask = run.measured_mask
    out = {}
    for part, values in split(run).items():
        ok = mask & np.isfinite(values)
        count = ok.sum(axis=0)
        per_iter = np.where(ok, values, 0.0).sum(axis=0)[count > 0] / count[count > 0]
        out[part] = float(np.median(per_iter)) if per_iter.size else float("nan")
    return out
