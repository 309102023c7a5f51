"""Nonnegative denoising: the positive part of an estimate, and its exact SURE.

Counts, and sums of values bounded below by 0, are never negative.  Every denoiser of this
package takes ``nonnegative=True`` to return the positive part ``g(f(y)) = max(f(y), 0)``
of its estimate ``f(y)`` (post-processing of the release: no privacy cost).  Whatever the
truth ``θ ≥ 0``, clipping never increases the error at any key (``|max(f, 0) − θ| ≤
|f − θ|``), so the clipped estimator's risk is at most the unclipped one's.

SURE of the clipped estimator.  ``max(·, 0)`` is Lipschitz and ``f`` is weakly
differentiable, so ``g∘f`` is weakly differentiable with, almost everywhere,
``∂(g∘f)_i/∂y_i = 1{f_i > 0} · ∂f_i/∂y_i`` and Stein's lemma gives the unbiased

    SURE = ‖max(f, 0) − y‖² + 2 Σᵢ σᵢ² 1{f_i > 0} ∂f_i/∂y_i − Σᵢ σᵢ²

(:func:`clipped_sure`).  Each denoiser supplies the diagonal ``∂f_i/∂y_i`` of its Jacobian
in closed form (``docs/denoising.md``, "Nonnegative releases"; the tests compare every one
with a finite-difference Jacobian).  For order-0 trend filtering the positive part is the
exact solution of the constrained problem (``trend_filter``'s docstring).
"""

from __future__ import annotations

import numpy as np

__all__ = ["MARK", "check_nonnegative", "clipped_sure", "positive_part"]

#: The params key a clipped result carries (``params[MARK] = True``): its intervals are
#: clipped at 0 too (:mod:`dpgauss.denoise.result`).
MARK = "nonnegative"


def check_nonnegative(value: object) -> bool:
    """``nonnegative`` must be ``True`` or ``False`` (a flag, not a number)."""
    if not isinstance(value, bool | np.bool_):
        raise TypeError(f"nonnegative must be True or False; got {value!r}")
    return bool(value)


def positive_part(estimate: np.ndarray) -> np.ndarray:
    """``max(estimate, 0)`` as a new float array (``-0.0`` written as ``0.0``)."""
    return np.maximum(np.asarray(estimate, dtype=np.float64), 0.0) + 0.0


def clipped_sure(
    y: np.ndarray,
    clipped: np.ndarray,
    sigma: float | np.ndarray,
    divergence: float,
) -> float:
    """``‖clipped − y‖² + 2·divergence − Σσᵢ²``, ``divergence = Σ σᵢ² 1{f_i>0} ∂f_i/∂y_i``."""
    r = np.ravel(clipped) - np.ravel(y)
    noise = float(np.sum(np.broadcast_to(np.asarray(sigma, dtype=np.float64) ** 2, np.shape(y))))
    return float(r @ r) + 2.0 * float(divergence) - noise
