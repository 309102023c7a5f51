"""The streamlined array path of ``gaussian_epsilon`` / ``gdp_epsilon`` (``profile._epsilon_lean``).

Arrays of at least ``profile.LEAN_FROM`` points take it: a zero screen by ``erf``, a start
from a table (midpoint branch) or the tail bound (direct branch), one fast Halley step and
the exact, safe Newton step of ``_settle.epsilon_midpoint`` / ``epsilon_direct``.  Here:

* its new kernel pieces against mpmath: the far Mills ratio from the midpoint series
  (``_mills.mills_far_from_midpoint``) within a hundredth of the bound the safe step uses;
* whole large calls against mpmath (hypothesis over μ, δ and σ, Δ, and a grid of
  extremes): every entry safe (no tolerance: the exact profile at the returned ε is at
  most δ), within 1e-9 of the exact ε, 0.0 exactly when (0, δ)-DP suffices, and equal to
  the scalar path's answer up to the last steps' rounding;
* the zero screen's edge, and the settle cases against the general path.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.privacy import _mills, _settle, gaussian_epsilon, gdp_epsilon, profile

from .reference import hp, mpf_exact, ref_delta, ref_epsilon
from .strategies import DELTA, MU, SENS, log_uniform
from .test_profile import EPS_ATOL, EPS_RTOL, assert_epsilon_ok

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

BIG = profile.LEAN_FROM + 13  # a call that takes the streamlined path


def _filler(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Ordinary (μ, δ) points around the ones under test, so that every branch of the
    streamlined path runs in the same call."""
    rng = np.random.default_rng(seed)
    return 10.0 ** rng.uniform(-4.0, 2.5, n), 10.0 ** rng.uniform(-300.0, -0.31, n)


def agree(a: float, b: float) -> bool:
    """Two safe answers for the same point by different iterations and kernels: each is
    above the root by its own safe-side widening, usually ~1e-13 relative; where ε is tiny
    (μ = 1e-8) the general path's quadrature kernel stops up to ~1e-13 absolute above it
    (both are checked against mpmath on their own, within 1e-9 relative + 1e-12)."""
    return abs(a - b) <= 1e-11 * max(a, b) + 2e-13


# ------------------------------------------------------------------ the far Mills ratio


@settings(deadline=None, max_examples=300)
@given(
    m=st.one_of(st.floats(0.0, 29.99), st.floats(-3.0, math.log10(29.99)).map(lambda e: 10**e)),
    frac=st.one_of(st.just(1.0), st.floats(1e-8, 1.0)),
    exact=st.booleans(),
)
def test_far_mills_ratio_from_the_midpoint_series(m, frac, exact):
    """``R(m + μ/2)`` from the series is within FAR_FROM_MIDPOINT_ERROR / 100 of the
    60-digit value wherever the midpoint branch is used (both kernels' limits)."""
    limit = float(_mills.midpoint_limit(np.array(m))) if exact else _settle.FAST_STEP
    if not exact and m >= _settle.FAST_MAX:
        return
    mu = float(np.nextafter(limit * max(1.0, m), 0.0)) * frac
    _, *r = _mills.midpoint_series(np.array([m]), np.array([mu]), exact)
    got = float(_mills.mills_far_from_midpoint(np.array([mu]), tuple(r))[0])
    with mpmath.workdps(50):
        s = mpf_exact(m) + mpf_exact(mu) / 2
        want = mpmath.ncdf(-s) / mpmath.npdf(s)
        err = abs(mpf_exact(got) / want - 1)
    assert err <= _mills.FAR_FROM_MIDPOINT_ERROR / 100, (m, mu, float(err))


# ------------------------------------------------------------------ whole large calls


@pytest.mark.slow
@settings(deadline=None, max_examples=60)
@given(mu=MU, delta=DELTA)
def test_large_gdp_epsilon_call_against_mpmath_and_the_scalar_path(mu, delta):
    filler_mu, filler_delta = _filler(BIG, 5)
    filler_mu[::997], filler_delta[::997] = mu, delta
    out = gdp_epsilon(filler_mu, filler_delta)
    assert isinstance(out, np.ndarray) and out.shape == (BIG,)
    values = out[::997]
    assert np.all(values == values[0]), "same input, same output"
    got = float(values[0])
    assert_epsilon_ok(got, mu, delta, f"gdp_epsilon([... {mu!r} ...], [... {delta!r} ...])")
    assert agree(got, gdp_epsilon(mu, delta))


@settings(deadline=None, max_examples=40)
@given(mu=log_uniform(1e-4, 300.0), delta=log_uniform(1e-200, 0.5), sens=SENS)
def test_large_gaussian_epsilon_call_against_mpmath(mu, delta, sens):
    sigma = sens / mu
    filler_mu, filler_delta = _filler(BIG, 6)
    sig = sens / filler_mu
    sig[::1009], filler_delta[::1009] = sigma, delta
    out = gaussian_epsilon(sig, filler_delta, sens)
    got = float(out[0])
    with hp():
        m = mpf_exact(sens) / mpf_exact(sigma)  # the μ the release really has
    assert_epsilon_ok(got, m, delta, f"gaussian_epsilon([... {sigma!r} ...], {delta!r}, {sens!r})")
    assert agree(got, gaussian_epsilon(sigma, delta, sens))


