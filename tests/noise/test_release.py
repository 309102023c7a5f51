"""``dpgauss.noise.release``: the lattice laws' ``value_limit`` is exactly the edge of what
their releases hold (a release clamps its aggregate there: ``release/estimate.add_noise``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.noise.lattice import add_lattice_noise, round_to_grid
from dpgauss.noise.release import DiscreteGaussianNoise, DiscreteLaplaceNoise, value_limit


@settings(max_examples=60, deadline=None)
@given(k=st.integers(-20, 40), mantissa=st.sampled_from([1.0, 0.75, 0.6180339887]))
def test_a_rounded_release_holds_its_limit_and_refuses_just_beyond(k: int, mantissa: float) -> None:
    """Rounded laws (any grid, a power of two or not): ``round(±limit/γ)`` is an int64 below
    2^51, and the grid's value 2^51·γ is refused."""
    grid = mantissa * 2.0**-k
    limit = value_limit(grid, rounded=True)
    r = round_to_grid(np.array([limit, -limit]), grid)
    assert abs(int(r[0])) < 2**51 and int(r[0]) == -int(r[1])
    with pytest.raises(ValueError, match="2\\^51"):
        round_to_grid(np.array([2.0**51 * grid]), grid)


@pytest.mark.parametrize("k", [0, 1, 4, 6, 10, 20, 30])
def test_an_integer_release_holds_its_limit_and_refuses_the_next_integer(k: int) -> None:
    """Integer laws on γ = 2^-k: the limit is the largest integer (as a float) below
    2^(62−k); it is released, and 2^(62−k) itself is refused."""
    grid = 2.0**-k
    law = DiscreteGaussianNoise(sigma_lattice=300.0, grid=grid, rounded=False, dim=2)
    limit = law.value_limit
    assert limit == math.floor(limit) and limit < 2.0 ** (62 - k)
    assert limit == value_limit(grid, rounded=False)
    out = add_lattice_noise(np.array([limit, -limit]), law, np.random.default_rng(1))
    assert np.all(np.isfinite(out)) and abs(out[0] - limit) < 1e-6 * limit + 1e5 * grid
    with pytest.raises(ValueError, match="magnitude below"):
        add_lattice_noise(np.array([2.0 ** (62 - k), 0.0]), law, np.random.default_rng(1))


def test_every_lattice_law_states_its_limit() -> None:
    gauss = DiscreteGaussianNoise(sigma_lattice=40.0, grid=0.25, rounded=True, dim=3)
    laplace = DiscreteLaplaceNoise(scale=7.0, grid=0.5, rounded=True)
    assert gauss.value_limit == (2.0**51 - 2.0) * 0.25
    assert laplace.value_limit == (2.0**51 - 2.0) * 0.5
    out = add_lattice_noise(np.array([laplace.value_limit]), laplace, np.random.default_rng(2))
    assert np.isfinite(out).all()
