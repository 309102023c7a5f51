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

import numpy as np
from scipy.special import erfcx

from . import _mills, _scalar, _solve

__all__ = [
    "FAST_MAX",
    "FAST_STEP",
    "direct",
    "direct_in_branch",
    "direct_terms",
    "midpoint",
    "midpoint_in_branch",
    "midpoint_terms",
]

_SQRT_HALF_PI, _INV_SQRT2, _HALF_LOG_2PI = (
    _mills._SQRT_HALF_PI,
    _mills._INV_SQRT2,
    _mills._HALF_LOG_2PI,
)
_HALLEY_STOP = 1e-2
#: The fast kernel's midpoint branch: μ < FAST_STEP·max(1, |t|) and m < FAST_MAX (there its
#: series through μ⁴ without the continued fraction is within 3e-10 of D); the direct
#: branch is μ ≥ FAST_STEP·max(1, |t|).
FAST_STEP = 0.05
FAST_MAX = 20.0


def _halley(g: np.ndarray, g1: np.ndarray, c: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """One Halley step ``x − (g/g′)/(1 − (g/g′) c/2)``, and whether the exact step may
    follow: its denominator above ½ and the step below 1e-2 (module doc)."""
    newton = g / g1
    denom = 1.0 - 0.5 * newton * c
    step = newton / denom
    return x - step, (denom > 0.5) & (np.abs(step) <= _HALLEY_STOP)


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
    """``(log δ, t, q, D)`` in the midpoint branch (:func:`midpoint_in_branch`).

    ``q = ε/μ`` is the midpoint ``m = t + μ/2``; ``D`` is :func:`._mills.mills_diff_midpoint`
    (exact), or its terms through ``μ⁴`` without the continued fraction (fast: within
    3e-10 of ``D``).  ``t = q − μ/2`` and ``log φ(t) = −t²/2 − ½ log 2π`` are formed in
    plain double precision, also for ``exact``: μ ≤ 0.05·max(1, |t|) here, so ``t`` is off
    by at most ~2.3e-16·|t| (two roundings) and ``t²/2`` by ~3.5e-16·t², under a third of
    the ``2e-15 |log δ|`` of :func:`.profile.log_delta_error`, since ``t²/2 < |log δ|``:
    ``D ≈ μ M1(m) ≤ 0.05·max(1, |t|)·M1(m) < 1`` (``M1 ≤ M1(−1) < 4.5``, and
    ``M1(s) < 1/s²`` for ``s > 0``), so ``log δ < −t²/2``.  Checked against mpmath within
    that bound in the tests.
    """
    q = eps / mu
    t = q - 0.5 * mu
    if exact:
        d = _mills.mills_diff_midpoint(q, mu)
    else:
        r0 = _SQRT_HALF_PI * erfcx(q * _INV_SQRT2)
        m1 = 1.0 - q * r0
        r2 = r0 - q * m1
        r3 = q * r2 - 2.0 * m1
        r5 = q * (q * r3 + 3.0 * r2) + 4.0 * r3
        h2 = mu * mu
        d = mu * (m1 - h2 * (r3 * (1.0 / 24.0) + h2 * (1.0 / 1920.0) * r5))
    return np.log(d) - (0.5 * t * t + _HALF_LOG_2PI), t, q, d


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
    if exact:
        t, log_phi = _exact_t(eps, mu)
    else:
        t = eps / mu - 0.5 * mu
        log_phi = -(0.5 * t * t + _HALF_LOG_2PI)
    a = t * _INV_SQRT2
    d = _SQRT_HALF_PI * (erfcx(a) - erfcx(a + mu * _INV_SQRT2))
    return np.log(d) + log_phi, t, d


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
