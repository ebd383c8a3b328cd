"""Nonparametric statistics for comparing runs (scipy does the work).

- ``median_ci``: the median with a distribution-free confidence interval from order statistics
  (``scipy.stats.quantile_test(...).confidence_interval``: the interval between two order
  statistics whose coverage follows from the binomial distribution, as recommended by Le Boudec
  and by Hoefler & Belli for non-normal timing data). Needs at least 6 values for 95 %.
- ``compare_samples``: Mann-Whitney U test (``scipy.stats.mannwhitneyu``, two-sided) of two
  samples, with the ratio of medians and the common-language effect size P(B > A) + P(B = A)/2.
"""

from __future__ import annotations

from typing import Dict, Optional

import numpy as np

DEFAULT_CONFIDENCE = 0.95
DEFAULT_ALPHA = 0.05


def finite(values) -> np.ndarray:
    """The finite values of ``values`` as a flat float64 array."""
    a = np.asarray(values, dtype=np.float64).ravel()
    return a[np.isfinite(a)]


def median_ci(values, confidence: float = DEFAULT_CONFIDENCE) -> Dict[str, Optional[float]]:
    """n, median, and the order-statistic confidence interval (lo, hi) of the median; lo/hi are
    None when there are too few values for the requested confidence."""
    x = finite(values)
    out: Dict[str, Optional[float]] = {"n": int(x.size), "median": None, "lo": None, "hi": None,
                                       "confidence": confidence}
    if x.size == 0:
        return out
    out["median"] = float(np.median(x))
    from scipy import stats as sps      # imported on use: keeps the command line quick to start
    ci = sps.quantile_test(x, q=out["median"], p=0.5).confidence_interval(confidence)
    if np.isfinite(ci.low) and np.isfinite(ci.high):
        out["lo"], out["hi"] = float(ci.low), float(ci.high)
    return out


def compare_samples(a, b, alpha: float = DEFAULT_ALPHA) -> Dict[str, Optional[float]]:
    """Two-sided Mann-Whitney U test of sample ``b`` against baseline ``a``.

    Returns n_a, n_b, U (of b), p, ``p_b_greater`` (U / (n_a n_b): the probability that a value
    of b exceeds one of a, ties counting half; 0.5 = no shift), ``median_ratio`` (median b /
    median a) and ``significant`` (p < alpha). Values are None when a sample is empty."""
    xa, xb = finite(a), finite(b)
    out: Dict[str, Optional[float]] = {"n_a": int(xa.size), "n_b": int(xb.size), "U": None,
                                       "p": None, "p_b_greater": None, "median_ratio": None,
                                       "alpha": alpha, "significant": None}
    if xa.size == 0 or xb.size == 0:
        return out
    from scipy import stats as sps
    res = sps.mannwhitneyu(xb, xa, alternative="two-sided")
    u, p = float(res.statistic), float(res.pvalue)
    ma = float(np.median(xa))
    out.update({"U": u, "p": p, "p_b_greater": u / (xa.size * xb.size),
                "median_ratio": float(np.median(xb)) / ma if ma else None,
                "significant": bool(p < alpha)})
    return out
