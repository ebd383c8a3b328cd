"""Tokens per second and model FLOPs utilisation (MFU): the work behind a throughput.

A file written by a newer dtbench records, as root attributes (docs/hdf5-layout.md):
``tokens_per_sample`` (a language model's sequence length, 0 for other models),
``train_flops_per_sample`` (the model's forward and backward FLOPs per sample, as a step computes
them) and ``peak_flops`` (FLOP/s of one device that computes, at the run's precision: the
datasheet's for a GPU dtbench's table knows, else measured at start; ``peak_flops_source`` says
which). From a global throughput X (samples/s, over all ranks, metrics.throughput):

- tokens/s = X x tokens_per_sample (language models only);
- MFU = train_flops_per_sample x X / (peak_flops x devices), devices = the ranks that compute
  (``nworkers``: every rank but the parameter servers of ``--exchange async``; ``nranks`` in
  files without it).

A file without an attribute (an older dtbench, a model without a sequence), or with one that is
not a positive finite number, has no such figure: ``None``, and the commands leave the column
out.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

from .runfile import Run

DEFINITIONS = {
    "tokens_per_s": "samples/s x tokens_per_sample (a language model's sequence length; root "
                    "attribute)",
    "mfu": "model FLOPs utilisation: train_flops_per_sample (forward + backward FLOPs of one "
           "sample, as a step computes them) x samples/s / (peak_flops x devices that compute: "
           "nworkers); peak_flops: one device's peak at the run's precision, from dtbench's "
           "table of GPUs or measured at start (peak_flops_source)",
}


def _positive(run: Run, key: str) -> Optional[float]:
    value = run.attrs.get(key)
    if value is None or isinstance(value, (str, bool)):
        return None
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if np.isfinite(value) and value > 0 else None


def tokens_per_sample(run: Run) -> Optional[int]:
    """A language model's tokens per sample (its sequence length); None for other models and in
    files without the attribute."""
    value = _positive(run, "tokens_per_sample")
    return None if value is None else int(value)


def train_flops_per_sample(run: Run) -> Optional[float]:
    """Training FLOPs of one sample (forward + backward); None when not recorded."""
    return _positive(run, "train_flops_per_sample")


def peak_flops(run: Run) -> Optional[float]:
    """One computing device's peak FLOP/s at the run's precision; None when not recorded or
    unknown (NaN in the file)."""
    return _positive(run, "peak_flops")


def devices(run: Run) -> int:
    """The ranks that compute: ``nworkers`` (all but parameter servers), else ``nranks``."""
    n = run.attrs.get("nworkers")
    return int(n) if isinstance(n, int) and n > 0 else run.nranks


def tokens_per_s(run: Run, samples_per_s: Optional[float]) -> Optional[float]:
    """samples/s x tokens_per_sample; None for a model without tokens or an unknown rate."""
    tokens = tokens_per_sample(run)
    return samples_per_s * tokens if tokens and samples_per_s else None


def mfu(run: Run, samples_per_s: Optional[float],
        peak: Optional[float] = None) -> Optional[float]:
    """train_flops_per_sample x samples/s / (peak x devices), a fraction; ``peak`` defaults to
    the run's own peak_flops. None when a term is unknown."""
    flops = train_flops_per_sample(run)
    peak = peak_flops(run) if peak is None else peak
    if not (flops and peak and samples_per_s):
        return None
    return flops * samples_per_s / (peak * devices(run))


def group_peak(runs: Sequence[Run]) -> Optional[float]:
    """The median of the runs' peak_flops (repeats of one configuration measure their CPU's
    peak each at start); None when no run records one."""
    peaks = [p for p in (peak_flops(r) for r in runs) if p]
    return float(np.median(peaks)) if peaks else None


def group_rates(runs: Sequence[Run], samples_per_s: Dict[str, Optional[float]],
                keys: Sequence[str] = ("median", "lo", "hi")) -> Dict[str, Dict[str, object]]:
    """tokens/s and MFU of the pooled runs of one configuration at each of its throughputs
    (``samples_per_s``: median and the interval's bounds); only the figures the files allow
    (no key for a model without tokens, or without FLOPs or a peak)."""
    first = runs[0]
    out: Dict[str, Dict[str, object]] = {}
    if tokens_per_sample(first):
        out["tokens_per_s"] = {k: tokens_per_s(first, samples_per_s.get(k)) for k in keys}
    peak = group_peak(runs)
    if train_flops_per_sample(first) and peak:
        out["mfu"] = {k: mfu(first, samples_per_s.get(k), peak) for k in keys}
    return out
