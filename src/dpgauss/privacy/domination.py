r"""The μ-GDP charge of any mechanism: the smallest μ whose GDP profile dominates its own.

A mechanism that is not exactly μ-GDP (a discrete Gaussian release) is still μ-GDP for
every μ whose (ε, δ_μ(ε)) profile lies above the mechanism's own (ε, δ(ε)) profile, because
a symmetric trade-off function is determined by its privacy profile (Dong, Roth & Su 2019,
Prop. 2.12).  :func:`dominating_mu` finds the smallest such μ on a grid of ε, rounded up.
It lives apart from the accountant (:mod:`.accounting`, which re-exports it) so that the
discrete profiles and the typed events can use it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._rounding import up
from .calibration import gdp_mu

__all__ = ["dominating_mu"]

_DELTA_FLOOR = 1e-300


def dominating_mu(
    profile: Callable[[np.ndarray], np.ndarray], mu_guess: float, *, grid: int = 400
) -> float:
    """The smallest μ whose GDP profile lies above a mechanism's profile ``δ(ε)``.

    For each ε the μ with ``δ_μ(ε) = δ(ε)`` is found (rounded up), and the largest over a
    log grid of ε, refined around the maximum, is returned with a relative margin of 1e-9.
    Domination is certified where ``δ(ε) ≥ 1e-300``: below that, double precision cannot
    tell the two profiles apart (δ underflows to its floor).  ``profile`` maps an array of
    ε ≥ 0 to the mechanism's δ(ε) (rounded up); ``mu_guess`` sets the ε range.
    """
    eps_max = 0.5 * mu_guess * mu_guess + 40.0 * mu_guess
    eps = np.concatenate(([0.0], np.geomspace(1e-6, eps_max, grid)))
    best = _mu_for(profile, eps)
    i = int(np.argmax(best))
    lo, hi = eps[max(i - 1, 0)], eps[min(i + 1, eps.size - 1)]
    fine = np.linspace(lo, hi, 64)
    return float(max(best.max(), _mu_for(profile, fine).max()) * (1.0 + 1e-9))


def _mu_for(profile: Callable[[np.ndarray], np.ndarray], eps: np.ndarray) -> np.ndarray:
    d = np.asarray(profile(eps), dtype=np.float64)
    ok = (d >= _DELTA_FLOOR) & (d < 1)
    out = np.zeros_like(eps)
    if ok.any():
        # gdp_mu is the largest μ with δ_μ(ε) ≤ d; one ulp up is the smallest above.
        out[ok] = up(gdp_mu(eps[ok], d[ok]))
    return out
