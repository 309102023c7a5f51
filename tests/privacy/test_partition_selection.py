"""Gaussian thresholding (:mod:`dpgauss.privacy.partition_selection`) against the definition.

The reference integrates the hockey-stick divergence ``sup_E P_A(E) − e^ε P_B(E)`` of the
*actual* released outputs (each key: nothing, or its noisy count above τ) at 50 digits, for
a unit holding one or two keys, shared with other units or its own; the module's exact
profile must dominate it, and its bound ``δ_μ(ε) + η`` must dominate both.
"""

from __future__ import annotations

import math

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.privacy import gdp_delta
from dpgauss.privacy.partition_selection import (
    exact_delta,
    gaussian_tail,
    gaussian_threshold,
    gdp_budget,
    selection_eta,
    split,
    tail_for,
    thresholded_delta,
)

mp = mpmath.mp


def _phi(x, m, s):
    return mpmath.npdf(x, m, s)


def _released(c, s, tau):
    """P[c + N(0, s²) > τ]."""
    return 1 - mpmath.ncdf((tau - c) / s)


def _one_key_divergence(ca, cb, s, tau, weight_a, eps):
    """``∫ max(0, w·f_A − e^ε f_B)`` over one key's outputs (∅, or y > τ), where the key's
    count is ``ca`` in A and ``cb`` in B."""
    e = mpmath.exp(eps)
    none = max(0, weight_a * (1 - _released(ca, s, tau)) - e * (1 - _released(cb, s, tau)))

    def gap(y):
        return max(0, weight_a * _phi(y, ca, s) - e * _phi(y, cb, s))

    # the densities cross once: split the integral there
    pts = [tau, mpmath.inf]
    if ca != cb:
        cross = (ca + cb) / 2 + s**2 * (eps - mpmath.log(weight_a)) / (ca - cb)
        if cross > tau:
            pts = [tau, cross, mpmath.inf]
    return none + mpmath.quad(gap, pts)


def brute_delta(s, tau, c_unit, shared_count, unique, eps):
    """The exact δ(ε) of the thresholded release, both directions, for a unit adding
    ``c_unit`` records to one key shared with others (count ``shared_count`` without it),
    or none (shared_count None), and to ``unique`` keys of its own (0, 1 or 2)."""
    with mp.workdps(50):
        s, tau, c, eps = map(mpmath.mpf, (s, tau, c_unit, eps))
        q = (1 - _released(c, s, tau)) ** unique  # A releases none of the unit's own keys
        out = []
        for direction in ("A||B", "B||A"):
            if shared_count is None:
                if direction == "A||B":
                    out.append(1 - q)  # any own key released: impossible under B
                else:
                    out.append(max(0, 1 - mpmath.exp(eps) * q))
                continue
            n = mpmath.mpf(shared_count)
            if direction == "A||B":  # P_A = q·(shared under A) + (1 − q)·(own released)
                out.append(_one_key_divergence(n + c, n, s, tau, q, eps) + (1 - q))
            else:  # P_B(E) − e^ε q P_A(E) on outputs without own keys
                out.append(
                    _one_key_divergence(n, n + c, s, tau, mpmath.mpf(1), eps - mpmath.log(q))
                    if q < 1
                    else _one_key_divergence(n, n + c, s, tau, mpmath.mpf(1), eps)
                )
        return max(out)


CASES = [
    # sigma, eta, max_keys, max_per_key, eps
    (5.0, 5e-7, 1, 1.0, 1.0),
    (2.0, 1e-3, 2, 1.0, 0.5),
    (3.0, 1e-5, 2, 2.0, 2.0),
    (1.0, 1e-2, 2, 1.0, 0.1),
]


@pytest.mark.parametrize(("sigma", "eta", "d0", "c", "eps"), CASES)
def test_the_bound_dominates_the_definition(sigma, eta, d0, c, eps):
    tau = gaussian_threshold(sigma, eta, d0, c)
    got_eta = selection_eta(sigma, tau, d0, c)
    assert got_eta <= eta
    mu = math.sqrt(d0) * c / sigma
    bound = thresholded_delta(mu, eps, got_eta)
    exact = exact_delta(sigma, tau, d0, c, eps)
    assert exact <= bound * (1 + 1e-12)
    for unique in range(d0 + 1):
        shared = None if unique == d0 else 3  # the unit's other keys are shared (count 3)
        brute = brute_delta(sigma, tau, c, shared, unique, eps)
        assert float(brute) <= exact * (1 + 1e-9) + 1e-300, (unique, float(brute), exact)
    # the bound is nearly tight: within the selection's own δ of the Gaussian part
    assert bound - float(gdp_delta(mu, eps)) <= 1.0001 * got_eta


