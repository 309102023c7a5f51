"""Multivariate discrete Gaussian bounds: against mpmath, against exact profiles, calibration."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from mpmath import mp, mpf

import dpgauss.privacy.discrete_multivariate as dm
from dpgauss.privacy import analytic_gaussian_sigma, discrete_gaussian_delta
from dpgauss.privacy.discrete_multivariate import (
    discrete_gaussian_vector_delta,
    discrete_gaussian_vector_sigma,
    integer_shift_bound,
    zcdp_delta,
)

DPS = 40

# ------------------------------------------------------------------------ mpmath references


def ref_zcdp(rho: float, eps: float) -> mpf:
    """inf over α of exp((α−1)(αρ−ε)) (1−1/α)^α/(α−1), at the root of the derivative."""
    with mp.workdps(DPS):
        r, e = mpf(rho), mpf(eps)

        def deriv(x):  # α = 1 + e^x
            a = 1 + mpmath.exp(x)
            return (2 * a - 1) * r - e + mpmath.log(1 - 1 / a)

        x = mpmath.findroot(deriv, (mpf(-60), mpf(60)), solver="bisect")
        a = 1 + mpmath.exp(x)
        return mpmath.exp((a - 1) * (a * r - e)) * (1 - 1 / a) ** a / (a - 1)


def ref_gauss(sigma, eps, sens) -> mpf:
    s, e, d = mpf(sigma), mpf(eps), mpf(sens)
    t = e * s / d
    return mpmath.ncdf(d / (2 * s) - t) - mpmath.exp(e) * mpmath.ncdf(-d / (2 * s) - t)


def ref_smoothing(sigma: float, eps: float, sens_bar: float, dim: int) -> mpf:
    """The module's Bound 2, minimised over its τ grid, in mpmath."""
    with mp.workdps(DPS):

        def theta(u):
            c = 2 * mpmath.pi**2 * u * u
            return 2 * mpmath.nsum(lambda k: mpmath.exp(-c * k * k), [1, mpmath.inf])

        best = mpf(1)
        s = mpf(sigma)
        for tau in dm._TAUS:
            t = mpf(float(tau))
            if t >= s or theta(t) >= 0.5:
                continue
            a = dim * mpmath.log(1 + theta(t))
            b = dim * (mpmath.log(1 + theta(s)) - mpmath.log(1 - theta(t)))
            s1 = mpmath.sqrt(s * s - t * t)
            tv = 1 - mpmath.exp(-min(a, b))
            best = min(best, ref_gauss(s1, eps, sens_bar) + (1 + mpmath.exp(eps)) * tv)
            if eps - a - b >= 0:
                best = min(best, mpmath.exp(a) * ref_gauss(s1, eps - a - b, sens_bar))
        return best


@pytest.mark.parametrize(
    ("rho", "eps"), [(0.025, 1.0), (0.5, 0.0), (1e-4, 0.1), (2.0, 8.0), (1e-6, 1e-3), (0.01, 3.0)]
)
def test_zcdp_delta_matches_mpmath_rounded_up(rho, eps):
    ref = ref_zcdp(rho, eps)
    got = zcdp_delta(rho, eps)
    with mp.workdps(DPS):
        rel = (mpf(got) - ref) / ref
    assert 0 <= rel < 1e-9, rel


@pytest.mark.parametrize(
    ("sigma", "eps", "sens", "dim"),
    [
        (3.0, 1.0, 2.0, 4),
        (8.5, 1.0, 2.0, 100),
        (12.0, 0.5, 3.0, 10**6),
        (600.0, 1.0, 129.0, 50),
        (2.0, 0.0, 1.5, 3),
        (40.0, 4.0, 10.0, 10**4),
    ],
)
def test_smoothing_bound_matches_mpmath_rounded_up(sigma, eps, sens, dim):
    m, bar = integer_shift_bound(sens)
    # at most M = ⌊Δ²⌋ coordinates of an integer shift are non-zero: d is capped there
    ref = ref_smoothing(sigma, eps, bar, min(dim, m))
    got = discrete_gaussian_vector_delta(sigma, eps, sens, dim, method="smoothing")
    with mp.workdps(DPS):
        rel = (mpf(got) - ref) / ref
    assert 0 <= rel < 1e-9, rel


# ------------------------------------------------------------------- validity against exact


