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

import numpy as np
from scipy.special import ndtr

from .._validation import NONNEGATIVE, POSITIVE, UNIT_OPEN, finish, real_args
from . import _mills, _scalar, _solve
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


def _epsilon_args(mu: np.ndarray, delta: np.ndarray) -> np.ndarray:
    from scipy.special import ndtri

    shape = np.broadcast(mu, delta).shape
    mu_f, d_f = (np.broadcast_to(a, shape).ravel().astype(np.float64) for a in (mu, delta))
    mu_f = np.minimum(mu_f, _MU_MAX)
    return _epsilon_flat(mu_f, np.log(d_f), -ndtri(d_f)).reshape(shape)


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
