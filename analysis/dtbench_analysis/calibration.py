"""The exchange's efficiency against the communication library, where a result file has it.

Newer dtbench versions store a calibration record: the library's own collective time per bucket
size, measured in the same job. This reader does not depend on its exact names: it looks for a
group whose name contains ``calib`` (at the root or one level down) holding a 1-D size dataset
(name with ``byte`` or ``size``) and a 1-D time dataset of the same length (name with ``time``,
``second`` or ending in ``_s``), and for a ready-made efficiency (a root attribute or a
``summary`` entry whose name contains ``efficiency``). When only the record is there, the
efficiency is estimated as

    library time for the median bytes a rank sent per iteration (linear interpolation in the
    record) / median measured exchange transfer time (``exchange - exchange_wait``),

so 1.0 means the exchange is as fast as the library and 0.5 that it takes twice as long.
Files without any of it give None everywhere.
"""

from __future__ import annotations

from typing import Dict, Optional

import h5py
import numpy as np

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
        except (OSError, TypeError):
            cache["record"] = None
    return cache["record"]


def _number(value) -> Optional[float]:
    if isinstance(value, dict):
        for k in ("median", "value", "efficiency", "ratio"):
            if k in value:
                return _number(value[k])
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if np.isfinite(x) else None


def from_summary(s: Dict[str, object]) -> Optional[float]:
    """A ready-made efficiency in a ``summary.summarize`` dict (any top-level key naming it)."""
    for k, v in s.items():
        if "efficiency" in k.lower():
            x = _number(v)
            if x is not None:
                return x
    return None


def efficiency(run: Run, summary_dict: Optional[Dict[str, object]] = None) -> Optional[float]:
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
    rec = record(run)
    if rec is None or run.nranks < 2:
        return None
    sent = run.measured("bytes_sent")
    transfer = run.measured("exchange")
    if run.has("exchange_wait"):
        transfer = transfer - run.measured("exchange_wait")
    sent, transfer = sent[np.isfinite(sent)], transfer[np.isfinite(transfer)]
    if not sent.size or not transfer.size or np.median(transfer) <= 0:
        return None
    library = float(np.interp(np.median(sent), rec["bytes"], rec["seconds"]))
    return library / float(np.median(transfer))
