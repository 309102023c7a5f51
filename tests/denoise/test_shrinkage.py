"""Posterior mean and positive-part James–Stein: formulas, exact SURE, domination of y."""

from __future__ import annotations

import numpy as np
import pytest

from dpgauss.denoise import Denoised, james_stein, posterior_mean

REPS = 3000


def _sure_minus_loss(estimator, theta: np.ndarray, sigma: float, seed: int, reps: int = REPS):
    """Paired Monte Carlo of SURE − realised loss; returns (mean, standard error, results)."""
    rng = np.random.default_rng(seed)
    diffs = np.empty(reps)
    results = []
    for r in range(reps):
        y = theta + sigma * rng.standard_normal(theta.shape)
        res = estimator(y)
        diffs[r] = res.risk - np.sum((res.estimate - theta) ** 2)
        results.append(res)
    return diffs.mean(), diffs.std(ddof=1) / np.sqrt(reps), results


def _divergence_fd(estimator, y: np.ndarray, h: float = 1e-6) -> float:
    base = estimator(y).estimate.ravel()
    total = 0.0
    for i in range(y.size):
        yy = y.ravel().copy()
        yy[i] += h
        total += (estimator(yy.reshape(y.shape)).estimate.ravel()[i] - base[i]) / h
    return total


# --- posterior mean -------------------------------------------------------------------


def test_posterior_mean_formula_and_shape():
    y = np.arange(6.0).reshape(2, 3) - 2.5
    res = posterior_mean(y, 2.0, prior_variance=4.0)
    assert isinstance(res, Denoised)
    assert res.method == "posterior_mean"
    assert res.estimate.shape == (2, 3)
    np.testing.assert_allclose(res.estimate, 0.5 * y)
    assert res.params["shrinkage"] == pytest.approx(0.5)
    assert res.params["df"] == pytest.approx(3.0)
    # SURE of a linear smoother: ‖ŷ − y‖² + 2σ² tr S − dσ²
    expected = np.sum((0.5 * y) ** 2) + 2 * 4.0 * 3.0 - 6 * 4.0
    assert res.risk == pytest.approx(expected)


def test_posterior_mean_prior_mean_and_per_coordinate_variance():
    y = np.array([1.0, 2.0, 3.0])
    w2 = np.array([0.0, 1.0, np.float64(1e300)])
    res = posterior_mean(y, 1.0, prior_variance=w2, prior_mean=[5.0, 0.0, 0.0])
    np.testing.assert_allclose(res.estimate, [5.0, 1.0, 3.0])
    np.testing.assert_allclose(res.params["shrinkage"], [0.0, 0.5, 1.0])


def test_posterior_mean_zero_prior_variance_gives_prior_mean():
    res = posterior_mean([1.0, -2.0], 1.0, prior_variance=0.0)
    np.testing.assert_array_equal(res.estimate, [0.0, 0.0])
    assert res.risk == pytest.approx(5.0 - 2.0)


@pytest.mark.parametrize("w2", [0.25, 4.0])
def test_posterior_mean_sure_is_unbiased(w2):
    rng = np.random.default_rng(11)
    theta = rng.normal(0.0, 1.5, size=20)
    sigma = 1.3
    mean, se, _ = _sure_minus_loss(
        lambda y: posterior_mean(y, sigma, prior_variance=w2), theta, sigma, 1
    )
    assert abs(mean) < 3 * se


def test_posterior_mean_attains_the_bayes_risk():
    # θ drawn from the prior itself: E‖ŷ − θ‖² = d σ²w²/(σ²+w²) (Thm 10's Bayes risk)
    rng = np.random.default_rng(5)
    d, sigma, w2, reps = 50, 1.0, 2.0, 2000
    theta = rng.normal(0.0, np.sqrt(w2), size=(reps, d))
    y = theta + sigma * rng.standard_normal((reps, d))
    loss = np.sum((posterior_mean(y, sigma, prior_variance=w2).estimate - theta) ** 2, axis=1)
    bayes = d * sigma**2 * w2 / (sigma**2 + w2)
    assert abs(loss.mean() - bayes) < 3 * loss.std(ddof=1) / np.sqrt(reps)


# --- James–Stein ----------------------------------------------------------------------


@pytest.mark.parametrize("target", ["zero", "mean"])
def test_james_stein_formula(target):
    y = np.array([3.0, -1.0, 2.0, 0.5, 4.0])
    sigma = 0.8
    res = james_stein(y, sigma, target=target)
    d = y.size
    center = y.mean() if target == "mean" else 0.0
    k = d - 2 if target == "zero" else d - 3
    r = y - center
    factor = max(0.0, 1 - k * sigma**2 / np.sum(r**2))
    np.testing.assert_allclose(res.estimate, center + factor * r)
    assert res.params["shrinkage"] == pytest.approx(factor)
    assert res.params["target"] == target
    assert res.risk == pytest.approx(d * sigma**2 - (k * sigma**2) ** 2 / np.sum(r**2))


