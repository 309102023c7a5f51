r"""(ε, δ) guarantees of the *multivariate* discrete Gaussian mechanism.

M(x) = q(x) + Y, Y = (Y₁, …, Y_d) with i.i.d. Yⱼ ~ N_Z(0, σ²), for an integer-vector query
q: X → Z^d whose neighbouring values differ by an integer vector s = q(x) − q(x′) with
‖s‖₂ ≤ Δ₂.  Unlike the continuous Gaussian, the privacy loss of the discrete one depends
on the whole vector s, not only on ‖s‖₂, and no closed form is known; this module gives
*valid upper bounds* on δ(ε) that depend on σ, ε, Δ₂ and d only, and the smallest σ they
certify.

Integer shifts.  ‖s‖₂² is an integer, so only ‖s‖₂ ≤ Δ̄ = √⌊Δ₂²⌋ matters (exact floor).
In particular Δ₂ < 1 would mean the query never changes (rejected: Δ₂ ≥ 1 is required),
and for 1 ≤ Δ₂ < √2 the only possible shifts are ±eⱼ.

Only the changed coordinates count.  An integer shift with ‖s‖₂² ≤ M has at most M non-zero
coordinates, and a coordinate with sⱼ = 0 has the same law N_Z(0, σ²) under both neighbours,
independent of the others: the two output laws are P × R and Q × R with a common factor R,
and Σ (p r − e^ε q r)₊ = Σ r (p − e^ε q)₊ = the divergence of P and Q.  So every bound here
is evaluated with d replaced by min(d, M) (:func:`changed_coordinates`); a caller that knows
a smaller bound on the coordinates a neighbour can change (a unit touching at most k keys)
passes that as ``dim``.  For counts of Δ₂ = 5 over the 4,091 Manhattan junctions this is 25
coordinates, not 4,091.

Bound 1: concentrated DP (Canonne, Kamath & Steinke 2020, "The Discrete Gaussian for
Differential Privacy", NeurIPS; arXiv:2004.00010, hereafter CKS20)
--------------------------------------------------------------------------------------
* CKS20 Prop. 5: for integer shifts s ∈ Z, D_α(N_Z(s, σ²) ‖ N_Z(0, σ²)) ≤ α s²/(2σ²) for
  all α > 1, i.e. adding N_Z(0, σ²) to a sensitivity-Δ integer query is ½(Δ/σ)²-zCDP.
  Rényi divergence adds over independent coordinates, so the d-dimensional mechanism is
  ρ-zCDP with ρ = ‖s‖²/(2σ²) ≤ Δ̄²/(2σ²): this is CKS20 Thm. 14 (the multivariate
  discrete Gaussian satisfies ½‖s/σ‖²-concentrated DP).
* CKS20 Prop. 12 / Cor. 13 (zCDP → approximate DP): ρ-zCDP implies (ε, δ)-DP for

      δ = inf_{α>1}  exp((α−1)(αρ − ε)) / (α − 1) · (1 − 1/α)^α.

  (Proof, for the record: δ = E_P[(1 − e^{ε−L})₊] for the privacy loss L, and
  (1 − e^{ε−ℓ})₊ ≤ e^{(α−1)(ℓ−ε)} (1−1/α)^{α−1}/α for all ℓ, maximised at
  e^{ℓ−ε} = α/(α−1); then E_P[e^{(α−1)L}] = e^{(α−1)D_α} ≤ e^{(α−1)αρ}.)
  Any α gives a valid δ; we take the minimiser (the derivative
  (2α − 1)ρ − ε + log(1 − 1/α) is increasing) and evaluate at it, rounded up.

This bound is monotone in σ but loose: at (ε, δ) = (1, 1e-6) it needs ≈ 7 % more σ than the
continuous analytic Gaussian.

Bound 2: smoothing (Poisson summation), derived here
----------------------------------------------------
For τ ∈ (0, σ), let σ₁ = √(σ² − τ²) and θ(u) = 2 Σ_{k≥1} exp(−2π²u²k²).  Then M is
(ε, δ)-DP with δ the smaller of

    (a)  e^{a} · δ_c(σ₁, ε − a − b, Δ̄)                          (if ε ≥ a + b)
    (b)  δ_c(σ₁, ε, Δ̄) + (1 + e^ε) · (1 − e^{−min(a, b)})

where a = d·log(1 + θ(τ)), b = d·log((1 + θ(σ))/(1 − θ(τ))) and δ_c(σ, ε, Δ) is the exact
profile of the *continuous* Gaussian mechanism (Balle & Wang 2018, Thm 8;
:func:`dpgauss.privacy.gaussian_delta`).

Proof.  Let A(x) = K(q(x) + G), G ~ N(0, σ₁² I_d), where the post-processing K rounds each
coordinate o to an integer n with probability exp(−(n−o)²/(2τ²))/Z_τ(o),
Z_τ(o) = Σ_{m∈Z} exp(−(m−o)²/(2τ²)).  Post-processing keeps the (ε, δ_c(σ₁, ε, Δ̄))
guarantee of q(x) + G.  Z_τ is 1-periodic, so A(x) = q(x) + V with V i.i.d. of law
D′(n) = ∫ φ_{σ₁}(g) e^{−(n−g)²/(2τ²)}/Z_τ(g) dg.  Poisson summation gives
Z_τ(o) = τ√(2π) Σ_k e^{−2π²τ²k²} cos(2πko) ∈ τ√(2π)·[1 − θ(τ), 1 + θ(τ)], and
∫ φ_{σ₁}(g) φ_τ(n − g) dg = φ_σ(n) (σ² = σ₁² + τ²), so
D′(n) ∈ [φ_σ(n)/(1 + θ(τ)), φ_σ(n)/(1 − θ(τ))].  The discrete Gaussian has
N(n) = φ_σ(n)/(1 + θ(σ)) (Poisson summation again).  Hence, pointwise on Z^d,
N^d ≤ e^{a} D′^d and D′^d ≤ e^{b} N^d.  For every event E:
(a) P[M(x) ∈ E] ≤ e^a P[A(x) ∈ E] ≤ e^a (e^{ε′} P[A(x′) ∈ E] + δ_c(ε′))
    ≤ e^{a+b+ε′} P[M(x′) ∈ E] + e^a δ_c(ε′), with ε′ = ε − a − b;
(b) TV(N^d, D′^d) ≤ 1 − e^{−min(a,b)} (if P ≤ e^c Q pointwise then
    TV = Σ(P − Q)₊ ≤ 1 − e^{−c}), and P[M(x) ∈ E] ≤ P[A(x) ∈ E] + TV
    ≤ e^ε (P[M(x′) ∈ E] + TV) + δ_c(ε) + TV.                                        ∎

τ is taken from a fixed grid (0.75 … 3) and the smallest δ is kept; since every candidate
decreases in σ, so does the minimum.  With σ in the hundreds (the lattice releases of
:mod:`dpgauss.noise.lattice`) this is the continuous profile up to a relative
τ²/(2σ²) in σ; for counts it costs ≈ 0.5 % of σ at σ ≈ 8 and a few % at σ ≈ 3.

This bound is not taken from CKS20 (whose own multivariate approximate-DP theorem we could
not consult); it uses only post-processing and Poisson summation, as above, and the tests
check it against the exact profile of every integer shift for small d and Δ₂ = 2
(computed by convolution) and against an mpmath evaluation of the formula.
``method="zcdp"`` restricts everything to the published CKS20 results.

Exact special cases ("best")
----------------------------
If d = 1, or 1 ≤ Δ₂ < √2 (the only shifts are ±eⱼ and the other coordinates cancel from
the likelihood ratio), the mechanism's profile *is* the scalar one of CKS20 Thm 7 with
integer sensitivity k = ⌊Δ₂⌋ resp. 1, computed exactly by
:func:`dpgauss.privacy.discrete_profile.discrete_gaussian_delta`.  ``method="best"``
uses it then — unless one evaluation would sum more than about 2^21 terms
(k + 55k/ε > 2^21, e.g. k = 1 and ε < 2.6e-5), where Bound 2 is within τ²/(2σ²) of the
continuous profile anyway — and the smaller of Bounds 1 and 2 otherwise.

Numerics: every quantity is rounded toward the larger δ (δ_c from the rounded-up
continuous profile, σ₁ rounded down, θ, a, b and the zCDP exponent inflated).

Charging a release in μ-GDP, and a calibration that fits its own budget
----------------------------------------------------------------------
A μ-GDP ledger (:mod:`dpgauss.release.ledger`) charges a discrete release by
:func:`discrete_gaussian_vector_mu`: the smallest μ whose GDP profile lies above the
certified profile ε ↦ δ̂(ε) (:func:`dpgauss.privacy.accounting.dominating_mu`, on its ε grid,
1e-9 relative margin).  δ̂ there is the bound above, tightened in two valid ways: where the
exact scalar reduction applies (d = 1 or Δ₂ < √2) but "best" skipped it for its cost
criterion (small ε), the exact CKS20 Thm 7 profile is used if one evaluation is affordable;
and δ̂ is replaced by its running minimum from ε = 0, since an (ε′, δ)-DP mechanism is
(ε, δ)-DP for every ε ≥ ε′.

A σ certified for (ε, δ) at the single ε is not enough for a budget of the same (ε, δ):
the discrete profile is not exactly Gaussian-shaped, so its dominating μ is slightly
*above* ``gdp_mu(ε, δ)`` (at (1, 1e-6): by 1e-9 for lattice releases of 100 or more
coordinates, 2.5e-7 for one coordinate, 9e-4 for counts at σ ≈ 4.2; far more where σ < 1)
and the ledger would refuse it.
:func:`discrete_gaussian_gdp_sigma` raises σ just enough that

    discrete_gaussian_vector_mu(σ, Δ₂, d) ≤ gdp_mu(ε, δ)     (compared as the ledger does:
                                                              the same two doubles)

while keeping the (ε, δ) certificate.  Proof that the result is (ε, δ)-DP and fits an
(ε, δ) budget: the release is μ_c-GDP with μ_c = discrete_gaussian_vector_mu(σ, Δ₂, d) ≤
μ_B = gdp_mu(ε, δ); μ-GDP is monotone in μ, so it is μ_B-GDP, i.e. (ε, δ_{μ_B}(ε))-DP with
δ_{μ_B}(ε) ≤ δ (gdp_mu is the largest such μ, rounded down); and the ledger's test
μ_c² ≤ μ_B² holds for a fresh budget.  ∎

Note: the correction terms of the distributed discrete Gaussian (Kairouz, Liu & Steinke
2021, sums of n discrete Gaussians) are not needed here: each coordinate carries exactly
one discrete Gaussian.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .._validation import (
    NONNEGATIVE,
    POSITIVE,
    UNIT_OPEN,
    Interval,
    check_integral,
    elementwise,
    real_args,
)
from ._rounding import TINY, delta_from_log
from .calibration import analytic_gaussian_sigma, gdp_mu
from .discrete_profile import discrete_gaussian_delta, discrete_gaussian_sigma
from .domination import dominating_mu
from .profile import gaussian_delta

__all__ = [
    "changed_coordinates",
    "discrete_gaussian_gdp_sigma",
    "discrete_gaussian_vector_delta",
    "discrete_gaussian_vector_mu",
    "discrete_gaussian_vector_sigma",
    "integer_shift_bound",
    "zcdp_delta",
]

_AT_LEAST_ONE = Interval(1.0, math.inf, low_closed=True)
_DIM = Interval(1.0, 2.0**53, low_closed=True)
_METHODS = ("best", "zcdp", "smoothing")
_TAUS = np.array([0.75, 0.875, 1.0, 1.125, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0])
_U = 2.0**-52
_BISECT_RTOL = 1e-10
_EXACT_MAX_TERMS = 2.0**21


# ----------------------------------------------------------------------------- helpers


def integer_shift_bound(l2_sensitivity: float) -> tuple[int, float]:
    """``(M, Δ̄)`` with ``M = ⌊Δ₂²⌋`` (exact) and ``Δ̄ ≥ √M`` (rounded up).

    Integer vectors s with ‖s‖₂ ≤ Δ₂ have ‖s‖₂² ≤ M, so every bound that depends on
    ‖s‖₂ only may use Δ̄ in place of Δ₂.
    """
    m = math.floor(Fraction(l2_sensitivity) ** 2)
    root = math.isqrt(m)
    bar = float(root) if root * root == m else float(np.nextafter(math.sqrt(m), np.inf))
    return m, bar


def _theta(u: np.ndarray) -> np.ndarray:
    """Upper bound on θ(u) = 2 Σ_{k≥1} exp(−2π²u²k²) for u ≥ 0.5 (terms k ≤ 6; the rest is
    below 2 e^{−2π²·0.25·49} < 1e-100 of the first, covered by the inflation)."""
    u = np.asarray(u, dtype=np.float64)
    k = np.arange(1, 7, dtype=np.float64)
    with np.errstate(under="ignore"):
        terms = np.exp(-2.0 * math.pi**2 * np.multiply.outer(u * u, k * k))
    return 2.0 * terms.sum(axis=-1) * (1.0 + 1e-12) + 1e-300


def _log_cdp_delta(rho: float, eps: float) -> float:
    """log of the CKS20 Cor. 13 bound for ρ-zCDP at ε, rounded up (ρ > 0, ε ≥ 0)."""

    def deriv(log_x: float) -> float:  # α = 1 + x
        x = math.exp(log_x)
        return (1.0 + 2.0 * x) * rho - eps + log_x - math.log1p(x)

    lo, hi = -700.0, 700.0
    if deriv(hi) < 0:  # ρ so small that α > e^700: δ underflows anyway
        return -math.inf
    for _ in range(120):
        mid = 0.5 * (lo + hi)
        if deriv(mid) < 0:
            lo = mid
        else:
            hi = mid
    x = math.exp(hi)
    alpha = 1.0 + x
    t1 = x * (alpha * rho - eps)
    t2 = alpha * math.log1p(-1.0 / alpha) if x > 1e-8 else alpha * (math.log(x) - math.log(alpha))
    t3 = -math.log(x)
    value = t1 + t2 + t3
    # Each term is within a few ulps (the α's exact value is irrelevant: any α is valid).
    return value + 1e-13 * (abs(t1) + abs(t2) + abs(t3) + 1.0)


def zcdp_delta(rho: object, epsilon: object) -> float | np.ndarray:
    """δ such that ρ-zCDP implies (ε, δ)-DP (CKS20 Prop. 12 / Cor. 13), rounded up.

    ``δ = inf_{α>1} exp((α−1)(αρ − ε)) (1 − 1/α)^α / (α − 1)``, capped at 1.  ρ > 0, ε ≥ 0.
    """
    arrays, scalar = real_args(rho=(rho, POSITIVE), epsilon=(epsilon, NONNEGATIVE))
    return elementwise(lambda r, e: delta_from_log(_log_cdp_delta(r, e)), arrays, scalar)


def _zcdp_bound(sigma: float, eps: float, m: int) -> float:
    rho = float(np.nextafter(m / (2.0 * sigma * sigma), np.inf)) * (1.0 + 2 * _U)
    if rho == 0.0:
        return TINY
    return delta_from_log(_log_cdp_delta(rho, eps))


def _smoothing_bound(sigma: float, eps: float, sens_bar: float, dim: int) -> float:
    taus = _TAUS[_TAUS < sigma * (1.0 - 1e-9)]
    if taus.size == 0:
        return 1.0
    th_tau = _theta(taus)
    ok = th_tau < 0.5
    taus, th_tau = taus[ok], th_tau[ok]
    if taus.size == 0:
        return 1.0
    th_sig = float(_theta(np.array(max(sigma, 0.5))))
    up = 1.0 + 1e-12
    a = dim * np.log1p(th_tau) * up
    b = dim * (math.log1p(th_sig) - np.log1p(-th_tau)) * up
    # σ₁ = √(σ² − τ²), rounded down (a smaller σ₁ only increases δ_c).
    sigma1 = np.sqrt((sigma - taus) * (sigma + taus)) * (1.0 - 4 * _U)
    best = 1.0
    with np.errstate(over="ignore", under="ignore"):
        # (b): additive total-variation correction.
        if eps < 700.0:
            dc = np.asarray(gaussian_delta(sigma1, eps, sens_bar))
            tv = -np.expm1(-np.minimum(a, b)) * up
            cand = (dc + (1.0 + math.exp(eps) * up) * tv) * up
            best = min(best, float(cand.min()))
        # (a): multiplicative, with ε reduced by a + b.
        eps1 = (eps - (a + b)) * (1.0 - 4 * _U) - 4 * _U * (a + b)
        use = eps1 >= 0.0
        if use.any():
            dc = np.asarray(gaussian_delta(sigma1[use], eps1[use], sens_bar))
            cand = dc * np.exp(a[use]) * up
            best = min(best, float(cand.min()))
    return min(1.0, max(best, TINY))


def changed_coordinates(m: int, dim: int) -> int:
    """The most coordinates in which two neighbouring integer vectors can differ: ``min(d, M)``.

    An integer shift ``s`` with ``‖s‖₂² ≤ M`` has at most ``M`` non-zero coordinates (each
    contributes at least 1 to ``‖s‖₂²``), and at most ``d`` of course.  Coordinates where
    ``s_j = 0`` carry the same law ``N_Z(0, σ²)`` under both neighbours, independently of
    the others, so they add nothing to any divergence: the pair of output laws on ``Z^d``
    is a product of the pair on the changed coordinates with a common factor, and the
    hockey-stick divergence of ``P × R`` and ``Q × R`` equals that of ``P`` and ``Q``
    (integrate ``R`` out of ``Σ (p r − e^ε q r)₊ = Σ r (p − e^ε q)₊``).  Every bound below
    is therefore evaluated with ``d`` replaced by this number (the ``a`` and ``b`` of
    Bound 2 grow with it, so the largest possible count is the worst case).
    """
    return min(dim, m)


def _changed(l2: float, dim: float) -> int:
    return changed_coordinates(integer_shift_bound(l2)[0], int(dim))


def _exact_sensitivity(m: int, l2: float, dim: int, eps: float) -> int | None:
    """Integer sensitivity of the exact scalar reduction, or None if it does not apply or
    would be slow (more than about 2^21 terms per profile evaluation; the cost criterion
    depends on ε and Δ only, so "best" is the same function of σ everywhere)."""
    if m == 1:
        k = 1
    elif dim == 1:
        k = math.floor(Fraction(l2))
    else:
        return None
    cost = k if eps == 0.0 else k + 55.0 * k / eps
    return k if cost <= _EXACT_MAX_TERMS else None


def _delta_scalar(sigma: float, eps: float, l2: float, dim: int, method: str) -> float:
    m, bar = integer_shift_bound(l2)
    if method == "zcdp":
        return _zcdp_bound(sigma, eps, m)
    if method == "smoothing":
        return _smoothing_bound(sigma, eps, bar, dim)
    k = _exact_sensitivity(m, l2, dim, eps)
    if k is not None:
        try:
            return float(discrete_gaussian_delta(sigma, eps, k))
        except ValueError:  # too many terms for the exact sum: fall back to the bounds
            pass
    return min(_zcdp_bound(sigma, eps, m), _smoothing_bound(sigma, eps, bar, dim))


def _args(**spec: tuple[object, Interval]) -> tuple[tuple[np.ndarray, ...], bool]:
    arrays, scalar = real_args(**spec)
    check_integral(arrays[-1], "dim", "the number of coordinates", "a positive integer")
    return arrays, scalar


def discrete_gaussian_vector_delta(
    sigma: object,
    epsilon: object,
    l2_sensitivity: object,
    dim: object,
    *,
    method: str = "best",
) -> float | np.ndarray:
    """An upper bound on δ(ε) for i.i.d. N_Z(0, σ²) noise on an integer query in Z^d.

    Valid for every integer-vector query whose neighbouring values differ by at most
    Δ₂ in L2 norm (module docstring).  Broadcasts like a ``scipy.special`` function.

    Parameters
    ----------
    sigma : σ > 0.   epsilon : ε ≥ 0.
    l2_sensitivity : Δ₂ ≥ 1 (an integer vector that changes changes by at least 1).
    dim : d, a positive integer: the number of coordinates, or any bound on the number in
        which neighbouring values can differ (it is capped at ⌊Δ₂²⌋ here, module docstring).
    method : ``"best"`` (the exact scalar profile when d = 1 or Δ₂ < √2 and it is
        affordable, see the module docstring; else the smaller of the two bounds),
        ``"zcdp"`` (CKS20 Thm 14 + Cor. 13 only) or ``"smoothing"`` (the
        Poisson-summation bound only).

    Returns
    -------
    δ in (0, 1], never below the exact value of the bound it evaluates.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}; got {method!r}")
    arrays, scalar = _args(
        sigma=(sigma, POSITIVE),
        epsilon=(epsilon, NONNEGATIVE),
        l2_sensitivity=(l2_sensitivity, _AT_LEAST_ONE),
        dim=(dim, _DIM),
    )
    return elementwise(
        lambda s, e, l2, d: _delta_scalar(s, e, l2, _changed(l2, d), method), arrays, scalar
    )


