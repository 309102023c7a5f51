r"""The exact privacy profile of the Gaussian mechanism (Balle & Wang 2018, Theorem 8).

Adding ``N(0, σ²I)`` to a function of global L2 sensitivity Δ is (ε, δ)-DP if and only if

.. math::

    δ \ge δ_μ(ε) = Φ\Big(\frac{μ}{2} - \frac{ε}{μ}\Big)
                   - e^{ε}\,Φ\Big(-\frac{μ}{2} - \frac{ε}{μ}\Big), \qquad μ = Δ/σ.

The same curve is the (ε, δ) profile of μ-Gaussian differential privacy (Dong, Roth & Su
2019), which is why composition can be exact (``dpgauss.privacy.accounting``).

Evaluation without cancellation
-------------------------------
With ``t = ε/μ − μ/2`` the two arguments are ``−t`` and ``−(t + μ)``, and
``ε = μt + μ²/2`` gives the identity ``e^{ε} φ(t + μ) = φ(t)``.  Writing
``Φ(−x) = φ(x) R(x)`` with the Mills ratio ``R``:

* for ``t ≥ −1``:  ``δ = φ(t) · [R(t) − R(t + μ)]``, so
  ``log δ = log φ(t) + log D(t, μ)``; neither ``e^{ε}`` nor a tail probability is ever
  formed, so nothing overflows or underflows before the logarithm, and ``D`` is computed
  without cancellation (``_mills.mills_diff``);
* for ``t < −1`` (then μ ≥ 2 and δ ≥ 1 − 2Φ(−1)):
  ``δ = 1 − Φ(t) − φ(t) R(t + μ)``, a sum of positive terms well below 1.

Derivatives used by the solvers: ``∂δ/∂μ = φ(t)`` and ``∂δ/∂ε = −φ(t) R(t + μ)``.

Rounding
--------
The computed ``log δ`` is within ``log_delta_error(log δ, t)`` of the exact value (a bound
checked against a 60-digit mpmath reference in the tests, with a tenfold margin).  Every
public function moves its answer by that bound in the safe direction: δ up, ε up, σ up.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import erf, ndtr, ndtri

from .._validation import NONNEGATIVE, POSITIVE, UNIT_OPEN, finish, real_args
from . import _mills, _scalar, _settle, _solve
from ._rounding import TINY, delta_from_log_array, mu_up

__all__ = [
    "gaussian_delta",
    "gaussian_epsilon",
    "gaussian_log_delta",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_log_delta",
]

# μ beyond this is indistinguishable from μ = ∞ (δ = 1 in double precision); clipping
# keeps t² finite.
_MU_MAX = 1e100
_INV_SQRT2 = _mills._INV_SQRT2


#: Below ``1 − δ`` = 1e-290 the kernel's ``t < −1`` branch works with subnormal factors:
#: its error is then bounded absolutely, by this (one definition, in :mod:`._scalar`).
SUBNORMAL_TAIL_ERROR = _scalar.SUBNORMAL_TAIL_ERROR
_SUBNORMAL_TAIL = _scalar.SUBNORMAL_TAIL


def log_delta_error(log_d: np.ndarray, t: np.ndarray) -> np.ndarray:
    """A bound on |computed log δ − exact log δ| of the exact kernel.

    For ``t ≥ −1``, measured against a 90-digit mpmath reference over μ ∈ [1e-12, 160],
    ε ∈ [0, 3e3], the error stays below ``3e-14 + 1e-16 |log δ|`` (a few ulps of ``D``
    and of ``log δ`` itself); the bound is 3–20 times larger.  For ``t < −1`` the result
    is ``log1p(−tail)`` with ``tail = 1 − δ ≤ 0.32`` accurate to ``(1 + t²)`` ulps, so the
    error is proportional to ``1 − δ``: that keeps δ close to 1 exact in relative terms —
    down to ``tail`` ≈ 1e-290, below which the factors of ``tail`` (``φ(t)`` itself at
    ``t < −37.5``) are subnormal and lose their relative accuracy; there the bound is the
    absolute :data:`SUBNORMAL_TAIL_ERROR`, which rounds ``log δ`` up to 0 (δ = 1 − 2e-317
    is 1 in double precision anyway; μ = 82.79, ε = 273.8 came out 8 subnormal ulps low).
    """
    with np.errstate(over="ignore", invalid="ignore"):
        tail = -np.expm1(log_d)
        left = 1e-15 * (1.0 + t * t) * tail + 4e-16 * np.abs(log_d)
        left = np.where(tail < _SUBNORMAL_TAIL, left + SUBNORMAL_TAIL_ERROR, left)
        err = np.where(t < -1.0, left, _scalar.ERROR_ABS + _scalar.ERROR_REL * np.abs(log_d))
    # log δ = −inf (δ below every double) is exact as a bound: nothing to add.
    return np.where(np.isfinite(log_d), err, 0.0)


def log_delta_terms(
    mu: np.ndarray, eps: np.ndarray, exact: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kernel on flat float64 arrays: ``(log δ, t, log φ(t))``, μ > 0, ε ≥ 0.

    ``exact=True`` is accurate to :func:`log_delta_error`; ``exact=False`` skips the
    double-double ``t`` and the continued fraction (error up to ~1e-15·t² more), which
    is what a solver's iterations need before one exact evaluation at the end.
    """
    mu = np.minimum(mu, _MU_MAX)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        if exact:
            t, t_lo = _mills.profile_t(eps, mu)
            log_phi = _mills.log_phi(t, t_lo)
        else:
            t = eps / mu - 0.5 * mu
            log_phi = _mills.log_phi(t)
        left = t < -1.0
        if not left.any():
            return log_phi + np.log(_mills.mills_diff(t, mu, exact)), t, log_phi
        out = np.empty_like(t)
        right = ~left
        if right.any():
            out[right] = log_phi[right] + np.log(_mills.mills_diff(t[right], mu[right], exact))
        tl = t[left]
        far = np.exp(log_phi[left] + np.log(_mills.mills(tl + mu[left])))
        out[left] = np.log1p(-(ndtr(tl) + far))
    return out, t, log_phi


