"""Cost terms of the collectives dtbench's exchange runs, for ``dtbench-analyze predict``.

A collective's time is ``terms . PARAMS`` (fit.PARAMS: alpha and beta per topology
level, and across nodes a separate beta for messages above the eager limit, which the transport
sends with the rendezvous protocol; where the nodes share one machine's cores, a surcharge on
the bytes across nodes once the ranks outnumber the cores: ``SHARED``). Which algorithm runs
depends on how dtbench called MPI:
- blocking ``MPI_Allreduce`` (sync, hier and mixed without ``--overlap``, and every calibration):
  Open MPI's ``tuned`` component picks per call from the communicator size and the message size
  (``tuned_allreduce``: ``ompi_coll_tuned_allreduce_intra_dec_fixed`` of Open MPI 4.1, the
  table for commutative operations); the buckets run one after the other (``tuned``);
- ``MPI_Iallreduce`` (``--overlap``, ssp): libnbc's binomial tree, every bucket in flight at
  once (``tree``).
Ranks are numbered node by node; a step at rank distance d runs inside the node when d is
smaller than the ranks per node.
"""

from __future__ import annotations

import math
from typing import List, Optional

import numpy as np

NPARAMS = 6
#: the column of beta_inter_shared: where every node's ranks share the same C cores
#: (--shared-cores: nodes emulated on one machine) and the ranks outnumber them, a byte across
#: nodes costs that much more (a rank's socket is served only while the rank holds a core; with
#: a core per rank, its TCP work runs beside the link). Its coefficient: the bytes across nodes
#: of the link terms when ranks > C, else 0.
SHARED = 5
#: Open MPI's TCP BTL eager limit (btl_tcp_eager_limit): larger messages across nodes take the
#: rendezvous protocol, whose per-byte cost is fitted apart (beta_inter_rndv)
EAGER_BYTES = 65536


def _log2(n: int) -> int:
    return int(math.ceil(math.log2(n))) if n > 1 else 0


def _add(t: np.ndarray, inter: bool, messages: float, nbytes: float, message: float) -> None:
    """``messages`` latencies and ``nbytes`` bytes at one level, in messages of ``message``."""
    if not inter:
        t[0] += messages
        t[1] += nbytes
        return
    t[2] += messages
    t[4 if message > EAGER_BYTES else 3] += nbytes


def tuned_allreduce(p: int, nbytes: float) -> str:
    """The algorithm Open MPI 4.1's tuned component runs for MPI_Allreduce of ``nbytes`` over
    ``p`` ranks (commutative operation: dtbench sums floats). Segmented ring runs with segment
    size 0 in the fixed rules, i.e. as the plain ring; nonoverlapping is a reduce then a
    broadcast (costed as the binomial tree)."""
    rules = [  # (communicator size below, [(message size below, algorithm)], beyond)
        (4, [(8, "ring"), (4096, "rd"), (8192, "ring"), (16384, "rd"), (65536, "ring"),
             (262144, "ring")], "rab"),
        (8, [(16, "ring"), (8192, "rd")], "rab"),
        (16, [(8192, "rd")], "rab"),
        (32, [(64, "ring"), (4096, "rd")], "rab"),
        (64, [(128, "ring")], "rab"),
        (128, [(262144, "rd")], "rab"),
        (256, [(131072, "nonoverlapping"), (262144, "rd")], "rab"),
        (512, [(4096, "nonoverlapping")], "rab"),
        (2048, [(2048, "nonoverlapping"), (16384, "rd")], "rab"),
        (4096, [(2048, "nonoverlapping"), (4096, "ring"), (16384, "rd")], "rab"),
        (None, [(2048, "nonoverlapping"), (16384, "ring"), (32768, "rd")], "rab"),
    ]
    names = {"rd": "recursive_doubling", "rab": "rabenseifner", "ring": "ring",
             "nonoverlapping": "tree"}
    return names[pick_rule(rules, p, nbytes)]


def pick_rule(rules, p: int, nbytes: float) -> str:
    """An Open MPI fixed decision table: ``rules`` lists (communicator size below, [(bytes
    below, algorithm)], algorithm beyond), the last with size None; the algorithm for ``p``
    ranks and ``nbytes``."""
    for below, table, beyond in rules:
        if below is None or p < below:
            for limit, algo in table:
                if nbytes < limit:
                    return algo
            return beyond
    raise AssertionError("unreachable")


