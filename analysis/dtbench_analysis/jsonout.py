"""Strict JSON output for ``--json``: NaN/inf become null, numpy scalars plain numbers."""

from __future__ import annotations

import json

import numpy as np

from .records import Record


def json_safe(value):
    """NaN/inf -> None, numpy scalars/arrays -> Python values and result records -> dicts,
    recursively."""
    if isinstance(value, Record):
        value = value.as_dict()
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_safe(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


def dumps(value) -> str:
    return json.dumps(json_safe(value), indent=2, allow_nan=False)
