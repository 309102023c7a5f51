"""ε from a target error (:mod:`dpgauss.privacy.target_error`): the least ε whose calibrated
σ meets R, checked against mpmath; the decimals; the denoised model's closed form."""

from __future__ import annotations

import math
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.privacy import analytic_gaussian_sigma
from dpgauss.privacy.target_error import (
    EPSILON_FLOOR,
    _decimal_down,
    decimal_up,
    denoised_sigma,
    smallest_epsilon,
)

from .reference import hp, mpf_exact, ref_epsilon


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    target=st.floats(1e-3, 1e4),
    delta=st.sampled_from([1e-3, 1e-6, 1e-10]),
    sens=st.sampled_from([0.5, 1.0, 5.0]),
)
def test_smallest_epsilon_of_the_analytic_sigma(target, delta, sens):
    """Not below the exact ε* at which the analytic σ equals R (mpmath), and the 10-digit
    decimal just below the answer misses the target: the least that meets it."""

    def sigma_of(e: float) -> float:
        return float(analytic_gaussian_sigma(e, delta, sens))

    eps = smallest_epsilon(sigma_of, target, delta, sens)
    assert sigma_of(eps) <= target
    star = ref_epsilon(sens / target, delta)
    with hp():
        assert mpf_exact(eps) >= star or float(star) == 0.0
    below = _decimal_down(math.nextafter(eps, 0.0))
    if eps > EPSILON_FLOOR:
        assert sigma_of(below) > target


def test_a_target_met_by_any_epsilon_gives_the_floor():
    assert smallest_epsilon(lambda e: 1.0, 2.0, 1e-6) == EPSILON_FLOOR


def test_an_unreachable_target_is_refused():
    with pytest.raises(ValueError, match="target_rmse=1e-20 is not met"):
        smallest_epsilon(lambda e: 1.0, 1e-20, 1e-6)
    with pytest.raises(ValueError, match="target_rmse must be"):
        smallest_epsilon(lambda e: 1.0, -1.0, 1e-6)


def test_a_step_function_is_still_met():
    """A σ(ε) with steps (not smooth: Brent falls back to bisection) still gives the least
    decimal that meets the target."""

    def steps(e: float) -> float:
        return 10.0 / math.floor(1 + 4 * e)  # 10, 5, 3.33, 2.5, ... at ε = 0, 0.25, 0.5, ...

    eps = smallest_epsilon(steps, 3.4, 1e-6)
    assert eps == 0.5


@settings(max_examples=200, deadline=None, derandomize=True)
@given(x=st.floats(1e-300, 1e300))
def test_decimals_bracket_their_argument(x):
    up, down = decimal_up(x), _decimal_down(x)
    assert down <= x <= up
    for v in (up, down):
        assert len(Decimal(repr(v)).normalize().as_tuple().digits) <= 10 or v == x
    assert up == down or up > down


@pytest.mark.parametrize(
    ("target", "sigma0", "rmse0", "want"),
    [
        (8.0, 20.0, 4.0, 40.0),  # above r0: the ratio holds, σ = σ0·R/r0
        (2.0, 20.0, 4.0, 20.0 * 0.5**1.5),  # below r0: the σ^{2/3} rate, σ = σ0(R/r0)^{3/2}
        (4.0, 20.0, 4.0, 20.0),  # at r0: σ0
        (30.0, 20.0, 25.0, 30.0),  # r0 above σ0 is taken as σ0: raw meets R at σ = R
        (0.01, 20.0, 4.0, 0.01),  # never below the raw answer σ = R
    ],
)
def test_denoised_sigma_closed_form(target, sigma0, rmse0, want):
    got = denoised_sigma(target, sigma0, rmse0)
    assert got.sigma == pytest.approx(want, rel=1e-14)
    # the model r̂(σ) = min(σ, r0·max(σ/σ0, (σ/σ0)^{2/3})) meets the target there
    r0 = min(rmse0, sigma0)
    u = got.sigma / sigma0
    assert min(got.sigma, r0 * max(u, u ** (2 / 3))) <= target * (1 + 1e-12)


def test_denoised_sigma_names_its_arguments():
    with pytest.raises(ValueError, match="sigma0"):
        denoised_sigma(1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="rmse0"):
        denoised_sigma(1.0, 1.0, -2.0)