def exact_shift_delta(sigma: float, eps: float, shift: tuple[int, ...]) -> float:
    """Exact δ(ε) of N_Z(0, σ²)^d for the shift vector ``shift`` (float64 convolution).

    The privacy loss is (2⟨s, Y⟩ + ‖s‖²)/(2σ²); the law of ⟨s, Y⟩ is convolved directly.
    """
    n = int(60 * sigma) + 60
    y = np.arange(-n, n + 1)
    p = np.exp(-(y * y) / (2.0 * sigma * sigma))
    p /= p.sum()
    w, pw = np.array([0]), np.array([1.0])
    for s in shift:
        vals = (w[:, None] + s * y[None, :]).ravel()
        u, inv = np.unique(vals, return_inverse=True)
        pw = np.bincount(inv, (pw[:, None] * p[None, :]).ravel())
        keep = pw > 1e-300
        w, pw = u[keep], pw[keep]
    loss = (2 * w + sum(s * s for s in shift)) / (2 * sigma * sigma)
    return float(np.sum(pw * np.clip(-np.expm1(eps - loss), 0.0, None)))


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.6, 1.0, 1.7, 3.0, 4.5, 9.0])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.0, 3.0])
def test_bounds_dominate_the_exact_multivariate_profile(sigma, eps):
    """Δ₂ = 2, d = 4: every integer shift with ‖s‖² ≤ 4, up to symmetry."""
    shifts = [(1,), (1, 1), (1, 1, 1), (2,), (1, 1, 1, 1)]
    exact = max(exact_shift_delta(sigma, eps, s) for s in shifts)
    for method in ("zcdp", "smoothing", "best"):
        assert discrete_gaussian_vector_delta(sigma, eps, 2.0, 4, method=method) >= exact


@pytest.mark.parametrize("sens", [1, 2, 3])
def test_bounds_dominate_the_exact_scalar_profile_at_dim_1(sens):
    for sigma in [0.4, 0.9, 1.3, 2.0, 3.7, 6.0, 15.0, 40.0]:
        for eps in [0.0, 0.1, 0.5, 1.0, 2.0, 5.0]:
            exact = discrete_gaussian_delta(sigma, eps, sens)
            for method in ("zcdp", "smoothing"):
                bound = discrete_gaussian_vector_delta(sigma, eps, sens, 1, method=method)
                assert bound >= exact, (sigma, eps, sens, method)
            assert discrete_gaussian_vector_delta(sigma, eps, sens, 1) == exact


def test_best_is_exact_scalar_below_sqrt2_for_every_dim():
    """1 ≤ Δ₂ < √2: the only shifts are ±e_j, so the scalar profile at Δ = 1 is exact."""
    for dim in [1, 2, 1000, 10**9]:
        for sens in [1.0, 1.2, 1.414]:
            assert discrete_gaussian_vector_delta(3.0, 0.7, sens, dim) == discrete_gaussian_delta(
                3.0, 0.7, 1
            )
    assert discrete_gaussian_vector_delta(3.0, 0.7, 1.5, 7) > discrete_gaussian_delta(3.0, 0.7, 1)


@pytest.mark.parametrize(("sigma", "eps"), [(1.7, 1.0), (3.0, 0.3), (4.5, 2.0)])
def test_only_the_changed_coordinates_count(sigma, eps):
    """An integer shift with ‖s‖² ≤ M = ⌊Δ²⌋ has at most M non-zero coordinates; the others
    have the same law under both neighbours and drop out: the bound for d > M is the bound
    for d = M, and it still dominates the exact profile of every such shift."""
    from dpgauss.privacy.discrete_multivariate import changed_coordinates

    assert changed_coordinates(4, 10**6) == 4 and changed_coordinates(25, 3) == 3
    shifts = [(1,), (1, 1), (1, 1, 1), (2,), (1, 1, 1, 1)]
    exact = max(exact_shift_delta(sigma, eps, s) for s in shifts)
    for method in ("zcdp", "smoothing", "best"):
        at_m = discrete_gaussian_vector_delta(sigma, eps, 2.0, 4, method=method)
        for dim in (5, 4091, 10**6):
            assert discrete_gaussian_vector_delta(sigma, eps, 2.0, dim, method=method) == at_m
        assert at_m >= exact
    # zero coordinates add nothing: the exact profile of (1, 1, 0, 0) is that of (1, 1)
    assert exact_shift_delta(sigma, eps, (1, 1, 0, 0)) == pytest.approx(
        exact_shift_delta(sigma, eps, (1, 1)), rel=1e-12, abs=1e-300
    )


def test_integer_shift_bound_is_exact():
    assert integer_shift_bound(1.0) == (1, 1.0)
    assert integer_shift_bound(math.sqrt(2.0))[0] == 2  # the float √2 is slightly above √2
    assert integer_shift_bound(float(np.nextafter(math.sqrt(2.0), 0)))[0] == 1
    m, bar = integer_shift_bound(10.7)
    assert m == 114 and bar >= math.sqrt(114) and bar == pytest.approx(math.sqrt(114), rel=1e-15)


# ------------------------------------------------------------------------------ calibration


