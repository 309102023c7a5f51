"""The exact privacy profile: gaussian_delta / gaussian_log_delta / gaussian_epsilon and the
mu-GDP forms, against the mpmath reference.

* gaussian_delta is rounded up (never below the exact value), never to 0 (floor: the
  smallest positive double), and within 1e-9 relative of the exact value above 1e-300;
* gaussian_log_delta is the log of the same, meaningful far below the double range;
* gaussian_epsilon is never below the exact value, within 1e-9 relative (1e-12 absolute
  near 0), and exactly 0.0 when the release is already (0, delta)-DP.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings

from dpgauss.privacy import (
    gaussian_delta,
    gaussian_epsilon,
    gaussian_log_delta,
    gdp_delta,
    gdp_epsilon,
    gdp_log_delta,
)

from .reference import (
    hp,
    mpf_exact,
    ref_delta,
    ref_epsilon,
    ref_log_delta,
    rel_err,
)
from .strategies import DELTA, EPS, MU, SENS
from .validation_cases import (
    check_bad_value_array,
    check_bad_value_scalar,
    check_broadcast_mismatch,
    check_type_errors,
)

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

TINY = 5e-324  # smallest positive double
DELTA_RTOL = 1e-9
EPS_RTOL = 1e-9
EPS_ATOL = 1e-12


def exact_mu(sigma: float, sens: float) -> object:
    """Delta / sigma at high precision (the mu the release really has)."""
    with hp():
        return mpf_exact(sens) / mpf_exact(sigma)


def assert_delta_ok(value: object, exact: object, label: str) -> None:
    assert type(value) is float, f"{label}: scalar call returned {type(value).__name__}"
    assert 0 < value <= 1, f"{label} = {value!r}"
    assert value >= exact, f"{label} = {value!r} is BELOW the exact delta {exact}"
    if exact >= 1e-300:
        err = rel_err(value, exact)
        assert err <= DELTA_RTOL, f"{label} = {value!r}: relative error {err:.3e} vs {exact}"
    else:
        # below the normal range: a few subnormal ulps of slack beyond the relative bound
        with hp():
            bound = exact * (1 + DELTA_RTOL) + 8 * mpf_exact(TINY)
        assert value <= bound, f"{label} = {value!r} vs exact {exact}"


def assert_log_delta_close(value: object, exact_log: object, label: str) -> None:
    assert type(value) is float, f"{label}: scalar call returned {type(value).__name__}"
    assert math.isfinite(value) and value <= 0, f"{label} = {value!r}"
    with hp():
        err = abs(mpf_exact(value) - exact_log)
        tol = DELTA_RTOL + 1e-12 * abs(exact_log)
    assert err <= tol, f"{label} = {value!r} vs exact {exact_log} (|diff| = {float(err):.3e})"


def assert_epsilon_ok(value: object, mu: object, delta: float, label: str) -> None:
    assert type(value) is float, f"{label}: scalar call returned {type(value).__name__}"
    assert math.isfinite(value) and value >= 0, f"{label} = {value!r}"
    exact = ref_epsilon(mu, delta)
    if exact == 0:
        assert value == 0.0, f"{label} = {value!r}, but the release is already (0, delta)-DP"
    # safety, no tolerance: the returned epsilon really is achieved
    achieved = ref_delta(mu, value)
    assert achieved <= delta, f"UNSAFE: {label} = {value!r} only gives delta = {achieved}"
    assert value >= exact, f"{label} = {value!r} below exact {exact}"
    with hp():
        excess = float(mpf_exact(value) - exact)
        tol = EPS_RTOL * float(exact) + EPS_ATOL
    assert excess <= tol, f"{label} = {value!r} exceeds exact {exact} by {excess:.3e}"


# ---------------------------------------------------------------------------- properties


@pytest.mark.slow
@settings(deadline=None, max_examples=150)
@given(mu=MU, eps=EPS, sens=SENS)
def test_gaussian_delta_rounded_up_and_accurate(mu, eps, sens):
    sigma = sens / mu
    exact = ref_delta(exact_mu(sigma, sens), eps)
    label = f"gaussian_delta({sigma!r}, {eps!r}, {sens!r})"
    assert_delta_ok(gaussian_delta(sigma, eps, sens), exact, label)


@settings(deadline=None, max_examples=100)
@given(mu=MU, eps=EPS, sens=SENS)
def test_gaussian_log_delta_accurate(mu, eps, sens):
    sigma = sens / mu
    m = exact_mu(sigma, sens)
    label = f"gaussian_log_delta({sigma!r}, {eps!r}, {sens!r})"
    assert_log_delta_close(gaussian_log_delta(sigma, eps, sens), ref_log_delta(m, eps), label)


@settings(deadline=None, max_examples=100)
@given(mu=MU, eps=EPS)
def test_gdp_delta_and_log_delta(mu, eps):
    assert_delta_ok(gdp_delta(mu, eps), ref_delta(mu, eps), f"gdp_delta({mu!r}, {eps!r})")
    assert_log_delta_close(
        gdp_log_delta(mu, eps), ref_log_delta(mu, eps), f"gdp_log_delta({mu!r}, {eps!r})"
    )


@settings(deadline=None, max_examples=100)
@given(mu=MU, eps=EPS)
@example(mu=82.78825906280481, eps=273.8419634264361)  # 1 − δ ≈ 2e-317, subnormal
def test_log_delta_not_below_exact(mu, eps):
    # "natural log of the same" (rounded-up) delta: never below the exact log
    value = gdp_log_delta(mu, eps)
    exact = ref_log_delta(mu, eps)
    assert value >= exact, f"gdp_log_delta({mu!r}, {eps!r}) = {value!r} below exact {exact}"
    vectorised = gdp_log_delta(np.full(40, mu), np.full(40, eps))
    assert np.all(vectorised >= exact), f"gdp_log_delta arrays at ({mu!r}, {eps!r})"


@pytest.mark.parametrize("mu", [75.0, 82.78825906280481, 120.0, 160.0])
@pytest.mark.parametrize("ratio", [0.5, 2.0, 3.3, 10.0])
def test_log_delta_with_a_subnormal_tail_is_rounded_up(mu, ratio):
    """``1 − δ`` below 1e-290 (φ(t) subnormal at t < −37.5): the relative error bound of
    the ``t < −1`` kernel no longer holds there, the absolute one does (log δ ≥ exact)."""
    eps = ratio * mu
    exact = ref_log_delta(mu, eps)
    for value in (gdp_log_delta(mu, eps), gdp_log_delta(np.full(3, mu), np.full(3, eps))[0]):
        assert value >= exact and value <= 0.0


@pytest.mark.slow
@settings(deadline=None, max_examples=120)
@given(mu=MU, delta=DELTA, sens=SENS)
def test_gaussian_epsilon_never_too_small_and_accurate(mu, delta, sens):
    sigma = sens / mu
    m = exact_mu(sigma, sens)
    label = f"gaussian_epsilon({sigma!r}, {delta!r}, {sens!r})"
    assert_epsilon_ok(gaussian_epsilon(sigma, delta, sens), m, delta, label)


@settings(deadline=None, max_examples=80)
@given(mu=MU, delta=DELTA)
def test_gdp_epsilon(mu, delta):
    assert_epsilon_ok(gdp_epsilon(mu, delta), mu, delta, f"gdp_epsilon({mu!r}, {delta!r})")


@settings(deadline=None, max_examples=60)
@given(mu=MU, eps=EPS, sens=SENS)
def test_sigma_and_mu_forms_agree(mu, eps, sens):
    sigma = sens / mu
    m = float(exact_mu(sigma, sens))  # the double nearest to the release's mu
    a, b = gaussian_delta(sigma, eps, sens), gdp_delta(m, eps)
    if min(a, b) > 1e-300:
        assert a == pytest.approx(b, rel=3 * DELTA_RTOL)
    la, lb = gaussian_log_delta(sigma, eps, sens), gdp_log_delta(m, eps)
    assert la == pytest.approx(lb, rel=1e-11, abs=3 * DELTA_RTOL)
    # the default sensitivity is 1
    assert gaussian_delta(sigma, eps) == gaussian_delta(sigma, eps, 1.0)


@pytest.mark.parametrize("sens", [1.0, 2.0**-20, 2.0**20])
@pytest.mark.parametrize("mu", [2.0**-20, 0.125, 1.0, 4.0, 64.0])
def test_sigma_forms_equal_gdp_forms_at_exact_mu(mu, sens):
    sigma = sens / mu  # exact: powers of two, so Delta / sigma == mu exactly
    for eps in [0.0, 1e-8, 1.0, 20.0]:
        assert gaussian_delta(sigma, eps, sens) == pytest.approx(gdp_delta(mu, eps), rel=1e-12)
        assert gaussian_log_delta(sigma, eps, sens) == pytest.approx(
            gdp_log_delta(mu, eps), rel=1e-12, abs=1e-12
        )
    for delta in [1e-300, 1e-9, 0.1]:
        assert gaussian_epsilon(sigma, delta, sens) == pytest.approx(
            gdp_epsilon(mu, delta), rel=1e-12, abs=1e-15
        )


# ------------------------------------------------------------------------- fixed points

MU_GRID = [1e-10, 1e-8, 1e-6, 1e-4, 0.01, 1.0, 10.0, 100.0, 1e3]
EPS_GRID = [0.0, 1e-10, 1e-8, 6e-6, 1e-4, 1.0, 20.0, 1e3]


@pytest.mark.parametrize("eps", EPS_GRID)
@pytest.mark.parametrize("mu", MU_GRID)
def test_delta_grid(mu, eps):
    assert_delta_ok(gdp_delta(mu, eps), ref_delta(mu, eps), f"gdp_delta({mu!r}, {eps!r})")
    assert_log_delta_close(
        gdp_log_delta(mu, eps), ref_log_delta(mu, eps), f"gdp_log_delta({mu!r}, {eps!r})"
    )


@pytest.mark.parametrize(
    ("mu", "eps"),
    [
        (1e-6, 6e-6),  # ~7 digits of cancellation, delta ~ 1e-16
        (1e-8, 5e-8),  # ~9 digits of cancellation
        (1e-10, 1e-8),  # delta ~ 1e-2186: underflows
        (1e-10, 1e3),  # delta ~ exp(-5e25)
        (2.7510465697012414e-10, 1e-8),  # delta ~ 1e-300
        (21.035953330856823, 1e3),  # delta ~ 1e-300 at eps = 1e3
        (2.7792284836722737, 20.0),  # delta ~ 1e-9 at eps = 20
        (1e3, 1e-8),  # delta = 1 - exp(-125000): rounds up to 1.0 at most
        (1e-300, 0.0),  # delta = erf(mu / (2 sqrt 2)) ~ 4e-301
        (1e-300, 1e-300),  # ~300 digits of cancellation
        (1e-150, 1e-150),
        (1e-150, 1e-140),  # delta ~ 1e-(2e19)
    ],
)
def test_delta_extreme_points(mu, eps):
    assert_delta_ok(gdp_delta(mu, eps), ref_delta(mu, eps), f"gdp_delta({mu!r}, {eps!r})")
    assert_log_delta_close(
        gdp_log_delta(mu, eps), ref_log_delta(mu, eps), f"gdp_log_delta({mu!r}, {eps!r})"
    )


def test_underflow_floors_at_smallest_positive_double():
    assert gdp_delta(1e-10, 1e-8) == TINY
    assert gaussian_delta(1e10, 1e-8) == TINY
    assert gaussian_delta(1.0, 1e3, 1e-6) == TINY
    # ... while the log keeps the information
    exact = float(ref_log_delta(exact_mu(1e10, 1.0), 1e-8))
    assert exact == pytest.approx(-5033.15, abs=0.01)
    assert gaussian_log_delta(1e10, 1e-8) == pytest.approx(exact, rel=1e-12)


def test_huge_sigma_underflows_quietly():
    # sigma = 1e300 (mu = 1e-300) at eps = 1e-8: eps/mu = 1e292, delta = exp(-5e583).
    # The value is below every double: floor, no overflow warning, no NaN.
    assert gaussian_delta(1e300, 1e-8) == TINY
    assert gdp_delta(1e-300, 1.0) == TINY
    log_value = gdp_log_delta(1e-300, 1e-8)
    assert log_value <= -1e300  # -inf (overflowed) or a huge negative number, never NaN
    assert gaussian_log_delta(1e300, 1.0) <= -1e300
    assert gaussian_epsilon(1e300, 1e-300) == 0.0


def test_eps_zero_is_erf():
    for sigma in [1e-3, 0.5, 1.0, 3.0, 1e8]:
        expected = math.erf(1 / (2 * math.sqrt(2) * sigma))
        assert gaussian_delta(sigma, 0.0) == pytest.approx(expected, rel=1e-12)


def test_known_gdp_value():
    # 1-GDP is (1, 0.126936737506643945...)-DP
    assert gdp_delta(1.0, 1.0) == pytest.approx(0.12693673750664394580, rel=1e-12)
    assert gdp_delta(1.0, 1.0) >= 0.12693673750664394580
    assert gdp_epsilon(1.0, 0.12693673750664394580) == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("delta", [1e-300, 1e-100, 1e-9, 1e-5, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("mu", [1e-8, 1e-4, 0.1, 1.0, 10.0, 100.0, 1e3])
def test_epsilon_grid(mu, delta):
    assert_epsilon_ok(gdp_epsilon(mu, delta), mu, delta, f"gdp_epsilon({mu!r}, {delta!r})")


def test_epsilon_zero_exactly_when_already_zero_dp():
    # delta(mu, 0) = erf(mu / (2 sqrt 2)) ~ 0.39894 mu for small mu
    mus = np.array([1e-300, 1e-8, 1e-3, 0.5, 1.0, 3.0])
    d0 = np.array([float(ref_delta(m, 0.0)) for m in mus])
    above = np.minimum(d0 * (1 + 1e-6), 0.999)
    below = d0 * (1 - 1e-6)
    assert np.all(gdp_epsilon(mus, above) == 0.0)
    assert np.all(gdp_epsilon(mus, below) > 0.0)
    for m, d in zip(mus, above, strict=True):
        assert gdp_epsilon(float(m), float(d)) == 0.0
        assert gaussian_epsilon(1.0 / float(m), float(d)) == 0.0
    assert gaussian_epsilon(1.0, 0.5) == 0.0  # erf(1/(2 sqrt 2)) = 0.3829 <= 0.5


def test_epsilon_huge_answer():
    # mu = 1e3, delta = 1e-300: eps ~ mu (mu/2 + 37) ~ 5.4e5, e^eps overflows a double
    mu, delta = 1e3, 1e-300
    assert_epsilon_ok(gdp_epsilon(mu, delta), mu, delta, "gdp_epsilon(1e3, 1e-300)")


# ------------------------------------------------------------------ monotonic, vectorised


def test_monotonicity():
    eps = np.array([0.0, 1e-6, 1e-3, 0.1, 1.0, 5.0, 30.0])
    d = gaussian_delta(1.0, eps)
    assert np.all(np.diff(d) < 0)
    sigma = np.array([0.05, 0.1, 0.5, 1.0, 2.0, 10.0, 1e4])
    d = gaussian_delta(sigma, 0.5)
    assert np.all(np.diff(d) < 0)
    delta = np.array([1e-300, 1e-30, 1e-9, 1e-3, 0.1])
    e = gaussian_epsilon(0.5, delta)
    assert np.all(np.diff(e) < 0)


FUNCS_2 = [
    gaussian_delta,
    gaussian_log_delta,
    gaussian_epsilon,
    gdp_delta,
    gdp_log_delta,
    gdp_epsilon,
]


@pytest.mark.parametrize("func", FUNCS_2, ids=lambda f: f.__name__)
def test_broadcast_shape_and_elementwise_equality(func):
    first = np.array([[0.5], [1.0], [7.0]])  # sigma or mu, (3, 1)
    second = [1e-200, 1e-9, 0.3, 0.5] if "epsilon" in func.__name__ else [0.0, 1e-8, 1.0, 20.0]
    out = func(first, second)
    assert isinstance(out, np.ndarray)
    assert out.shape == (3, 4) and out.dtype == np.float64
    for i in range(3):
        for j in range(4):
            scalar = func(float(first[i, 0]), second[j])
            assert type(scalar) is float
            assert out[i, j] == scalar


@pytest.mark.parametrize(
    "func", [gaussian_delta, gaussian_log_delta, gaussian_epsilon], ids=lambda f: f.__name__
)
def test_broadcast_three_arguments(func):
    sigma = np.array([0.5, 1.0, 7.0])
    second = np.array([[1e-9], [0.3]]) if func is gaussian_epsilon else np.array([[0.0], [1.0]])
    sens = np.array([[[1e-6]], [[1.0]], [[1e6]], [[2.0]]])
    out = func(sigma, second, sens)
    assert out.shape == (4, 2, 3)
    for k in range(4):
        for i in range(2):
            for j in range(3):
                assert out[k, i, j] == func(
                    float(sigma[j]), float(second[i, 0]), float(sens[k, 0, 0])
                )


def test_zero_dim_and_numpy_scalars_give_float():
    assert type(gaussian_delta(np.float64(1.0), np.array(1.0))) is float
    assert type(gdp_epsilon(np.int64(1), 1e-5)) is float
    assert type(gaussian_log_delta(2, 1)) is float


# ----------------------------------------------------------------------- bad input

NAN, INF = math.nan, math.inf
BAD = {
    "sigma": [0.0, -1.0, -1e-300, NAN],
    "mu": [0.0, -1.0, NAN],
    "epsilon": [-1.0, -1e-300, NAN, INF, -INF],
    "delta": [0.0, -0.1, 1.0, 1.5, NAN, INF],
    "sensitivity": [0.0, -1.0, NAN, INF],
}
SIGNATURES = [
    (gaussian_delta, {"sigma": 1.0, "epsilon": 1.0, "sensitivity": 1.0}),
    (gaussian_log_delta, {"sigma": 1.0, "epsilon": 1.0, "sensitivity": 1.0}),
    (gaussian_epsilon, {"sigma": 1.0, "delta": 1e-5, "sensitivity": 1.0}),
    (gdp_delta, {"mu": 1.0, "epsilon": 1.0}),
    (gdp_log_delta, {"mu": 1.0, "epsilon": 1.0}),
    (gdp_epsilon, {"mu": 1.0, "delta": 1e-5}),
]
CASES = [(f, valid, n, b) for f, valid in SIGNATURES for n in valid for b in BAD[n]]
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


@pytest.mark.parametrize(("func", "valid"), SIGNATURES, ids=lambda x: getattr(x, "__name__", ""))
def test_shape_mismatch(func, valid):
    check_broadcast_mismatch(func, valid)