MU_EXTREMES = [1e-300, 1e-250, 1e-12, 1e-6, 1e-3, 0.05, 0.3, 1.0, 4.0, 30.0, 300.0, 1e4, 1e100]
DELTA_EXTREMES = [5e-324, 1e-300, 1e-249, 1e-100, 1e-12, 1e-5, 0.01, 0.3, 0.5, 0.9, 1 - 1e-12]


@pytest.mark.slow
def test_large_call_at_the_extremes_against_mpmath():
    points = [(m, d) for m in MU_EXTREMES for d in DELTA_EXTREMES]
    reps = -(-BIG // len(points))
    arr = np.array(points * reps)
    out = gdp_epsilon(arr[:, 0].copy(), arr[:, 1].copy())
    for i, (m, d) in enumerate(points):
        got = float(out[i])
        assert np.all(out[i :: len(points)] == got), "same input, same output"
        if m >= 1e4 and ref_epsilon(m, d) > 1e12:
            # beyond the reference's reach in reasonable time: safe and finite suffices
            assert math.isfinite(got) and ref_delta(m, got) <= d
            continue
        assert_epsilon_ok(got, m, d, f"gdp_epsilon({m!r}, {d!r}) in a large call")
        assert agree(got, gdp_epsilon(m, d)), (m, d, got)


def test_large_random_call_sample_against_mpmath():
    """The benchmark's distribution (σ in [1e-2, 1e3], δ in [1e-12, 1e-2]) and a wider one."""
    rng = np.random.default_rng(31)
    sigma = 10.0 ** rng.uniform(-2.0, 3.0, BIG)
    delta = np.where(
        rng.random(BIG) < 0.5,
        10.0 ** rng.uniform(-12.0, -2.0, BIG),
        10.0 ** rng.uniform(-300, 0, BIG),
    )
    delta = np.clip(delta, 1e-300, 0.999)
    eps = gaussian_epsilon(sigma, delta)
    for i in rng.choice(BIG, 40, replace=False):
        s, d, e = float(sigma[i]), float(delta[i]), float(eps[i])
        with hp():
            m = 1 / mpf_exact(s)
        assert_epsilon_ok(e, m, d, f"gaussian_epsilon({s!r}, {d!r})")


def test_zero_screen_edge_matches_the_general_path():
    """δ within a hair of δ_μ(0) = erf(μ/(2√2)) on both sides: the screen's margin sends
    those points to the general path, so the 0-or-not decision is the general vectorised
    path's (``_epsilon_flat``: the exact kernel plus its bound at ε = 0) everywhere.  (The
    scalar path's kernel differs in the last bits: at 1e-13 of the edge it may return
    ~1e-14 where the vectorised kernels return 0; both are safe.)"""
    mus = 10.0 ** np.linspace(-200.0, 0.5, 400)
    d0 = np.array([float(ref_delta(m, 0.0)) for m in mus])
    rel = np.array([-1e-6, -1e-10, -1e-13, 1e-13, 1e-10, 1e-6])
    mu = np.repeat(mus, rel.size)
    delta = np.clip((d0[:, None] * (1.0 + rel[None, :])).ravel(), 5e-324, 0.999)
    reps = -(-BIG // mu.size)
    out = gdp_epsilon(np.tile(mu, reps), np.tile(delta, reps))[: mu.size]
    general = profile._epsilon_flat(mu, np.log(delta), -profile.ndtri(delta))
    assert np.array_equal(out == 0.0, general == 0.0)
    for m, d, e in zip(mu.tolist(), delta.tolist(), out.tolist(), strict=True):
        assert ref_delta(m, e) <= d, f"UNSAFE at ({m!r}, {d!r}): {e!r}"


def test_broadcast_shapes_and_sensitivity():
    sigma = np.logspace(-2, 3, 160).reshape(160, 1)
    delta = np.logspace(-300, -1, 128)  # 20480 points: the streamlined path
    sens = np.array([[[1e-3]], [[1.0]], [[1e3]]])
    out = gaussian_epsilon(sigma, delta, sens)
    assert out.shape == (3, 160, 128) and out.dtype == np.float64
    unit = gdp_epsilon(1.0 / sigma, delta)
    rng = np.random.default_rng(4)
    for _ in range(20):
        k, i, j = rng.integers(3), rng.integers(160), rng.integers(128)
        s, d, c = float(sigma[i, 0]), float(delta[j]), float(sens[k, 0, 0])
        with hp():
            m = mpf_exact(c) / mpf_exact(s)
        assert_epsilon_ok(float(out[k, i, j]), m, d, f"gaussian_epsilon({s!r}, {d!r}, {c!r})")
    assert np.all(unit >= 0.0)


# ------------------------------------------------------------------ the settle cases


def _cases(n: int, seed: int) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    mu = 10.0 ** rng.uniform(-4.0, 2.0, n)
    delta = 10.0 ** rng.uniform(-200.0, -1.0, n)
    general = profile._epsilon_flat(mu, np.log(delta), -profile.ndtri(delta))
    keep = general > 0.0
    return mu[keep], delta[keep], general[keep]


@pytest.mark.parametrize("case", ["midpoint", "direct"])
def test_epsilon_settle_case_agrees_with_the_general_path(case):
    mu, delta, general = _cases(8000, 41)
    if case == "midpoint":
        x0 = profile._epsilon_start_midpoint(mu, np.log(delta))
        q0 = x0 / mu
        where = _settle.midpoint_in_branch(mu, q0 - 0.5 * mu, q0, True)
        where &= _settle.midpoint_in_branch(mu, q0 - 0.5 * mu, q0, False)
        settle = _settle.epsilon_midpoint
    else:
        x0 = profile._epsilon_start(mu, -profile.ndtri(delta))
        where = _settle.direct_in_branch(mu, x0 / mu - 0.5 * mu)
        settle = _settle.epsilon_direct
    assert where.sum() > 1000
    got, left = settle(mu[where], np.log(delta[where]), x0[where].copy(), 1)
    assert left.mean() < 0.05
    ok = ~left
    assert all(agree(a, b) for a, b in zip(got[ok], general[where][ok], strict=True))
    # on the safe side of the exact kernel's bound (the step's own criterion)
    log_d, t, _ = profile.log_delta_terms(mu[where][ok], got[ok])
    assert np.all(log_d + profile.log_delta_error(log_d, t) <= np.log(delta[where][ok]))


def test_epsilon_settle_cases_reject_a_far_start():
    mu, delta, general = _cases(3000, 42)
    for settle in (_settle.epsilon_midpoint, _settle.epsilon_direct):
        _, left = settle(mu, np.log(delta), general * 1.5, 1)
        assert left.all()


@pytest.mark.parametrize(
    "mu, delta",
    [
        (np.linspace(100.0, 1000.0, BIG), 1e-5),  # every point in the direct branch
        (np.full(BIG, 1e-3), 1e-5),  # every point in the midpoint branch
        (np.full(BIG, 0.5), 0.5),  # every ε is 0
        (np.r_[np.full(2 * profile.LEAN_FROM, 0.02), np.full(100, 50.0)], 1e-5),
    ],
    ids=["direct", "midpoint", "zero", "one-branch-block"],
)
def test_a_block_of_one_branch_only(mu: np.ndarray, delta: float) -> None:
    """Regression (review of issue #31 item 7): a block whose points all sit in one branch
    (or are all 0) raised ``UnboundLocalError``; each answer equals the scalar path's."""
    got = gdp_epsilon(mu, delta)
    for i in (0, mu.size // 2, mu.size - 1):
        want = gdp_epsilon(float(mu[i]), delta)
        assert got[i] == pytest.approx(want, rel=EPS_RTOL, abs=EPS_ATOL)


def _check_bound(mu: float, delta: float, eps: float) -> None:
    with mpmath.workdps(120):
        m, e, d = mpmath.mpf(mu), mpmath.mpf(eps), mpmath.mpf(delta)

        def profile_at(x: mpmath.mpf) -> mpmath.mpf:
            return mpmath.ncdf(-x / m + m / 2) - mpmath.exp(x) * mpmath.ncdf(-x / m - m / 2)

        assert profile_at(e) <= d, (mu, delta, eps)  # safe
        assert profile_at(e / (1 + mpmath.mpf(EPS_RTOL))) > d, (mu, delta, eps)  # tight


@pytest.mark.parametrize("mu", [1e8, 3.7e12, 4.3e20, 1.36e21, 1e50, 1.1e100, 1e150])
@pytest.mark.parametrize("delta", [1e-300, 1e-10, 1e-6, 0.3, 1 - 1e-16])
def test_huge_mu_takes_the_tail_bound_safe_and_within_tolerance(mu: float, delta: float) -> None:
    """Regression (review of issue #31 item 7): beyond ``_MU_MAX`` the clipped μ gave an ε
    below the true one (1.1e100: 5e199 for 6.05e199), and near μ = 4e20 the solver's
    bracket failed (``FloatingPointError``).  From ``BOUND_FROM`` on, the scalar, small-
    and large-array calls return the tail bound: safe and within 1e-9 (mpmath)."""
    scalar = gdp_epsilon(mu, delta)
    small = gdp_epsilon(np.full(3, mu), delta)
    large = gdp_epsilon(np.full(BIG, mu), delta)
    assert small[0] == scalar and large[0] == scalar and large[-1] == scalar
    _check_bound(mu, delta, scalar)


def test_past_overflow_epsilon_is_infinite() -> None:
    assert gdp_epsilon(1e200, 1e-6) == math.inf
    assert np.all(gdp_epsilon(np.full(BIG, 1e200), 1e-6) == math.inf)
    assert gaussian_epsilon(1e-101, 1e-6) == pytest.approx(5e201, rel=1e-6)


def test_the_bound_starts_at_the_same_mu_on_both_paths() -> None:
    from dpgauss.privacy import _scalar

    assert _scalar._EPS_BOUND_FROM == profile.BOUND_FROM
