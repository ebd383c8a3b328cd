"""Tests of the statistics behind compare/scaling (dtbench_analysis.stats)."""

import numpy as np
import pytest

from dtbench_analysis import stats


def test_median_ci_order_statistics():
    """Le Boudec's table: for n = 100 the 95 % interval of the median lies between the 40th and
    the 61st smallest values; for n = 6 between the smallest and the largest."""
    ci = stats.median_ci(np.arange(1, 101, dtype=float))
    assert (ci["n"], ci["median"], ci["lo"], ci["hi"]) == (100, 50.5, 40.0, 61.0)
    ci = stats.median_ci(np.arange(1, 7, dtype=float)[::-1])      # order of input irrelevant
    assert (ci["lo"], ci["hi"]) == (1.0, 6.0)


def test_median_ci_too_few_and_nan():
    ci = stats.median_ci([3.0, 1.0, np.nan, 2.0, 5.0, 4.0])       # 5 finite values
    assert ci["n"] == 5 and ci["median"] == 3.0 and ci["lo"] is None and ci["hi"] is None
    assert stats.median_ci([])["median"] is None


def test_identical_samples_not_significant():
    x = np.random.default_rng(1).lognormal(-3, 0.2, 200)
    r = stats.compare_samples(x, x.copy())
    assert r["p"] == pytest.approx(1.0) and r["significant"] is False
    assert r["median_ratio"] == pytest.approx(1.0) and r["p_b_greater"] == pytest.approx(0.5)


def test_same_distribution_not_significant():
    rng = np.random.default_rng(7)
    a, b = rng.lognormal(-3, 0.2, 300), rng.lognormal(-3, 0.2, 300)
    r = stats.compare_samples(a, b)
    assert r["p"] > 0.05 and r["significant"] is False


def test_clearly_different_significant():
    rng = np.random.default_rng(3)
    a = rng.lognormal(-3, 0.1, 100)
    r = stats.compare_samples(a, 1.5 * rng.lognormal(-3, 0.1, 100))
    assert r["significant"] is True and r["p"] < 1e-10
    assert r["p_b_greater"] > 0.95 and r["median_ratio"] == pytest.approx(1.5, rel=0.1)
    b = 1.5 * rng.lognormal(-3, 0.1, 100)
    strict = stats.compare_samples(a, b, alpha=stats.compare_samples(a, b)["p"] / 2)
    assert strict["significant"] is False                # the level is honoured


def test_empty_sample():
    r = stats.compare_samples([], [1.0, 2.0])
    assert r["p"] is None and r["significant"] is None and r["n_b"] == 2
