"""Cost terms of ZeRO's collectives (``--exchange zero1|zero2|zero3``) for ``dtbench-analyze
predict``: reduce-scatters and all-gathers per bucket, as coll.py costs the allreduce (terms
of fit.PARAMS, the same alpha and beta per level).

comm/coll_mpi.c calls ``MPI_Reduce_scatter_block`` and ``MPI_Allgather`` in place (blocking:
zero1's and zero3's, and every all-gather; zero2 starts its reduce-scatters during backward).
Open MPI 4.1's tuned component picks per call from the communicator size and one rank's block
(``tuned_reduce_scatter_block``, ``tuned_allgather``: ``ompi_coll_tuned_*_intra_dec_fixed``,
commutative operation). ``--transport hier`` (HYBRID_SHARD) runs them inside the node over its
L ranks, and after backward allreduces each rank's shard (1/L of the bucket) across the nodes
between the ranks of the same local rank, the L allreduces at once through the node's link.
Per iteration: zero1 and zero2 one reduce-scatter and one all-gather per bucket; zero3 one
reduce-scatter per bucket and the gathers of forward and backward (``passes``: the all-gathered
bytes over the gradient's, about 2, from ``bytes_allgather``).
"""

from __future__ import annotations

import math
from typing import Dict, Optional

import numpy as np

from .coll import NPARAMS, _add, _log2, bucket_sizes, collective_terms, pick_rule

KINDS = ("reduce_scatter", "allgather", "allreduce")
ZERO = ("zero1", "zero2", "zero3")


def scales_for(strategy: str, measured: Optional[Dict[str, float]] = None) -> Dict[str, float]:
    """zero_terms's scales for ``strategy``: those measured on a run of it, else fp32 on the
    wire and one all-gather pass (zero3: two, forward's and backward's)."""
    out = {"allgather": 2.0 if strategy == "zero3" else 1.0}
    out.update(measured or {})
    return out


def tuned_reduce_scatter_block(p: int, block: float) -> str:
    """Open MPI 4.1 tuned's fixed rule for MPI_Reduce_scatter_block of ``block`` bytes per rank
    over ``p`` ranks (commutative)."""
    rules = [  # (communicator size below, [(block below, algorithm)], beyond)
        (4, [(4, "rd"), (8, "bf"), (16, "rh"), (128, "bf"), (256, "rh"), (4096, "bf"),
             (8192, "rh"), (131072, "bf")], "lin"),
        (8, [(8, "rh"), (32, "rd"), (256, "bf"), (8192, "rh"), (16384, "bf"),
             (1048576, "rh")], "lin"),
        (16, [(4, "lin"), (32, "rh"), (128, "bf"), (524288, "rh"), (4194304, "lin")], "bf"),
        (32, [(32, "lin"), (524288, "rh"), (2097152, "lin"), (4194304, "rh")], "bf"),
        (None, [(4, "rh"), (16, "lin"), (65536, "bf"), (262144, "lin")], "bf"),
    ]
    names = {"rd": "recursive_doubling", "rh": "recursive_halving", "bf": "butterfly",
             "lin": "linear"}
    return names[pick_rule(rules, p, block)]


def tuned_allgather(p: int, block: float) -> str:
    """Open MPI 4.1 tuned's fixed rule for MPI_Allgather of ``block`` bytes per rank over ``p``
    ranks (``neighbor`` and ``ring`` cost alike here: p-1 blocks through the ring's links)."""
    if p == 2:
        return "two_proc"
    if p < 32:
        return "recursive_doubling"
    limits = [(64, 1024, 65536), (128, 512, 65536), (256, 512, 131072)]
    for below, rd, nb in limits:
        if p < below:
            return "recursive_doubling" if block < rd else ("neighbor" if block < nb else "ring")
    return "neighbor" if block >= 4096 else "bruck"


