"""The vectorised calibration path (calibration._solve_mu and its kernel) against mpmath.

The public tests (test_calibration.py) call with scalars and small arrays, which take the
scalar path of ``_scalar``; here the arrays are large enough for the vectorised path and
its starting-point table (``TABLE_FROM`` points), and its new pieces are checked alone:

* ``_mills.mills_diff_midpoint``, the one-``erfcx`` midpoint series of ``D(t, μ)``;
* the kernels of the two cases of ``_settle``, exact and fast, against the 60-digit
  profile within ``profile.log_delta_error`` (the bound every safe-side step relies on);
* the starting-point table (accuracy of the interpolation), and whole calls at the
  extremes: every distinct point safe (no tolerance) and within 1e-10 of the optimum.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.privacy import _mills, _settle, analytic_gaussian_sigma, calibration, gdp_mu
from dpgauss.privacy.profile import log_delta_error

from .reference import hp, mpf_exact, ref_delta, ref_delta_sigma, ref_log_delta, ref_mu, rel_err
from .strategies import EPS, MU

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

RTOL = 1e-10


def agree(a: np.ndarray | float, b: np.ndarray | float) -> bool:
    """Two safe answers for the same point from different starts.  The exact Newton step
    moves its answer to the safe side by its own curvature term, accepted up to
    1e-13·max(1, |log μ|) (_solve._CURVATURE_OK), so two starts may differ by that."""
    a, b = np.asarray(a), np.asarray(b)
    scale = np.maximum(1.0, np.abs(np.log(b)))
    return bool(np.all(np.abs(a - b) <= 2e-13 * scale * b + 5e-324))


BIG = calibration.TABLE_FROM + 17  # a call that takes the table path


def _ref_d(t: float, mu: float) -> object:
    """D(t, μ) = R(t) − R(t + μ) at 50 digits, with the double t, μ taken exactly."""
    with mpmath.workdps(50):
        tt, mm = mpf_exact(t), mpf_exact(mu)

        def mills(s: object) -> object:
            return mpmath.ncdf(-s) / mpmath.npdf(s)

        return mills(tt) - mills(tt + mm)


# ------------------------------------------------------------------- midpoint series


@pytest.mark.slow
@settings(deadline=None, max_examples=300)
@given(
    m=st.one_of(st.floats(-1.0, 29.99), st.floats(-3.0, math.log10(29.99)).map(lambda e: 10**e)),
    frac=st.one_of(st.just(0.0), st.floats(-8.0, 0.0)),
)
def test_midpoint_series_of_d_against_mpmath(m, frac):
    """Relative error of ``D`` below 3e-14 (the log-space bound is 1e-13) wherever the
    exact kernel uses it: μ < midpoint_limit(m)·max(1, |m|)."""
    step = float(_mills.midpoint_limit(np.array(m)))
    mu = float(np.nextafter(step * max(1.0, abs(m)), 0.0)) * 10.0**frac
    t = m - 0.5 * mu
    got = _mills.mills_diff_midpoint(np.array([t + 0.5 * mu]), np.array([mu]))[0]
    with hp():
        err = abs(mpf_exact(got) / _ref_d(t, mu) - 1)
    assert err <= 3e-14, f"D({t!r}, {mu!r}): relative error {float(err):.3e}"


def test_midpoint_series_fast_variant_is_close():
    m = np.linspace(0.0, _settle.FAST_MAX - 0.01, 400)
    mu = _settle.FAST_STEP * np.maximum(1.0, np.abs(m))
    _, _, _, fast = _settle.midpoint_terms(m * mu, mu, False)
    exact = _mills.mills_diff(m - 0.5 * mu, mu)
    assert np.max(np.abs(fast / exact - 1)) < 3e-10


# -------------------------------------------------------------------------- kernel


def _case_terms(mu: float, eps: float, exact: bool) -> tuple[str, float, float] | None:
    """(branch, log δ, t) from the settle case whose branch holds at (μ, ε), or None."""
    mu_a, eps_a = np.array([mu]), np.array([eps])
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        q = eps_a / mu_a
        t = q - 0.5 * mu_a
        if _settle.midpoint_in_branch(mu_a, t, q, exact)[0]:
            log_d, t, _, _ = _settle.midpoint_terms(eps_a, mu_a, exact)
            return "midpoint", float(log_d[0]), float(t[0])
        if _settle.direct_in_branch(mu_a, t)[0]:
            log_d, t, _ = _settle.direct_terms(eps_a, mu_a, exact)
            return "direct", float(log_d[0]), float(t[0])
    return None


def _check_in_bound(mu: float, eps: float) -> str | None:
    case = _case_terms(mu, eps, True)
    if case is None:
        return None
    name, log_d, t = case
    exact = ref_log_delta(mu, eps)
    if not math.isfinite(log_d):
        assert exact < -700
        return name
    bound = float(log_delta_error(np.array([log_d]), np.array([t]))[0])
    with hp():
        err = abs(mpf_exact(log_d) - exact)
    # (log δ = 0 for δ within 1e-300 of 1, as in test_scalar: the bound is then 0)
    assert err <= max(bound, 1e-300), f"{name} log δ({mu!r}, {eps!r}): |err| {float(err):.3e}"
    return name


@settings(deadline=None, max_examples=300)
@given(mu=MU, eps=EPS)
def test_settle_kernels_within_the_error_bound(mu, eps):
    """Each case's exact kernel, where its branch holds, is within log_delta_error of the
    60-digit value (the bound the safe step relies on)."""
    _check_in_bound(mu, eps)


@settings(deadline=None, max_examples=300)
@given(
    m=st.floats(0.0, 29.99),
    frac=st.one_of(st.just(1.0), st.floats(1e-6, 1.0)),
    large=st.booleans(),
)
def test_midpoint_kernel_within_the_error_bound_across_its_branch(m, frac, large):
    """Points built inside the midpoint branch (ε = m μ), up to its edges."""
    step = float(_mills.midpoint_limit(np.array(m)))
    scale = max(1.0, m) if large else 1.0
    mu = step * scale * frac * 0.95  # (|t| = m − μ/2 ≥ 0.975 m)
    assert _check_in_bound(mu, m * mu) == "midpoint"


@settings(deadline=None, max_examples=200)
@given(t=st.floats(-0.999, 38.0), ratio=st.floats(0.05, 50.0))
def test_direct_kernel_within_the_error_bound_across_its_branch(t, ratio):
    """Points built inside the direct branch (ε = μt + μ²/2 ≥ 0), from its edge on."""
    mu = max(ratio * max(1.0, abs(t)), -2.0 * t) * 1.0001
    assert _check_in_bound(mu, mu * t + 0.5 * mu * mu) == "direct"


@pytest.mark.slow
@settings(deadline=None, max_examples=200)
@given(
    delta=st.floats(-300.0, math.log10(0.5)).map(lambda e: 10**e),
    eps=st.floats(-8.0, 3.0).map(lambda e: 10**e),
    shift=st.floats(-1e-3, 1e-3),
)
def test_settle_kernels_near_the_solution(delta, eps, shift):
    """Near the optimum, where the cases run: exact kernels within the error bound, and
    the fast ones within 1e-9 of log δ."""
    mu = float(ref_mu(eps, delta)) * (1.0 + shift)
    if _check_in_bound(mu, eps) is None:
        return
    fast = _case_terms(mu, eps, False)
    if fast is not None:
        exact = ref_log_delta(mu, eps)
        with hp():
            assert abs(mpf_exact(fast[1]) - exact) <= 1e-9 * max(1.0, abs(float(exact)))


# ---------------------------------------------------------------------- start table


def test_start_table_interpolation_is_close():
    """Inside the grid the interpolated start is within 2e-2 of log μ* everywhere tested
    and within 5e-3 at 99 % of points (one fast Halley step then ends near 1e-6 or
    better; the second pass and the safeguarded solver catch the rest)."""
    rng = np.random.default_rng(5)
    eps = np.exp(rng.uniform(-18.4, 6.9, 4000))
    delta = np.exp(-np.exp(rng.uniform(calibration._TABLE_V[0] + 1e-9, 6.5, 4000)))
    x, inside, _ = calibration._start_table().lookup(eps, delta)
    assert inside.all()
    exact = np.log(calibration._calibrate(eps, delta))
    err = np.abs(x - exact)
    assert err.max() < 2e-2
    assert np.quantile(err, 0.99) < 5e-3


def test_start_outside_the_grid_is_closed_form():
    eps = np.array([0.0, 1e-12, 1e4, 1.0, 1.0])
    delta = np.array([1e-5, 1e-5, 1e-5, 0.9, 1e-310])
    _, inside, code = calibration._start_table().lookup(eps, delta)
    assert not inside.any() and np.all(code == 1)
    start, mid, direct = calibration._start(eps, delta, True)
    closed = calibration._log_mu_start(eps, delta)
    assert np.array_equal(start, closed)
    cases = calibration._branches(eps, closed)
    assert np.array_equal(mid, cases[0]) and np.array_equal(direct, cases[1])


# ---------------------------------------------------------------- whole vectorised calls

EPS_EXTREMES = [0.0, 1e-200, 1e-12, 1e-8, 1e-3, 0.37, 1.0, 20.0, 100.0, 1e3, 1e5, 1e10]
DELTA_EXTREMES = [5e-324, 1e-310, 1e-300, 1e-100, 1e-12, 1e-5, 0.01, 0.5, 0.9, 1 - 1e-12]


def _tiled(values: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    reps = -(-BIG // len(values))
    arr = np.array(values * reps)
    return arr[:, 0].copy(), arr[:, 1].copy()


@pytest.mark.slow
def test_large_call_at_the_extremes_is_safe_and_accurate():
    points = [(e, d) for e in EPS_EXTREMES for d in DELTA_EXTREMES]
    eps, delta = _tiled(points)
    mu = gdp_mu(eps, delta)
    assert isinstance(mu, np.ndarray) and mu.shape == eps.shape
    for i, (e, d) in enumerate(points):
        got = float(mu[i])
        assert np.all(mu[i :: len(points)] == got), "same input, same output"
        exact = ref_mu(e, d)
        assert got <= exact, f"gdp_mu({e!r}, {d!r}) = {got!r} above the optimum"
        assert ref_delta(got, e) <= d, f"UNSAFE: gdp_mu({e!r}, {d!r}) = {got!r}"
        spacing = 5e-324 / float(exact)  # subnormal optima: the double grid's resolution
        assert rel_err(got, exact) <= RTOL + 2 * spacing, (e, d, got)
        # the scalar path agrees (both land on the safe side of the same root)
        assert agree(got, gdp_mu(e, d))


def test_large_call_with_huge_epsilon_takes_the_closed_form():
    # ε ≥ calibration.HUGE_EPS among ordinary points of a table-path call: finite, and
    # the scalar path's value (the same closed form, test_calibration checks it with mpmath)
    points = [(e, d) for e in (1.0, 1e19, 1e20, 1e50, 1e300) for d in (5e-324, 1e-5, 0.9)]
    eps, delta = _tiled(points)
    mu = gdp_mu(eps, delta)
    assert np.isfinite(mu).all() and (mu > 0).all()
    for i, (e, d) in enumerate(points):
        assert agree(mu[i], gdp_mu(e, d)), (e, d)
        if e >= calibration.HUGE_EPS:
            assert ref_delta(float(mu[i]), e) <= d if e <= 1e50 else mu[i] < math.sqrt(2 * e)


def test_large_random_call_sample_against_mpmath():
    rng = np.random.default_rng(11)
    eps = 10.0 ** rng.uniform(-8.0, 3.0, BIG)
    delta = 10.0 ** rng.uniform(-300.0, math.log10(0.5), BIG)
    sens = 10.0 ** rng.uniform(-6.0, 6.0, BIG)
    sigma = analytic_gaussian_sigma(eps, delta, sens)
    for i in rng.choice(BIG, 60, replace=False):
        e, d, s, got = float(eps[i]), float(delta[i]), float(sens[i]), float(sigma[i])
        assert ref_delta_sigma(got, e, s) <= d, f"UNSAFE at ({e!r}, {d!r}, {s!r})"
        with hp():
            exact = mpf_exact(s) / ref_mu(e, d)
        assert rel_err(got, exact) <= RTOL
        assert agree(s / got, s / analytic_gaussian_sigma(e, d, s))


def test_large_call_beyond_the_table_against_mpmath():
    """ε over [1e-12, 1e6] and δ over [1e-320, 1 − 1e-12]: points inside the table's grid,
    outside it (closed-form start) and at its edges, in one call."""
    rng = np.random.default_rng(12)
    eps = 10.0 ** rng.uniform(-12.0, 6.0, BIG)
    delta = np.where(
        rng.random(BIG) < 0.8,
        10.0 ** rng.uniform(-320.0, 0.0, BIG),
        1.0 - 10.0 ** rng.uniform(-12.0, -0.31, BIG),
    )
    delta = np.clip(delta, 5e-324, 1.0 - 1e-12)
    mu = gdp_mu(eps, delta)
    for i in rng.choice(BIG, 40, replace=False):
        e, d, got = float(eps[i]), float(delta[i]), float(mu[i])
        exact = ref_mu(e, d)
        assert got <= exact and ref_delta(got, e) <= d, f"UNSAFE at ({e!r}, {d!r})"
        spacing = 5e-324 / float(exact)
        assert rel_err(got, exact) <= RTOL + 2 * spacing, (e, d, got)


def test_large_call_broadcasts_mixed_shapes_and_huge_sensitivity():
    eps = np.logspace(-3, 2, 160).reshape(160, 1)  # (160, 1)
    delta = np.logspace(-300, -1, 128)  # (128,)  -> 20480 points, the table path
    sens = np.array([[[1e-300]], [[1.0]], [[1e300]]])  # (3, 1, 1)
    out = analytic_gaussian_sigma(eps, delta, sens)
    assert out.shape == (3, 160, 128) and out.dtype == np.float64
    unit = gdp_mu(eps, delta)
    assert unit.shape == (160, 128)
    rng = np.random.default_rng(3)
    for _ in range(30):
        k, i, j = rng.integers(3), rng.integers(160), rng.integers(128)
        e, d, s = float(eps[i, 0]), float(delta[j]), float(sens[k, 0, 0])
        got = float(out[k, i, j])
        assert ref_delta_sigma(got, e, s) <= d
        with hp():
            exact = mpf_exact(s) / ref_mu(e, d)
        assert rel_err(got, exact) <= RTOL
        assert got == np.nextafter(s / unit[i, j], np.inf)


def test_table_and_closed_form_starts_agree():
    """The start changes the iterations, not the answer (beyond the last few ulps)."""
    rng = np.random.default_rng(7)
    eps = 10.0 ** rng.uniform(-8.0, 3.0, 5000)
    delta = 10.0 ** rng.uniform(-300.0, math.log10(0.5), 5000)
    with_table = calibration._solve_mu(eps, delta, True)
    without = calibration._solve_mu(eps, delta, False)
    assert agree(with_table, without)


def test_points_the_lean_passes_leave_go_to_the_safeguarded_solver(monkeypatch):
    """With a useless start (log μ = 0 everywhere) most points are not settled by the
    Halley passes: the safeguarded solver must take them, with the same answers."""
    rng = np.random.default_rng(9)
    eps = 10.0 ** rng.uniform(-8.0, 3.0, 2000)
    delta = 10.0 ** rng.uniform(-300.0, math.log10(0.5), 2000)
    good = calibration._solve_mu(eps, delta, False)

    def useless(e: np.ndarray, d: np.ndarray, table: bool) -> tuple[np.ndarray, ...]:
        x = np.zeros_like(e)
        return (x, *calibration._branches(e, x))

    monkeypatch.setattr(calibration, "_start", useless)
    bad_start = calibration._solve_mu(eps, delta, True)
    assert agree(bad_start, good)


# ------------------------------------------------------------- the two settle cases


def _branch_points(n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    eps = 10.0 ** rng.uniform(-8.0, 3.0, n)
    delta = 10.0 ** rng.uniform(-300.0, math.log10(0.5), n)
    x0, mid, direct = calibration._start(eps, delta, True)
    return eps, delta, x0, mid, direct


@pytest.mark.parametrize("case", ["midpoint", "direct"])
def test_settle_case_agrees_with_the_general_path(case):
    """A point the specialised case settles gets the general path's answer (up to the
    curvature term both accept), and is on the safe side of the exact kernel's bound."""
    eps, delta, x0, mid, direct = _branch_points(6000, 21)
    where = mid if case == "midpoint" else direct
    e, d, x = eps[where], delta[where], x0[where]
    assert e.size > 500
    got, left = getattr(_settle, case)(e, np.log(d), x.copy())
    assert left.mean() < 0.05
    general = calibration._settle(e, d, x.copy())
    ok = ~left
    assert agree(np.exp(got[ok]), np.exp(general[ok]))
    mu = np.exp(got[ok])
    if case == "midpoint":
        log_d, t, _, _ = _settle.midpoint_terms(e[ok], mu, True)
    else:
        log_d, t, _ = _settle.direct_terms(e[ok], mu, True)
    assert np.all(log_d + log_delta_error(log_d, t) <= np.log(d[ok]))


def test_settle_cases_reject_points_of_the_other_branch():
    eps, delta, x0, mid, direct = _branch_points(3000, 22)
    _, left = _settle.direct(eps[mid], np.log(delta[mid]), x0[mid].copy())
    assert left.all()
    _, left = _settle.midpoint(eps[direct], np.log(delta[direct]), x0[direct].copy())
    assert left.all()


def test_settle_cases_reject_a_far_start():
    """From a start 0.1 away from the root one Halley step does not end the iteration:
    the point must be handed back, not settled."""
    eps, delta, x0, mid, direct = _branch_points(3000, 23)
    for case, where in (("midpoint", mid), ("direct", direct)):
        _, left = getattr(_settle, case)(eps[where], np.log(delta[where]), x0[where] + 0.1)
        assert left.all()