def collective_terms(algorithm: str, nnodes: int, per_node: int, size: float,
                     pipelined: bool = False) -> np.ndarray:
    """Coefficients of PARAMS for one allreduce of ``size`` bytes over nnodes x per_node ranks.
    ``pipelined``: the bandwidth terms of a bucket that streams behind others (the load of the
    busiest link instead of the critical path), latency terms unchanged. ``tuned``: the
    algorithm Open MPI's tuned component picks for this size."""
    p = nnodes * per_node
    t = np.zeros(NPARAMS)
    if p <= 1:
        return t
    if algorithm == "tuned":
        algorithm = tuned_allreduce(p, size)
    l, n = _log2(per_node), _log2(nnodes)
    if algorithm == "ring":
        # every step is limited by the slowest link the ring crosses
        _add(t, nnodes > 1, 2 * (p - 1), 2 * (p - 1) / p * size, size / p)
    elif algorithm == "tree":
        # Open MPI libnbc's binomial allreduce (in place): a reduce in rounds at distance 1, 2,
        # 4, ... (l rounds inside the node, n across), then a binomial broadcast in which every
        # rank sends to all its children at once (vrank v -> v + 2^r for 2^r > v). The ranks
        # of node 0 each feed n other nodes over node 0's link (L*n copies at once), the next
        # node on the deepest path L*(n-1), ...: L*n(n+1)/2 link-times across nodes, l(l+1)/2
        # inside node 0. Streaming behind other buckets, a bucket costs the busiest link's load:
        # L*n copies out of node 0, l+1 through its memory.
        if pipelined:
            intra, inter = ((l + 1) * size if l else 0.0), per_node * n * size
        else:
            intra, inter = (l + l * (l + 1) / 2) * size, (n + per_node * n * (n + 1) / 2) * size
        _add(t, False, 2 * l, intra, size)
        _add(t, True, 2 * n, inter, size)
    elif algorithm == "recursive_doubling":
        # Open MPI: ranks beyond the largest power of two q first hand their vector to a
        # partner and get the result back (2 messages of the whole vector), then log2 q
        # exchanges of the whole vector at distance 1, 2, 4, ...
        q = 1 << int(math.floor(math.log2(p)))
        if q < p:
            _add(t, per_node < 2, 2, 2 * size, size)
        for k in range(_log2(q)):
            _add(t, 2 ** k >= per_node, 1, size, size)
    elif algorithm == "rabenseifner":
        # Open MPI's redscat_allgather: non-power-of-two ranks fold in pairs first (half each
        # way, the half back, the whole result at the end); then the reduce-scatter halves the
        # window at distance 1, 2, 4, ... and the all-gather doubles it back
        q = 1 << int(math.floor(math.log2(p)))
        if q < p:
            _add(t, per_node < 2, 3, 2 * size, size / 2)
        for k in range(_log2(q)):
            piece = size / 2 ** (k + 1)
            _add(t, 2 ** k >= per_node, 2, 2 * piece, piece)
    else:
        raise ValueError(f"unknown algorithm {algorithm!r}")
    return t


def hier_terms(algorithm: str, nnodes: int, per_node: int, size: float,
               pipelined: bool = False) -> np.ndarray:
    """--transport hier: reduce-scatter inside the node, allreduce of the shard across the nodes
    (``algorithm`` over one rank per node; ``tuned``: the rule for nnodes ranks and the shard's
    size), all-gather inside the node. The L ranks of a node run their shards' allreduces at once
    through the node's one link: the bandwidth terms are L times those of one shard."""
    t = np.zeros(NPARAMS)
    L = per_node
    if L > 1:
        _add(t, False, 2 * (L - 1), 2 * (L - 1) / L * size, size / L)
    across = collective_terms(algorithm, nnodes, 1, size / L, pipelined)
    across[[1, 3, 4]] *= L
    return t + across


def bucket_sizes(grad_bytes: float, bucket_bytes: float) -> List[float]:
    """The gradient cut in buckets of ``bucket_bytes`` (the last one holds the rest)."""
    nfull = int(grad_bytes // bucket_bytes) if bucket_bytes > 0 else 0
    sizes = [bucket_bytes] * nfull
    rest = grad_bytes - nfull * bucket_bytes
    if rest > 0 or not sizes:
        sizes.append(max(rest, 0.0))
    return sizes


def exchange_terms(strategy: str, algorithm: str, nnodes: int, per_node: int,
                   grad_bytes: float, bucket_bytes: float,
                   cores: Optional[int] = None) -> np.ndarray:
    """Terms of one iteration's gradient exchange, one allreduce per bucket. ``tuned`` (blocking
    MPI_Allreduce): the buckets one after the other, each with the algorithm of its size. Other
    algorithms (MPI_Iallreduce): all in flight at once, the largest bucket pays the whole
    critical path, the others stream behind it at the rate of the busiest link. ``cores``: every
    node's ranks share these cores (the ``SHARED`` term)."""
    sizes = bucket_sizes(grad_bytes, bucket_bytes)
    fn = hier_terms if strategy == "hier" else collective_terms
    if algorithm == "tuned":
        t = sum((fn(algorithm, nnodes, per_node, x) for x in sizes), np.zeros(NPARAMS))
    else:
        others = sizes[:]
        others.remove(max(sizes))
        t = fn(algorithm, nnodes, per_node, max(sizes)) + sum(
            (fn(algorithm, nnodes, per_node, x, True) for x in others), np.zeros(NPARAMS))
    return with_shared(t, nnodes * per_node, cores)


def with_shared(t: np.ndarray, ranks: int, cores: Optional[int]) -> np.ndarray:
    """``t`` with its SHARED term: its bytes across nodes where ``ranks`` outnumber ``cores``."""
    t[SHARED] = float(t[3] + t[4]) if cores and ranks > cores else 0.0
    return t
