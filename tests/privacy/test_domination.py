"""The μ-GDP charge of a mechanism that is not exactly Gaussian
(:mod:`dpgauss.privacy.domination`)."""

from __future__ import annotations

import numpy as np
import pytest

import dpgauss
from dpgauss.privacy.domination import dominating_mu


def test_dominating_mu_bounds_the_discrete_profile():
    sigma = 3.0

    def profile(e):
        return dpgauss.discrete_gaussian_delta(sigma, e, 1)

    mu = dominating_mu(profile, 1 / sigma)
    assert 1 / sigma < mu < 1.01 / sigma  # the discrete profile is slightly worse
    eps = np.linspace(0.0, 8.0, 801)
    assert np.all(dpgauss.gdp_delta(mu, eps) >= profile(eps))
    # …and tight: a slightly smaller μ fails somewhere.
    assert np.any(dpgauss.gdp_delta(mu * (1 - 1e-4), eps) < profile(eps))


@pytest.mark.parametrize("mu0", [0.05, 1.0, 4.0])
def test_an_exact_gaussian_profile_is_charged_its_own_mu(mu0):
    """Given the μ-GDP profile itself, the smallest dominating μ is μ (rounded up, within
    the 1e-9 margin), never below it."""

    def profile(e):
        return dpgauss.gdp_delta(mu0, e)

    mu = dominating_mu(profile, mu0)
    assert mu0 <= mu <= mu0 * (1 + 1e-8)


def test_a_profile_of_zero_is_charged_nothing():
    """δ(ε) = 0 everywhere is certified by μ = 0 (no ε of the grid constrains it)."""
    assert dominating_mu(lambda e: np.zeros_like(e), 1.0) == 0.0
