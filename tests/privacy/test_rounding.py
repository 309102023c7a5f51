"""privacy/_rounding: every helper is on the safe side, against mpmath at 200 digits.

Each ``*_up`` helper must return a double ≥ the exact value (``*_down`` ≤), at 0,
subnormals, huge values and inf as well as on hypothesis draws; the helpers documented as
"the smallest double ≥" are also checked to be tight (the next double below is too small).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.privacy import _rounding as r

mp = mpmath.mp
mp.dps = 200

MAX = 1.7976931348623157e308
SUB = 5e-324  # smallest subnormal
SUB_BIG = 2.2250738585072e-308  # a large subnormal
CORNERS = [0.0, SUB, 3 * SUB, SUB_BIG, 2.2250738585072014e-308, 1e-300, 0.1, 1.0, 3.0, 1e300, MAX]

nonneg = st.floats(min_value=0.0, max_value=MAX, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=SUB, max_value=MAX, allow_nan=False, allow_infinity=False)
finite = st.floats(allow_nan=False, allow_infinity=False)


def mpf(x: float | Fraction | int) -> mpmath.mpf:
    if isinstance(x, Fraction):
        return mpmath.mpf(x.numerator) / x.denominator
    return mpmath.mpf(x)


def below(x: float) -> float:
    return math.nextafter(x, -math.inf)


# ------------------------------------------------------------------------- up / down


@given(finite)
def test_up_is_above_and_down_is_below(x):
    assert r.up(x) > x or (x == MAX and r.up(x) == math.inf)
    if x > 0.0:
        assert r.down(x) < x and r.down(x) >= 0.0


def test_up_down_extremes():
    assert r.up(0.0) == SUB
    assert r.up(-0.0) == SUB
    assert r.up(math.inf) == math.inf
    assert r.up(MAX) == math.inf
    assert math.isnan(r.up(math.nan))
    assert r.down(0.0) == 0.0  # a lower bound of a non-negative quantity stays >= 0
    assert r.down(SUB) == 0.0
    assert r.down(math.inf) == MAX


def test_up_keeps_the_type():
    assert type(r.up(1.0)) is float
    assert type(r.up(1)) is float
    arr = r.up(np.array([0.0, 1.0, math.inf]))
    assert isinstance(arr, np.ndarray)
    assert arr.tolist() == [SUB, math.nextafter(1.0, 2.0), math.inf]
    assert r.down(np.array([0.0, 1.0])).tolist() == [0.0, math.nextafter(1.0, 0.0)]


# ------------------------------------------------------------------------------- μ = Δ/σ


@given(positive, positive)
def test_mu_up_is_above_the_exact_quotient(sens, sigma):
    mu = float(r.mu_up(np.array([sens]), np.array([sigma]))[0])
    assert mpf(mu) >= mpf(sens) / mpf(sigma)


@settings(max_examples=300)
@given(positive, positive)
def test_mu_up_exact_is_the_smallest_double_above(sens, sigma):
    exact = mpf(sens) / mpf(sigma)
    if exact > MAX:
        with pytest.raises(ValueError, match="overflows"):
            r.mu_up_exact(sens, sigma)
        return
    mu = r.mu_up_exact(sens, sigma)
    assert mpf(mu) >= exact
    assert mu == SUB or mpf(below(mu)) < exact
    # the accountant's μ is on the safe side too, and at most one ulp higher
    acc = float(r.mu_up(np.array(sens), np.array(sigma)))
    assert mu <= acc <= math.nextafter(mu, math.inf)


@pytest.mark.parametrize("sens", CORNERS[1:])
@pytest.mark.parametrize("sigma", CORNERS[1:])
def test_mu_up_corners(sens, sigma):
    exact = mpf(sens) / mpf(sigma)
    mu = float(r.mu_up(np.array(sens), np.array(sigma)))
    assert mpf(mu) >= exact  # inf where the quotient overflows
    if exact <= MAX:
        tight = r.mu_up_exact(sens, sigma)
        assert mpf(tight) >= exact and (tight == SUB or mpf(below(tight)) < exact)
    else:
        with pytest.raises(ValueError, match="sensitivity/sigma"):
            r.mu_up_exact(sens, sigma)


def test_mu_up_underflow_is_never_zero():
    assert r.mu_up_exact(SUB, 3.0) == SUB
    assert r.mu_up_exact(SUB, MAX) == SUB
    assert float(r.mu_up(np.array(SUB), np.array(MAX))) == SUB


# ------------------------------------------------------------------- products, rationals


@given(nonneg, nonneg)
def test_mul_up_is_the_smallest_double_above(a, b):
    exact = mpf(a) * mpf(b)
    p = r.mul_up(a, b)
    if exact > MAX:
        assert p == math.inf
        return
    assert mpf(p) >= exact
    assert p == 0.0 or mpf(below(p)) < exact


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (0.0, 5.0, 0.0),
        (SUB, 0.5, SUB),
        (SUB, SUB, SUB),
        (MAX, 2.0, math.inf),
        (math.inf, 1.0, math.inf),
    ],
)
def test_mul_up_extremes(a, b, want):
    assert r.mul_up(a, b) == want


@pytest.mark.parametrize(
    "q",
    [
        Fraction(1, 3),
        Fraction(2, 3),
        Fraction(10**400, 10**100 * 3),
        Fraction(1, 10**330),
        Fraction(7, 2**1080),
        Fraction(0),
        Fraction(MAX),
        Fraction(-1, 3),
    ],
)
def test_rational_up(q):
    f = r.rational_up(q)
    assert Fraction(f) >= q
    assert Fraction(below(f)) < q


@given(st.integers(0, 10**30), st.integers(1, 10**30))
def test_rational_up_property(n, d):
    q = Fraction(n, d)
    f = r.rational_up(q)
    assert Fraction(f) >= q and (f == 0.0 or Fraction(below(f)) < q)


# --------------------------------------------------------------------------- square roots


def _check_sqrt(x: Fraction | int) -> None:
    exact = mpmath.sqrt(mpf(Fraction(x)))
    hi, lo = r.sqrt_up(x), r.sqrt_down(x)
    assert mpf(hi) >= exact
    assert mpf(lo) <= exact
    assert lo <= hi <= math.nextafter(math.nextafter(lo, math.inf), math.inf)
    if hi != math.inf:
        assert Fraction(hi) ** 2 >= Fraction(x)
    assert Fraction(lo) ** 2 <= Fraction(x)


@pytest.mark.parametrize(
    "x",
    [
        0,
        1,
        2,
        3,
        4,
        10**15 + 37,
        2**53 + 1,
        10**40 + 1,
        Fraction(1, 3),
        Fraction(SUB),
        Fraction(SUB_BIG),
        Fraction(1, 10**700),
        Fraction(MAX),
        10**308 * 17,
        10**700,
    ],
)
def test_sqrt_extremes(x):
    _check_sqrt(x)


def test_sqrt_beyond_the_largest_double():
    assert r.sqrt_up(10**700) == math.inf
    assert r.sqrt_down(10**700) == MAX
    assert r.sqrt_up(Fraction(1, 10**700)) == SUB  # √ underflows: never rounded up to 0
    assert r.sqrt_down(Fraction(1, 10**700)) == 0.0
    assert r.sqrt_up(-1) == r.sqrt_down(-1) == 0.0


@given(st.integers(0, 10**40))
def test_sqrt_of_integers(n):
    _check_sqrt(n)


@given(nonneg)
def test_sqrt_of_doubles_is_the_smallest_above(x):
    _check_sqrt(Fraction(x))
    s = r.sqrt_up(x)  # float(x) is exact: the result is the smallest double >= √x
    assert s == 0.0 or Fraction(below(s)) ** 2 < Fraction(x)


# ------------------------------------------------------------------- exact composition


@given(st.lists(st.floats(min_value=0.0, max_value=1e150), max_size=30))
def test_sum_squares_is_exact(mus):
    assert r.sum_squares(mus) == sum((Fraction(m) ** 2 for m in mus), Fraction(0))


def test_sum_squares_extremes():
    assert r.sum_squares([]) == 0
    assert r.sum_squares([SUB, MAX]) == Fraction(SUB) ** 2 + Fraction(MAX) ** 2
    assert r.sum_squares(np.array([0.5, 0.25])) == Fraction(5, 16)


@settings(max_examples=200)
@given(
    st.lists(st.floats(min_value=0.0, max_value=1e150), min_size=1, max_size=40), st.integers(0, 5)
)
def test_sqrt_sum_up_is_above_the_exact_root(xs, extra):
    exact = mpmath.sqrt(mpmath.fsum(mpf(x) for x in xs))
    assert mpf(r.sqrt_sum_up(np.array(xs), extra)) >= exact


def test_sqrt_sum_up_extremes():
    assert r.sqrt_sum_up(np.array([0.0])) == SUB
    assert r.sqrt_sum_up(np.array([SUB, SUB])) >= math.sqrt(2 * SUB)
    with np.errstate(over="ignore"):
        assert r.sqrt_sum_up(np.array([MAX, MAX])) == math.inf
    assert r.sqrt_sum_up(np.array([1.0] * 1000)) >= math.sqrt(1000)


# ---------------------------------------------------------------------------- δ from log δ


LOGS = [
    0.0,
    -0.0,
    -1e-300,
    -1e-17,
    -1e-10,
    -0.5,
    -1.0,
    -10.0,
    -700.0,
    -708.5,
    -744.0,
    -744.2,
    -744.4,
    -744.45,
    -745.2,
    -746.0,
    -1000.0,
    -math.inf,
]


@pytest.mark.parametrize("log_d", LOGS)
def test_delta_from_log_is_above_the_exact_value(log_d):
    exact = mpmath.exp(mpf(log_d)) if log_d != -math.inf else mpf(0)
    for d in (r.delta_from_log(log_d), float(r.delta_from_log_array(np.array([log_d]))[0])):
        assert mpf(d) >= exact
        assert r.TINY <= d <= 1.0


def test_delta_from_log_caps_and_floors():
    assert r.delta_from_log(0.0) == 1.0
    assert r.delta_from_log(1000.0) == 1.0  # no OverflowError
    assert r.delta_from_log(-math.inf) == r.TINY == SUB
    assert r.delta_from_log(-1e-300) == 1.0
    assert math.isnan(r.delta_from_log(math.nan))
    assert r.delta_from_log_array(np.array([1000.0, -math.inf])).tolist() == [1.0, SUB]
    # between log(TINY) ≈ -744.44 and -744, δ is above the smallest subnormal: not floored to it
    assert r.delta_from_log(-744.2) > SUB


@given(st.floats(min_value=-800.0, max_value=0.0))
def test_delta_from_log_property(log_d):
    exact = mpmath.exp(mpf(log_d))
    assert mpf(r.delta_from_log(log_d)) >= exact
    assert mpf(float(r.delta_from_log_array(np.array(log_d)))) >= exact


@settings(max_examples=300)
@given(nonneg, positive)
def test_quotient_up_is_the_smallest_double_above(a, b):
    exact = mpf(a) / mpf(b)
    q = r.quotient_up(a, b)
    if exact > MAX:
        assert q == math.inf
        return
    assert mpf(q) >= exact
    assert q == 0.0 or mpf(below(q)) < exact
    if a > 0.0:
        assert q == r.mu_up_exact(a, b)


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        (0.0, 1.0, 0.0),
        (SUB, 3.0, SUB),
        (1.0, 3.0, math.nextafter(1 / 3, 1.0)),
        (MAX, 0.5, math.inf),
    ],
)
def test_quotient_up_extremes(a, b, want):
    assert r.quotient_up(a, b) == want


@given(
    st.lists(st.floats(min_value=0.0, max_value=1e100), max_size=10),
    st.floats(min_value=SUB, max_value=1e100),
    st.integers(1, 50),
)
def test_fits_budget_is_the_exact_comparison(mus, mu_budget, count):
    exact = count * sum((Fraction(m) ** 2 for m in mus), Fraction(0))
    assert r.fits_budget(mus, mu_budget, count) == (exact <= Fraction(mu_budget) ** 2)


def test_fits_budget_at_the_edge():
    # ten charges of μ_B/√10 rounded up to a double: a float sum could call it a tie
    mu_b = 1.0
    mu = r.sqrt_up(Fraction(1, 10))
    assert not r.fits_budget([mu] * 10, mu_b)
    assert r.fits_budget([r.sqrt_down(Fraction(1, 10))] * 10, mu_b)
    assert r.fits_budget([], mu_b) and r.fits_budget([mu_b], mu_b)
    assert not r.fits_budget([mu_b, SUB], mu_b)


def test_sub_down_and_sum_up_are_exact_on_the_safe_side():
    """``sub_down`` is the largest double ≤ a − b (floored at 0), ``sum_up`` the smallest
    double ≥ Σx, both decided in rationals: the ledger's δ − Ση and Ση."""
    from fractions import Fraction

    from dpgauss.privacy._rounding import sub_down, sum_up

    for a, b in [(1e-6, 3e-7), (1e-6, 1e-22), (0.1, 0.3 - 0.2), (5e-7, 5e-7), (1e-9, 1e-6)]:
        got = sub_down(a, b)
        exact = Fraction(a) - Fraction(b)
        if exact <= 0:
            assert got == 0.0
        else:
            assert Fraction(got) <= exact < Fraction(math.nextafter(got, math.inf))
    xs = [1e-7, 2e-7, 3e-17, 0.1]
    got = sum_up(xs)
    exact = sum(map(Fraction, xs))
    assert Fraction(math.nextafter(got, 0.0)) < exact <= Fraction(got)
    assert sum_up([]) == 0.0