def test_all_own_keys_reach_the_exact_profile():
    """A unit whose keys are all its own: the brute force equals ``exact_delta``."""
    sigma, eta, d0, c, eps = 2.0, 1e-3, 2, 1.0, 0.5
    tau = gaussian_threshold(sigma, eta, d0, c)
    brute = brute_delta(sigma, tau, c, None, d0, eps)
    exact = exact_delta(sigma, tau, d0, c, eps)
    # j = Δ₀ is one of the exact profile's cases; it may not be the largest
    assert float(brute) <= exact * (1 + 1e-12)
    with mp.workdps(50):
        p = _released(mpmath.mpf(c), mpmath.mpf(sigma), mpmath.mpf(tau))
        assert abs(brute - (1 - (1 - p) ** d0)) < mpmath.mpf("1e-40")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    sigma=st.floats(0.1, 100.0),
    log_eta=st.floats(-15.0, -1.0),
    d0=st.integers(1, 50),
    c=st.sampled_from([1.0, 2.0, 5.0]),
)
def test_threshold_spends_at_most_eta_and_little_less(sigma, log_eta, d0, c):
    """τ is rounded up and checked: the tail at τ, at 50 digits, is at most the allowed p,
    and τ is within 1e-9·σ of the exact threshold."""
    eta = 10.0**log_eta
    tau = gaussian_threshold(sigma, eta, d0, c)
    with mp.workdps(50):
        p = _released(mpmath.mpf(c), mpmath.mpf(sigma), mpmath.mpf(tau))
        eta_exact = -d0 * mpmath.log1p(-p)
        assert eta_exact <= eta
        exact_tau = c + sigma * mpmath.sqrt(2) * mpmath.erfinv(
            1 - 2 * (1 - mpmath.exp(-mpmath.mpf(eta) / d0))
        )
        assert tau >= exact_tau and tau - exact_tau <= 1e-9 * sigma + 1e-12 * abs(exact_tau)


def test_tail_and_eta_round_the_safe_way():
    p = tail_for(1e-6, 10)
    assert p <= -math.expm1(-1e-7)
    tau = 7.5
    assert gaussian_tail(2.0, tau, 1.0) >= float(1 - mpmath.ncdf((tau - 1.0) / 2.0))


def test_split_fits_exactly_its_delta():
    mu, eta = split(1.0, 1e-6)
    assert eta == 5e-7
    assert float(gdp_delta(mu, 1.0)) + eta <= 1e-6
    assert gdp_budget(1.0, 1e-6, 1e-6) == 0.0
    assert gdp_budget(1.0, 1e-6, 0.0) == pytest.approx(
        float(__import__("dpgauss").gdp_mu(1.0, 1e-6))
    )


def test_the_issue_example_at_one_and_1e_minus_6():
    """#30: 100 keys of 300 units each are released (τ far below 300), a key of one unit is
    released with probability at most η (3,000 of them: at most 3,000·p)."""
    mu, eta = split(1.0, 1e-6)
    sigma = 1.0 / mu
    tau = gaussian_threshold(sigma, eta, 1, 1.0)
    assert 20.0 < tau < 40.0
    assert gaussian_tail(sigma, tau, 1.0) <= eta
    miss = float(mpmath.ncdf((tau - 300) / sigma))  # a 300-unit key below τ
    assert 100 * miss < 1e-30


def test_arguments_are_named():
    with pytest.raises(ValueError, match="max_keys_per_unit"):
        gaussian_threshold(1.0, 1e-6, 0)
    with pytest.raises(ValueError, match="eta"):
        gaussian_threshold(1.0, 0.0, 1)
    with pytest.raises(ValueError, match="sigma"):
        gaussian_tail(-1.0, 1.0)
