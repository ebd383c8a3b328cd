"""Memory per rank against time per iteration: what sharding the model's state buys
(``--exchange zero1|zero2|zero3`` beside ``sync``, docs/exchange.md) and what it costs.

Two figures per rank, both optional in a file (docs/hdf5-layout.md): the plan's bytes of the
parameters, gradients and optimizer state (/ranks/memory_params, memory_grads,
memory_optimizer: from the buffers dtbench allocated, not a measurement) and the measured peak
resident memory of the process (/ranks/memory_peak_resident, ``ru_maxrss`` at the end: the
libraries, MPI's buffers and the activations too). ``memory_per_rank`` gives both for one run
(the largest rank, and the smallest measured peak), beside the median time per iteration
(metrics.iteration_times, as every table of the report). The report draws memory against time
(tables.memory_time, plot/memory_fig.py) only where the runs that record memory hold two
strategies or more. Values that are not bytes were read as not recorded (schema.memory_values).
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import metrics
from .records import Record, absent, record
from .runfile import Run
from .units import MS

MIB = 2.0 ** 20
PLAN_KEYS = ("memory_params", "memory_grads", "memory_optimizer")
PEAK_KEY = "memory_peak_resident"
#: the data-parallel strategies whose memory the sharding changes (compare shows memory per
#: rank where its groups differ among these)
SHARDING = ("sync", "zero1", "zero2", "zero3")

DEFINITION = ("per rank, the bytes of the model's parameters, gradients and optimizer state "
              "(/ranks/memory_*: the plan's, from the buffers dtbench allocated; the "
              "optimizer's state of the rank's shard with --exchange zero1 or zero2; zero3 also "
              "shards the parameters and gradients: its shard and one bucket), the largest over "
              "the ranks, MiB; measured peak resident: /ranks/memory_peak_resident (the "
              "process's ru_maxrss at the end: everything the rank touched), the largest and "
              "the smallest over the ranks that recorded it, MiB; against the median time per "
              "iteration (critical path for lockstep runs)")


@record
class MemoryPerRank(Record):
    """What each rank holds for the model (the plan, the largest rank; None where the file
    records no plan) and, in newer files, the measured peak resident memory (MiB), with the
    median time per iteration (ms) the report draws them against."""
    params_mib: Optional[float]
    grads_mib: Optional[float]
    optimizer_mib: Optional[float]
    total_mib: Optional[float]
    # /ranks/memory_peak_resident (absent in older files): the largest and the smallest rank
    peak_resident_max_mib: Optional[float] = absent()
    peak_resident_min_mib: Optional[float] = absent()
    time_per_iteration_ms: Optional[float] = None

    @property
    def shown_mib(self) -> Optional[float]:
        """The memory per rank a figure shows: the measured peak where recorded, else the
        plan's total (None: neither)."""
        peak = self.get("peak_resident_max_mib")
        return peak if peak is not None else self.total_mib

    @property
    def basis(self) -> Optional[str]:
        """What ``shown_mib`` is: "measured peak", "plan" or None."""
        if self.get("peak_resident_max_mib") is not None:
            return "measured peak"
        return "plan" if self.total_mib is not None else None


def _bytes(run: Run, key: str) -> Optional[np.ndarray]:
    """/ranks/``key`` as float64 (NaN: not recorded), None when the file lacks it."""
    if key not in run.ranks:
        return None
    return run.ranks[key].to_numpy(dtype=float)


def _largest(values: np.ndarray) -> Optional[float]:
    finite = values[np.isfinite(values)]
    return float(finite.max()) / MIB if finite.size else None


def memory_per_rank(run: Run) -> Optional[MemoryPerRank]:
    """/ranks/memory_* of ``run`` as MemoryPerRank; None in files without them (the plan's three
    and the peak all absent, or none of them holding a number)."""
    plan = [_bytes(run, k) for k in PLAN_KEYS]
    peak = _bytes(run, PEAK_KEY)
    if all(p is None for p in plan) and peak is None:
        return None
    parts = [None if p is None else _largest(p) for p in plan]
    total = None if any(p is None for p in plan) else _largest(sum(plan))
    out = MemoryPerRank(*parts, total)
    if peak is not None:
        out.peak_resident_max_mib = _largest(peak)
        out.peak_resident_min_mib = None if out.peak_resident_max_mib is None else \
            float(np.nanmin(peak)) / MIB
    if out.shown_mib is None and all(p is None for p in parts):
        return None
    times = metrics.iteration_times(run)
    out.time_per_iteration_ms = float(np.median(times)) * MS if times.size else None
    return out

