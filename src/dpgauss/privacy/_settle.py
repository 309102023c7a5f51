r"""The calibration's two common cases, settled in as few array passes as possible.

:func:`.calibration._settle` runs the general kernel (:func:`.calibration._log_delta_terms`,
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
yet below 1e-3, or whose Newton step still has a curvature term above the acceptance
threshold.  The caller sends those through the general path; a point settled here got
the general path's formulas and its safe step (up to the rounding of a few operations
done in another order).
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfcx

from . import _mills, _solve

__all__ = ["direct", "midpoint"]

_SQRT_HALF_PI = float(np.sqrt(np.pi / 2.0))
_INV_SQRT2 = float(1.0 / np.sqrt(2.0))
_HALF_LOG_2PI = float(0.5 * np.log(2.0 * np.pi))
_HALLEY_STOP = 1e-3
_FAST_STEP = 0.05  # as calibration._FAST_TAYLOR_STEP
_FAST_MAX = 20.0  # as calibration._FAST_TAYLOR_MAX


def _halley(g: np.ndarray, g1: np.ndarray, c: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """One Halley step ``x − (g/g′)/(1 − (g/g′) c/2)``, and whether it ends the iteration:
    its denominator above ½ and the step below 1e-3 (stricter than the general solver,
    which takes a Newton step where the denominator is small and compares the step with
    1e-3·max(1, |x|))."""
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
    err = 1e-13 + 2e-15 * np.abs(log_d)
    step = (g + 2.0 * err) / g1
    curvature = 2.0 * np.abs(c) * step * step
    again = curvature > _solve.CURVATURE_OK
    new = x - step - curvature - 1e-15 * (1.0 + np.abs(x))
    return new, again


def midpoint(eps: np.ndarray, log_target: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Settle points in the midpoint branch from ``x`` ≈ log μ* (module doc).

    With ``q = ε/μ``: ``t = q − μ/2``, the midpoint is ``m = q`` and the branch holds when
    ``μ < c·max(1, |t|)`` with ``c`` from :func:`._mills.midpoint_limit` (fast kernel:
    ``c = 0.05``, ``m < 20``, series through μ⁴ without the continued fraction: within
    3e-10 of ``D``).  ``log φ(t)`` is formed in double
    precision (``calibration._midpoint_terms`` says why that stays within the bound).
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        # fast kernel at x: series through μ⁴ without the continued fraction
        mu = np.exp(x)
        q = eps / mu
        t = q - 0.5 * mu
        scale = np.maximum(1.0, np.abs(t))
        ok = (mu < _FAST_STEP * scale) & (q < _FAST_MAX)
        r0 = _SQRT_HALF_PI * erfcx(q * _INV_SQRT2)
        m1 = 1.0 - q * r0
        r2 = r0 - q * m1
        r3 = q * r2 - 2.0 * m1
        r5 = q * (q * r3 + 3.0 * r2) + 4.0 * r3
        h2 = mu * mu
        d = mu * (m1 - h2 * (r3 * (1.0 / 24.0) + h2 * (1.0 / 1920.0) * r5))
        log_d = np.log(d) - (0.5 * t * t + _HALF_LOG_2PI)
        g1 = mu / d
        c = 1.0 + t * (q + 0.5 * mu) - g1
        x, done = _halley(log_d - log_target, g1, c, x)
        ok &= done
        # exact kernel at the new x
        mu = np.exp(x)
        q = eps / mu
        t = q - 0.5 * mu
        scale = np.maximum(1.0, np.abs(t))
        if np.max(q, initial=-np.inf) < _mills.TAYLOR_LIMITS[0]:
            ok &= mu < _mills.TAYLOR_STEPS[0] * scale
        else:
            ok &= mu < _mills.midpoint_limit(q) * scale
        d = _mills.mills_diff_midpoint(q, mu)
        log_d = np.log(d) - (0.5 * t * t + _HALF_LOG_2PI)
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
    ``|ε/μ|, μ, |t| ≥ 1e150``: the caller rejects those points (``ok``)."""
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


def direct(eps: np.ndarray, log_target: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, ...]:
    """Settle points in the direct branch from ``x`` ≈ log μ* (module doc).

    The branch holds when ``t ≥ −1`` and ``μ ≥ 0.05·max(1, |t|)`` (the profile kernel's
    condition for the direct difference, ``_mills.mills_diff``).  The exact kernel forms
    ``t`` and ``log φ(t)`` in double-double, as the profile's.
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        mu = np.exp(x)
        ok = mu < 1e100
        t = eps / mu - 0.5 * mu
        a = t * _INV_SQRT2
        b = a + mu * _INV_SQRT2
        ok &= (t >= -1.0) & (mu >= _FAST_STEP * np.maximum(1.0, np.abs(t)))
        d = _SQRT_HALF_PI * (erfcx(a) - erfcx(b))
        log_d = np.log(d) - (0.5 * t * t + _HALF_LOG_2PI)
        g1 = mu / d
        c = 1.0 + t * (t + mu) - g1
        x, done = _halley(log_d - log_target, g1, c, x)
        ok &= done
        mu = np.exp(x)
        t, log_phi = _exact_t(eps, mu)
        ok &= (mu < 1e100) & (t < 1e100)  # (then |ε/μ| < 1e150: no overflow in _exact_t)
        ok &= (t >= -1.0) & (mu >= _FAST_STEP * np.maximum(1.0, np.abs(t)))
        a = t * _INV_SQRT2
        d = _SQRT_HALF_PI * (erfcx(a) - erfcx(a + mu * _INV_SQRT2))
        log_d = np.log(d) + log_phi
        g1 = mu / d
        c = 1.0 + t * (t + mu) - g1
        x, again = _safe_newton(log_d - log_target, g1, c, log_d, x)
        ok &= ~again & np.isfinite(x)
    return x, ~ok
