"""The one root finder behind every calibration: fast Halley, then an exact, safe Newton step.

Calibrating σ and inverting the profile for ε are both "find where a monotone function
``g`` (computed ``log δ`` minus the target) crosses zero, then step to its safe side".
This module does that on flat arrays, vectorised, in two phases:

1. Safeguarded Halley iterations on a *fast* kernel (a few 1e-7 relative accuracy, half
   the cost).  Halley converges cubically, so a step below 1e-3 ends the phase.
2. Newton steps on the *exact* kernel onto the root of ``g + 2·err``, where ``err`` bounds
   the exact kernel's evaluation error, widened by a curvature term and by ``pad`` (the
   rounding of the variable itself) in the safe direction.  The exact ``g`` is within
   ``err`` of the truth everywhere, so at the result the true ``g`` is at most ``−err``:
   the answer is safe.  One step suffices unless the curvature term is large, and then
   the point takes more steps from where it stands.

The safe side is where ``g ≤ 0``; it lies below the root when ``g`` increases (σ's
``x = log μ``) and above it when ``g`` decreases (ε).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["CURVATURE_OK", "Kernel", "exact_newton", "solve_safe"]

# kernel(x, idx, exact) -> (g, g′, g″/g′, err) at x for the problem's elements idx
# (idx None: all of them, in order).
# (The curvature comes as the ratio g″/g′, which stays finite where g′ overflows.)
Kernel = Callable[
    [np.ndarray, np.ndarray | None, bool],
    tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
]

_MAX_ITER = 100
_HALLEY_STOP = 1e-3
#: An exact Newton step is final when its curvature term is below this (times max(1, |x|)).
CURVATURE_OK = 1e-13


def _halley(kernel: Kernel, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    active = np.arange(x.size)
    for _ in range(_MAX_ITER):
        if active.size == 0:
            break
        xi = x[active]
        g, g1, c, _ = kernel(xi, active, False)
        below = g * np.sign(g1) <= 0  # the root lies above xi
        lo_a = np.where(below, xi, lo[active])
        hi_a = np.where(below, hi[active], xi)
        lo[active], hi[active] = lo_a, hi_a
        newton = g / g1
        denom = 1.0 - 0.5 * newton * c
        step = np.where(denom > 0.5, newton / denom, newton)
        new = xi - step
        bad = ~((new >= lo_a) & (new <= hi_a))
        if bad.any():  # leave the bracket: bisect it, or walk out of a half-open one
            lb, hb = lo_a[bad], hi_a[bad]
            new[bad] = np.where(
                np.isfinite(hb),
                np.where(np.isfinite(lb), 0.5 * (lb + hb), hb - np.maximum(1.0, np.abs(hb))),
                lb + np.maximum(1.0, np.abs(lb)),
            )
        x[active] = new
        scale = np.maximum(1.0, np.abs(new))
        done = (~bad & (np.abs(step) <= _HALLEY_STOP * scale)) | (hi_a - lo_a <= 1e-15 * scale)
        active = active[~done]
    return x


def solve_safe(
    kernel: Kernel,
    x0: np.ndarray,
    pad: Callable[[np.ndarray], np.ndarray],
    lo: np.ndarray | None = None,
    hi: np.ndarray | None = None,
) -> np.ndarray:
    """Root of the kernel's ``g``, moved to the side where ``g + err ≤ 0`` (see module doc).

    ``x0`` is the starting point, ``lo``/``hi`` an optional bracket (±inf when omitted),
    and ``pad(x)`` a bound on the rounding error of ``x`` in the arithmetic that follows.
    """
    x = np.array(x0, dtype=np.float64)
    lo = np.full_like(x, -np.inf) if lo is None else np.array(lo, dtype=np.float64)
    hi = np.full_like(x, np.inf) if hi is None else np.array(hi, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        x = exact_newton(kernel, _halley(kernel, x, lo, hi), pad, np.arange(x.size))
    if not np.isfinite(x).all():
        bad = int(np.flatnonzero(~np.isfinite(x))[0])
        raise FloatingPointError(f"dpgauss internal error: no finite root at element {bad}")
    return x


def safe_step(
    g: np.ndarray, g1: np.ndarray, c: np.ndarray, err: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The exact Newton step onto the root of ``g + 2·err`` (the safe side of the root of
    ``g`` for an evaluation error up to ``err``) and its curvature term ``2|c|·step²``, by
    which the step is moved further to the safe side (module doc)."""
    step = (g + 2.0 * err) / g1
    return step, 2.0 * np.abs(c) * step * step


def exact_newton(
    kernel: Kernel,
    x: np.ndarray,
    pad: Callable[[np.ndarray], np.ndarray],
    points: np.ndarray | None,
) -> np.ndarray:
    """Phase 2 of :func:`solve_safe` (module doc): exact Newton steps onto the safe side,
    from ``x`` (near the root) for the problem's elements ``points`` (None: all)."""
    x = np.array(x, dtype=np.float64)
    sub = np.arange(x.size)  # positions in x still stepping
    idx = points
    for _ in range(_MAX_ITER):
        xi = x if sub.size == x.size else x[sub]
        with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
            g, g1, c, err = kernel(xi, idx, True)
            step, curvature = safe_step(g, g1, c, err)
            again = curvature > CURVATURE_OK * np.maximum(1.0, np.abs(xi))
            widen = np.where(again, 0.0, curvature + pad(xi))
            new = xi - step - np.sign(g1) * widen
        if sub.size == x.size:
            x = new
        else:
            x[sub] = new
        if not again.any():
            break
        sub = sub[again]
        idx = sub if points is None else points[sub]
    return x