@pytest.mark.parametrize("target", ["zero", "mean"])
@pytest.mark.parametrize("scale", [0.05, 3.0])
def test_james_stein_divergence_matches_finite_differences(target, scale):
    rng = np.random.default_rng(2)
    y = scale * rng.standard_normal(7) + (0.3 if target == "mean" else 0.0)
    est = lambda v: james_stein(v, 1.0, target=target)  # noqa: E731
    res = est(y)
    if scale < 1:  # inside the positive-part region: everything shrunk to the centre
        assert res.params["shrinkage"] == 0.0
    else:
        assert 0.0 < res.params["shrinkage"] < 1.0
    assert res.params["df"] == pytest.approx(_divergence_fd(est, y), rel=1e-5, abs=1e-5)
    fd = _divergence_fd(est, y)
    sure = np.sum((res.estimate - y) ** 2) + 2 * fd - y.size
    assert res.risk == pytest.approx(sure, rel=1e-5, abs=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "d", "theta_scale"),
    [
        ("zero", 3, 0.0),
        ("zero", 5, 0.5),
        ("zero", 10, 1.0),
        ("zero", 40, 3.0),
        ("mean", 4, 0.0),
        ("mean", 5, 0.5),
        ("mean", 10, 1.0),
        ("mean", 40, 3.0),
    ],
)
def test_james_stein_sure_is_unbiased(target, d, theta_scale):
    rng = np.random.default_rng(100 + d)
    theta = theta_scale * rng.standard_normal(d) + (2.0 if target == "mean" else 0.0)
    sigma = 0.7
    mean, se, results = _sure_minus_loss(
        lambda y: james_stein(y, sigma, target=target), theta, sigma, seed=d
    )
    assert abs(mean) < 3 * se
    if theta_scale == 0.0:
        # the positive part must actually be exercised by this case
        assert np.mean([r.params["shrinkage"] == 0.0 for r in results]) > 0.1


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "d"),
    [("zero", 3), ("zero", 4), ("zero", 8), ("zero", 50), ("mean", 4), ("mean", 8), ("mean", 50)],
)
def test_james_stein_beats_the_raw_vector(target, d):
    rng = np.random.default_rng(d)
    theta = rng.normal(1.0, 1.0, size=d)
    sigma, reps = 1.0, 4000
    gain = np.empty(reps)
    for r in range(reps):
        y = theta + sigma * rng.standard_normal(d)
        est = james_stein(y, sigma, target=target).estimate
        gain[r] = np.sum((y - theta) ** 2) - np.sum((est - theta) ** 2)
    assert gain.mean() > 3 * gain.std(ddof=1) / np.sqrt(reps)


@pytest.mark.parametrize(("target", "d"), [("zero", 1), ("zero", 2), ("mean", 2), ("mean", 3)])
def test_james_stein_small_dimension_returns_y(target, d):
    y = np.linspace(-1.0, 2.0, d)
    res = james_stein(y, 2.0, target=target)
    np.testing.assert_array_equal(res.estimate, y)
    assert res.risk == pytest.approx(d * 4.0)
    assert "unchanged" in res.params and "d ≥" in res.params["unchanged"]


def test_james_stein_keeps_shape_and_handles_zero_vector():
    res = james_stein(np.zeros((2, 3)), 1.0)
    assert res.estimate.shape == (2, 3)
    np.testing.assert_array_equal(res.estimate, 0.0)
    assert res.risk == pytest.approx(-6.0)  # ‖y‖² − dσ²: unbiased, may be negative


# --- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: james_stein([1.0, np.nan, 2.0], 1.0), ValueError, "y must be finite"),
        (lambda: james_stein("abc", 1.0), TypeError, "y must be"),
        (lambda: james_stein([1.0, 2.0, 3.0], 0.0), ValueError, "sigma"),
        (lambda: james_stein([1.0, 2.0, 3.0], [1.0, 2.0]), ValueError, "one per key"),
        (lambda: james_stein([1.0, 2.0, 3.0], 1.0, target="median"), ValueError, "target"),
        (lambda: james_stein([1.0, 2.0, 3.0], 1.0, target=None), ValueError, "target"),
        (lambda: posterior_mean([1.0], 1.0, prior_variance=-1.0), ValueError, "prior_variance"),
        (lambda: posterior_mean([1.0], 1.0, prior_variance=np.inf), ValueError, "prior_variance"),
        (lambda: posterior_mean([1.0], 1.0, prior_variance="big"), TypeError, "prior_variance"),
        (
            lambda: posterior_mean([1.0, 2.0], 1.0, prior_variance=[1.0, 2.0, 3.0]),
            ValueError,
            "broadcast",
        ),
        (
            lambda: posterior_mean([1.0, 2.0], 1.0, prior_variance=[[1.0], [2.0]]),
            ValueError,
            "shape of y",
        ),
        (
            lambda: posterior_mean([1.0], 1.0, prior_variance=1.0, prior_mean=np.nan),
            ValueError,
            "prior_mean",
        ),
        (lambda: posterior_mean([1.0], -1.0, prior_variance=1.0), ValueError, "sigma"),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
