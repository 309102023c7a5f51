"""analytic_gaussian_sigma and gdp_mu against the mpmath reference.

Two properties are checked at every point:

* accuracy: relative error against the exact optimum <= 1e-10;
* safety (no tolerance): the exact profile, evaluated at high precision at the returned
  sigma (or mu), does not exceed the requested delta.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings

from dpgauss.privacy import analytic_gaussian_sigma, gdp_mu

from .reference import (
    hp,
    mpf_exact,
    ref_delta,
    ref_delta_sigma,
    ref_mu,
    ref_sigma,
    rel_err,
)
from .strategies import DELTA, EPS, SENS
from .validation_cases import (
    check_bad_value_array,
    check_bad_value_scalar,
    check_broadcast_mismatch,
    check_type_errors,
)

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

RTOL = 1e-10


def assert_sigma_ok(eps: float, delta: float, sens: float, sigma: object) -> None:
    assert type(sigma) is float, f"scalar call returned {type(sigma).__name__}"
    assert math.isfinite(sigma) and sigma > 0, sigma
    # safety first, no tolerance: profile at the returned sigma never exceeds delta
    achieved = ref_delta_sigma(sigma, eps, sens)
    assert achieved <= delta, (
        f"UNSAFE: analytic_gaussian_sigma({eps!r}, {delta!r}, {sens!r}) = {sigma!r} "
        f"gives delta = {achieved}"
    )
    err = rel_err(sigma, ref_sigma(eps, delta, sens))
    assert err <= RTOL, (
        f"analytic_gaussian_sigma({eps!r}, {delta!r}, {sens!r}) = {sigma!r}: "
        f"relative error {err:.3e} vs exact {ref_sigma(eps, delta, sens)}"
    )


def assert_mu_ok(eps: float, delta: float, mu: object) -> None:
    assert type(mu) is float, f"scalar call returned {type(mu).__name__}"
    assert math.isfinite(mu) and mu > 0, mu
    exact = ref_mu(eps, delta)
    assert mu <= exact, f"gdp_mu({eps!r}, {delta!r}) = {mu!r} above the optimum {exact}"
    achieved = ref_delta(mu, eps)
    assert achieved <= delta, f"UNSAFE: gdp_mu({eps!r}, {delta!r}) = {mu!r} gives {achieved}"
    err = rel_err(mu, exact)
    assert err <= RTOL, f"gdp_mu({eps!r}, {delta!r}) = {mu!r}: relative error {err:.3e}"


# ---------------------------------------------------------------------------- properties


@pytest.mark.slow
@settings(deadline=None, max_examples=150)
@given(eps=EPS, delta=DELTA, sens=SENS)
def test_analytic_sigma_exact_and_safe(eps, delta, sens):
    assert_sigma_ok(eps, delta, sens, analytic_gaussian_sigma(eps, delta, sens))


@settings(deadline=None, max_examples=100)
@given(eps=EPS, delta=DELTA)
def test_gdp_mu_exact_rounded_down_and_safe(eps, delta):
    assert_mu_ok(eps, delta, gdp_mu(eps, delta))


@settings(deadline=None, max_examples=60)
@given(eps=EPS, delta=DELTA, sens=SENS)
def test_sigma_and_mu_forms_agree(eps, delta, sens):
    sigma = analytic_gaussian_sigma(eps, delta, sens)
    mu = gdp_mu(eps, delta)
    # both are within 1e-10 of the same optimum Delta / mu*
    assert rel_err(sigma, _ratio(sens, mu)) <= 2 * RTOL
    # the default sensitivity is 1, and sigma scales linearly with the sensitivity
    unit = analytic_gaussian_sigma(eps, delta)
    assert rel_err(unit, _ratio(1.0, mu)) <= 2 * RTOL
    assert rel_err(sigma, _mul(sens, unit)) <= 2 * RTOL


def _ratio(a: float, b: float) -> object:
    with hp():
        return mpf_exact(a) / mpf_exact(b)


def _mul(a: float, b: float) -> object:
    with hp():
        return mpf_exact(a) * mpf_exact(b)


# ------------------------------------------------------------------------- fixed points

EPS_CORNERS = [0.0, 1e-8, 1e-3, 1.0, 20.0, 1e3]
DELTA_CORNERS = [1e-300, 1e-100, 1e-9, 1e-5, 0.5, 0.9, 1 - 1e-12, 1 - 2**-53]
SENS_CORNERS = [1e-6, 1.0, 1e6]


@pytest.mark.parametrize("sens", SENS_CORNERS)
@pytest.mark.parametrize("delta", DELTA_CORNERS)
@pytest.mark.parametrize("eps", EPS_CORNERS)
def test_analytic_sigma_corners(eps, delta, sens):
    assert_sigma_ok(eps, delta, sens, analytic_gaussian_sigma(eps, delta, sens))


@pytest.mark.parametrize("delta", DELTA_CORNERS)
@pytest.mark.parametrize("eps", EPS_CORNERS)
def test_gdp_mu_corners(eps, delta):
    assert_mu_ok(eps, delta, gdp_mu(eps, delta))


@pytest.mark.parametrize(
    ("eps", "delta"),
    [
        # large eps with delta next to 1: found inaccurate (rel. error up to 6e-9) in an
        # early version of the implementation
        (550.2476756850681, 0.9999968728050596),
        (602.734012712118, 0.9999999999999996),
        (793.4753081972938, 0.9999999999881076),
        (891.8475140464677, 0.9999999982198396),
        (992.7638926175421, 0.9999999712358205),
        (521.5806850395938, 0.9999999999999967),
        (1e3, 0.999),
    ],
)
def test_large_eps_delta_near_one(eps, delta):
    assert_sigma_ok(eps, delta, 1.0, analytic_gaussian_sigma(eps, delta))
    assert_mu_ok(eps, delta, gdp_mu(eps, delta))


# Beyond ε ≈ 1e20 the optimum μ* ≈ √(2ε) is so large that adjacent doubles μ move
# t = ε/μ − μ/2 by more than the kernel can resolve (and from ε ≈ 1e47 the solver found
# no finite root at all): there μ is the tail bound −q + √(q² + 2ε), rounded down.
HUGE_EPS = [1e20, 3.7e24, 1e30, 1e40, 1e47, 1e50, 1e100, 1e200, 1.7976931348623157e308]
HUGE_DELTA = [5e-324, 1e-300, 1e-5, 0.5, 1 - 2**-53]


def assert_tail_safe_and_tight(
    eps: float, delta: float, mu_num: float, mu_den: float, tight: bool = True
) -> None:
    """At μ = mu_num/mu_den (exactly), mpmath, without e^ε (which mpmath cannot form at
    ε = 1e200): safe, since δ_μ(ε) ≤ Φ(μ/2 − ε/μ) ≤ δ; and within RTOL of the optimum,
    since at μ(1 + RTOL) δ_μ(ε) ≥ Φ(−t) − φ(t)/(t + μ) > δ (Mills: R(x) ≤ 1/x for x > 0)."""
    with mpmath.workdps(60 + 2 * int(math.log10(eps))):
        e = mpf_exact(eps)
        m = mpf_exact(mu_num) / mpf_exact(mu_den)
        t = e / m - m / 2
        # Φ(−t) for t ≫ 0 through its upper bound φ(t)/t (erfc overflows there)
        tail = mpmath.ncdf(-t) if t < 30 else mpmath.npdf(t) / t
        assert tail <= delta, f"UNSAFE at eps={eps!r}, delta={delta!r}"
        if not tight:
            return
        m2 = m * (1 + mpmath.mpf(RTOL))
        t2 = e / m2 - m2 / 2
        # Φ(−t2) for t2 ≪ 0 through its lower bound 1 − φ(t2)/|t2| (erfc overflows there)
        upper = mpmath.ncdf(-t2) if t2 > -30 else 1 - mpmath.npdf(t2) / -t2
        assert upper - mpmath.npdf(t2) / (t2 + m2) > delta, f"not tight at eps={eps!r}"


@pytest.mark.parametrize("delta", HUGE_DELTA)
@pytest.mark.parametrize("eps", HUGE_EPS)
def test_huge_epsilon_is_finite_safe_and_accurate(eps, delta):
    for sens in (5e-324, 1e-6, 1.0, 1e6, 1.7976931348623157e308):
        sigma = analytic_gaussian_sigma(eps, delta, sens)
        assert type(sigma) is float and 0 < sigma < math.inf
        # a subnormal σ has too few bits to be tight (σ = Δ/μ* underflows at Δ = 5e-324)
        assert_tail_safe_and_tight(eps, delta, sens, sigma, tight=sigma > 1e-300)
    mu = gdp_mu(eps, delta)
    assert_tail_safe_and_tight(eps, delta, mu, 1.0)
    # arrays above the scalar size take the vectorised path: the same guarantee
    mu_a = gdp_mu(np.full(40, eps), np.full(40, delta))
    assert np.all(mu_a == mu_a[0])
    assert_tail_safe_and_tight(eps, delta, float(mu_a[0]), 1.0)
    if eps <= 1e100:  # the general reference still forms e^ε here
        assert_sigma_ok(eps, delta, 1.0, analytic_gaussian_sigma(eps, delta))
        assert_mu_ok(eps, delta, mu)
        assert_mu_ok(eps, delta, float(mu_a[0]))


@pytest.mark.parametrize("eps", [0.0, 1e-8, 1.0, 1e3])
@pytest.mark.parametrize("delta", [2.2250738585072014e-308, 1e-310, 1e-320])
def test_gdp_mu_subnormal_delta(eps, delta):
    # delta in (0, 1) includes subnormal doubles.  For eps = 0 the optimum mu ~ 2.5 delta
    # is itself subnormal (relative spacing up to ~1e-4 at 1e-320): safety always,
    # accuracy to what the double grid allows.
    mu = gdp_mu(eps, delta)
    assert type(mu) is float and 0 < mu < math.inf
    exact = ref_mu(eps, delta)
    assert mu <= exact
    assert ref_delta(mu, eps) <= delta
    spacing = 5e-324 / float(exact)
    assert rel_err(mu, exact) <= RTOL + 2 * spacing


def test_gdp_mu_smallest_delta():
    mu = gdp_mu(0.0, 5e-324)  # optimum ~ 1.25e-323: 1e-323 is the largest safe double
    assert 0 < mu <= float(ref_mu(0.0, 5e-324))
    assert ref_delta(mu, 0.0) <= 5e-324


def test_competitor_failing_point():
    # eps = 20, delta = 1e-9: sigma = 0.359812086..., well below the classical formula
    sigma = analytic_gaussian_sigma(20.0, 1e-9)
    assert_sigma_ok(20.0, 1e-9, 1.0, sigma)
    assert sigma == pytest.approx(0.35981208672, rel=1e-9)


def test_known_value_eps1_delta1e5():
    sigma = analytic_gaussian_sigma(1.0, 1e-5)
    assert_sigma_ok(1.0, 1e-5, 1.0, sigma)
    assert sigma == pytest.approx(3.7306, abs=1e-4)


def test_eps_zero_matches_erf_inverse():
    # eps = 0: delta = erf(Delta / (2 sqrt(2) sigma)); tiny delta: sigma ~ 1/(sqrt(2 pi) delta)
    sigma = analytic_gaussian_sigma(0.0, 1e-300)
    assert sigma == pytest.approx(1 / (math.sqrt(2 * math.pi) * 1e-300), rel=1e-10)
    assert analytic_gaussian_sigma(0, 0.5) == pytest.approx(0.7413011092528010, rel=1e-10)


def test_accepts_integer_and_numpy_scalars():
    a = analytic_gaussian_sigma(1, 1e-5, 2)
    b = analytic_gaussian_sigma(np.float64(1.0), np.float64(1e-5), np.int64(2))
    assert type(a) is float and type(b) is float
    assert a == b
    assert type(analytic_gaussian_sigma(np.array(1.0), np.array(1e-5))) is float
    assert type(gdp_mu(np.float64(1.0), 1e-5)) is float


# ------------------------------------------------------------------ monotonic, vectorised


def test_monotone_in_eps_and_delta():
    eps = np.array([0.0, 1e-8, 1e-4, 0.1, 1.0, 10.0, 1e3])
    s = analytic_gaussian_sigma(eps, 1e-6)
    assert np.all(np.diff(s) < 0)
    delta = np.array([1e-300, 1e-100, 1e-10, 1e-3, 0.5, 0.99])
    s = analytic_gaussian_sigma(0.5, delta)
    assert np.all(np.diff(s) < 0)
    m = gdp_mu(0.5, delta)
    assert np.all(np.diff(m) > 0)


@pytest.mark.parametrize("func", [analytic_gaussian_sigma, gdp_mu])
def test_broadcast_shape_and_elementwise_equality(func):
    eps = np.array([[0.0], [1e-8], [1.0]])  # (3, 1)
    delta = [1e-300, 1e-9, 0.5, 0.9]  # (4,)
    out = func(eps, delta)
    assert isinstance(out, np.ndarray)
    assert out.shape == (3, 4)
    assert out.dtype == np.float64
    for i in range(3):
        for j in range(4):
            assert out[i, j] == func(float(eps[i, 0]), delta[j])


def test_broadcast_with_sensitivity_and_safety_of_every_element():
    eps = np.array([0.0, 0.01, 1.0, 20.0])
    delta = np.array([[1e-300], [1e-5]])
    sens = np.array([1e-6, 1.0, 1e6, 3.0])
    out = analytic_gaussian_sigma(eps, delta, sens)
    assert out.shape == (2, 4)
    for i in range(2):
        for j in range(4):
            assert_sigma_ok(float(eps[j]), float(delta[i, 0]), float(sens[j]), float(out[i, j]))


def test_list_input_returns_array_and_one_element_array_is_array():
    out = analytic_gaussian_sigma([1.0, 2.0], 1e-5)
    assert isinstance(out, np.ndarray) and out.shape == (2,)
    one = gdp_mu(np.array([1.0]), 1e-5)
    assert isinstance(one, np.ndarray) and one.shape == (1,)


def test_empty_input():
    out = analytic_gaussian_sigma(np.array([]), 1e-5)
    assert isinstance(out, np.ndarray) and out.shape == (0,)


# ----------------------------------------------------------------------- bad input

SIGMA_ARGS = {"epsilon": 1.0, "delta": 1e-5, "sensitivity": 1.0}
MU_ARGS = {"epsilon": 1.0, "delta": 1e-5}
NAN, INF = math.nan, math.inf
BAD = {
    "epsilon": [-1.0, -1e-300, NAN, INF, -INF],
    "delta": [0.0, -0.1, 1.0, 1.5, NAN, INF],
    "sensitivity": [0.0, -1.0, NAN, INF],
}
CASES = [
    (analytic_gaussian_sigma, SIGMA_ARGS, name, bad) for name in SIGMA_ARGS for bad in BAD[name]
] + [(gdp_mu, MU_ARGS, name, bad) for name in MU_ARGS for bad in BAD[name]]
IDS = [f"{f.__name__}-{n}-{b}" for f, _, n, b in CASES]


@pytest.mark.parametrize(("func", "valid", "name", "bad"), CASES, ids=IDS)
def test_bad_value_scalar(func, valid, name, bad):
    check_bad_value_scalar(func, valid, name, bad)


@pytest.mark.parametrize(("func", "valid", "name", "bad"), CASES, ids=IDS)
def test_bad_value_array_names_index(func, valid, name, bad):
    check_bad_value_array(func, valid, name, bad)


@pytest.mark.parametrize(
    ("func", "valid"), [(analytic_gaussian_sigma, SIGMA_ARGS), (gdp_mu, MU_ARGS)]
)
def test_type_errors(func, valid):
    check_type_errors(func, valid)


@pytest.mark.parametrize(
    ("func", "valid"), [(analytic_gaussian_sigma, SIGMA_ARGS), (gdp_mu, MU_ARGS)]
)
def test_shape_mismatch(func, valid):
    check_broadcast_mismatch(func, valid)
