"""Sanity checks of the mpmath reference itself (no dpgauss involved)."""

from __future__ import annotations

import math
from itertools import pairwise

import mpmath
import pytest
from hypothesis import given, settings
from mpmath import mp, mpf
from scipy.special import ndtr

from .reference import (
    DPS,
    hp,
    ref_classical_sigma,
    ref_delta,
    ref_delta0,
    ref_delta_integral,
    ref_delta_sigma,
    ref_epsilon,
    ref_log_delta,
    ref_mu,
    ref_one_minus_delta,
    ref_sigma,
    rel_err,
)
from .strategies import DELTA, EPS, EPS_BELOW_1, log_uniform

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def test_global_precision_untouched():
    before = mp.prec
    ref_delta(1e-10, 1e-8)
    ref_mu(1.0, 1e-5)
    ref_epsilon(1.0, 1e-5)
    ref_delta_integral(1.0, 1.0)
    ref_delta0(2.0)
    assert mp.prec == before


@pytest.mark.parametrize("mu", [1e-300, 1e-8, 0.3, 1.0, 7.5, 40.0])
def test_eps_zero_is_erf(mu):
    with mp.workdps(DPS + 20):
        expected = mpmath.erf(mpf(mu) / (2 * mpmath.sqrt(2)))
    assert rel_err(ref_delta(mu, 0), expected) < mpf(10) ** (-DPS + 2)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mu", "eps"),
    [
        (1e-10, 1e-8),  # the two terms agree to ~11 digits
        (1e-10, 1e3),  # ~23 digits of cancellation, delta ~ 1e-(2e25)
        (2.7510465697012415e-10, 1e-8),  # delta ~ 1e-300
        (1e-5, 1e-10),
        (1.0, 1.0),
        (0.5, 0.0),
        (21.0, 1e3),
        (40.0, 1e3),
        (2.5e-300, 1e-300),
    ],
)
def test_direct_form_matches_cancellation_free_integral(mu, eps):
    assert rel_err(ref_delta_integral(mu, eps), ref_delta(mu, eps)) < 1e-35


@pytest.mark.parametrize(
    ("mu", "eps"), [(1e-10, 1e-8), (1e-10, 1e3), (1e-3, 10.0), (3.0, 0.0), (300.0, 500.0)]
)
def test_more_digits_do_not_change_the_value(mu, eps):
    assert rel_err(ref_delta(mu, eps), ref_delta(mu, eps, dps=150)) < mpf(10) ** (-DPS + 1)


@pytest.mark.parametrize("mu", [0.2, 0.7, 1.0, 2.5, 5.0])
@pytest.mark.parametrize("eps", [0.0, 0.1, 1.0, 3.0])
def test_agrees_with_plain_double_formula_where_it_is_well_conditioned(mu, eps):
    # no cancellation at these points: scipy's ndtr in double precision is an
    # independent implementation accurate to ~1e-15
    double = ndtr(mu / 2 - eps / mu) - math.exp(eps) * ndtr(-mu / 2 - eps / mu)
    assert rel_err(double, ref_delta(mu, eps)) < 1e-12


@pytest.mark.parametrize(("mu", "eps"), [(0.3, 0.0), (1.0, 1.0), (2.0, 0.5), (5.0, 8.0)])
def test_derivative_in_mu_is_normal_density(mu, eps):
    # d delta / d mu = phi(mu/2 - eps/mu): the e^eps phi(b) = phi(a) identity
    with mp.workdps(40):
        numeric = mpmath.diff(lambda m: ref_delta(m, eps, dps=50), mpf(mu))
        exact = mpmath.npdf(mpf(mu) / 2 - mpf(eps) / mpf(mu))
        assert abs(numeric / exact - 1) < mpf(10) ** -25


def test_known_value_gdp_one():
    # 1-GDP at eps = 1: Phi(-1/2) - e Phi(-3/2)
    with hp():
        expected = mpf("0.12693673750664394580082962475776688")
    assert rel_err(ref_delta(1.0, 1.0), expected) < 1e-33


