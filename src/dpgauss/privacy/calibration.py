r"""Analytic calibration of the Gaussian mechanism (Balle & Wang 2018, Algorithm 1 / Thm 8).

The analytic mechanism uses the smallest σ for which the exact profile of
``profile.py`` satisfies ``δ_{Δ/σ}(ε) ≤ δ``.  Since ``δ_μ(ε)`` increases with μ = Δ/σ, this
is ``σ = Δ/μ*`` with μ* the root of ``log δ_μ(ε) = log δ``.

Solver
------
Newton's method on ``x = log μ`` with the exact derivative
``∂ log δ / ∂ log μ = μ φ(t)/δ`` (``t = ε/μ − μ/2``), safeguarded by a bracket and bisection.
It starts from two closed-form lower bounds of μ*:

* ``δ_μ(ε) ≤ δ_μ(0) = 2Φ(μ/2) − 1`` gives ``μ* ≥ 2√2 · erfinv(δ)``;
* ``δ_μ(ε) ≤ Φ(μ/2 − ε/μ)`` gives ``μ* ≥ −q + √(q² + 2ε)`` with ``q = −Φ⁻¹(δ)``;

moved up by one step of an asymptotic model (``_log_mu_start``), typically to within 1 %
of μ*, so that two Halley steps on the fast kernel and one exact Newton step finish
(``_solve.solve_safe``).  That last step lands below the root by the bound on the
evaluation error of ``log δ`` (``profile.log_delta_error``) divided by the slope, and
``σ = Δ/μ`` is rounded up: the profile at the returned σ never exceeds the requested δ,
and σ exceeds the exact optimum by about 1e-13 relative.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erfinv, ndtri

from .._validation import NONNEGATIVE, POSITIVE, UNIT_OPEN, finish, real_args
from . import _scalar, _solve
from .profile import log_delta_error, log_delta_terms

__all__ = ["analytic_gaussian_sigma", "gdp_mu"]

_BLOCK = 1 << 15


def _log_mu_start(eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """A starting point for ``log μ*``, usually within 1 % of it.

    Two exact lower bounds (module docstring): ``μ_tv = 2√2 erfinv(δ)`` (linear,
    ``√(2π) δ``, for subnormal δ where erfinv underflows) and the tail bound ``μ_a``
    solving ``Φ(μ/2 − ε/μ) = δ``, i.e. ``t = ε/μ − μ/2 = q``.  When the tail bound is the
    larger one and ``q ≥ 1``, one Newton step on the asymptotic model
    ``δ ≈ φ(t) μ/(t (t + μ))`` (from ``M1(s) ≈ 1/s²``) moves it up: at ``μ_a`` the model
    gives ``log δ − log δ_t ≈ −log(1 + q/μ_a)`` with slope ``≈ q (q + μ_a)``.
    """
    q = -ndtri(delta)
    root = np.sqrt(q * q + 2.0 * eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        # −q + √(q² + 2ε) without cancellation when q > 0.
        mu_tail = np.where(q > 0, 2.0 * eps / (q + root), root - q)
        mu_tv = np.where(
            delta < 1e-300, np.sqrt(2.0 * np.pi) * delta, 2.0 * np.sqrt(2.0) * erfinv(delta)
        )
        tail_wins = (mu_tail > mu_tv) & (q >= 1.0)
        step = np.log1p(q / mu_tail) / (q * (q + mu_tail))
        return np.where(
            tail_wins,
            np.log(mu_tail) + np.minimum(step, 0.5),
            np.log(np.maximum(mu_tail, mu_tv)),
        )


def _derivatives(
    log_d: np.ndarray, t: np.ndarray, log_phi: np.ndarray, x: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``g′`` and ``g″/g′`` of ``g = log δ`` in ``x = log μ``.

    ``g′ = μ φ(t)/δ`` (from ∂δ/∂μ = φ(t)), formed in log space so that neither factor
    overflows, and, with ``dt/dx = −(t + μ)``, ``g″/g′ = 1 + t (t + μ) − g′``.
    """
    g1 = np.exp(x + log_phi - log_d)
    return g1, 1.0 + t * (t + np.exp(x)) - g1


