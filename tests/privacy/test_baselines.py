"""Baselines: classical Gaussian mechanism (Thm 1), Laplace, delta0, Theorem 2 and Theorem 4,
and how the analytic calibration compares with them."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings

from dpgauss.privacy import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    delta0,
    gdp_delta,
    laplace_scale,
    theorem2_sigma,
    theorem4_sigma_lower_bound,
)

from .reference import (
    hp,
    mpf_exact,
    ref_classical_sigma,
    ref_delta0,
    ref_delta_sigma,
    rel_err,
)
from .strategies import DELTA, EPS, EPS_BELOW_1, EPS_POS, SENS
from .validation_cases import (
    check_bad_value_array,
    check_bad_value_scalar,
    check_broadcast_mismatch,
    check_type_errors,
)

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

CLOSED_FORM_RTOL = 1e-14  # a few ulps: these are one-line formulas
DELTA0_RTOL = 1e-9


# ------------------------------------------------------------------------------ classical


@settings(deadline=None, max_examples=100)
@given(eps=EPS_BELOW_1, delta=DELTA, sens=SENS)
def test_classical_formula(eps, delta, sens):
    value = classical_gaussian_sigma(eps, delta, sens)
    assert type(value) is float
    exact = ref_classical_sigma(eps, delta, sens)
    assert rel_err(value, exact) <= CLOSED_FORM_RTOL, (value, exact)


def test_classical_known_values():
    assert classical_gaussian_sigma(0.5, 1e-5) == pytest.approx(
        2 * math.sqrt(2 * math.log(1.25e5)), rel=1e-15
    )
    assert classical_gaussian_sigma(0.5, 1e-5, 3.0) == pytest.approx(
        6 * math.sqrt(2 * math.log(1.25e5)), rel=1e-15
    )
    # just below eps = 1, close to the paper's 4.84 at eps = 1
    assert classical_gaussian_sigma(0.999999, 1e-5) == pytest.approx(4.8448, abs=1e-3)


@pytest.mark.parametrize("eps", [1.0, 1.0000001, 1.5, 20.0, 1e3])
def test_classical_rejects_eps_at_least_one(eps):
    with pytest.raises(ValueError, match="analytic_gaussian_sigma"):
        classical_gaussian_sigma(eps, 1e-5)
    with pytest.raises(ValueError, match="analytic_gaussian_sigma"):
        classical_gaussian_sigma([0.5, eps], 1e-5)


@settings(deadline=None, max_examples=100)
@given(eps=EPS_BELOW_1, delta=DELTA, sens=SENS)
def test_analytic_never_worse_than_classical(eps, delta, sens):
    # the paper's claim (and the reason the classical one is only a baseline): for eps < 1
    # the classical sigma is (eps, delta)-DP, so the optimum is at most it
    classical = classical_gaussian_sigma(eps, delta, sens)
    assert ref_delta_sigma(classical, eps, sens) <= delta  # the claim itself, exactly
    assert analytic_gaussian_sigma(eps, delta, sens) <= classical


def test_analytic_vs_classical_known_gap():
    # eps -> 1, delta = 1e-5: 3.73 vs 4.84
    ratio = analytic_gaussian_sigma(0.999999, 1e-5) / classical_gaussian_sigma(0.999999, 1e-5)
    assert ratio == pytest.approx(3.7306 / 4.8448, abs=1e-3)


# -------------------------------------------------------------------------------- Laplace


@settings(deadline=None, max_examples=50)
@given(eps=EPS_POS, l1=SENS)
def test_laplace_scale(eps, l1):
    value = laplace_scale(eps, l1)
    assert type(value) is float
    assert rel_err(value, _ratio(l1, eps)) <= CLOSED_FORM_RTOL


def test_laplace_known_and_vectorised():
    assert laplace_scale(0.5, 2.0) == pytest.approx(4.0, rel=1e-15)
    out = laplace_scale([0.5, 1.0, 4.0], [[2.0], [1.0]])
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, [[4.0, 2.0, 0.5], [2.0, 1.0, 0.25]], rtol=1e-15)


def _ratio(a: float, b: float) -> object:
    with hp():
        return mpf_exact(a) / mpf_exact(b)


# --------------------------------------------------------------------------------- delta0


@settings(deadline=None, max_examples=80)
@given(eps=EPS)
def test_delta0_against_mpmath(eps):
    value = delta0(eps)
    assert type(value) is float
    exact = ref_delta0(eps)
    if eps == 0:
        assert value == 0.0
    else:
        assert rel_err(value, exact) <= DELTA0_RTOL, (eps, value, exact)
        assert 0 < value < 0.5


@pytest.mark.parametrize("eps", [1e-300, 1e-16, 1e-8, 1e-3, 0.5, 1.0, 20.0, 1e3, 1e6])
def test_delta0_fixed_points(eps):
    with hp():
        e = mpf_exact(eps)
        exact = mpmath.ncdf(0) - mpmath.exp(e) * mpmath.ncdf(-mpmath.sqrt(2 * e))
    # for eps -> 0 the subtraction above loses all digits at 80 digits: use the reference
    exact = ref_delta0(eps) if eps < 1e-40 else exact
    assert rel_err(delta0(eps), exact) <= DELTA0_RTOL


def test_delta0_is_profile_at_theorem4_sigma():
    eps = np.array([1e-8, 1e-3, 0.5, 1.0, 20.0, 1e3])
    np.testing.assert_allclose(delta0(eps), gdp_delta(np.sqrt(2 * eps), eps), rtol=3e-9)
    assert np.all(np.diff(delta0(eps)) > 0)


# -------------------------------------------------------------------------------- Theorem 2


@settings(deadline=None, max_examples=60)
@given(delta=DELTA, sens=SENS)
def test_theorem2(delta, sens):
    value = theorem2_sigma(delta, sens)
    assert type(value) is float
    with hp():
        exact = mpf_exact(sens) / (2 * mpf_exact(delta))
    assert rel_err(value, exact) <= CLOSED_FORM_RTOL
    # the exact (0, delta) calibration is tighter than Pinsker's bound
    analytic = analytic_gaussian_sigma(0.0, delta, sens)
    assert analytic <= value
    assert ref_delta_sigma(value, 0.0, sens) <= delta


def test_theorem2_asymptotic_ratio():
    # sigma_analytic(0, delta) ~ Delta / (sqrt(2 pi) delta): ratio -> sqrt(2 pi) / 2
    ratio = theorem2_sigma(1e-300) / analytic_gaussian_sigma(0.0, 1e-300)
    assert ratio == pytest.approx(math.sqrt(2 * math.pi) / 2, rel=1e-10)


# -------------------------------------------------------------------------------- Theorem 4


@settings(deadline=None, max_examples=100)
@given(eps=EPS_POS, delta=DELTA, sens=SENS)
def test_theorem4_bound(eps, delta, sens):
    d0 = float(ref_delta0(eps))
    if delta < d0 * (1 - 1e-6):
        bound = theorem4_sigma_lower_bound(eps, delta, sens)
        assert type(bound) is float
        with hp():
            exact = mpf_exact(sens) / mpmath.sqrt(2 * mpf_exact(eps))
        assert rel_err(bound, exact) <= CLOSED_FORM_RTOL
        assert analytic_gaussian_sigma(eps, delta, sens) >= bound
    elif delta > d0 * (1 + 1e-6):
        with pytest.raises(ValueError, match="delta"):
            theorem4_sigma_lower_bound(eps, delta, sens)


@pytest.mark.parametrize(
    ("eps", "delta"), [(1e-8, 1e-3), (1e-8, 0.5), (1.0, 0.3), (1e3, 0.4999), (0.5, 0.3)]
)
def test_theorem4_raises_when_delta_not_below_delta0(eps, delta):
    assert delta >= float(ref_delta0(eps))
    with pytest.raises(ValueError, match="delta"):
        theorem4_sigma_lower_bound(eps, delta)
    with pytest.raises(ValueError, match=r"at index \(1,\)"):
        theorem4_sigma_lower_bound(eps, [1e-300, delta, delta])


@pytest.mark.parametrize(
    ("eps", "delta"), [(1e-8, 1e-5), (1.0, 1e-5), (20.0, 1e-9), (1e3, 1e-300), (1e3, 0.4)]
)
def test_theorem4_fixed_points(eps, delta):
    bound = theorem4_sigma_lower_bound(eps, delta)
    assert bound == pytest.approx(1 / math.sqrt(2 * eps), rel=1e-15)
    assert analytic_gaussian_sigma(eps, delta) >= bound


def test_theorem4_eps_zero_raises():
    with pytest.raises(ValueError):
        theorem4_sigma_lower_bound(0.0, 1e-5)


# ----------------------------------------------------------------------- bad input

NAN, INF = math.nan, math.inf
SIGNATURES = [
    (classical_gaussian_sigma, {"epsilon": 0.5, "delta": 1e-5, "sensitivity": 1.0}),
    (laplace_scale, {"epsilon": 0.5, "l1_sensitivity": 1.0}),
    (delta0, {"epsilon": 0.5}),
    (theorem2_sigma, {"delta": 1e-5, "sensitivity": 1.0}),
    (theorem4_sigma_lower_bound, {"epsilon": 1.0, "delta": 1e-5, "sensitivity": 1.0}),
]
BAD = {
    classical_gaussian_sigma: {"epsilon": [0.0, -1.0, NAN, INF, -INF]},
    laplace_scale: {"epsilon": [0.0, -1.0, NAN, INF]},
    delta0: {"epsilon": [-1.0, -1e-300, NAN, INF]},
    theorem4_sigma_lower_bound: {"epsilon": [-1.0, NAN, INF]},
}
COMMON = {
    "delta": [0.0, -0.1, 1.0, 1.5, NAN, INF],
    "sensitivity": [0.0, -1.0, NAN, INF],
    "l1_sensitivity": [0.0, -1.0, NAN, INF],
}
CASES = [
    (f, valid, n, b)
    for f, valid in SIGNATURES
    for n in valid
    for b in BAD.get(f, {}).get(n, COMMON.get(n, []))
]
IDS = [f"{f.__name__}-{n}-{b}" for f, _, n, b in CASES]


@pytest.mark.parametrize(("func", "valid", "name", "bad"), CASES, ids=IDS)
def test_bad_value_scalar(func, valid, name, bad):
    check_bad_value_scalar(func, valid, name, bad)


@pytest.mark.parametrize(("func", "valid", "name", "bad"), CASES, ids=IDS)
def test_bad_value_array_names_index(func, valid, name, bad):
    check_bad_value_array(func, valid, name, bad)


@pytest.mark.parametrize(("func", "valid"), SIGNATURES, ids=lambda x: getattr(x, "__name__", ""))
def test_type_errors(func, valid):
    check_type_errors(func, valid)


@pytest.mark.parametrize(
    ("func", "valid"),
    [s for s in SIGNATURES if len(s[1]) > 1],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_shape_mismatch(func, valid):
    check_broadcast_mismatch(func, valid)


@pytest.mark.parametrize(("func", "valid"), SIGNATURES, ids=lambda x: getattr(x, "__name__", ""))
def test_scalar_in_float_out_array_in_array_out(func, valid):
    assert type(func(**valid)) is float
    arrays = {k: np.full((2, 3), v) for k, v in valid.items()}
    out = func(**arrays)
    assert isinstance(out, np.ndarray) and out.shape == (2, 3) and out.dtype == np.float64
    assert np.all(out == func(**valid))