def test_known_sigma_eps1_delta1e5():
    # Balle & Wang: analytic sigma ~ 3.73 vs classical ~ 4.84 at eps = 1, delta = 1e-5, Delta = 1
    analytic = float(ref_sigma(1.0, 1e-5))
    classical = float(ref_classical_sigma(1.0, 1e-5))
    assert analytic == pytest.approx(3.7306, abs=1e-4)
    assert classical == pytest.approx(4.8448, abs=1e-4)
    assert classical == pytest.approx(math.sqrt(2 * math.log(1.25e5)), rel=1e-14)


def test_eps_zero_small_delta_asymptotics():
    # erf(x) = 2x/sqrt(pi) (1 + O(x^2)): sigma(0, delta) -> 1 / (sqrt(2 pi) delta)
    with mp.workdps(DPS):
        expected = 1 / (mpmath.sqrt(2 * mpmath.pi) * mpf(1e-300))
    assert rel_err(ref_sigma(0.0, 1e-300), expected) < 1e-50


@pytest.mark.parametrize("delta", [1e-300, 1e-9, 0.5])
def test_eps_zero_mu_solves_erf(delta):
    mu = ref_mu(0.0, delta)
    with mp.workdps(DPS + 20):
        assert abs(mpmath.erf(mu / (2 * mpmath.sqrt(2))) / mpf(delta) - 1) < mpf(10) ** -45


@settings(deadline=None, max_examples=25)
@given(eps=EPS, delta=DELTA)
def test_mu_round_trip(eps, delta):
    mu = ref_mu(eps, delta)
    assert rel_err(ref_delta(mu, eps), mpf(delta)) < 1e-40
    if eps > 0:
        assert rel_err(ref_epsilon(mu, delta), mpf(eps)) < 1e-30


@settings(deadline=None, max_examples=15)
@given(mu=log_uniform(1e-8, 1e3), delta=DELTA)
def test_epsilon_is_smallest(mu, delta):
    e = ref_epsilon(mu, delta)
    assert e >= 0
    with hp():
        above, below = e * (1 + mpf(10) ** -30), e * (1 - mpf(10) ** -30)
    assert ref_delta(mu, above) <= delta
    if e > 0:
        assert ref_delta(mu, below) > delta
    else:
        assert ref_delta(mu, 0) <= delta


@pytest.mark.slow
@pytest.mark.parametrize(("mu", "delta"), [(1e-300, 1e-310), (1e-300, 1e-301), (1e-200, 1e-250)])
def test_epsilon_is_smallest_for_tiny_answers(mu, delta):
    # eps* ~ 1e-300: the root finder must work in relative terms
    e = ref_epsilon(mu, delta)
    assert 0 < e < 1e-190
    with hp():
        above, below = e * (1 + mpf(10) ** -30), e * (1 - mpf(10) ** -30)
    assert ref_delta(mu, above) <= delta < ref_delta(mu, below)


def test_epsilon_zero_when_already_zero_dp():
    # delta(mu, 0) = erf(mu/(2 sqrt 2)) ~ 0.3989 mu for small mu
    assert ref_epsilon(1e-3, 1e-3) == 0
    assert ref_epsilon(1e-3, 3.98e-4) > 0


def test_monotonicity():
    eps_grid = [0.0, 1e-6, 1e-3, 0.1, 1.0, 5.0, 50.0]
    for mu in [1e-4, 0.1, 1.0, 10.0]:
        vals = [ref_delta(mu, e) for e in eps_grid]
        assert all(a > b for a, b in pairwise(vals))
    mu_grid = [1e-6, 1e-3, 0.1, 1.0, 10.0, 30.0]
    for e in [0.0, 0.5, 20.0]:
        vals = [ref_delta(m, e) for m in mu_grid]
        assert all(a < b for a, b in pairwise(vals))
    delta_grid = [1e-300, 1e-50, 1e-9, 1e-3, 0.3, 0.9]
    for e in [0.0, 1.0]:
        mus = [ref_mu(e, d) for d in delta_grid]
        assert all(a < b for a, b in pairwise(mus))
        epss = [ref_epsilon(2.0, d) for d in delta_grid]
        assert all(a >= b for a, b in pairwise(epss))
    mus = [ref_mu(e, 1e-5) for e in eps_grid]
    assert all(a < b for a, b in pairwise(mus))


