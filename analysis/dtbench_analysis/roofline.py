"""The roofline of a --profile-layers run: each layer's achieved FLOP/s and bytes/s against the
device's peaks, so a reader sees which layers are far from the hardware and what bounds them.

dtbench records per rank and layer the FLOPs and the least bytes one forward and one backward call
move (/profile/*_flop, *_bytes), and per rank its device's peak memory bandwidth and compute at
the run's precision, from a table of known GPUs or measured at start, with how each was found
(docs/hdf5-layout.md). ``peaks(profile)`` reads the peaks; ``layer_rates(profile, j, seconds)``
layer j's rates over its mean time. Older files have none of it: both return None.
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

from .records import Record, record

#: a layer whose FLOPs per byte are below the ridge point (peak FLOP/s / peak B/s) can at best
#: reach peak FLOP/s x intensity / ridge: memory bounds it; at or above, compute does
MEMORY, COMPUTE = "memory", "compute"


@record
class Peaks(Record):
    """The device's peaks: the median over ranks (one device model per run, as a rule)."""
    bandwidth_gbps: Optional[float]     # GB/s (1e9 B/s)
    compute_gflops: Optional[float]     # GFLOP/s at the run's precision
    ridge_flop_per_byte: Optional[float]    # compute / bandwidth
    bandwidth_method: str               # how found (rank 0's; the table or a measurement)
    compute_method: str


@record
class LayerRates(Record):
    """One layer's amounts per iteration (forward + backward, mean over the ranks holding it)
    over its mean time."""
    gflop: Optional[float]              # FLOPs of one forward and one backward, / 1e9
    gbytes: Optional[float]             # least bytes they move, / 1e9
    gflops: Optional[float]             # gflop / time
    gbps: Optional[float]               # gbytes / time
    intensity: Optional[float]          # FLOP per byte
    compute_share: Optional[float]      # gflops / the peak
    bandwidth_share: Optional[float]    # gbps / the peak
    bound: Optional[str]                # MEMORY or COMPUTE: intensity against the ridge point


def _median(values: np.ndarray) -> Optional[float]:
    finite = values[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else None


def _method(methods: np.ndarray) -> str:
    said = [str(m) for m in methods if str(m)]
    return said[0] if said else "not recorded"


def has_roofline(profile: Dict[str, np.ndarray]) -> bool:
    return "forward_bytes" in profile and "peak_flops" in profile


def peaks(profile: Dict[str, np.ndarray]) -> Optional[Peaks]:
    """The run's peaks; None in files without a roofline."""
    if not has_roofline(profile):
        return None
    bw, fl = _median(profile["peak_bandwidth"]), _median(profile["peak_flops"])
    return Peaks(None if bw is None else bw / 1e9, None if fl is None else fl / 1e9,
                 fl / bw if bw and fl else None, _method(profile["peak_bandwidth_method"]),
                 _method(profile["peak_flops_method"]))


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def layer_rates(profile: Dict[str, np.ndarray], j: int, seconds: Optional[float],
                peak: Optional[Peaks]) -> Optional[LayerRates]:
    """Layer j's rates over `seconds` (its mean forward + backward time; None or 0: not timed,
    e.g. a row fused into another); None in files without a roofline."""
    if peak is None:
        return None

    def amount(*names: str) -> Optional[float]:
        cells = sum(profile[n][:, j] for n in names)  # NaN on ranks not holding the layer
        return float(np.nanmean(cells)) if np.isfinite(cells).any() else None
    flop, moved = amount("forward_flop", "backward_flop"), amount("forward_bytes", "backward_bytes")
    timed = seconds is not None and np.isfinite(seconds) and seconds > 0
    gflops = flop / seconds / 1e9 if timed and flop is not None else None
    gbps = moved / seconds / 1e9 if timed and moved is not None else None
    intensity = _ratio(flop, moved)
    bound = None
    if intensity is not None and peak.ridge_flop_per_byte is not None:
        bound = MEMORY if intensity < peak.ridge_flop_per_byte else COMPUTE
    return LayerRates(None if flop is None else flop / 1e9, None if moved is None else moved / 1e9,
                      gflops, gbps, intensity, _ratio(gflops, peak.compute_gflops),
                      _ratio(gbps, peak.bandwidth_gbps), bound)
