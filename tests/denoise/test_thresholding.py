"""Soft and hard thresholding: formulas, exact SURE, the O(d log d) SURE threshold."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dpgauss.denoise import hard_threshold, soft_threshold
from dpgauss.denoise.thresholding import soft_sure, sure_threshold, universal_threshold


def _brute_force_sure(abs_y: np.ndarray, sigma: float, lam: float) -> float:
    """SURE straight from Stein: ‖ŷ − y‖² + 2σ²·#{|yᵢ| > λ} − dσ², one λ at a time."""
    est = np.maximum(abs_y - lam, 0.0)
    return float(
        np.sum((est - abs_y) ** 2) + 2 * sigma**2 * np.sum(abs_y > lam) - abs_y.size * sigma**2
    )


def test_soft_threshold_formula():
    y = np.array([[-3.0, -0.5], [0.2, 2.5]])
    res = soft_threshold(y, 1.0, threshold=1.0)
    np.testing.assert_allclose(res.estimate, [[-2.0, 0.0], [0.0, 1.5]])
    assert res.estimate.shape == y.shape
    assert res.params == {"threshold": 1.0, "lambda": 1.0, "df": 2}
    # SURE = dσ² − 2σ²·#{|y| ≤ λ} + Σ min(y², λ²)
    assert res.risk == pytest.approx(4 - 2 * 2 + (1 + 0.25 + 0.04 + 1))


def test_hard_threshold_formula_and_no_risk():
    y = np.array([-3.0, -0.5, 0.2, 2.5, 1.0])
    res = hard_threshold(y, 1.0, threshold=1.0)
    np.testing.assert_array_equal(res.estimate, [-3.0, 0.0, 0.0, 2.5, 0.0])
    assert res.risk is None
    assert res.mse is None
    assert res.params["kept"] == 2


@pytest.mark.parametrize("d", [1, 2, 100, 10_000])
def test_universal_threshold(d):
    sigma = 1.7
    expected = sigma * math.sqrt(2 * math.log(d)) if d > 1 else 0.0
    assert universal_threshold(sigma, d) == pytest.approx(expected)
    y = np.random.default_rng(d).normal(size=d)
    assert soft_threshold(y, sigma).params["lambda"] == pytest.approx(expected)
    assert hard_threshold(y, sigma).params["lambda"] == pytest.approx(expected)


@settings(max_examples=200, deadline=None)
@given(
    arrays(
        np.float64,
        st.integers(1, 60),
        elements=st.one_of(
            st.floats(-20, 20, allow_nan=False),
            st.sampled_from([0.0, 1.0, -1.0, 2.5]),  # ties and exact zeros
        ),
    ),
    st.floats(0.05, 10.0),
)
def test_sure_threshold_equals_brute_force(y, sigma):
    abs_y = np.abs(y)
    lam, value = sure_threshold(abs_y, sigma)
    candidates = np.concatenate(([0.0], abs_y))
    brute = np.array([_brute_force_sure(abs_y, sigma, c) for c in candidates])
    scale = abs_y.size * sigma**2 + np.sum(abs_y**2)
    assert value == pytest.approx(brute.min(), abs=1e-9 * scale)
    assert _brute_force_sure(abs_y, sigma, lam) == pytest.approx(value, abs=1e-9 * scale)
    assert lam in candidates
    # no λ between or beyond the candidates does better (SURE increases between them)
    grid = np.linspace(0.0, abs_y.max() * 1.1 + 1.0, 97)
    assert min(_brute_force_sure(abs_y, sigma, g) for g in grid) >= value - 1e-9 * scale


def test_soft_sure_matches_stein_form():
    rng = np.random.default_rng(0)
    y = rng.normal(size=500) * 2
    for lam in (0.0, 0.3, 1.0, 5.0):
        assert soft_sure(np.abs(y), 1.3, lam) == pytest.approx(
            _brute_force_sure(np.abs(y), 1.3, lam)
        )


