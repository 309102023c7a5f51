r"""Keys not known in advance: Gaussian thresholding and its exact guarantee.

The mechanism.  Every unit contributes to at most ``Δ₀`` keys (``max_keys_per_unit``) and
at most ``Δ∞`` to each key's count (``max_records_per_key``; 1 for a count of units).  For
every key ``k`` that occurs in the data, ``ỹ_k = c_k + Z_k`` with ``Z_k ~ N(0, σ²)``
independent, and the key is released, with ``ỹ_k``, iff ``ỹ_k > τ``.  Keys that do not
occur are never released (there is no public list of them).

The guarantee.  Let ``A = B ∪ {u}`` be neighbours, ``U`` the keys only ``u`` holds
(``|U| = j ≤ Δ₀``, each with ``c_k ≤ Δ∞`` in A and absent from B) and ``S`` the others.
The release splits into independent parts, ``M(A) = (M_S(A), M_U(A))`` and
``M(B) = (M_S(B), ∅)``:

* on ``S`` it is post-processing of the Gaussian mechanism on at most ``Δ₀ − j`` changed
  counts of at most ``Δ∞`` each, so ``M_S`` is ``μ_j``-GDP with
  ``μ_j = √(Δ₀ − j)·Δ∞/σ ≤ μ = √Δ₀·Δ∞/σ``;
* on ``U``, ``q = P[M_U(A) = ∅] = Π_k P[c_k + Z_k ≤ τ] ≥ (1 − p)^j``, with the per-key
  tail ``p = P[Δ∞ + Z > τ] = Φ(−(τ − Δ∞)/σ)``.

So ``P_A = q·(P̃_A × ∅) + (1 − q)·R`` and ``P_B = P̃_B × ∅`` for some R, where
``P̃`` is ``M_S``.  The hockey-stick divergences follow exactly (``η = −log q``):

.. math::

    δ_{A‖B}(ε) &= q\,δ_{μ_j}(ε + η) + (1 − q)
      \quad\text{(put every output with a key of U in the event)},\\
    δ_{B‖A}(ε) &= δ_{μ_j}(ε − η)
      \quad\text{(}P_B(E) − e^ε q P̃_A(E)\text{, the GDP profile at } e^{ε−η}\text{)},

and both are at most ``δ_μ(ε) + η``: the first because ``q δ_μ(ε+η) ≤ δ_μ(ε)`` and
``1 − q ≤ −log q``; the second by the mean value theorem, since
``|∂δ_μ/∂ε| = e^ε Φ(−ε/μ − μ/2) ≤ Φ(−ε/μ + μ/2) ≤ 1``.  Hence

    **Gaussian thresholding is (ε, δ_μ(ε) + η)-DP for every ε ≥ 0, with
    η = −Δ₀·log(1 − p)**, μ the Gaussian mechanism's ``√Δ₀·Δ∞/σ``,

and the released values need no further charge (they are the same noisy counts).
:func:`exact_delta` is the exact profile above, maximised over ``j``, and
``tests/privacy/test_partition_selection.py`` checks it against the definition (the
hockey-stick divergence integrated at 50 digits) and the bound against it.

Composition.  The structure composes: for k such releases (adaptively) against the same
unit, ``P_A`` is a mixture with weight ``Π qᵢ`` on a product of the ``P̃``'s, which compose
as ``√Σμᵢ²``-GDP, and ``P_B`` is that product.  The same two lines give

    **k releases are (ε, δ_{√Σμᵢ²}(ε) + Σηᵢ)-DP**,

so a ledger keeps ``Σμᵢ²`` and, beside it, ``Σηᵢ`` — the δ spent outside the μ-GDP
composition — and a budget ``(ε_B, δ_B)`` admits them iff
``√Σμᵢ² ≤ gdp_mu(ε_B, δ_B − Σηᵢ)`` (:func:`gdp_budget`).

Choosing τ.  A spec at ``(ε, δ)`` gives a share of δ to the selection,
``η ≤ δ`` (:func:`split`), the per-key tail ``p = 1 − e^{−η/Δ₀}``
(:func:`tail_for`), so that ``−Δ₀ log(1 − p) = η`` and the union over the Δ₀ keys one unit
can create is released with probability ``1 − (1 − p)^{Δ₀} = 1 − e^{−η} ≤ η``, and
``τ = Δ∞ + σ·Φ⁻¹(1 − p)`` (:func:`gaussian_threshold`), rounded up and then *checked*:
:func:`selection_eta` of the τ returned is at most η.  The rule is ``ỹ > τ``, strict; for
a continuous law ``P[Z = τ − Δ∞] = 0``, and a discrete (lattice) law must count the mass at
the threshold in its tail (the bug of OpenDP's thresholds, opendp#2922), which
:func:`selection_eta_of_tail` leaves to the caller's tail.

Everything is rounded toward the safe side: p and η up, τ up, μ down.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy import special

from .._validation import POSITIVE, UNIT_OPEN, check_int, check_scalar
from ._rounding import down, fits_budget, sub_down, sum_up, up
from .calibration import gdp_mu
from .profile import gdp_delta

__all__ = [
    "exact_delta",
    "gaussian_tail",
    "gaussian_threshold",
    "gdp_budget",
    "plan_selections",
    "selection_eta",
    "selection_eta_of_tail",
    "split",
    "tail_for",
    "thresholded_delta",
]

#: Relative margin on the special functions (``ndtri``, ``log_ndtr``: a few ulps).
_MARGIN = 1e-13
#: The selection's default share of δ (:func:`split`).
SELECTION_SHARE = 0.5


def _keys(max_keys: object) -> int:
    return check_int(max_keys, "max_keys_per_unit", 1)


def gaussian_tail(sigma: float, tau: float, max_per_key: float = 1.0) -> float:
    """``p = P[Δ∞ + N(0, σ²) > τ] = Φ(−(τ − Δ∞)/σ)``, rounded up."""
    s = check_scalar(sigma, "sigma", POSITIVE)
    c = check_scalar(max_per_key, "max_records_per_key", POSITIVE)
    t = check_scalar(tau, "tau")
    z = (t - c) / s
    z = z * (1.0 - _MARGIN) if z > 0 else z * (1.0 + _MARGIN)  # toward a larger tail
    log_p = float(special.log_ndtr(-z))
    return min(1.0, up(math.exp(log_p) * (1.0 + _MARGIN)))


def selection_eta_of_tail(p: float, max_keys: int) -> float:
    """``η = −Δ₀·log(1 − p)``, rounded up, for a per-key tail ``p`` (module docstring)."""
    d0 = _keys(max_keys)
    pp = check_scalar(p, "p", UNIT_OPEN) if p != 0.0 else 0.0
    if pp == 0.0:
        return 0.0
    return up(-d0 * math.log1p(-pp) * (1.0 + _MARGIN))


def selection_eta(sigma: float, tau: float, max_keys: int, max_per_key: float = 1.0) -> float:
    """The δ Gaussian thresholding at τ spends outside the μ-GDP composition: ``η`` of the
    module docstring, rounded up."""
    return selection_eta_of_tail(gaussian_tail(sigma, tau, max_per_key), max_keys)


def tail_for(eta: float, max_keys: int) -> float:
    """The largest per-key tail ``p`` with ``−Δ₀ log(1 − p) ≤ η``: ``p = −expm1(−η/Δ₀)``,
    rounded down."""
    e = check_scalar(eta, "eta", UNIT_OPEN)
    d0 = _keys(max_keys)
    return down(-math.expm1(-e / d0) * (1.0 - _MARGIN))


def gaussian_threshold(sigma: float, eta: float, max_keys: int, max_per_key: float = 1.0) -> float:
    """The threshold ``τ = Δ∞ + σ·Φ⁻¹(1 − p)`` with ``p`` = :func:`tail_for` ``(η, Δ₀)``,
    rounded up and checked: ``selection_eta(σ, τ, Δ₀, Δ∞) ≤ η``."""
    s = check_scalar(sigma, "sigma", POSITIVE)
    c = check_scalar(max_per_key, "max_records_per_key", POSITIVE)
    p = tail_for(eta, max_keys)
    z = -float(special.ndtri(p))  # Φ⁻¹(1 − p), accurate for small p
    z = z * (1.0 + _MARGIN) if z > 0 else z * (1.0 - _MARGIN)
    tau = up(c + up(s * z))
    step = abs(tau) * 1e-12 + s * 1e-12
    while selection_eta(s, tau, max_keys, c) > eta:  # only if the margins were not enough
        tau, step = tau + step, 2.0 * step
    return tau


def thresholded_delta(mu: float, epsilon: float, eta: float) -> float:
    """``δ_μ(ε) + η``: the δ at ε of a release that is μ-GDP apart from a selection that
    spent η (module docstring), rounded up."""
    d = float(gdp_delta(mu, epsilon))
    return min(1.0, up(d + check_scalar(eta, "eta", POSITIVE) if eta else d))


def gdp_budget(epsilon: float, delta: float, eta: float) -> float:
    """The μ-GDP budget left at ``(ε, δ)`` once η is spent outside it:
    ``gdp_mu(ε, δ − η)`` (the largest μ with ``δ_μ(ε) + η ≤ δ``); 0 if ``η ≥ δ``."""
    e = check_scalar(epsilon, "epsilon", POSITIVE)
    d = check_scalar(delta, "delta", UNIT_OPEN)
    rest = sub_down(d, check_scalar(eta, "eta", POSITIVE) if eta else 0.0)
    return float(gdp_mu(e, rest)) if rest > 0 else 0.0


def split(epsilon: float, delta: float, share: float = SELECTION_SHARE) -> tuple[float, float]:
    """``(μ, η)`` for a thresholded release at ``(ε, δ)``: η = ``share``·δ (rounded down)
    for the selection and μ = :func:`gdp_budget` ``(ε, δ, η)`` for the noisy counts, so
    that ``δ_μ(ε) + η ≤ δ``."""
    d = check_scalar(delta, "delta", UNIT_OPEN)
    f = check_scalar(share, "share", UNIT_OPEN)
    eta = d * f
    if Fraction(eta) > Fraction(d) * Fraction(f):  # the product rounded up: one ulp down
        eta = down(eta)
    return gdp_budget(epsilon, d, eta), eta


def exact_delta(
    sigma: float, tau: float, max_keys: int, max_per_key: float, epsilon: float
) -> float:
    """The exact δ(ε) of Gaussian thresholding (module docstring): the larger of the two
    hockey-stick divergences, maximised over the number ``j`` of keys only the unit holds.
    Not rounded: a reference for the bound :func:`thresholded_delta`, and for reports."""
    s, c, d0 = float(sigma), float(max_per_key), _keys(max_keys)
    e = float(epsilon)
    p = float(special.ndtr(-(float(tau) - c) / s))
    best = 0.0
    for j in range(d0 + 1):
        mu_j = math.sqrt(d0 - j) * c / s
        eta = -j * math.log1p(-p)
        q = math.exp(-eta)
        if mu_j == 0.0:
            a, b = 1.0 - q, max(0.0, 1.0 - math.exp(e - eta)) if e < eta else 0.0
        else:
            a = q * float(gdp_delta(mu_j, e + eta)) + (1.0 - q)
            b = _gdp_hockey(mu_j, e - eta)
        best = max(best, a, b)
    return best


def _gdp_hockey(mu: float, eps: float) -> float:
    """``sup_E P(E) − e^ε Q(E)`` for ``P = N(0,1)``, ``Q = N(μ,1)``, any real ε (for
    ε < 0 the weight is below 1: ``δ = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)`` still holds)."""
    if eps >= 0.0:
        return float(gdp_delta(mu, eps))
    t = eps / mu
    return float(special.ndtr(mu / 2 - t) - np.exp(eps) * special.ndtr(-mu / 2 - t))


def plan_selections(
    epsilon: float, delta: float, k: int, share: float = SELECTION_SHARE
) -> dict[str, float]:
    """``k`` thresholded releases (keys not known in advance) that fit a budget ``(ε, δ)``.

    Each release is specified at ``(ε_q, δ_q)`` with ``δ_q = δ/k`` (rounded down): its
    selection spends ``η_q = share·δ_q`` (:func:`split`) and its counts at most
    ``μ_q = gdp_mu(ε_q, δ_q − η_q)``; together they are ``(ε, δ_{√k μ_q}(ε) + k η_q)``-DP
    (module docstring), so they fit iff ``k μ_q² ≤ gdp_mu(ε, δ − k η_q)²`` — the ledger's
    test, exactly (``Ledger.charge``).  ``ε_q`` is the largest double found by bisection
    that passes it (at least ``ε·2⁻⁴⁰``).  Returns ``epsilon_q, delta_q, eta_q, mu_q,
    eta_total, mu_budget`` (the μ budget left once the ``k`` η's are spent); ``ValueError``
    if even the smallest ``ε_q`` does not fit.
    """
    e = check_scalar(epsilon, "epsilon", POSITIVE)
    d = check_scalar(delta, "delta", UNIT_OPEN)
    kk = check_int(k, "k", 1)
    dq = d / kk
    if Fraction(dq) * kk > Fraction(d):
        dq = down(dq)
    _, eta_q = split(e, dq, share)  # η does not depend on ε
    eta_total = sum_up([eta_q] * kk)
    rest = sub_down(d, eta_total)
    mu_b = float(gdp_mu(e, rest)) if rest > 0 else 0.0

    def ok(eq: float) -> bool:
        return fits_budget([split(eq, dq, share)[0]], mu_b, count=kk)

    floor = e * 2.0**-40
    if not ok(floor):
        raise ValueError(
            f"{kk} selections at delta={dq:g} each cannot fit the budget (epsilon={e:g}, "
            f"delta={d:g}): even epsilon={floor:g} is charged too much"
        )
    lo, hi = floor, e
    while ok(hi):  # ε_q ≤ ε unless the δ split makes a single release cheaper
        lo, hi = hi, 2.0 * hi + 1.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return {
        "epsilon_q": lo,
        "delta_q": dq,
        "eta_q": eta_q,
        "mu_q": split(lo, dq, share)[0],
        "eta_total": eta_total,
        "mu_budget": mu_b,
    }
