"""The composition baselines of :mod:`dpgauss.privacy.composition` (basic, advanced/KOV, RDP,
zCDP) against their formulas at high precision, and the ordering ``exact`` ≤ every other."""

from __future__ import annotations

import math

import mpmath
import pytest

from dpgauss.privacy.composition import METHODS, composed_epsilon, composed_sigma, kov_delta

from .reference import ref_epsilon


@pytest.mark.parametrize(
    ("method", "k", "expected"),
    [
        ("exact", 10, 19.42),
        ("exact", 100, 96.72),
        ("rdp", 10, 20.55),
        ("rdp", 100, 100.72),
        ("basic", 10, 53.49),
        ("basic", 100, 577.6),
    ],
)
def test_issue_numbers_for_unit_sigma(method, k, expected):
    """ε at δ = 1e-6 of k releases with σ = Δ = 1 (numbers measured elsewhere)."""
    eps = composed_epsilon(method, k, 1.0, 1e-6)
    assert round(eps, 2 if expected < 500 else 1) == expected


def test_kov_single_release_is_randomised_response():
    for eps0 in (0.1, 1.0, 3.0):
        assert kov_delta(eps0, 0.0, 1, 0.0) == pytest.approx(math.tanh(eps0 / 2), rel=1e-12)
        assert kov_delta(eps0, 0.0, 1, eps0) == 0.0


def test_kov_never_worse_than_basic():
    for k in (2, 10, 50):
        eps0, d0 = 0.3, 1e-7
        assert kov_delta(eps0, d0, k, k * eps0) <= k * d0 * (1 + 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 10, 100])
def test_exact_needs_least_noise(k):
    sig = {m: composed_sigma(m, k, 1.0, 1e-6) for m in METHODS}
    assert sig["exact"] <= min(sig.values()) * (1 + 1e-12)
    assert sig["zcdp"] <= sig["rdp"] * (1 + 1e-9)  # continuous vs grid of orders
    assert sig["advanced"] <= sig["basic"] * (1 + 1e-9)
    for m in METHODS:  # each σ really composes to ε = 1 under its own method
        assert composed_epsilon(m, k, sig[m], 1e-6) == pytest.approx(1.0, abs=1e-6)


def _ref_kov(eps0: float, delta0: float, k: int, eps: float) -> mpmath.mpf:
    """KOV 2015, Thm 3.3, summed term by term at 50 digits."""
    with mpmath.workdps(50):
        e0, e = mpmath.mpf(eps0), mpmath.mpf(eps)
        total = mpmath.mpf(0)
        for ll in range(k + 1):
            term = mpmath.exp((k - ll) * e0) - mpmath.exp(e + ll * e0)
            if term > 0:
                total += mpmath.binomial(k, ll) * term
        d_kov = total / (1 + mpmath.exp(e0)) ** k
        return 1 - (1 - mpmath.mpf(delta0)) ** k * (1 - min(d_kov, 1))


@pytest.mark.parametrize(
    ("eps0", "delta0", "k", "eps"),
    [(0.1, 0.0, 10, 0.5), (0.5, 1e-8, 40, 5.0), (1.0, 1e-6, 7, 2.0), (0.01, 1e-9, 200, 0.3)],
)
def test_kov_delta_against_the_theorem(eps0, delta0, k, eps):
    got = kov_delta(eps0, delta0, k, eps)
    ref = _ref_kov(eps0, delta0, k, eps)
    with mpmath.workdps(50):
        assert abs(mpmath.mpf(got) - ref) <= 1e-12 * max(ref, mpmath.mpf("1e-300"))


@pytest.mark.parametrize(("k", "sigma"), [(1, 1.0), (10, 3.0), (1000, 40.0)])
def test_exact_is_the_composed_mu_and_rdp_its_formula(k, sigma):
    """``exact`` is the profile of √k·μ₀ (mpmath); ``rdp`` is the minimum over the grid of
    orders of ``αρ + log((α−1)/α) − (log δ + log α)/(α − 1)`` with ρ = kμ₀²/2."""
    delta = 1e-6
    mu = math.sqrt(k) / sigma
    assert composed_epsilon("exact", k, sigma, delta) == pytest.approx(
        float(ref_epsilon(mu, delta)), rel=1e-9
    )
    rho = k / sigma**2 / 2
    with mpmath.workdps(40):
        orders = [mpmath.mpf(1) + mpmath.mpf(i) / 10 for i in range(1, 100)]
        orders += [mpmath.mpf(a) for a in range(12, 64)]
        ref = min(
            a * rho + mpmath.log((a - 1) / a) - (mpmath.log(delta) + mpmath.log(a)) / (a - 1)
            for a in orders
        )
    assert composed_epsilon("rdp", k, sigma, delta) == pytest.approx(float(ref), rel=1e-12)
    # zCDP optimises over every α > 1, so it is never worse than the grid
    assert composed_epsilon("zcdp", k, sigma, delta) <= float(ref) * (1 + 1e-9)


def test_unknown_method_names_the_choices():
    with pytest.raises(ValueError, match="method must be one of"):
        composed_epsilon("moments", 2, 1.0, 1e-6)
