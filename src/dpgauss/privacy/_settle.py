r"""The calibration's two common cases, settled in as few array passes as possible.

:func:`.calibration._settle` runs the general kernel (:func:`.profile.log_delta_terms`,
which picks a branch per point) and the general solver steps.  Near the optimum most
points of a calibration stay in one of two branches of the kernel, and for those this
module does the same two steps — one Halley step on the fast kernel, then the exact
Newton step onto the safe side (:func:`._solve.exact_newton`) — with the branch fixed and
every quantity formed once:

* **midpoint** (μ small against ``max(1, |t|)``): ``D(t, μ)`` from the midpoint series
  of :func:`._mills.mills_diff_midpoint`, where the midpoint is ``m = t + μ/2 = ε/μ``;
* **direct** (``t ≥ −1`` and μ not small): ``D = R(t) − R(t + μ)``, two ``erfcx``.

In both ``δ = φ(t) D`` (``profile.py``), so ``g = log δ − log δ_target`` has the slope
``g′ = μ φ(t)/δ = μ/D`` in ``x = log μ`` and ``g″/g′ = 1 + t (t + μ) − g′``
(:func:`.calibration._derivatives`), with no exponential.  The exact step uses the error
bound of :func:`.profile.log_delta_error` for ``t ≥ −1``, ``1e-13 + 2e-15 |log δ|``.

Each function returns the settled ``x`` and a mask of the points it did not settle: a
point that is not in the branch at one of the two evaluations, whose Halley step is not
below 1e-2 (or whose Halley denominator is below ½), or whose Newton step still has a
curvature term above ``_solve.CURVATURE_OK``.  That last test is the one that decides:
Halley's error after a step ``s`` is about ``|c|² s³/4``, so from ``s ≤ 3e-3`` (``|c| ≲ 5``
in the benchmark's range) the Newton step is below ~2e-7 and its curvature term
``2|c| step²`` passes; larger Halley steps are let through only to be checked there.
The caller sends the points not settled through the general path; a point settled here
got the general path's formulas and its safe step (up to the rounding of a few
operations done in another order).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.special import erfcx

from . import _mills, _scalar, _solve

__all__ = [
    "ARRAY_FROM",
    "FAST_MAX",
    "FAST_STEP",
    "direct",
    "direct_in_branch",
    "direct_terms",
    "direct_terms_far",
    "epsilon_direct",
    "epsilon_midpoint",
    "midpoint",
    "midpoint_in_branch",
    "midpoint_terms",
    "midpoint_terms_far",
]

_SQRT_HALF_PI, _INV_SQRT2, _HALF_LOG_2PI = (
    _mills._SQRT_HALF_PI,
    _mills._INV_SQRT2,
    _mills._HALF_LOG_2PI,
)
_HALLEY_STOP = 1e-2
#: Arrays of at least this many points take the streamlined paths built on these cases
#: (``calibration.TABLE_FROM``, ``profile.LEAN_FROM``): below it their set-up costs more
#: than they save.
ARRAY_FROM = 1 << 14
#: The fast kernel's midpoint branch: μ < FAST_STEP·max(1, |t|) and m < FAST_MAX (there its
#: series through μ⁴ without the continued fraction is within 3e-10 of D); the direct
#: branch is μ ≥ FAST_STEP·max(1, |t|).
FAST_STEP = 0.05
FAST_MAX = 20.0


def _halley(
    g: np.ndarray, g1: np.ndarray, c: np.ndarray, x: np.ndarray, scale: float | np.ndarray = 1.0
) -> tuple[np.ndarray, ...]:
    """One Halley step ``x − (g/g′)/(1 − (g/g′) c/2)``, and whether the exact step may
    follow: its denominator above ½ and the step below 1e-2 (times ``scale``; module doc)."""
    newton = g / g1
    denom = 1.0 - 0.5 * newton * c
    step = newton / denom
    return x - step, (denom > 0.5) & (np.abs(step) <= _HALLEY_STOP * scale)


def _safe_newton(
    g: np.ndarray, g1: np.ndarray, c: np.ndarray, log_d: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`._solve.exact_newton`'s accepted step for ``g′ > 0``, ``t ≥ −1``: onto the
    root of ``g + 2 err``, moved down by the curvature term and the rounding pad; and the
    mask of the points whose curvature term is too large for the step to be final
    (compared with ``CURVATURE_OK`` itself, not times ``max(1, |x|)``: stricter)."""
    err = _scalar.ERROR_ABS + _scalar.ERROR_REL * np.abs(log_d)
    step, curvature = _solve.safe_step(g, g1, c, err)
    again = curvature > _solve.CURVATURE_OK
    new = x - step - curvature - 1e-15 * (1.0 + np.abs(x))
    return new, again