def reduce_scatter_terms(algorithm: str, nnodes: int, per_node: int, size: float) -> np.ndarray:
    """One MPI_Reduce_scatter_block of a bucket of ``size`` bytes over nnodes x per_node ranks
    (each rank keeps size/p). ``tuned``: the rule for this size."""
    p = nnodes * per_node
    t = np.zeros(NPARAMS)
    if p <= 1:
        return t
    if algorithm == "tuned":
        algorithm = tuned_reduce_scatter_block(p, size / p)
    q = 1 << int(math.floor(math.log2(p)))
    if algorithm == "linear":
        # Open MPI's basic_linear: a reduce of the whole bucket to rank 0 (binomial: log2 p
        # steps of the bucket), then rank 0 sends every other rank its block
        for k in range(_log2(p)):
            _add(t, 2 ** k >= per_node, 1, size, size)
        _add(t, nnodes > 1, p - 1, (p - 1) / p * size, size / p)
    elif algorithm == "recursive_doubling":
        # log2 p exchanges of the part still to be reduced: about the whole bucket each
        for k in range(_log2(p)):
            _add(t, 2 ** k >= per_node, 1, size, size)
    elif algorithm in ("recursive_halving", "butterfly"):
        # non-power-of-two ranks fold first (the bucket once), then log2 q exchanges of half the
        # window: halving starts at distance q/2, the butterfly at distance 1
        if q < p:
            _add(t, per_node < 2, 1, size, size)
        n = _log2(q)
        for k in range(n):
            d = 2 ** (n - 1 - k) if algorithm == "recursive_halving" else 2 ** k
            piece = size / 2 ** (k + 1)
            _add(t, d >= per_node, 1, piece, piece)
    else:
        raise ValueError(f"unknown reduce-scatter algorithm {algorithm!r}")
    return t


def allgather_terms(algorithm: str, nnodes: int, per_node: int, size: float) -> np.ndarray:
    """One MPI_Allgather filling a bucket of ``size`` bytes (size/p per rank). ``tuned``: the
    rule for this size."""
    p = nnodes * per_node
    t = np.zeros(NPARAMS)
    if p <= 1:
        return t
    if algorithm == "tuned":
        algorithm = tuned_allgather(p, size / p)
    block = size / p
    if algorithm == "recursive_doubling" and p & (p - 1):
        algorithm = "bruck"      # Open MPI's recursive doubling falls back to Bruck's
    if algorithm == "two_proc":
        _add(t, nnodes > 1, 1, block, block)
    elif algorithm == "recursive_doubling":
        for k in range(_log2(p)):
            _add(t, 2 ** k >= per_node, 1, 2 ** k * block, 2 ** k * block)
    elif algorithm == "bruck":
        for k in range(_log2(p)):
            n = min(2 ** k, p - 2 ** k)
            _add(t, 2 ** k >= per_node, 1, n * block, n * block)
    elif algorithm in ("ring", "neighbor"):
        _add(t, nnodes > 1, p - 1, (p - 1) * block, block)
    else:
        raise ValueError(f"unknown all-gather algorithm {algorithm!r}")
    return t


def zero_terms(kind: str, hier: bool, algorithm: str, nnodes: int, per_node: int,
               grad_bytes: float, bucket_bytes: float, scale: float = 1.0) -> np.ndarray:
    """Terms of one iteration's collectives of ``kind`` (KINDS) over the buckets. ``scale``:
    for reduce_scatter the wire bytes over the fp32 gradient's (``--grad-dtype``), for
    allgather the number of passes over the parameters (zero3: forward and backward). With
    ``hier`` the reduce-scatters and all-gathers run inside the node and the allreduce of the
    shards across the nodes; without, there is no allreduce. Algorithms other than ``tuned``
    and ``tree`` name the allreduce across nodes only; the others take tuned's rules."""
    t = np.zeros(NPARAMS)
    L = per_node
    inside = (1, L) if hier else (nnodes, L)
    own = algorithm if algorithm in ("linear", "recursive_halving", "butterfly") else "tuned"
    for size in bucket_sizes(grad_bytes, bucket_bytes):
        if kind == "reduce_scatter":
            t += reduce_scatter_terms(own, *inside, size * scale)
        elif kind == "allgather":
            t += scale * allgather_terms("tuned", *inside, size)
        elif kind == "allreduce" and hier and nnodes > 1:
            algo = algorithm if algorithm in ("ring", "recursive_doubling", "rabenseifner",
                                              "tree") else "tuned"
            across = collective_terms(algo, nnodes, 1, size * scale / L)
            across[[1, 3, 4]] *= L
            t += across
    return t


def zero_exchange_terms(strategy: str, hier: bool, algorithm: str, nnodes: int, per_node: int,
                        grad_bytes: float, bucket_bytes: float,
                        scales: Dict[str, float]) -> np.ndarray:
    """Terms of what an iteration of ``strategy`` (ZERO) waits for: every collective, but
    zero2's reduce-scatters, started during backward, of which only the last bucket's (the
    first layers' gradients, produced last) is left after backward."""
    t = np.zeros(NPARAMS)
    for kind in KINDS:
        part = zero_terms(kind, hier, algorithm, nnodes, per_node, grad_bytes, bucket_bytes,
                          scales.get(kind, 1.0))
        if strategy == "zero2" and kind == "reduce_scatter":
            n = len(bucket_sizes(grad_bytes, bucket_bytes))
            part = part / max(1, n)
        t += part
    return t
