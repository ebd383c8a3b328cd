"""Numbers for people: seconds to milliseconds, and the one way every command prints a number
(``n/a`` for what was not measured: None, NaN or inf)."""

from __future__ import annotations

from typing import Optional

import numpy as np

#: milliseconds per second
MS = 1e3


def to_ms(seconds: Optional[float]) -> Optional[float]:
    """Seconds -> milliseconds; None stays None."""
    return None if seconds is None else seconds * MS


def num(value: Optional[float], fmt: str = ".3f", scale: float = 1.0) -> str:
    """``format(value * scale, fmt)``, or ``n/a`` when value is None, NaN or inf."""
    if value is None or not np.isfinite(value):
        return "n/a"
    return format(value * scale, fmt)


def ms(seconds: Optional[float]) -> str:
    """Seconds printed as milliseconds with 3 decimals (``n/a`` when not measured)."""
    return num(seconds, ".3f", MS)
