r"""How other accounting methods compose k Gaussian releases — the baselines for μ-GDP.

k releases, each adding ``N(0, σ²)`` at sensitivity Δ (``μ₀ = Δ/σ``), composed five ways:

``"exact"``
    μ-GDP (:mod:`dpgauss.privacy.accounting`): ``μ = √k μ₀`` and the exact profile.
``"basic"``
    each release calibrated exactly at ``(ε/k, δ/k)``, composed by the basic theorem.
``"advanced"``
    each release treated as ``(ε₀, δ₀)``-DP with its exact ε₀ at a chosen δ₀, composed by
    the *optimal* composition theorem of Kairouz, Oh & Viswanath (2015, Thm 3.3): k-fold
    composition is ``(ε, 1 − (1 − δ₀)^k (1 − δ_KOV))``-DP with
    ``δ_KOV = (1 + e^{ε₀})^{−k} Σ_l C(k, l) max(0, e^{(k−l)ε₀} − e^{ε + lε₀})``; δ₀ is
    optimised.
``"rdp"``
    Rényi DP: a Gaussian release has ``RDP(α) = αμ₀²/2`` (Mironov 2017), composition adds,
    and ``ε = RDP(α) + log((α−1)/α) − (log δ + log α)/(α − 1)`` (Balle et al. 2020, Thm
    21; the conversion used by Opacus), minimised over the customary grid of orders
    ``α ∈ {1.1, 1.2, …, 10.9} ∪ {11, …, 63}``.
``"zcdp"``
    ρ-zCDP with ``ρ = kμ₀²/2`` and the conversion of Canonne, Kamath & Steinke (2020,
    Cor. 13), ``δ = e^{(α−1)(αρ − ε)}/(α−1) · (1 − 1/α)^α``, minimised over all α > 1.

``composed_epsilon`` gives the total ε at δ; ``composed_sigma`` the σ per query needed for
a total (ε, δ).  Every method but ``"exact"`` is an upper bound, so exact needs the least
noise; ``docs/accounting.md`` has the table.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq, minimize_scalar
from scipy.special import gammaln, logsumexp

from .accounting import plan_equal
from .calibration import analytic_gaussian_sigma
from .profile import gaussian_epsilon, gdp_epsilon

__all__ = ["METHODS", "composed_epsilon", "composed_sigma", "kov_delta"]

METHODS = ("exact", "basic", "advanced", "rdp", "zcdp")
RDP_ORDERS = np.concatenate([1.0 + np.arange(1, 100) / 10.0, np.arange(12.0, 64.0)])


def kov_delta(eps0: float, delta0: float, k: int, epsilon: float) -> float:
    """δ of the k-fold composition of (ε₀, δ₀)-DP mechanisms at ε (KOV 2015, Thm 3.3)."""
    if eps0 <= 0:
        return float(-math.expm1(k * math.log1p(-delta0)))
    l_max = math.ceil((k * eps0 - epsilon) / (2.0 * eps0))  # terms with l < l_max are > 0
    if l_max <= 0 or epsilon - k * eps0 >= 0:
        d_kov = 0.0
    else:
        ll = np.arange(min(l_max, k + 1))
        ll = ll[epsilon - (k - 2 * ll) * eps0 < 0]  # drop a term that is exactly zero
        log_binom = gammaln(k + 1) - gammaln(ll + 1) - gammaln(k - ll + 1)
        gap = epsilon - (k - 2 * ll) * eps0
        log_terms = log_binom + (k - ll) * eps0 + np.log(-np.expm1(gap))
        d_kov = float(np.exp(logsumexp(log_terms) - k * np.logaddexp(0.0, eps0)))
    # 1 − (1 − δ₀)^k (1 − δ_KOV) without the cancellation of 1 − (nearly 1)
    if d_kov >= 1.0:
        return 1.0
    return float(-math.expm1(k * math.log1p(-delta0) + math.log1p(-d_kov)))


def _advanced_epsilon(k: int, mu0: float, delta: float) -> float:
    def total(log_delta0: float) -> float:
        d0 = math.exp(log_delta0)
        eps0 = float(gdp_epsilon(mu0, d0))
        if 1.0 - (1.0 - d0) ** k >= delta:
            return math.inf
        hi = k * eps0 + 1.0
        if kov_delta(eps0, d0, k, 0.0) <= delta:
            return 0.0
        return brentq(lambda e: kov_delta(eps0, d0, k, e) - delta, 0.0, hi, xtol=1e-12)

    top = math.log(-math.expm1(math.log1p(-delta) / k))  # δ₀ < 1 − (1 − δ)^{1/k}
    res = minimize_scalar(
        total, bounds=(top - 30.0, top - 1e-9), method="bounded", options={"xatol": 1e-6}
    )
    # Basic composition is the special case ε = kε₀ at the largest δ₀: never do worse.
    return min(float(res.fun), total(top - 1e-9))


def _rdp_epsilon(rho: float, delta: float, orders: np.ndarray) -> float:
    a = orders
    eps = rho * a + np.log1p(-1.0 / a) - (math.log(delta) + np.log(a)) / (a - 1.0)
    return float(np.min(eps))


def _zcdp_epsilon(rho: float, delta: float) -> float:
    def f(log_am1: float) -> float:
        return _rdp_epsilon(rho, delta, np.array([1.0 + math.exp(log_am1)]))

    res = minimize_scalar(f, bounds=(-20.0, 10.0), method="bounded", options={"xatol": 1e-10})
    return float(res.fun)


def composed_epsilon(
    method: str, k: int, sigma: float, delta: float, sensitivity: float = 1.0
) -> float:
    """Total ε at δ of k releases with noise σ at sensitivity Δ, by ``method`` (see module)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}; got {method!r}")
    mu0 = sensitivity / sigma
    if method == "exact":
        return float(gdp_epsilon(math.sqrt(k) * mu0, delta))
    if method == "basic":
        return k * float(gaussian_epsilon(sigma, delta / k, sensitivity))
    if method == "advanced":
        return _advanced_epsilon(k, mu0, delta)
    rho = k * mu0 * mu0 / 2.0
    if method == "rdp":
        return _rdp_epsilon(rho, delta, RDP_ORDERS)
    return _zcdp_epsilon(rho, delta)


def composed_sigma(
    method: str, k: int, epsilon: float, delta: float, sensitivity: float = 1.0
) -> float:
    """σ per query so that k queries are together (ε, δ)-DP by ``method``."""
    if method == "exact":
        return plan_equal(epsilon, delta, k, sensitivity)
    if method == "basic":
        return float(analytic_gaussian_sigma(epsilon / k, delta / k, sensitivity))

    def excess(log_sigma: float) -> float:
        return composed_epsilon(method, k, math.exp(log_sigma), delta, sensitivity) - epsilon

    lo = math.log(plan_equal(epsilon, delta, k, sensitivity))  # exact needs the least noise
    hi = lo + 1.0
    while excess(hi) > 0:
        hi += 1.0
    return math.exp(brentq(excess, lo, hi, xtol=1e-10))