def test_sure_threshold_is_fast_and_sensible():
    # sparse signal: SURE picks a clearly positive λ; dense large signal: λ near 0
    rng = np.random.default_rng(1)
    d = 200_000
    theta = np.zeros(d)
    theta[:1000] = 10.0
    y = theta + rng.standard_normal(d)
    res = soft_threshold(y, 1.0, threshold="sure")
    assert 1.5 < res.params["lambda"] < math.sqrt(2 * math.log(d))
    dense = 100 * rng.standard_normal(d) + rng.standard_normal(d)
    assert soft_threshold(dense, 1.0, threshold="sure").params["lambda"] < 0.1


def _sure_minus_loss(threshold, theta, sigma, seed, reps=2000):
    rng = np.random.default_rng(seed)
    diffs = np.empty(reps)
    for r in range(reps):
        y = theta + sigma * rng.standard_normal(theta.size)
        res = soft_threshold(y, sigma, threshold=threshold)
        diffs[r] = res.risk - np.sum((res.estimate - theta) ** 2)
    return diffs.mean(), diffs.std(ddof=1) / math.sqrt(reps)


def _sparse_theta(d, k, size, seed):
    theta = np.zeros(d)
    theta[np.random.default_rng(seed).choice(d, k, replace=False)] = size
    return theta


@pytest.mark.slow
@pytest.mark.parametrize("threshold", [0.5, 1.5, "universal"])
@pytest.mark.parametrize(
    "theta",
    [_sparse_theta(200, 10, 3.0, 0), np.linspace(-2, 2, 200), np.zeros(50)],
    ids=["sparse", "ramp", "zero"],
)
def test_soft_sure_is_unbiased_for_a_fixed_or_universal_threshold(threshold, theta):
    mean, se = _sure_minus_loss(threshold, theta, 1.2, seed=theta.size)
    assert abs(mean) < 3 * se


def test_soft_sure_threshold_risk_is_the_minimised_sure():
    rng = np.random.default_rng(4)
    y = _sparse_theta(300, 20, 4.0, 1) + rng.standard_normal(300)
    res = soft_threshold(y, 1.0, threshold="sure")
    lam, value = sure_threshold(np.abs(y), 1.0)
    assert res.params["lambda"] == lam
    assert res.risk == pytest.approx(value)
    assert res.risk <= soft_threshold(y, 1.0).risk + 1e-9  # never above the universal λ's SURE


def test_empty_and_scalar_inputs():
    res = soft_threshold(np.zeros(0), 1.0, threshold="sure")
    assert res.estimate.shape == (0,) and res.risk == 0.0
    res = soft_threshold(3.0, 1.0, threshold=1.0)
    assert res.estimate.shape == () and float(res.estimate) == 2.0


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: soft_threshold([1.0, 2.0], 1.0, threshold=-1.0), ValueError, "threshold"),
        (lambda: soft_threshold([1.0, 2.0], 1.0, threshold=np.nan), ValueError, "threshold"),
        (lambda: soft_threshold([1.0, 2.0], 1.0, threshold="minimax"), ValueError, "threshold"),
        (lambda: soft_threshold([1.0, 2.0], 1.0, threshold=[1.0, 2.0, 3.0]), ValueError, "per key"),
        (lambda: soft_threshold([1.0, 2.0], 1.0, threshold=True), TypeError, "threshold"),
        (lambda: soft_threshold([1.0, 2.0], 1.0, threshold=None), TypeError, "threshold"),
        (lambda: soft_threshold([1.0, np.inf], 1.0), ValueError, "y must be finite"),
        (lambda: soft_threshold([1.0, 2.0], np.nan), ValueError, "sigma"),
        (lambda: hard_threshold([1.0, 2.0], 1.0, threshold="sure"), ValueError, "no unbiased"),
        (lambda: hard_threshold([1.0, 2.0], 1.0, threshold=-0.1), ValueError, "threshold"),
        (lambda: hard_threshold(["a"], 1.0), TypeError, "y must be"),
        (lambda: hard_threshold([1.0], 0.0), ValueError, "sigma"),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