@pytest.mark.parametrize("eps", [1e-8, 0.01, 1.0, 20.0, 1e3])
def test_delta0_is_profile_at_theorem4_sigma(eps):
    with mp.workdps(DPS + 20):
        direct = mpmath.ncdf(0) - mpmath.exp(mpf(eps)) * mpmath.ncdf(-mpmath.sqrt(2 * mpf(eps)))
    d0 = ref_delta0(eps)
    assert rel_err(d0, direct) < 1e-40
    assert 0 < d0 < 0.5
    # Theorem 4: below delta0, sigma must exceed Delta / sqrt(2 eps)
    mu = ref_mu(eps, float(d0) / 2)
    assert mu < math.sqrt(2 * eps)
    assert ref_delta0(0.0) == 0


@settings(deadline=None, max_examples=20)
@given(eps=EPS_BELOW_1, delta=DELTA)
def test_classical_mechanism_is_safe_below_one(eps, delta):
    # the paper's claim behind "analytic <= classical for eps < 1"
    sigma = ref_classical_sigma(eps, delta)
    assert ref_delta_sigma(sigma, eps) <= delta
    assert ref_sigma(eps, delta) <= sigma


def test_classical_mechanism_fails_for_large_eps():
    # at eps = 20, delta = 1e-9 the classical formula does not give (eps, delta)-DP
    sigma = ref_classical_sigma(20.0, 1e-9)
    assert ref_delta_sigma(sigma, 20.0) > 1e-9 * 100


@pytest.mark.parametrize(("mu", "eps"), [(0.5, 0.0), (3.0, 1.0), (8.0, 0.5), (30.0, 2.0)])
def test_complement_and_log_near_one(mu, eps):
    with hp():
        assert abs(ref_delta(mu, eps) + ref_one_minus_delta(mu, eps) - 1) < mpf(10) ** -DPS
        assert abs(ref_log_delta(mu, eps) - mpmath.log(ref_delta(mu, eps))) < mpf(10) ** -DPS


def test_log_delta_resolves_delta_next_to_one():
    # eps = 0, mu = 56: delta = 1 - erfc(56 / (2 sqrt 2)) = 1 - 6.06e-174
    with hp():
        expected = -mpmath.erfc(mpf(56) / (2 * mpmath.sqrt(2)))
        assert abs(ref_log_delta(56.0, 0.0) / expected - 1) < mpf(10) ** -50
        assert ref_log_delta(56.0, 0.0) < 0


def test_log_delta_far_below_double_range():
    # mu = 1e-10, eps = 1e3: delta = exp(about -5e25)
    ld = ref_log_delta(1e-10, 1e3)
    with mp.workdps(40):
        a = mpf(1e-10) / 2 - mpf(1e3) / mpf(1e-10)
        # leading asymptotics: log Phi(a) ~ -a^2/2 - log(-a) - log(sqrt(2 pi))
        assert abs(ld / (-(a**2) / 2) - 1) < 1e-20


@pytest.mark.parametrize(
    ("eps", "delta"),
    [
        (0.0, 1e-300),
        (1e-8, 1e-300),
        (1e3, 1e-300),
        (1e3, 0.5),
        (1e-8, 0.5),
        (20.0, 1e-9),
        (1.0, 1 - 2**-53),
    ],
)
def test_corner_solutions(eps, delta):
    mu = ref_mu(eps, delta)
    assert mu > 0
    assert rel_err(ref_delta(mu, eps), mpf(delta)) < 1e-40


def test_invalid_reference_inputs_raise():
    for bad in [(-1.0, 1e-5), (1.0, 0.0), (1.0, 1.0), (math.inf, 1e-5)]:
        with pytest.raises(ValueError):
            ref_mu(*bad)
    with pytest.raises(ValueError):
        ref_delta(0.0, 1.0)
    with pytest.raises(ValueError):
        ref_delta(1.0, -1.0)