def _solve_mu(eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Largest μ with exact log δ_μ(ε) + error ≤ log δ, on flat arrays."""
    log_target = np.log(delta)

    def kernel(x: np.ndarray, idx: np.ndarray, exact: bool) -> tuple[np.ndarray, ...]:
        mu = np.exp(x)
        log_d, t, log_phi = log_delta_terms(mu, eps[idx], exact)
        g1, curvature = _derivatives(log_d, t, log_phi, x)
        err = log_delta_error(log_d, t) if exact else 0.0 * g1
        return log_d - log_target[idx], g1, curvature, err

    x = _solve.solve_safe(
        kernel, _log_mu_start(eps, delta), pad=lambda x: 1e-15 * (1.0 + np.abs(x))
    )
    return np.exp(x)


def _mu_flat(eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """μ* on flat arrays, with the subnormal corner handled in closed form.

    For tiny δ with tiny ε, μ* is at or below the subnormal range, where μ has too few
    bits for a solver.  There ``δ_μ(ε) ≤ δ_μ(0) = erf(μ/(2√2)) ≈ μ/√(2π)``, so the (0, δ)
    solution ``√(2π) δ``, one subnormal step down, is safe (and optimal up to the spacing
    of subnormals when ε = 0).
    """
    closed = (delta < 1e-300) & (eps <= 1e-280)
    if not closed.any():
        return _solve_mu(eps, delta)
    mu = np.nextafter(np.sqrt(2.0 * np.pi) * delta, 0.0)
    solve = np.flatnonzero(~closed)
    if solve.size:
        mu[solve] = _solve_mu(eps[solve], delta[solve])
    return mu


def _calibrate(eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
    shape = np.broadcast(eps, delta).shape
    eps_f, d_f = (np.broadcast_to(a, shape).ravel() for a in (eps, delta))
    out = np.empty(eps_f.size)
    # Blocks small enough for the temporaries to stay in cache: ~20 % faster at 10^6.
    for start in range(0, eps_f.size, _BLOCK):
        block = slice(start, start + _BLOCK)
        out[block] = _mu_flat(eps_f[block], d_f[block])
    return out.reshape(shape)


def gdp_mu(epsilon: object, delta: object) -> float | np.ndarray:
    """Largest μ such that μ-GDP implies (ε, δ)-DP, rounded down (the safe side).

    ε ∈ [0, ∞), δ ∈ (0, 1).  ``analytic_gaussian_sigma(ε, δ, Δ) = Δ / gdp_mu(ε, δ)``
    (rounded up).
    """
    args = _scalar.plain(epsilon, delta)
    if args is not None and (fast := _scalar.gdp_mu(*args)) is not None:
        return fast
    (eps_a, d_a), scalar = real_args(epsilon=(epsilon, NONNEGATIVE), delta=(delta, UNIT_OPEN))
    small = _scalar.elementwise(_scalar.gdp_mu, eps_a, d_a)
    return finish(_calibrate(eps_a, d_a) if small is None else small, scalar)


def analytic_gaussian_sigma(
    epsilon: object, delta: object, sensitivity: object = 1.0
) -> float | np.ndarray:
    r"""Smallest σ for which ``f(x) + N(0, σ²I)`` is (ε, δ)-DP (Balle & Wang 2018, Thm 8).

    Solves ``Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) = δ`` for σ, exactly up to rounding,
    which is always toward more noise: the exact profile at the returned σ never exceeds
    δ.  Valid for every ε ≥ 0 (ε = 0 is the (0, δ) case, where the solution is
    ``σ = Δ / (2√2 erfinv(δ))``), unlike the classical ``Δ√(2 ln(1.25/δ))/ε``.

    Parameters
    ----------
    epsilon : array_like, ε ∈ [0, ∞)
    delta : array_like, δ ∈ (0, 1)
    sensitivity : array_like, global L2 sensitivity Δ ∈ (0, ∞)

    Returns
    -------
    float or ndarray
        σ, broadcast over the inputs; a Python float for scalar inputs.

    Examples
    --------
    >>> round(analytic_gaussian_sigma(1.0, 1e-5), 6)
    3.730632

    Python numbers take the scalar path of :mod:`dpgauss.privacy._scalar` (the same
    kernels on floats, a few microseconds); arrays the vectorised one.
    """
    args = _scalar.plain(epsilon, delta, sensitivity)
    if args is not None and (fast := _scalar.analytic_gaussian_sigma(*args)) is not None:
        return fast
    (eps_a, d_a, sens_a), scalar = real_args(
        epsilon=(epsilon, NONNEGATIVE),
        delta=(delta, UNIT_OPEN),
        sensitivity=(sensitivity, POSITIVE),
    )
    small = _scalar.elementwise(_scalar.analytic_gaussian_sigma, eps_a, d_a, sens_a)
    if small is not None:
        return finish(small, scalar)
    mu = _calibrate(eps_a, d_a)
    with np.errstate(over="ignore", divide="ignore"):
        sigma = np.nextafter(sens_a / mu, np.inf)
    if not np.isfinite(sigma).all():
        bad = np.argwhere(~np.isfinite(sigma))[0] if sigma.ndim else ()
        where = f" at index {tuple(int(i) for i in bad)}" if sigma.ndim else ""
        raise ValueError(
            f"delta={float(d_a[tuple(bad)])!r} with sensitivity={float(sens_a[tuple(bad)])!r}"
            f"{where} needs a sigma above the largest double (1.8e308)"
        )
    return finish(sigma, scalar)
