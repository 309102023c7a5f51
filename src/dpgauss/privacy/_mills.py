"""Mills-ratio kernels: the Gaussian tail functions the privacy profile is built from.

Notation (all on float64 arrays, no validation here):

* ``R(t) = Φ(−t)/φ(t) = √(π/2)·erfcx(t/√2)``, the Mills ratio, finite for t ≥ −37.
* ``M1(s) = 1 − s·R(s) = −R′(s) > 0``, the first moment ``∫₀^∞ u e^{−su−u²/2} du``.
* ``D(t, μ) = R(t) − R(t + μ) = ∫_t^{t+μ} M1(s) ds > 0`` for μ > 0 (computed for t ≥ −1).

``D`` is what the exact Gaussian privacy profile reduces to (see ``profile.py``), and it is
where the naive formula loses its digits: ``R(t)`` and ``R(t+μ)`` agree to about
``log10(max(1, |t|)/μ)`` digits.  We therefore compute ``D`` directly when μ is not small
against ``max(1, |t|)`` (under two digits lost) and otherwise integrate ``M1`` over
``[t, t+μ]`` with Gauss–Legendre, where ``M1`` is smooth on the scale ``max(1, |t|)`` and
four nodes are exact to double precision.  ``M1`` itself cancels for large ``s``
(``s·R(s) → 1``), so there we use Laplace's continued fraction
``1/R(s) = s + 1/(s + 2/(s + 3/(s + …)))``, giving ``M1 = R(s)·K(s)`` with
``K(s) = 1/R(s) − s = 1/(s + 2/(s + 3/(s + …)))``; 24 terms reach full double precision for
``s ≥ 6`` (checked against mpmath in the tests).
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfcx

__all__ = [
    "log_phi",
    "midpoint_limit",
    "midpoint_series",
    "mills",
    "mills_and_m1",
    "mills_diff",
    "mills_diff_midpoint",
    "mills_far_from_midpoint",
    "mills_m1",
    "profile_t",
]

_SQRT_HALF_PI = float(np.sqrt(np.pi / 2.0))
_INV_SQRT2 = float(1.0 / np.sqrt(2.0))
_HALF_LOG_2PI = float(0.5 * np.log(2.0 * np.pi))

# Below this argument 1 − s·R(s) loses at most log10(s²) digits (2e-14 relative at s = 6);
# above it Laplace's continued fraction with _CF_TERMS terms is exact to a few ulps.
_CF_FROM = 6.0
_CF_TERMS = 24

# D(t, μ) is computed by quadrature when μ < _SMALL_STEP · max(1, |t|): there the direct
# difference would cancel more than a factor 1/(0.05·0.4) = 50, i.e. lose 2e-14.  Over
# such an interval the 4-node Gauss–Legendre rule is exact to 1e-14 (measured against
# mpmath); the 2-node rule of the fast path to 2e-7, enough inside a solver's iterations.
_SMALL_STEP = 0.05
_GL_EXACT = np.polynomial.legendre.leggauss(4)
_GL_FAST = np.polynomial.legendre.leggauss(2)

# The midpoint series of D (mills_diff_midpoint, terms up to μ⁸) is used where μ/max(1, |t|)
# is below TAYLOR_STEPS[i] and the midpoint m below TAYLOR_LIMITS[i], for some i.  The
# first omitted term is about (μ/m)¹⁰/1024 of D, below 1e-16 for μ/m < 0.05.  The
# recurrence for the j-th derivative of M1 cancels about m^(2j+2)/(j+1)! (relative), and
# the term weighs (μ/2m)^j/(j+1): at each (step, limit) pair below, the rounding of the
# μ⁶ and μ⁸ terms stays below 3e-15 of D (checked against mpmath in the tests).
TAYLOR_STEPS = (0.05, 0.025, 5e-3)
TAYLOR_LIMITS = (12.0, 20.0, 30.0)

_SPLIT = 134217729.0  # 2**27 + 1, Dekker's splitting constant for float64
_SPLIT_MAX = 1e150  # beyond this the split overflows; the corrections are irrelevant there


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``a·b = p + e`` exactly (Dekker), for |a|, |b| < 1e150."""
    p = a * b
    ca = _SPLIT * a
    a_hi = ca - (ca - a)
    a_lo = a - a_hi
    cb = _SPLIT * b
    b_hi = cb - (cb - b)
    b_lo = b - b_hi
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