def midpoint_in_branch(mu: np.ndarray, t: np.ndarray, q: np.ndarray, exact: bool) -> np.ndarray:
    """Where :func:`midpoint_terms` holds: ``μ < c·max(1, |t|)`` with ``c`` from
    :func:`._mills.midpoint_limit` (exact), or ``c = 0.05`` and ``m = q < 20`` (fast)."""
    scale = np.maximum(1.0, np.abs(t))
    if not exact:
        return (mu < FAST_STEP * scale) & (q < FAST_MAX)
    if np.max(q, initial=-np.inf) < _mills.TAYLOR_LIMITS[0]:
        return mu < _mills.TAYLOR_STEPS[0] * scale
    return mu < _mills.midpoint_limit(q) * scale


def midpoint_terms(eps: np.ndarray, mu: np.ndarray, exact: bool) -> tuple[np.ndarray, ...]:
    """``(log δ, t, q, D)`` in the midpoint branch (:func:`midpoint_in_branch`); see
    :func:`midpoint_terms_far`."""
    return _midpoint(eps, mu, exact, False)[:4]


def midpoint_terms_far(eps: np.ndarray, mu: np.ndarray, exact: bool) -> tuple[np.ndarray, ...]:
    """``(log δ, t, q, D, R(t + μ))`` in the midpoint branch (:func:`midpoint_in_branch`).

    ``q = ε/μ`` is the midpoint ``m = t + μ/2``; ``D`` is :func:`._mills.mills_diff_midpoint`
    (exact), or its terms through ``μ⁴`` without the continued fraction (fast: within
    3e-10 of ``D``).  ``t = q − μ/2`` and ``log φ(t) = −t²/2 − ½ log 2π`` are formed in
    plain double precision, also for ``exact``: μ ≤ 0.05·max(1, |t|) here, so ``t`` is off
    by at most ~2.3e-16·|t| (two roundings) and ``t²/2`` by ~3.5e-16·t², under a third of
    the ``2e-15 |log δ|`` of :func:`.profile.log_delta_error`, since ``t²/2 < |log δ|``:
    ``D ≈ μ M1(m) ≤ 0.05·max(1, |t|)·M1(m) < 1`` (``M1 ≤ M1(−1) < 4.5``, and
    ``M1(s) < 1/s²`` for ``s > 0``), so ``log δ < −t²/2``.  Checked against mpmath within
    that bound in the tests.  ``R(t + μ) = R(m + μ/2)`` comes from the same series
    (:func:`._mills.mills_far_from_midpoint`, relative error below
    :data:`._mills.FAR_FROM_MIDPOINT_ERROR`): no further ``erfcx``.
    """
    return _midpoint(eps, mu, exact, True)


def _midpoint(eps: np.ndarray, mu: np.ndarray, exact: bool, far: bool) -> tuple[np.ndarray, ...]:
    q = eps / mu
    t = q - 0.5 * mu
    if exact:
        d, *r = _mills.midpoint_series(q, mu)
    else:
        r0 = _SQRT_HALF_PI * erfcx(q * _INV_SQRT2)
        m1 = 1.0 - q * r0
        r2 = r0 - q * m1
        r3 = q * r2 - 2.0 * m1
        r4 = q * r3 + 3.0 * r2
        r5 = q * r4 + 4.0 * r3
        h2 = mu * mu
        d = mu * (m1 - h2 * (r3 * (1.0 / 24.0) + h2 * (1.0 / 1920.0) * r5))
        r = [r0, -m1, r2, r3, r4]
    log_d = np.log(d) - (0.5 * t * t + _HALF_LOG_2PI)
    if not far:
        return log_d, t, q, d
    return log_d, t, q, d, _mills.mills_far_from_midpoint(mu, tuple(r))