@pytest.mark.slow
@pytest.mark.parametrize("sens", [2.0, 3.0, 50.0])
@pytest.mark.parametrize("dim", [2, 100, 10**6])
def test_bounds_decrease_in_sigma(sens, dim):
    sigma0 = analytic_gaussian_sigma(1.0, 1e-6, sens)
    grid = sigma0 * np.linspace(0.95, 1.3, 120)
    for method in ("zcdp", "smoothing", "best"):
        d = discrete_gaussian_vector_delta(grid, 1.0, sens, dim, method=method)
        assert np.all(np.diff(d) <= 0), method


@pytest.mark.parametrize(
    ("eps", "delta", "sens", "dim"),
    [
        (1.0, 1e-6, 2.0, 2),
        (1.0, 1e-6, 2.0, 100),
        (1.0, 1e-6, 3.0, 10**4),
        (0.5, 1e-9, 5.0, 10**6),
        (3.0, 1e-5, 2.0, 50),
        (0.0, 1e-3, 2.0, 10),
        (1.0, 1e-6, 129.0, 10**4),
    ],
)
def test_vector_sigma_is_safe_minimal_and_close_to_continuous(eps, delta, sens, dim):
    sigma = discrete_gaussian_vector_sigma(eps, delta, sens, dim)
    assert discrete_gaussian_vector_delta(sigma, eps, sens, dim) <= delta
    assert discrete_gaussian_vector_delta(sigma * (1 - 1e-9), eps, sens, dim) > delta
    cont = analytic_gaussian_sigma(eps, delta, integer_shift_bound(sens)[1])
    # The smoothing bound costs ≈ τ²/(2σ²) with τ ≈ 1-1.5: a few % when σ is about 3.
    assert cont <= sigma <= (1.02 if cont > 5 else 1.05) * cont


def test_vector_sigma_uses_the_exact_scalar_calibration_when_it_applies():
    from dpgauss.privacy import discrete_gaussian_sigma

    assert discrete_gaussian_vector_sigma(1.0, 1e-6, 1.0, 10**6) == discrete_gaussian_sigma(
        1.0, 1e-6, 1
    )
    assert discrete_gaussian_vector_sigma(8.0, 1e-5, 3.5, 1) == discrete_gaussian_sigma(
        8.0, 1e-5, 3
    )


def test_broadcasting():
    out = discrete_gaussian_vector_delta([3.0, 4.0], 1.0, 2.0, [[2], [10]])
    assert out.shape == (2, 2)
    assert isinstance(discrete_gaussian_vector_delta(3.0, 1.0, 2.0, 2), float)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"sigma": 1.0, "epsilon": 1.0, "l2_sensitivity": 0.5, "dim": 2}, ValueError, "l2_sens"),
        ({"sigma": 1.0, "epsilon": 1.0, "l2_sensitivity": 2.0, "dim": 2.5}, ValueError, "dim"),
        ({"sigma": 1.0, "epsilon": 1.0, "l2_sensitivity": 2.0, "dim": 0}, ValueError, "dim"),
        ({"sigma": 0.0, "epsilon": 1.0, "l2_sensitivity": 2.0, "dim": 2}, ValueError, "sigma"),
        ({"sigma": 1.0, "epsilon": -1.0, "l2_sensitivity": 2.0, "dim": 2}, ValueError, "epsilon"),
        ({"sigma": "a", "epsilon": 1.0, "l2_sensitivity": 2.0, "dim": 2}, TypeError, "sigma"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        discrete_gaussian_vector_delta(**kwargs)


def test_bad_method_and_delta():
    with pytest.raises(ValueError, match="method"):
        discrete_gaussian_vector_delta(1.0, 1.0, 2.0, 2, method="exact")
    with pytest.raises(ValueError, match="delta"):
        discrete_gaussian_vector_sigma(1.0, 1.0, 2.0, 2)
    with pytest.raises(ValueError, match="rho"):
        zcdp_delta(0.0, 1.0)


@pytest.mark.parametrize("method", ["zcdp", "smoothing"])
def test_vector_sigma_single_method(method):
    sigma = discrete_gaussian_vector_sigma(1.0, 1e-6, 2.0, 100, method=method)
    assert discrete_gaussian_vector_delta(sigma, 1.0, 2.0, 100, method=method) <= 1e-6
    assert discrete_gaussian_vector_delta(sigma * (1 - 1e-9), 1.0, 2.0, 100, method=method) > 1e-6
    best = discrete_gaussian_vector_sigma(1.0, 1e-6, 2.0, 100)
    assert sigma >= best
    with pytest.raises(ValueError, match="method"):
        discrete_gaussian_vector_sigma(1.0, 1e-6, 2.0, 100, method="exact")
