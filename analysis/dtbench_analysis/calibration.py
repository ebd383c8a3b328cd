"""The exchange's efficiency against the communication library, where a result file has it.

Newer dtbench versions store a calibration: the library's own collective time on the run's
buckets, measured in the same job (root attributes ``calibration_*``, e.g.
``calibration_exchange_s`` = the library's time for one exchange of all buckets). This reader
does not depend on the exact names. In order, it uses:

1. a ready-made efficiency: a ``summary`` entry or root attribute whose name contains
   ``efficiency``;
2. a root attribute ``calibration*_s`` (finite, > 0): library seconds per exchange;
3. a group whose name contains ``calib`` (at the root or one level down) with a 1-D size
   dataset (name with ``byte`` or ``size``) and a 1-D time dataset of the same length (name with
   ``time``, ``second`` or ending in ``_s``): library seconds for the median bytes a rank sent
   per iteration, interpolated linearly;

and divides the library's time by the median measured exchange transfer time
(``exchange - exchange_wait`` over ranks x measured iterations). 1.0 means the exchange is as fast
as the library, 0.5 that it takes twice as long. Files without any of it give None.
"""

from __future__ import annotations

from typing import Dict, Optional

import h5py
import numpy as np

from .records import Record
from .runfile import Run


def _find_record(f: h5py.File) -> Optional[Dict[str, np.ndarray]]:
    candidates = []
    for name, obj in f.items():
        if isinstance(obj, h5py.Group):
            if "calib" in name.lower():
                candidates.append(obj)
            candidates += [g for n, g in obj.items()
                           if isinstance(g, h5py.Group) and "calib" in n.lower()]
    for g in candidates:
        sizes = times = None
        for n, ds in g.items():
            if not isinstance(ds, h5py.Dataset) or ds.ndim != 1 or ds.dtype.kind not in "iuf":
                continue
            low = n.lower()
            if sizes is None and ("byte" in low or "size" in low):
                sizes = ds[()].astype(np.float64)
            elif times is None and ("time" in low or "second" in low or low.endswith("_s")):
                times = ds[()].astype(np.float64)
        if sizes is not None and times is not None and sizes.shape == times.shape:
            ok = np.isfinite(sizes) & np.isfinite(times) & (times > 0)
            if ok.any():
                order = np.argsort(sizes[ok])
                return {"bytes": sizes[ok][order], "seconds": times[ok][order]}
    return None


def record(run: Run) -> Optional[Dict[str, np.ndarray]]:
    """{"bytes": sizes, "seconds": library time} sorted by size, or None (cached on the run)."""
    cache = run.__dict__.setdefault("_calibration_cache", {})
    if "record" not in cache:
        try:
            with h5py.File(run.path, "r", locking=False) as f:
                cache["record"] = _find_record(f)
        except (OSError, RuntimeError, KeyError, TypeError, ValueError):  # damaged: no record
            cache["record"] = None
    return cache["record"]


def _number(value) -> Optional[float]:
    if isinstance(value, (dict, Record)):
        for k in ("median", "value", "efficiency", "ratio"):
            if k in value:
                return _number(value[k])
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if np.isfinite(x) else None


def from_summary(s) -> Optional[float]:
    """A ready-made efficiency in a ``summary.summarize`` result (any top-level key naming it)."""
    for k, v in s.items():
        if "efficiency" in k.lower():
            x = _number(v)
            if x is not None:
                return x
    return None


def efficiency(run: Run, summary_dict=None) -> Optional[float]:
    """Exchange efficiency against the library (see the module doc), or None."""
    if summary_dict is not None:
        x = from_summary(summary_dict)
        if x is not None:
            return x
    for k, v in run.attrs.items():
        if "efficiency" in k.lower():
            x = _number(v)
            if x is not None:
                return x
    if run.nranks < 2:
        return None
    library = None
    for k, v in run.attrs.items():
        if k.lower().startswith("calib") and k.lower().endswith("_s"):
            x = _number(v)
            if x is not None and x > 0:
                library = x
                break
    rec = record(run) if library is None else None
    if library is None and rec is None:
        return None
    sent = run.measured("bytes_sent")
    transfer = run.measured("exchange")
    if run.has("exchange_wait"):
        transfer = transfer - run.measured("exchange_wait")
    sent, transfer = sent[np.isfinite(sent)], transfer[np.isfinite(transfer)]
    if not sent.size or not transfer.size or np.median(transfer) <= 0:
        return None
    if library is None:
        library = float(np.interp(np.median(sent), rec["bytes"], rec["seconds"]))
    return library / float(np.median(transfer))