def midpoint(eps: np.ndarray, log_target: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Settle points in the midpoint branch from ``x`` ≈ log μ* (module doc)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        mu = np.exp(x)
        log_d, t, q, d = midpoint_terms(eps, mu, False)
        ok = midpoint_in_branch(mu, t, q, False)
        g1 = mu / d
        x, done = _halley(log_d - log_target, g1, 1.0 + t * (q + 0.5 * mu) - g1, x)
        ok &= done
        mu = np.exp(x)
        log_d, t, q, d = midpoint_terms(eps, mu, True)
        ok &= midpoint_in_branch(mu, t, q, True)
        g1 = mu / d
        c = 1.0 + t * (q + 0.5 * mu) - g1
        x, again = _safe_newton(log_d - log_target, g1, c, log_d, x)
        ok &= ~again & np.isfinite(x)
    return x, ~ok


_SPLIT = 134217729.0  # 2**27 + 1, Dekker's splitting constant


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _SPLIT * a
    hi = c - (c - a)
    return hi, a - hi


def _exact_t(eps: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``t`` and ``log φ(t)`` in double-double, as :func:`._mills.profile_t` and
    :func:`._mills.log_phi` (the same operations), without their guards against
    ``|ε/μ|, μ, |t| ≥ 1e150``: :func:`direct_in_branch` rejects those points."""
    q = eps / mu
    q_hi, q_lo = _split(q)
    m_hi, m_lo = _split(mu)
    p = q * mu
    p_err = ((q_hi * m_hi - p) + q_hi * m_lo + q_lo * m_hi) + q_lo * m_lo
    half = 0.5 * mu
    t = q - half
    z = t - q
    t_lo = ((q - (t - z)) + (-half - z)) + ((eps - p) - p_err) / mu
    t_hi, t_hl = _split(t)
    sq = t * t
    sq_err = ((t_hi * t_hi - sq) + t_hi * t_hl + t_hl * t_hi) + t_hl * t_hl
    return t, -0.5 * sq - ((0.5 * sq_err + t * t_lo) + _HALF_LOG_2PI)


def direct_in_branch(mu: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Where :func:`direct_terms` holds: ``t ≥ −1`` and ``μ ≥ 0.05·max(1, |t|)`` (the
    profile kernel's condition for the direct difference, ``_mills.mills_diff``), with
    ``μ, t < 1e100`` (then ``|ε/μ| < 1e150``: no overflow in the double-double ``t``)."""
    return (t >= -1.0) & (t < 1e100) & (mu < 1e100) & (mu >= FAST_STEP * np.maximum(1.0, t))


def direct_terms(eps: np.ndarray, mu: np.ndarray, exact: bool) -> tuple[np.ndarray, ...]:
    """``(log δ, t, D)`` in the direct branch (:func:`direct_in_branch`):
    ``D = R(t) − R(t + μ)`` from two ``erfcx``; ``exact`` forms ``t`` and ``log φ(t)`` in
    double-double, as the profile's kernel."""
    return direct_terms_far(eps, mu, exact)[:3]


def direct_terms_far(eps: np.ndarray, mu: np.ndarray, exact: bool) -> tuple[np.ndarray, ...]:
    """``(log δ, t, D, R(t + μ))`` in the direct branch: :func:`direct_terms` and the
    far Mills ratio it computes on the way."""
    if exact:
        t, log_phi = _exact_t(eps, mu)
    else:
        t = eps / mu - 0.5 * mu
        log_phi = -(0.5 * t * t + _HALF_LOG_2PI)
    a = t * _INV_SQRT2
    e_far = erfcx(a + mu * _INV_SQRT2)
    d = _SQRT_HALF_PI * (erfcx(a) - e_far)
    return np.log(d) + log_phi, t, d, _SQRT_HALF_PI * e_far


def direct(eps: np.ndarray, log_target: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Settle points in the direct branch from ``x`` ≈ log μ* (module doc)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        mu = np.exp(x)
        log_d, t, d = direct_terms(eps, mu, False)
        ok = direct_in_branch(mu, t)
        g1 = mu / d
        x, done = _halley(log_d - log_target, g1, 1.0 + t * (t + mu) - g1, x)
        ok &= done
        mu = np.exp(x)
        log_d, t, d = direct_terms(eps, mu, True)
        ok &= direct_in_branch(mu, t)
        g1 = mu / d
        c = 1.0 + t * (t + mu) - g1
        x, again = _safe_newton(log_d - log_target, g1, c, log_d, x)
        ok &= ~again & np.isfinite(x)
    return x, ~ok


# ----------------------------------------------------------------- ε for a given μ
#
# The same two cases for the inverse problem (``profile.gaussian_epsilon`` on arrays): the
# root in ``x = ε`` of ``g = log δ_μ(ε) − log δ_target``, which decreases.  With
# ``s = t + μ``, ``∂δ/∂ε = −φ(t) R(s)`` and ``δ = φ(t) D`` give ``g′ = −R(s)/D`` and
# (``profile._epsilon_flat``) ``g″/g′ = 1 − 1/(μ R(s)) − g′``: the far Mills ratio ``R(s)``
# is the direct branch's second ``erfcx``, and the midpoint branch's Taylor series at the
# midpoint (``_mills.mills_far_from_midpoint``).  The safe side is *above* the root.


#: Pad of the safe ε (the rounding of ``x`` itself), as ``profile._epsilon_flat``'s.
def _epsilon_pad(x: np.ndarray) -> np.ndarray:
    return 4e-16 * np.abs(x) + _TINY


_TINY = 5e-324


def _epsilon_derivatives(
    mu: np.ndarray, d: np.ndarray, far: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    g1 = -far / d
    return g1, 1.0 - 1.0 / (mu * far) - g1


def _epsilon_case(
    terms: Callable[..., tuple[np.ndarray, ...]],
    in_branch: Callable[[np.ndarray, np.ndarray, np.ndarray, bool], np.ndarray],
    slope_error: float,
    mu: np.ndarray,
    log_target: np.ndarray,
    x: np.ndarray,
    passes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``passes`` Halley steps on the fast kernel from ``x`` ≈ ε*, then the exact Newton
    step onto the safe side (above the root): the settled ε and the mask of the points
    not settled (out of the branch at some evaluation, a Halley denominator below ½, a
    last Halley step above 1e-2 of ε, an exact step whose curvature term is above
    ``CURVATURE_OK``·max(1, ε), or ε ≤ 0 at any step: the general path takes those).

    The exact step moves up by ``(g + 2 err)/|g′|`` (``err`` the kernel's error bound for
    ``t ≥ −1``, where both cases are), then by its curvature term, by ``slope_error``
    times the step (the slope's relative error: the midpoint branch's far Mills ratio
    is a Taylor series) and by the rounding pad of ``ε``."""
    ok = np.ones(x.shape, dtype=bool)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        for i in range(passes):
            log_d, t, q, d, far = terms(x, mu, False)
            ok &= in_branch(mu, t, q, False)
            g1, c = _epsilon_derivatives(mu, d, far)
            x, done = _halley(log_d - log_target, g1, c, x, np.abs(x))
            ok &= (done if i == passes - 1 else np.ones_like(done)) & (x > 0.0)
        log_d, t, q, d, far = terms(x, mu, True)
        ok &= in_branch(mu, t, q, True)
        g1, c = _epsilon_derivatives(mu, d, far)
        err = _scalar.ERROR_ABS + _scalar.ERROR_REL * np.abs(log_d)
        step, curvature = _solve.safe_step(log_d - log_target, g1, c, err)
        ok &= curvature <= _solve.CURVATURE_OK * np.maximum(1.0, np.abs(x))
        x = x - step + (curvature + slope_error * np.abs(step) + _epsilon_pad(x))
        ok &= np.isfinite(x) & (x > 0.0)
    return np.nextafter(x, np.inf), ~ok


def _midpoint_far(eps: np.ndarray, mu: np.ndarray, exact: bool) -> tuple[np.ndarray, ...]:
    return midpoint_terms_far(eps, mu, exact)


def _direct_far(eps: np.ndarray, mu: np.ndarray, exact: bool) -> tuple[np.ndarray, ...]:
    log_d, t, d, far = direct_terms_far(eps, mu, exact)
    return log_d, t, t, d, far


def _direct_in_branch(mu: np.ndarray, t: np.ndarray, q: np.ndarray, exact: bool) -> np.ndarray:
    return direct_in_branch(mu, t)


def epsilon_midpoint(
    mu: np.ndarray, log_target: np.ndarray, x: np.ndarray, passes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Settle ε in the midpoint branch from ``x`` ≈ ε* (:func:`_epsilon_case`)."""
    return _epsilon_case(
        _midpoint_far,
        midpoint_in_branch,
        _mills.FAR_FROM_MIDPOINT_ERROR,
        mu,
        log_target,
        x,
        passes,
    )


def epsilon_direct(
    mu: np.ndarray, log_target: np.ndarray, x: np.ndarray, passes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Settle ε in the direct branch from ``x`` ≈ ε* (:func:`_epsilon_case`); its slope is
    exact (``R(s)`` is the kernel's own ``erfcx``), so only a rounding allowance of 1e-12."""
    return _epsilon_case(_direct_far, _direct_in_branch, 1e-12, mu, log_target, x, passes)
