"""Closed-form bounds from the paper: the classical mechanism, Laplace, and Theorems 2 and 4.

These are the baselines the analytic mechanism is compared with (and the curves of the
paper's Figure 1).  Each is a one-line formula; what this module adds is validation, the
range in which each formula is valid, and rounding toward the conservative side.
"""

from __future__ import annotations

import math

import numpy as np

from .._validation import (
    NONNEGATIVE,
    POSITIVE,
    UNIT_OPEN,
    Interval,
    check_interval,
    finish,
    real_args,
)
from . import _mills
from ._rounding import down, up

__all__ = [
    "classical_gaussian_sigma",
    "delta0",
    "laplace_scale",
    "theorem2_sigma",
    "theorem4_sigma_lower_bound",
]

_CLASSICAL_EPSILON = Interval(0.0, 1.0)


def classical_gaussian_sigma(
    epsilon: object, delta: object, sensitivity: object = 1.0
) -> float | np.ndarray:
    """The classical Gaussian mechanism's ``σ = Δ √(2 ln(1.25/δ)) / ε`` (paper Theorem 1).

    Only valid for ε ∈ (0, 1): beyond it the bound does not give (ε, δ)-DP, and the paper
    shows (Theorem 4) that no σ of order 1/ε can.  δ ∈ (0, 1), Δ ∈ (0, ∞).
    """
    (eps_a, d_a, s_a), scalar = real_args(
        epsilon=(epsilon, NONNEGATIVE),
        delta=(delta, UNIT_OPEN),
        sensitivity=(sensitivity, POSITIVE),
    )
    check_interval(
        eps_a,
        "epsilon",
        _CLASSICAL_EPSILON,
        note="the classical bound of Theorem 1 is not valid for epsilon >= 1; "
        "use analytic_gaussian_sigma, which is exact for every epsilon >= 0",
    )
    return finish(up(s_a * np.sqrt(2.0 * np.log(1.25 / d_a)) / eps_a), scalar)


def laplace_scale(epsilon: object, l1_sensitivity: object) -> float | np.ndarray:
    """Scale ``b = Δ₁/ε`` of the Laplace mechanism (ε-DP); its variance is ``2b²``."""
    (eps_a, s_a), scalar = real_args(
        epsilon=(epsilon, POSITIVE), l1_sensitivity=(l1_sensitivity, POSITIVE)
    )
    return finish(up(s_a / eps_a), scalar)


def _delta0(eps: np.ndarray) -> np.ndarray:
    # At μ = √(2ε) the profile's t = ε/μ − μ/2 vanishes, so δ₀ = φ(0) · D(0, √(2ε)).
    flat = eps.ravel()
    mu = np.sqrt(2.0 * flat)
    d = np.zeros_like(flat)
    pos = mu > 0
    d[pos] = _mills.mills_diff(np.zeros(int(pos.sum())), mu[pos]) / math.sqrt(2.0 * math.pi)
    return d.reshape(eps.shape)


def delta0(epsilon: object) -> float | np.ndarray:
    """``δ₀(ε) = Φ(0) − e^ε Φ(−√(2ε))``: the δ reached by ``σ = Δ/√(2ε)``.

    Any Gaussian mechanism that is (ε, δ)-DP with δ < δ₀(ε) needs ``σ > Δ/√(2ε)`` (proof of
    the paper's Theorem 4).  δ₀ increases from 0 at ε = 0 to 1/2 as ε → ∞.  ε ∈ [0, ∞).
    """
    (eps_a,), scalar = real_args(epsilon=(epsilon, NONNEGATIVE))
    return finish(_delta0(eps_a), scalar)


def theorem2_sigma(delta: object, sensitivity: object = 1.0) -> float | np.ndarray:
    """``σ = Δ/(2δ)``: enough for (0, δ)-DP by Pinsker's inequality (paper Theorem 2).

    Loose: the exact (0, δ) calibration is ``analytic_gaussian_sigma(0, δ, Δ)``.
    """
    (d_a, s_a), scalar = real_args(delta=(delta, UNIT_OPEN), sensitivity=(sensitivity, POSITIVE))
    return finish(up(s_a / (2.0 * d_a)), scalar)


def theorem4_sigma_lower_bound(
    epsilon: object, delta: object, sensitivity: object = 1.0
) -> float | np.ndarray:
    """Theorem 4's lower bound ``σ ≥ Δ/√(2ε)`` for (ε, δ)-DP with δ < δ₀(ε).

    It shows that σ must shrink like 1/√ε, not 1/ε, as ε grows.  We use the exact
    condition δ < δ₀(ε) from the theorem's proof; requests with δ ≥ δ₀(ε), where the bound
    does not hold, raise ``ValueError``.  Rounded down (a lower bound's safe side).
    """
    (eps_a, d_a, s_a), scalar = real_args(
        epsilon=(epsilon, POSITIVE), delta=(delta, UNIT_OPEN), sensitivity=(sensitivity, POSITIVE)
    )
    d0 = _delta0(eps_a)
    ok = d_a < d0
    if not ok.all():
        bad = np.argwhere(~ok)[0] if ok.ndim else ()
        where = f" at index {tuple(int(i) for i in bad)}" if ok.ndim else ""
        raise ValueError(
            f"delta must be below delta0(epsilon) = {d0[tuple(bad)]:.6g} for Theorem 4's "
            f"bound to apply; got {d_a[tuple(bad)]!r}{where}"
        )
    return finish(down(s_a / np.sqrt(2.0 * eps_a)), scalar)