def log_mills_far(mu: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``log R(t + μ)``, so that ``∂δ/∂ε = −exp(log φ(t) + log R(t + μ))``."""
    with np.errstate(divide="ignore"):
        return np.log(_mills.mills(t + np.minimum(mu, _MU_MAX)))


def _profile_args(
    sigma: object, epsilon: object, sensitivity: object
) -> tuple[np.ndarray, np.ndarray, bool]:
    (sigma_a, eps_a, sens_a), scalar = real_args(
        sigma=(sigma, POSITIVE), epsilon=(epsilon, NONNEGATIVE), sensitivity=(sensitivity, POSITIVE)
    )
    return mu_up(sens_a, sigma_a), eps_a, scalar


def _safe_log_delta(mu: np.ndarray, eps: np.ndarray) -> np.ndarray:
    shape = np.broadcast(mu, eps).shape
    mu_f, eps_f = (np.broadcast_to(a, shape).ravel() for a in (mu, eps))
    log_d, t, _ = log_delta_terms(mu_f, eps_f)
    return np.minimum(log_d + log_delta_error(log_d, t), 0.0).reshape(shape)


def gdp_log_delta(mu: object, epsilon: object) -> float | np.ndarray:
    """``log δ_μ(ε)`` of μ-GDP, rounded up; see :func:`gdp_delta`."""
    args = _scalar.plain(mu, epsilon)
    if args is not None and (fast := _scalar.gdp_log_delta(*args)) is not None:
        return fast
    (mu_a, eps_a), scalar = real_args(mu=(mu, POSITIVE), epsilon=(epsilon, NONNEGATIVE))
    small = _scalar.elementwise(_scalar.gdp_log_delta, mu_a, eps_a)
    return finish(_safe_log_delta(mu_a, eps_a) if small is None else small, scalar)


def gdp_delta(mu: object, epsilon: object) -> float | np.ndarray:
    """Exact δ(ε) of μ-GDP: ``Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)``, never rounded down.

    μ ∈ (0, ∞), ε ∈ [0, ∞).  At ε = 0 this is ``2Φ(μ/2) − 1``, the total-variation distance.
    A δ below the smallest positive double is returned as that double, not as 0.
    """
    args = _scalar.plain(mu, epsilon)
    if args is not None and (fast := _scalar.gdp_delta(*args)) is not None:
        return fast
    (mu_a, eps_a), scalar = real_args(mu=(mu, POSITIVE), epsilon=(epsilon, NONNEGATIVE))
    small = _scalar.elementwise(_scalar.gdp_delta, mu_a, eps_a)
    if small is not None:
        return finish(small, scalar)
    return finish(delta_from_log_array(_safe_log_delta(mu_a, eps_a)), scalar)


def gaussian_log_delta(
    sigma: object, epsilon: object, sensitivity: object = 1.0
) -> float | np.ndarray:
    """Natural log of :func:`gaussian_delta`, useful when δ underflows (rounded up)."""
    args = _scalar.plain(sigma, epsilon, sensitivity)
    if args is not None and (fast := _scalar.gaussian_log_delta(*args)) is not None:
        return fast
    mu, eps, scalar = _profile_args(sigma, epsilon, sensitivity)
    small = _scalar.elementwise(_scalar.gdp_log_delta, mu, eps)
    return finish(_safe_log_delta(mu, eps) if small is None else small, scalar)


def gaussian_delta(sigma: object, epsilon: object, sensitivity: object = 1.0) -> float | np.ndarray:
    """Exact privacy profile δ(ε) of ``N(0, σ²)`` noise at L2 sensitivity Δ (Thm 8).

    ``δ(ε) = Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ)``: the release is (ε, δ)-DP exactly
    for δ ≥ this value.  σ ∈ (0, ∞), ε ∈ [0, ∞), Δ ∈ (0, ∞).  Never rounded down.

    >>> round(gaussian_delta(3.730631, 1.0), 8)
    1e-05
    """
    args = _scalar.plain(sigma, epsilon, sensitivity)
    if args is not None and (fast := _scalar.gaussian_delta(*args)) is not None:
        return fast
    mu, eps, scalar = _profile_args(sigma, epsilon, sensitivity)
    small = _scalar.elementwise(_scalar.gdp_delta, mu, eps)
    if small is not None:
        return finish(small, scalar)
    return finish(delta_from_log_array(_safe_log_delta(mu, eps)), scalar)


def _epsilon_flat(mu: np.ndarray, log_target: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Smallest ε ≥ 0 with exact log δ_μ(ε) + error ≤ log_target (flat arrays).

    Derivatives in ε, with ``s = t + μ``: ``g′ = −φ(t) R(s)/δ`` (from ∂δ/∂ε) and, since
    ``dt/dε = ds/dε = 1/μ`` and ``R′/R = s − 1/R``, ``g″/g′ = 1 − 1/(μ R(s)) − g′``.
    """
    eps = np.zeros_like(mu)
    log_d0, t0, _ = log_delta_terms(mu, eps)
    todo = log_d0 + log_delta_error(log_d0, t0) > log_target
    if not todo.any():
        return eps
    mu_s, lt = mu[todo], log_target[todo]

    def kernel(
        x: np.ndarray, idx: np.ndarray | None, exact: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        m = mu_s[idx]
        log_d, t, log_phi = log_delta_terms(m, x, exact)
        log_r = log_mills_far(m, t)
        g1 = -np.exp(log_phi + log_r - log_d)
        curvature = 1.0 - np.exp(-log_r) / m - g1
        err = log_delta_error(log_d, t) if exact else 0.0 * g1
        return log_d - lt[idx], g1, curvature, err

    # Φ(μ/2 − ε/μ) ≤ δ as soon as ε ≥ μ(μ/2 + q), q = −Φ⁻¹(δ): the bracket's upper end.
    hi = np.maximum(mu_s * (0.5 * mu_s + q[todo]), 0.0) * (1.0 + 1e-12) + 1e-300
    x = _solve.solve_safe(
        kernel, hi, pad=lambda x: 4e-16 * np.abs(x) + TINY, lo=np.zeros_like(hi), hi=hi * 2.0
    )
    eps[todo] = np.nextafter(x, np.inf)
    return eps


#: Arrays of at least this many points take the streamlined path (:func:`_epsilon_lean`).
LEAN_FROM = _settle.ARRAY_FROM
_BLOCK = 1 << 15
_LEAN_PASSES = 1
#: The streamlined path's domain: μ and δ far from the subnormal range (the zero screen's
#: ``erf`` keeps its relative accuracy there); the rest takes the general path.
_LEAN_MIN = 1e-250


def _epsilon_start(mu: np.ndarray, q: np.ndarray) -> np.ndarray:
    """A start for ε* in the direct branch (μ not small; usually within 1e-3 of ε*): the
    tail bound ``t = q`` (ε = μ(q + μ/2), where ``Φ(−t) = δ``) moved down by one step of
    the asymptotic model ``δ ≈ Φ(−t)·μ/(t + μ)`` (``R(s) ≈ 1/s``), whose log at ``t = q``
    is ``−log(1 + q/μ)`` below the target with slope about ``−q`` in ``t``; kept above
    1e-3 of the bound."""
    bound = mu * (q + 0.5 * mu)
    t = q - np.log1p(q / mu) / np.maximum(q, 1.0)
    return np.maximum(mu * (t + 0.5 * mu), 1e-3 * bound)


_START_STEP = 1e-3  # of the table of H′(m), m ∈ [0, 40]
_START_Y_STEP = 1e-2  # of the table of H⁻¹(y), y ∈ [0, 800]


@functools.cache
def _midpoint_start_table() -> tuple[np.ndarray, np.ndarray]:
    """``H⁻¹(y)`` on ``y ∈ [0, 800]`` and ``H′(m)`` on ``m ∈ [0, 40]``, both on uniform
    grids (a lookup is one gather, not a search), with ``H(m) = m²/2 − log M1(m)``, for
    :func:`_epsilon_start_midpoint` (built once, in a few milliseconds)."""
    m = np.arange(0.0, 40.0 + _START_STEP / 2, _START_STEP)
    r, m1 = _mills.mills_and_m1(m)
    h = 0.5 * m * m - np.log(m1)
    # M1′ = m − (1 + m²) R, from R′ = mR − 1.
    slope = m - (m - (1.0 + m * m) * r) / m1
    inverse = np.interp(np.arange(0.0, 800.0 + _START_Y_STEP / 2, _START_Y_STEP), h, m)
    return inverse, slope


def _uniform_lookup(table: np.ndarray, x: np.ndarray, step: float) -> np.ndarray:
    """Linear interpolation in ``table`` (values at 0, step, 2 step, …), clipped to it."""
    pos = np.clip(x * (1.0 / step), 0.0, table.size - 1.000001)
    i = pos.astype(np.intp)
    lo = table.take(i)
    return lo + (pos - i) * (table.take(i + 1) - lo)


def _epsilon_start_midpoint(mu: np.ndarray, log_delta: np.ndarray) -> np.ndarray:
    """A start for ε* in the midpoint branch (μ small; usually within 1e-5 of ε*).

    There ``D ≈ μ M1(m)`` at the midpoint ``m = ε/μ`` and ``t = m − μ/2``, so
    ``log δ = log φ(t) + log D`` reads ``H(m) − mμ/2 + μ²/8 = log μ − log δ − ½ log 2π``
    with ``H(m) = m²/2 − log M1(m)`` increasing: ``m₀ = H⁻¹(right-hand side)`` from a
    table, then one Newton step for the μ terms.  Only the iteration count depends on it.
    """
    inverse, slope = _midpoint_start_table()
    y = np.log(mu) - log_delta - _mills._HALF_LOG_2PI
    m0 = _uniform_lookup(inverse, y, _START_Y_STEP)
    half = 0.5 * mu
    m1 = m0 + (m0 - 0.25 * mu) * half / (_uniform_lookup(slope, m0, _START_STEP) - half)
    return mu * m1


def _epsilon_lean(mu: np.ndarray, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_epsilon_flat` in as few array passes as possible (flat arrays, one block):
    ε, and the mask of the points left to the general path (their ε is not set).

    1. *Zero screen.*  ``δ_μ(0) = erf(μ/(2√2))`` in double precision (relative error a few
       ulps) decides ε = 0 where its log is below ``log δ`` by more than ``1e-9(1 + |log δ|)``
       — far more than the exact kernel's error bound, so the general path's test (the
       exact kernel plus its bound at ε = 0) gives 0 there too — and ε > 0 where it is
       above by as much; the points in between take the general path.  ``erf`` is needed
       only where ``μ < 4δ`` or ``δ > ½``: elsewhere ``δ_μ(0) > δ`` by at least a third
       (``erf(x) ≥ (2/√π)(x − x³/3)`` gives ``δ_μ(0) ≥ 0.33 μ`` for ``μ ≤ 2``, and
       ``δ_μ(0) ≥ erf(1/√2) > 0.68`` beyond).
    2. *Start and branch*: the midpoint case of :mod:`._settle` (the calibration's two
       cases) where :func:`_epsilon_start_midpoint`'s start is in its branch, else the
       direct case where :func:`_epsilon_start`'s is in its own.
    3. :func:`._settle.epsilon_midpoint` / :func:`._settle.epsilon_direct`: one Halley
       step on the fast kernel and the exact, safe Newton step; every point they do not
       settle (about 1 % in the benchmark) is left to the general path.
    """
    log_target = np.log(delta)
    out = np.zeros_like(mu)
    normal = (mu >= _LEAN_MIN) & (delta >= _LEAN_MIN)
    positive = normal.copy()
    near = np.flatnonzero((mu < 4.0 * delta) | (delta > 0.5))
    general = np.zeros(mu.shape, dtype=bool)
    if near.size:
        lt = log_target[near]
        with np.errstate(divide="ignore", under="ignore"):
            log_d0 = np.log(erf(mu[near] * (0.5 * _INV_SQRT2)))
        margin = 1e-9 * (1.0 + np.abs(lt))
        above, below = log_d0 > lt + margin, log_d0 < lt - margin
        positive[near] &= above
        general[near] = ~(above | below)
    general |= ~normal
    idx = np.flatnonzero(positive)
    m, lt = mu[idx], log_target[idx]
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        x0 = _epsilon_start_midpoint(m, lt)
        q0 = x0 / m
        t0 = q0 - 0.5 * m
        mid = _settle.midpoint_in_branch(m, t0, q0, True)
        mid &= _settle.midpoint_in_branch(m, t0, q0, False) & (x0 > 0.0)
        other = np.flatnonzero(~mid)
        direct = np.zeros(m.shape, dtype=bool)
        if other.size:
            mo = m[other]
            x0[other] = _epsilon_start(mo, -ndtri(delta[idx[other]]))
            direct[other] = _settle.direct_in_branch(mo, x0[other] / mo - 0.5 * mo)
    left = ~(mid | direct)
    for case, where in ((_settle.epsilon_midpoint, mid), (_settle.epsilon_direct, direct)):
        sub = np.flatnonzero(where)
        if sub.size:
            out[idx[sub]], left[sub] = case(m[sub], lt[sub], x0[sub], _LEAN_PASSES)
    general[idx[left]] = True
    return out, general


#: From this μ on, ε is the tail bound ``μ(μ/2 + q)`` (q = −Φ⁻¹(δ)) rounded up: it is
#: safe for every μ (``Φ(μ/2 − ε/μ) = δ`` there, and δ_μ(ε) is that minus a positive
#: term), and within ``~q/μ`` (relative) of the exact ε, far inside 1e-9 here; the
#: solver's bracket breaks down near μ = 1e21, and the kernels clip μ at ``_MU_MAX``.
BOUND_FROM = 1e8


def epsilon_bound(mu: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """The safe ε of :data:`BOUND_FROM`: ``μ(μ/2 + q)(1 + 1e-12)``, ``inf`` past overflow."""
    with np.errstate(over="ignore"):
        return np.maximum(mu * (0.5 * mu - ndtri(delta)), 0.0) * (1.0 + 1e-12)


def _epsilon_args(mu: np.ndarray, delta: np.ndarray) -> np.ndarray:
    shape = np.broadcast(mu, delta).shape
    mu_f, d_f = (np.broadcast_to(a, shape).ravel().astype(np.float64) for a in (mu, delta))
    big = np.flatnonzero(mu_f >= BOUND_FROM)
    if big.size:
        bound = epsilon_bound(mu_f[big], d_f[big])
        mu_f[big] = 1.0  # solved below like any point, then replaced by the bound
        out = _epsilon_args(mu_f, d_f).ravel()
        out[big] = bound
        return out.reshape(shape)
    if mu_f.size < LEAN_FROM:
        return _epsilon_flat(mu_f, np.log(d_f), -ndtri(d_f)).reshape(shape)
    out = np.empty(mu_f.size)
    general = np.empty(mu_f.size, dtype=bool)
    # Blocks small enough for the temporaries to stay in cache; the points left to the
    # general path are solved together at the end (its set-up is paid once per call).
    for start in range(0, mu_f.size, _BLOCK):
        block = slice(start, start + _BLOCK)
        out[block], general[block] = _epsilon_lean(mu_f[block], d_f[block])
    rest = np.flatnonzero(general)
    if rest.size:
        d_rest = d_f[rest]
        out[rest] = _epsilon_flat(mu_f[rest], np.log(d_rest), -ndtri(d_rest))
    return out.reshape(shape)


def gdp_epsilon(mu: object, delta: object) -> float | np.ndarray:
    """Smallest ε ≥ 0 such that μ-GDP implies (ε, δ)-DP; never rounded down."""
    args = _scalar.plain(mu, delta)
    if args is not None and (fast := _scalar.gdp_epsilon(*args)) is not None:
        return fast
    (mu_a, d_a), scalar = real_args(mu=(mu, POSITIVE), delta=(delta, UNIT_OPEN))
    small = _scalar.elementwise(_scalar.gdp_epsilon, mu_a, d_a)
    return finish(_epsilon_args(mu_a, d_a) if small is None else small, scalar)


def gaussian_epsilon(sigma: object, delta: object, sensitivity: object = 1.0) -> float | np.ndarray:
    """Smallest ε ≥ 0 for which ``N(0, σ²)`` noise at sensitivity Δ is (ε, δ)-DP.

    Inverts the exact profile of Theorem 8 in ε (it is decreasing in ε).  Returns 0.0 when
    the release is already (0, δ)-DP, i.e. ``2Φ(Δ/(2σ)) − 1 ≤ δ``.  Never rounded down.
    σ ∈ (0, ∞), δ ∈ (0, 1), Δ ∈ (0, ∞).
    """
    args = _scalar.plain(sigma, delta, sensitivity)
    if args is not None and (fast := _scalar.gaussian_epsilon(*args)) is not None:
        return fast
    (sigma_a, d_a, sens_a), scalar = real_args(
        sigma=(sigma, POSITIVE), delta=(delta, UNIT_OPEN), sensitivity=(sensitivity, POSITIVE)
    )
    mu_a = mu_up(sens_a, sigma_a)
    small = _scalar.elementwise(_scalar.gdp_epsilon, mu_a, d_a)
    return finish(_epsilon_args(mu_a, d_a) if small is None else small, scalar)