def profile_t(eps: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``t = ε/μ − μ/2`` as an unevaluated sum ``t_hi + t_lo`` (double-double).

    The profile's ``log φ(t) = −t²/2 − …`` would otherwise inherit ``|t|·ulp(ε/μ)`` of
    absolute error, about 1e-13 at δ = 1e-300.
    """
    q = eps / mu
    ok = (np.abs(q) < _SPLIT_MAX) & (mu < _SPLIT_MAX)
    qs, ms = np.where(ok, q, 0.0), np.where(ok, mu, 1.0)
    p, p_err = _two_prod(qs, ms)
    q_lo = ((np.where(ok, eps, 0.0) - p) - p_err) / ms  # ε − qμ is exact by Sterbenz
    half = 0.5 * mu
    t_hi = q - half
    z = t_hi - q
    t_err = (q - (t_hi - z)) + (-half - z)  # Knuth's two-sum error of q + (−μ/2)
    return t_hi, np.where(ok, t_err + q_lo, 0.0)


def log_phi(t_hi: np.ndarray, t_lo: np.ndarray | None = None) -> np.ndarray:
    """Log of the standard normal density ``−t²/2 − ½ log 2π`` at ``t = t_hi + t_lo``.

    With ``t_lo`` given, ``t_hi²`` is formed exactly (Dekker) so the result is accurate to
    an ulp of itself; without it, to ``|t|·ulp(t)``.
    """
    if t_lo is None:
        return -0.5 * t_hi * t_hi - _HALF_LOG_2PI
    ok = np.abs(t_hi) < _SPLIT_MAX
    ts = np.where(ok, t_hi, 0.0)
    sq, sq_err = _two_prod(ts, ts)
    small = 0.5 * sq_err + ts * t_lo
    return np.where(ok, -0.5 * sq - (small + _HALF_LOG_2PI), -0.5 * t_hi * t_hi)


def mills(t: np.ndarray) -> np.ndarray:
    """Mills ratio ``R(t) = Φ(−t)/φ(t)``; relative accuracy that of ``erfcx``."""
    return _SQRT_HALF_PI * erfcx(t * _INV_SQRT2)


def mills_m1(s: np.ndarray, exact: bool = True) -> np.ndarray:
    """``M1(s) = 1 − s·R(s)``, for every real ``s`` with ``R`` finite.

    With ``exact=False`` the direct formula is used everywhere: relative error below
    ``6e-16·s²`` (fine inside a solver's iterations, not for a final answer).
    """
    s = np.asarray(s, dtype=np.float64)
    if not exact:
        return 1.0 - s * mills(s)
    out = np.empty_like(s)
    near = s < _CF_FROM
    if near.any():
        sn = s[near]
        out[near] = 1.0 - sn * mills(sn)
    far = ~near
    if far.any():
        sf = s[far]
        cf = sf.copy()
        for k in range(_CF_TERMS, 1, -1):
            cf = sf + k / cf
        out[far] = mills(sf) / cf
    return out


def mills_and_m1(s: np.ndarray, exact: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """``(R(s), M1(s))`` with one ``erfcx``: ``M1 = 1 − sR`` below 6, ``R·K(s)`` (Laplace's
    continued fraction, as in :func:`mills_m1`) from 6 on; ``exact=False``: ``1 − sR``
    everywhere (``6e-16·s²`` relative)."""
    r = mills(s)
    m1 = 1.0 - s * r
    far = s >= _CF_FROM
    if exact and far.any():
        sf = s[far]
        cf = sf.copy()
        for k in range(_CF_TERMS, 1, -1):
            cf = sf + k / cf
        m1[far] = r[far] / cf
    return r, m1


def midpoint_limit(m: np.ndarray) -> np.ndarray:
    """The largest ``μ/max(1, |t|)`` at which :func:`mills_diff_midpoint` is exact for the
    midpoint ``m`` (:data:`TAYLOR_STEPS`, :data:`TAYLOR_LIMITS`); 0 beyond the last limit."""
    (s0, s1, s2), (l0, l1, l2) = TAYLOR_STEPS, TAYLOR_LIMITS
    return np.where(m < l0, s0, np.where(m < l1, s1, np.where(m < l2, s2, 0.0)))


def mills_diff_midpoint(m: np.ndarray, mu: np.ndarray, exact: bool = True) -> np.ndarray:
    r"""``D(t, μ)`` from the Taylor series of ``R`` about the midpoint ``m = t + μ/2``.

    With ``r_k = R^{(k)}(m)``, the odd terms of ``R(m ∓ μ/2)`` give

    .. math::

        D = R(m - μ/2) - R(m + μ/2) = -2 \sum_{k \text{ odd}} r_k \frac{(μ/2)^k}{k!}
          = -μ \Big[r_1 + \frac{μ^2}{24} r_3 + \frac{μ^4}{1920} r_5
                 + \frac{μ^6}{322560} r_7 + …\Big],

    and ``R′ = sR − 1`` gives ``r_1 = −M1`` and ``r_{k+1} = m r_k + k r_{k−1}``.
    Truncated after ``r_9``: the first omitted term is about ``(μ/m)¹⁰/1024`` of ``D``
    (below 1e-16 where it is used, see :data:`TAYLOR_STEPS`).  One ``erfcx`` per point
    instead of the quadrature's four; checked against mpmath in the tests.
    ``exact=False`` skips the continued fraction (:func:`mills_and_m1`).
    """
    return midpoint_series(m, mu, exact)[0]


def midpoint_series(m: np.ndarray, mu: np.ndarray, exact: bool = True) -> tuple[np.ndarray, ...]:
    """``(D, r_0, r_1, r_2, r_3, r_4)``: :func:`mills_diff_midpoint` and the first derivatives
    ``r_k = R^{(k)}(m)`` of the Mills ratio at the midpoint that it computes on the way
    (:func:`mills_far_from_midpoint` needs them)."""
    r0, m1 = mills_and_m1(m, exact)
    r1 = -m1
    r2 = m * r1 + r0
    r3 = m * r2 + 2.0 * r1
    r4 = m * r3 + 3.0 * r2
    r5 = m * r4 + 4.0 * r3
    r6 = m * r5 + 5.0 * r4
    r7 = m * r6 + 6.0 * r5
    r9 = m * (m * r7 + 7.0 * r6) + 8.0 * r7
    h2 = mu * mu
    tail = r7 * (1.0 / 322560.0) + h2 * (1.0 / 92897280.0) * r9
    tail = r3 * (1.0 / 24.0) + h2 * (r5 * (1.0 / 1920.0) + h2 * tail)
    return mu * (m1 - h2 * tail), r0, r1, r2, r3, r4


#: A bound on the relative error of :func:`mills_far_from_midpoint` wherever the midpoint
#: series is used (μ < 0.05·max(1, |t|), m < 30): its first omitted term is about
#: ``(μ/2)⁵ |r_5|/(120 R)``, below 1e-8 relative there (checked against mpmath in the
#: tests with a hundredfold margin).
FAR_FROM_MIDPOINT_ERROR = 1e-6


def mills_far_from_midpoint(mu: np.ndarray, r: tuple[np.ndarray, ...]) -> np.ndarray:
    """``R(m + μ/2)`` from ``r = (r_0, …, r_4)`` at the midpoint ``m`` (Taylor, through
    ``r_4``): the far Mills ratio ``R(t + μ)`` of the midpoint branch without another
    ``erfcx``, within :data:`FAR_FROM_MIDPOINT_ERROR` relative (a slope, not a value that
    is charged: the ε solver widens its safe step by that much of the step)."""
    r0, r1, r2, r3, r4 = r
    h = 0.5 * mu
    return r0 + h * (r1 + h * (0.5 * r2 + h * ((1.0 / 6.0) * r3 + h * (1.0 / 24.0) * r4)))


def mills_diff(t: np.ndarray, mu: np.ndarray, exact: bool = True) -> np.ndarray:
    """``D(t, μ) = R(t) − R(t+μ)`` for μ > 0 and t ≥ −1, to a few ulps relative.

    ``t ≥ −1`` is every caller's range (below it the profile needs ``R(t+μ)`` alone), and
    the quadrature's premise: for ``t < −1``, ``M1 ≈ −sR(s)`` varies on the scale ``1/|t|``,
    not ``max(1, |t|)``, and four nodes over ``μ < 0.05·|t|`` are far from exact (4 % at
    ``t = −30, μ = 0.5``, measured against mpmath in ``tests/privacy/test_mills.py``).
    ``t`` and ``μ`` broadcast.  ``exact=False`` trades accuracy (~2e-7 relative) for speed:
    two quadrature nodes and no continued fraction, so two ``erfcx`` calls per point on
    either branch.
    """
    t, mu = np.broadcast_arrays(np.asarray(t, dtype=np.float64), np.asarray(mu, dtype=np.float64))
    small = mu < _SMALL_STEP * np.maximum(1.0, np.abs(t))
    if not small.any():
        return mills(t) - mills(t + mu)
    out = np.empty(np.broadcast(t, mu).shape)
    big = ~small
    if big.any():
        tb, mb = t[big], mu[big]
        out[big] = mills(tb) - mills(tb + mb)
    ts, ms = t[small], mu[small]
    half = 0.5 * ms
    mid = ts + half
    acc = np.zeros_like(ts)
    nodes, weights = _GL_EXACT if exact else _GL_FAST
    for node, weight in zip(nodes, weights, strict=True):
        acc += weight * mills_m1(mid + node * half, exact)
    out[small] = acc * half
    return out
