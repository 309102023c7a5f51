"""The Mills-ratio kernels of :mod:`dpgauss.privacy._mills` against mpmath at 80 digits.

Every kernel is checked on both sides of its branch points (the continued fraction from
``s = 6``, the quadrature below ``μ = 0.05·max(1, |t|)``) and at the ends of its domain
(``t = −37``, where ``R`` is near the largest double, and ``t = 1e8``), with the error
bound its docstring states.  The midpoint series has its own tests in
``test_calibration_vectorised.py``.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpmath import mpf

from dpgauss.privacy import _mills

from .reference import hp, mpf_exact, rel_err


def _r(x: mpf) -> mpf:
    """``R(x) = Φ(−x)/φ(x)`` at the working precision."""
    return mpmath.erfc(x / mpmath.sqrt(2)) * mpmath.sqrt(mpmath.pi / 2) * mpmath.exp(x**2 / 2)


def _ref_r(t: float) -> mpf:
    """``R(t) = Φ(−t)/φ(t) = e^{t²/2} ∫_t^∞ e^{−u²/2} du``, exact at 80 digits."""
    with hp():
        return _r(mpf_exact(t))


def _ref_m1(s: float) -> mpf:
    """``M1(s) = 1 − sR(s)``: at 80 digits the cancellation (``log10 s²`` digits, 16 at
    ``s = 1e8``) leaves far more than double precision."""
    with hp():
        return 1 - mpf_exact(s) * _ref_r(s)


def _ref_d(t: float, mu: float) -> mpf:
    """``D(t, μ) = ∫_t^{t+μ} M1(s) ds``, as the difference of ``R`` at enough digits."""
    with mpmath.workdps(80 + max(0, int(math.log10(max(1.0, abs(t)) / mu)) + 5)):
        a, b = mpf_exact(t), mpf_exact(t) + mpf_exact(mu)
        return +(_r(a) - _r(b))


ARGS = [-37.0, -20.0, -1.0, -1e-300, 0.0, 1e-8, 0.5, 2.0, 5.999999, 6.0, 6.000001, 30.0, 1e4, 1e8]


@pytest.mark.parametrize("t", ARGS)
def test_mills_ratio(t):
    """As accurate as ``erfcx``: a few ulps for t ≥ 0; for t < 0 ``erfcx`` is
    ``2e^{x²} − erfcx(−x)`` and the rounding of ``x² = t²/2`` costs ``t²/2`` ulps
    (1.1e-13 at t = −37, measured here)."""
    got = float(_mills.mills(np.array([t]))[0])
    assert math.isfinite(got) and got > 0
    bound = 5e-15 if t >= 0 else 5e-15 + 0.5 * t * t * 2.3e-16
    assert rel_err(got, _ref_r(t)) <= bound


@pytest.mark.parametrize("s", ARGS)
def test_m1_exact_on_both_sides_of_the_continued_fraction(s):
    """``1 − sR`` cancels for large s; the continued fraction from 6 on does not."""
    got = float(_mills.mills_m1(np.array([s]))[0])
    assert got > 0
    bound = 2e-14 if s >= 0 else 2e-14 + 0.5 * s * s * 2.3e-16  # erfcx, as for R
    assert rel_err(got, _ref_m1(s)) <= bound


def test_m1_fast_variant_meets_its_stated_bound():
    s = np.array([0.5, 3.0, 5.0, 8.0, 20.0])
    fast = _mills.mills_m1(s, exact=False)
    for si, fi in zip(s, fast, strict=True):
        assert rel_err(float(fi), _ref_m1(float(si))) <= 6e-16 * max(1.0, si * si) * 4


def test_m1_of_the_naive_formula_would_fail_at_large_s():
    """The test above can fail: at s = 1e4 the direct formula has no correct digit left."""
    s = 1e4
    naive = 1.0 - s * float(_mills.mills(np.array([s]))[0])
    assert rel_err(naive, _ref_m1(s)) > 1e-9


def test_mills_and_m1_agree_with_the_separate_kernels():
    s = np.concatenate([np.linspace(-30.0, 40.0, 701), [1e3, 1e6]])
    r, m1 = _mills.mills_and_m1(s)
    np.testing.assert_array_equal(r, _mills.mills(s))
    np.testing.assert_allclose(m1, _mills.mills_m1(s), rtol=1e-15, atol=0)


@pytest.mark.parametrize(
    ("t", "mu"),
    [
        (0.0, 1.0),  # direct difference
        (0.0, 0.049),  # quadrature, just inside
        (0.0, 0.05),  # direct, just outside
        (-1.0, 1e-6),
        (-1.0, 0.04),
        (-0.5, 3.0),
        (10.0, 1e-12),
        (1e3, 1e-9),
        (1e6, 10.0),  # direct branch at a huge t: μ ≥ 0.05·|t| is false, quadrature
        (1e6, 1e5),
    ],
)
def test_mills_difference(t, mu):
    got = float(_mills.mills_diff(np.array([t]), np.array([mu]))[0])
    assert got > 0
    assert rel_err(got, _ref_d(t, mu)) <= 5e-14


@settings(deadline=None, max_examples=150, derandomize=True)
@given(
    t=st.floats(-1.0, 60.0),
    log_step=st.floats(-12.0, 1.0),
)
def test_mills_difference_everywhere(t, log_step):
    """A few ulps relative on both branches for t ≥ −1 (the kernel's range), the fast
    variant within its 2e-7."""
    mu = 10.0**log_step * max(1.0, abs(t))
    ref = _ref_d(t, mu)
    exact = float(_mills.mills_diff(np.array([t]), np.array([mu]))[0])
    fast = float(_mills.mills_diff(np.array([t]), np.array([mu]), exact=False)[0])
    assert rel_err(exact, ref) <= 1e-13
    assert rel_err(fast, ref) <= 2e-7


def test_mills_difference_broadcasts_and_mixes_branches():
    t = np.array([[-0.75], [5.0]])
    mu = np.array([1e-6, 0.5, 2.0])
    got = _mills.mills_diff(t, mu)
    assert got.shape == (2, 3)
    for i in range(2):
        for j in range(3):
            assert rel_err(float(got[i, j]), _ref_d(float(t[i, 0]), float(mu[j]))) <= 5e-14


@settings(deadline=None, max_examples=200, derandomize=True)
@given(
    eps=st.floats(0.0, 1e6),
    mu=st.floats(1e-6, 1e4),
)
def test_profile_t_is_double_double_exact(eps, mu):
    """``t_hi + t_lo`` equals ``ε/μ − μ/2`` to about 1e-30 relative (far below one ulp)."""
    t_hi, t_lo = _mills.profile_t(np.array([eps]), np.array([mu]))
    with hp():
        exact = mpf_exact(eps) / mpf_exact(mu) - mpf_exact(mu) / 2
        got = mpf_exact(float(t_hi[0])) + mpf_exact(float(t_lo[0]))
        scale = max(abs(exact), mpf(eps) / mpf(mu), mpf(mu))
        assert abs(got - exact) <= mpf("1e-30") * scale


@pytest.mark.parametrize("t", [0.0, 1.5, -7.25, 38.0, 1e3, 1e7])
def test_log_phi_with_its_low_part(t):
    """With the low part the square is formed exactly: an ulp of the result."""
    t_lo = 1e-17 * max(1.0, abs(t))
    got = float(_mills.log_phi(np.array([t]), np.array([t_lo]))[0])
    with hp():
        x = mpf_exact(t) + mpf_exact(t_lo)
        ref = -(x**2) / 2 - mpmath.log(2 * mpmath.pi) / 2
    assert rel_err(got, ref) <= 4e-16
    plain = float(_mills.log_phi(np.array([t]))[0])
    assert plain == -0.5 * t * t - 0.5 * math.log(2 * math.pi) or rel_err(plain, ref) <= 1e-15


def test_midpoint_limit_is_the_documented_table():
    m = np.array([0.0, 11.9, 12.0, 19.9, 20.0, 29.9, 30.0, 1e3])
    np.testing.assert_array_equal(
        _mills.midpoint_limit(m), [0.05, 0.05, 0.025, 0.025, 5e-3, 5e-3, 0.0, 0.0]
    )
