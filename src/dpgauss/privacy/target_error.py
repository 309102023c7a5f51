r"""ε from a target error: the least privacy loss whose noise meets a per-key RMSE.

A publisher often knows the error a table may have ("each count within ±10 or so") before
knowing which ε to ask for.  For the raw release the answer is exact: the error of key
``i`` is the noise ``Z_i ~ N(0, σ²)`` (continuous) or the lattice discrete Gaussian of
variance ``σ²`` (secure), so the per-key RMSE is exactly the delivered σ, and

.. math::

    ε^*(R) = \min\{ε > 0 : σ(ε, δ, Δ) \le R\},

where ``σ(ε, δ, Δ)`` is the noise the release calibrates at ε — the analytic Gaussian σ
(continuous), or the σ of the secure law the pipeline draws (within about 1e-5 of it for
counts, whose integers need no grid; 0.05-0.1 % above it for sums, the price of the
grid).  ``σ`` is non-increasing in ε, so :func:`smallest_epsilon` brackets ε* from
``gaussian_epsilon(R, δ, Δ)`` (the ε at which the *exact* analytic σ equals R) and bisects;
the answer is written as a 10-digit decimal rounded up, and is *checked*: the σ calibrated
at it is ``≤ R`` (so the rounding toward more noise of calibration can never make the
published ε miss the target).

For a denoised release no such identity exists: its error depends on the unknown signal.
:func:`denoised_sigma` extrapolates from a previous release of the same kind of table (its
report's σ₀ and estimated per-key RMSE r₀), and is labelled an **estimate** wherever it is
shown.  The model: the error ratio ``r₀/σ₀`` stays the same when σ grows (denoising gains
at least as much with more noise), and when σ shrinks the denoised RMSE falls no faster
than ``σ^{2/3}`` — the minimax rate of total-variation denoising of signals of bounded
variation (Mammen & van de Geer 1997), the slowest of the rates the denoisers here attain
(sparse and piecewise-constant signals fall as σ itself).  A denoiser that can fall back
to the raw release (every λ path here reaches it) is never worse than σ, so

.. math::

    \hat r(σ) = \min\Big(σ,\; r_0 \max\big(σ/σ_0, (σ/σ_0)^{2/3}\big)\Big),

which is increasing in σ; :func:`denoised_sigma` returns the largest σ with
``r̂(σ) ≤ R``, in closed form.  The ε it implies is then found exactly as for the raw
release.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from scipy.optimize import brentq

from .._validation import POSITIVE, check_scalar
from .profile import gaussian_epsilon

__all__ = ["DenoisedTarget", "decimal_up", "denoised_sigma", "smallest_epsilon"]

#: The smallest ε :func:`smallest_epsilon` reports: below it every ε meets the target.
EPSILON_FLOOR = 1e-9
_DIGITS = 10


def decimal_up(x: float, digits: int = _DIGITS) -> float:
    """The smallest ``digits``-significant-digit decimal ``≥ x`` (as the nearest double
    that is not below ``x``), for x > 0."""
    if not x > 0 or not math.isfinite(x):
        return x
    exp = math.floor(math.log10(x)) - digits + 1
    q = math.ceil(x / 10.0**exp - 1e-6)  # the division's rounding must not add a step
    out = float(f"{q}e{exp}")
    while out < x:
        q += 1
        out = float(f"{q}e{exp}")
    return out


def _decimal_down(x: float, digits: int = _DIGITS) -> float:
    """The largest ``digits``-significant-digit decimal ``≤ x``, for x > 0."""
    exp = math.floor(math.log10(x)) - digits + 1
    q = math.floor(x / 10.0**exp + 1e-6)
    out = float(f"{q}e{exp}")
    while out > x:
        q -= 1
        out = float(f"{q}e{exp}")
    return out


def smallest_epsilon(
    sigma_of: Callable[[float], float],
    target: float,
    delta: float,
    sensitivity: float = 1.0,
) -> float:
    """The smallest ε (a 10-digit decimal) whose calibrated noise ``sigma_of(ε) ≤ target``.

    Parameters
    ----------
    sigma_of
        ε ↦ the σ a release calibrated at ``(ε, delta)`` delivers; non-increasing in ε.
    target
        R > 0, the per-key RMSE the raw release must meet.
    delta, sensitivity
        The δ ∈ (0, 1) of the release and its L2 sensitivity Δ > 0 (for the start).

    Returns
    -------
    float
        ε ≥ :data:`EPSILON_FLOOR`, with ``sigma_of(ε) ≤ target`` checked.  Raises
        ``ValueError`` if no ε up to 1e12 meets the target.
    """
    r = check_scalar(target, "target_rmse", POSITIVE)
    start = max(float(gaussian_epsilon(r, delta, sensitivity)), EPSILON_FLOOR)

    def ok(e: float) -> bool:
        s = float(sigma_of(e))
        return math.isfinite(s) and s <= r

    if ok(start):  # walk down to an ε that fails
        hi, lo = start, start * (1.0 - 1e-6)
        while ok(lo):
            if lo <= EPSILON_FLOOR:
                return EPSILON_FLOOR
            hi, lo = lo, max(lo / 2.0, EPSILON_FLOOR)
    else:  # walk up to an ε that meets the target
        lo, hi = start, start * (1.0 + 1e-6)
        while not ok(hi):
            if hi > 1e12:
                raise ValueError(
                    f"target_rmse={r:g} is not met by any epsilon up to 1e12 at "
                    f"delta={delta:g}, sensitivity={sensitivity:g}"
                )
            lo, hi = hi, hi * 2.0
    # sigma_of(lo) > r >= sigma_of(hi); Brent's method (superlinear where σ(ε) is smooth,
    # as calibrated σ is: a dozen calls where bisection takes 45, which matters for the
    # secure law, fitted anew at each ε), then the exact bracket is re-checked below
    if hi - lo > 1e-13 * hi:

        def gap(e: float) -> float:
            s = float(sigma_of(e))
            return s - r if math.isfinite(s) else math.inf

        root = brentq(gap, lo, hi, xtol=1e-14 * hi, rtol=1e-15, maxiter=200)
        # the root is within a rounding of the threshold: close the bracket around it
        step = 1e-14 * root
        if ok(root):
            hi, probe = root, max(root - step, lo)
            while probe > lo and ok(probe):
                hi, step = probe, 2.0 * step
                probe = max(probe - step, lo)
            lo = probe
        else:
            lo, probe = root, min(root + step, hi)
            while probe < hi and not ok(probe):
                lo, step = probe, 2.0 * step
                probe = min(probe + step, hi)
            hi = probe
        while hi - lo > 1e-13 * hi:  # only where σ(ε) was not smooth enough for Brent
            mid = 0.5 * (lo + hi)
            if ok(mid):
                hi = mid
            else:
                lo = mid
    out = decimal_up(hi)
    below = _decimal_down(hi)
    if below < out and ok(below):  # the threshold itself may be a decimal (ε = 1 exactly)
        out = below
    while not ok(out):  # only if sigma_of is not monotone at this scale
        out = decimal_up(out * (1.0 + 10.0 ** (1 - _DIGITS)))
    return out


@dataclass(frozen=True)
class DenoisedTarget:
    """The model's answer (module docstring): the largest σ expected to meet the target
    after denoising, from a previous release's ``sigma0`` and estimated RMSE ``rmse0``."""

    sigma: float
    sigma0: float
    rmse0: float
    target: float

    @property
    def ratio(self) -> float:
        """r₀/σ₀, the previous release's denoised error over its raw error."""
        return self.rmse0 / self.sigma0


def denoised_sigma(target: float, sigma0: float, rmse0: float) -> DenoisedTarget:
    """The largest σ with ``r̂(σ) ≤ target`` (module docstring), an estimate.

    ``target``, ``sigma0`` and ``rmse0`` are positive; ``rmse0`` above ``sigma0`` (a
    denoiser worse than raw) is taken as ``sigma0``.
    """
    r = check_scalar(target, "target_rmse", POSITIVE)
    s0 = check_scalar(sigma0, "sigma0", POSITIVE)
    r0 = min(check_scalar(rmse0, "rmse0", POSITIVE), s0)
    if r <= r0:  # σ ≤ σ₀: r̂ = r₀ (σ/σ₀)^{2/3}
        s = s0 * (r / r0) ** 1.5
    else:  # σ ≥ σ₀: r̂ = r₀ σ/σ₀
        s = s0 * r / r0
    return DenoisedTarget(max(s, r), s0, r0, r)