@lru_cache(maxsize=256)
def _sigma_scalar(eps: float, delta: float, l2: float, dim: int, method: str) -> float:
    m, bar = integer_shift_bound(l2)
    k = _exact_sensitivity(m, l2, dim, eps) if method == "best" else None
    if k is not None:
        try:
            return float(discrete_gaussian_sigma(eps, delta, k))
        except ValueError:
            pass

    def safe(s: float) -> bool:
        return _delta_scalar(s, eps, l2, dim, method) <= delta

    # Every bound is at least the continuous profile at σ: start just below its σ.
    lo = float(analytic_gaussian_sigma(eps, delta, bar)) * (1.0 - 1e-9)
    hi = lo * 1.01
    while not safe(hi):
        lo, hi = hi, 2.0 * hi
    while hi - lo > _BISECT_RTOL * hi:
        mid = 0.5 * (lo + hi)
        if safe(mid):
            hi = mid
        else:
            lo = mid
    return hi


def discrete_gaussian_vector_sigma(
    epsilon: object,
    delta: object,
    l2_sensitivity: object,
    dim: object,
    *,
    method: str = "best",
) -> float | np.ndarray:
    """The smallest σ (relative resolution 1e-10) certified by
    :func:`discrete_gaussian_vector_delta` with the same ``method`` for (ε, δ), Δ₂, d.

    ``method="zcdp"`` restricts the certificate to the published CKS20 results (Thm 14 +
    Cor. 13; about 7 % more σ at (1, 1e-6)); the default ``"best"`` also uses the exact
    scalar profile and the Poisson-summation bound derived in the module docstring.

    * d = 1 or 1 ≤ Δ₂ < √2 (and affordable): the exact scalar calibration
      :func:`dpgauss.privacy.discrete_profile.discrete_gaussian_sigma` (integer
      sensitivity ⌊Δ₂⌋ resp. 1), which handles the sawtooth of the exact profile.
    * otherwise both bounds decrease in σ (so does their minimum): bisection from just
      below the continuous analytic σ, keeping the upper end certified.  The result is
      always at least the continuous analytic σ for Δ̄ = √⌊Δ₂²⌋.

    ε ≥ 0, δ ∈ (0, 1), Δ₂ ≥ 1, d a positive integer.  The result is safe:
    ``discrete_gaussian_vector_delta(σ, ε, Δ₂, d) ≤ δ``.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}; got {method!r}")
    arrays, scalar = _args(
        epsilon=(epsilon, NONNEGATIVE),
        delta=(delta, UNIT_OPEN),
        l2_sensitivity=(l2_sensitivity, _AT_LEAST_ONE),
        dim=(dim, _DIM),
    )
    return elementwise(
        lambda e, d, l2, k: _sigma_scalar(e, d, l2, _changed(l2, k), method), arrays, scalar
    )


# ------------------------------------------------------------------ μ-GDP charge and fit


def _exact_k(m: int, l2: float, dim: int) -> int | None:
    """Integer sensitivity of the exact scalar reduction if it applies (cost aside)."""
    if m == 1:
        return 1
    if dim == 1:
        return math.floor(Fraction(l2))
    return None


def _charge_delta(sigma: float, eps: np.ndarray, l2: float, dim: int) -> np.ndarray:
    """The certified profile used for the μ-GDP charge (module docstring), at ``eps``.

    ``discrete_gaussian_vector_delta`` ("best"); where the exact scalar profile applies but
    "best" skipped it for its cost criterion, the smaller of that and the exact profile
    (when one evaluation sums at most about 2^21 terms); then the running minimum over
    ε′ ≤ ε of these values, ε′ = 0 included.
    """
    eps = np.asarray(eps, dtype=np.float64)
    flat = np.concatenate(([0.0], eps.ravel()))
    out = np.array(discrete_gaussian_vector_delta(sigma, flat, l2, dim), dtype=np.float64)
    m, _ = integer_shift_bound(l2)
    k = _exact_k(m, l2, dim)
    if k is not None:
        for i, e in enumerate(flat.tolist()):
            if _exact_sensitivity(m, l2, dim, e) is not None:
                continue  # "best" used the exact profile already
            cost = k + min(10.5 * sigma, 55.0 * k / e if e > 0.0 else math.inf) + 16.0
            if cost > _EXACT_MAX_TERMS:
                continue
            try:
                out[i] = min(out[i], float(discrete_gaussian_delta(sigma, e, k)))
            except ValueError:  # more terms than the exact sum allows: keep the bound
                pass
    order = np.argsort(flat, kind="stable")
    out[order] = np.minimum.accumulate(out[order])
    return out[1:].reshape(eps.shape)


@lru_cache(maxsize=1024)
def _mu_scalar(sigma: float, l2: float, dim: int) -> float:
    def profile(eps: np.ndarray) -> np.ndarray:
        return _charge_delta(sigma, eps, l2, dim)

    return dominating_mu(profile, l2 / sigma)


def discrete_gaussian_vector_mu(
    sigma: object, l2_sensitivity: object, dim: object
) -> float | np.ndarray:
    """The μ-GDP charge of i.i.d. N_Z(0, σ²)^d noise on an integer query of L2 sensitivity Δ₂.

    The smallest μ whose μ-GDP profile lies above the certified profile (module docstring:
    :func:`discrete_gaussian_vector_delta`, tightened by the exact scalar profile where it
    applies and by its running minimum in ε), as found by
    :func:`dpgauss.privacy.accounting.dominating_mu`.  It is what
    ``DiscreteGaussianNoise.dominating_mu`` returns and what the ledger charges; a
    deterministic function of the three doubles (cached).

    σ > 0, Δ₂ ≥ 1, d a positive integer.  Broadcasts; a float for scalar input.
    """
    arrays, scalar = _args(
        sigma=(sigma, POSITIVE),
        l2_sensitivity=(l2_sensitivity, _AT_LEAST_ONE),
        dim=(dim, _DIM),
    )
    return elementwise(lambda s, l2, d: _mu_scalar(s, l2, _changed(l2, d)), arrays, scalar)


_FIT_ATTEMPTS = 64


@lru_cache(maxsize=256)
def _gdp_sigma_scalar(eps: float, delta: float, l2: float, dim: int) -> float:
    mu_budget = float(gdp_mu(eps, delta))
    sigma = _sigma_scalar(eps, delta, l2, dim, "best")
    for attempt in range(_FIT_ATTEMPTS):
        mu = _mu_scalar(sigma, l2, dim)
        if mu <= mu_budget and _delta_scalar(sigma, eps, l2, dim, "best") <= delta:
            return sigma
        # μ is close to proportional to 1/σ: one step usually lands; grow the push if not.
        step = max(mu / mu_budget, 1.0) * (1.0 + 1e-10 * 2.0**attempt)
        sigma = float(np.nextafter(sigma * step, np.inf))
    raise FloatingPointError(  # pragma: no cover - never observed
        f"dpgauss internal error: no sigma fits gdp_mu({eps!r}, {delta!r}) for "
        f"l2_sensitivity={l2!r}, dim={dim}"
    )


def discrete_gaussian_gdp_sigma(
    epsilon: object, delta: object, l2_sensitivity: object, dim: object
) -> float | np.ndarray:
    """The σ of N_Z(0, σ²)^d noise whose μ-GDP charge fits a budget of the same (ε, δ).

    Starting from :func:`discrete_gaussian_vector_sigma` (certified for (ε, δ) at ε), σ is
    raised until ``discrete_gaussian_vector_mu(σ, Δ₂, d) ≤ gdp_mu(ε, δ)`` — the very two
    doubles the ledger compares for a fresh (ε, δ) budget — and σ is still certified for
    (ε, δ).  Each step multiplies σ by the ratio of the two μ's (plus 1e-10), so the result
    exceeds the smallest such σ by about 1e-10 relative.

    Proof of the guarantee: the noise is μ_c-GDP with μ_c ≤ μ_B = gdp_mu(ε, δ), hence
    μ_B-GDP, hence (ε, δ)-DP since δ_{μ_B}(ε) ≤ δ (module docstring).

    ε ≥ 0, δ ∈ (0, 1), Δ₂ ≥ 1, d a positive integer; cached.  Cost over
    :func:`discrete_gaussian_vector_sigma` at (1, 1e-6): 9e-4 for counts (σ ≈ 4, Δ₂ = 1;
    the discrete profile at ε = 0 is that much worse than the Gaussian one), ≤ 2.6e-7 for
    the lattice releases of :mod:`dpgauss.noise.lattice` (``docs/security.md``).
    """
    arrays, scalar = _args(
        epsilon=(epsilon, NONNEGATIVE),
        delta=(delta, UNIT_OPEN),
        l2_sensitivity=(l2_sensitivity, _AT_LEAST_ONE),
        dim=(dim, _DIM),
    )
    return elementwise(
        lambda e, d, l2, k: _gdp_sigma_scalar(e, d, l2, _changed(l2, k)), arrays, scalar
    )
