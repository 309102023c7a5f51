"""Discrete Gaussian privacy profile (CKS20 Thm 7) against a direct high-precision mpmath sum."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from mpmath import mp, mpf

from dpgauss.privacy.discrete_profile import discrete_gaussian_delta, discrete_gaussian_sigma

DPS = 50


def ref_delta(sigma: float, eps: float, sens: int) -> mpf:
    """P[X > εσ²/Δ - Δ/2] - e^ε P[X > εσ²/Δ + Δ/2], X ~ N_Z(0, σ²), summed directly.

    The two tails are summed separately (the defining form, independent of the package's
    positive-term rewriting) at high precision; Z is Jacobi's θ₃(0, e^{-1/(2σ²)}).  The sums
    stop 40σ + 40 beyond the threshold, where the terms are below e^-800 of the first.
    """
    with mp.workdps(DPS + 40):
        s2 = mpf(sigma) ** 2
        e = mpf(eps)
        a = e * s2 / sens - mpf(sens) / 2
        first = int(mpmath.floor(a)) + 1
        last = first + sens + int(40 * sigma) + 40
        z = mpmath.jtheta(3, 0, mpmath.exp(-1 / (2 * s2)))
        w = [mpmath.exp(-(mpf(x) ** 2) / (2 * s2)) for x in range(first, last)]
        upper = mpmath.fsum(w)
        shifted = mpmath.fsum(w[sens:])
        return +((upper - mpmath.exp(e) * shifted) / z)


CASES = [
    (3.0, 1.0, 1),  # the issue's value
    (0.5, 0.1, 1),
    (0.7, 4.0, 1),
    (1.0, 0.0, 1),
    (1.0, 0.0, 4),
    (1.3, 2.0, 2),
    (2.5, 3.0, 2),
    (3.7, 0.3, 1),
    (5.0, 6.0, 1),  # δ ~ 1e-40: relative accuracy in the far tail
    (10.0, 0.5, 3),
    (37.3, 0.2, 1),
    (64.0, 0.05, 5),
    (0.2, 0.01, 7),
]


@pytest.mark.parametrize(("sigma", "eps", "sens"), CASES)
def test_matches_mpmath_and_is_rounded_up(sigma, eps, sens):
    ref = ref_delta(sigma, eps, sens)
    got = discrete_gaussian_delta(sigma, eps, sens)
    with mp.workdps(DPS):
        rel = (mpf(got) - ref) / ref
    assert rel >= 0, f"rounded down by {rel}"
    assert rel < 1e-9


def test_issue_value_and_continuous_comparison():
    from dpgauss import gaussian_delta

    d = discrete_gaussian_delta(3.0, 1.0, 1)
    assert d == pytest.approx(2.178e-4, rel=1e-3)
    assert gaussian_delta(3.0, 1.0, 1.0) == pytest.approx(2.075e-4, rel=1e-3)
    assert d > gaussian_delta(3.0, 1.0, 1.0)


def test_epsilon_zero_is_a_central_probability():
    sigma = 2.0
    x = np.arange(-200, 201)
    pmf = np.exp(-(x**2) / (2 * sigma**2))
    pmf /= pmf.sum()
    for sens in (1, 2, 3):
        inside = pmf[(x > -sens / 2) & (x <= sens / 2)].sum()
        got = discrete_gaussian_delta(sigma, 0.0, sens)
        assert inside * (1 - 1e-14) <= got <= inside * (1 + 2e-11)  # 1e-11 safety margin


def test_underflow_is_never_zero():
    assert discrete_gaussian_delta(1.0, 1000.0) == 5e-324


def test_large_sigma_close_to_continuous():
    from dpgauss import gaussian_delta

    d = discrete_gaussian_delta(1e5, 1e-4, 1)
    assert d == pytest.approx(gaussian_delta(1e5, 1e-4, 1.0), rel=1e-8)


def test_monotone_in_sensitivity():
    """Worst neighbours differ by exactly Δ (log-concavity argument in the module doc)."""
    for sigma in (0.3, 0.8, 1.7, 4.0):
        for eps in (0.0, 0.5, 2.0, 6.0):
            values = discrete_gaussian_delta(sigma, eps, np.arange(1, 8))
            assert np.all(np.diff(values) >= 0)


@pytest.mark.slow
def test_epsilon_zero_is_monotone_in_sigma():
    """Why calibration may skip the pocket scan at ε = 0."""
    grid = np.linspace(0.05, 50.0, 5000)
    for sens in (1, 2, 5):
        assert np.all(np.diff(discrete_gaussian_delta(grid, 0.0, sens)) <= 0)


def test_not_monotone_in_sigma():
    """Documented lattice effect: at ε = 8 more noise can be *less* private."""
    assert discrete_gaussian_delta(0.54, 8.0) > 10 * discrete_gaussian_delta(0.44, 8.0)


def test_broadcasting_and_types():
    out = discrete_gaussian_delta([1.0, 2.0, 3.0], [[0.5], [1.0]], 1)
    assert out.shape == (2, 3) and out.dtype == np.float64
    assert out[1, 2] == discrete_gaussian_delta(3.0, 1.0)
    assert isinstance(discrete_gaussian_delta(3, 1), float)
    assert isinstance(discrete_gaussian_sigma(1, 1e-5), float)
    assert discrete_gaussian_delta(3.0, 1.0, 2.0) == discrete_gaussian_delta(3.0, 1.0, 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sigma": 0.0, "epsilon": 1.0}, ValueError, "sigma must be in"),
        ({"sigma": math.nan, "epsilon": 1.0}, ValueError, "sigma"),
        ({"sigma": 1.0, "epsilon": -0.1}, ValueError, "epsilon must be in"),
        ({"sigma": 1.0, "epsilon": math.inf}, ValueError, "epsilon"),
        ({"sigma": 1.0, "epsilon": 1.0, "sensitivity": 1.5}, ValueError, "positive integer"),
        ({"sigma": 1.0, "epsilon": 1.0, "sensitivity": [1, 2.5]}, ValueError, r"index \(1,\)"),
        ({"sigma": 1.0, "epsilon": 1.0, "sensitivity": 0}, ValueError, "sensitivity"),
        ({"sigma": "1", "epsilon": 1.0}, TypeError, "sigma"),
        ({"sigma": [1.0, 2.0], "epsilon": [1.0, 2.0, 3.0]}, ValueError, "broadcast"),
    ],
)
def test_delta_validation(kwargs, error, match):
    with pytest.raises(error, match=match):
        discrete_gaussian_delta(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 1.0, "delta": 0.0}, "delta must be in"),
        ({"epsilon": 1.0, "delta": 1.0}, "delta must be in"),
        ({"epsilon": -1.0, "delta": 1e-5}, "epsilon"),
        ({"epsilon": 1.0, "delta": 1e-5, "sensitivity": 0.5}, "sensitivity"),
    ],
)
def test_sigma_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        discrete_gaussian_sigma(**kwargs)


def test_sigma_issue_value():
    sigma = discrete_gaussian_sigma(1.0, 2.18e-4, 1)
    assert 2.99 < sigma < 3.0
    assert discrete_gaussian_delta(sigma, 1.0) <= 2.18e-4


@pytest.mark.slow
@pytest.mark.parametrize(
    ("eps", "delta", "sens"),
    [(1.0, 1e-6, 1), (0.5, 1e-5, 1), (0.1, 1e-10, 1), (3.0, 1e-4, 3), (0.0, 1e-3, 2)],
)
def test_sigma_is_safe_and_locally_smallest(eps, delta, sens):
    sigma = discrete_gaussian_sigma(eps, delta, sens)
    assert ref_delta(sigma, eps, sens) <= delta
    assert ref_delta(sigma * (1 - 1e-9), eps, sens) > delta


@pytest.mark.slow
@pytest.mark.parametrize(
    ("eps", "delta", "sens"),
    [
        (1.0, 1e-3, 1),
        (2.0, 0.027, 1),
        (5.0, 1e-3, 1),
        (8.0, 1e-6, 1),
        (8.0, 1e-4, 2),
        (20.0, 1e-9, 1),
        (12.0, 1e-12, 1),
    ],
)
def test_sigma_is_smallest_on_a_grid(eps, delta, sens):
    """Where δ(σ) is far from monotone, the search still finds the first safe σ."""
    sigma = discrete_gaussian_sigma(eps, delta, sens)
    assert discrete_gaussian_delta(sigma, eps, sens) <= delta
    grid = np.linspace(sigma / 4, sigma, 4001)
    safe = grid[discrete_gaussian_delta(grid, eps, sens) <= delta]
    assert safe.min() >= sigma * (1 - 1e-9)


def test_sigma_broadcasts():
    out = discrete_gaussian_sigma([0.5, 1.0], 1e-5, [[1], [2]])
    assert out.shape == (2, 2)
    assert np.all(discrete_gaussian_delta(out, [0.5, 1.0], [[1], [2]]) <= 1e-5)
