"""Adversarial review of the exact sampler's table inversion and two-level path: bounded
memory for huge sizes, the block table's decisions on the real σ' against a 45-digit CDF,
the guide search on adversarial leads, and the block table's tail."""

from __future__ import annotations

import tracemalloc
from fractions import Fraction
from types import SimpleNamespace

import mpmath
import numpy as np
import pytest
from mpmath import mp

import dpgauss.noise.discrete_sampler as dg
from dpgauss.noise.discrete_sampler import discrete_gaussian

SUM_SIGMA = 34875.761648714855  # GaussianMechanism(1, 1e-6, 1)'s σ_L on the grid 2^-13
COUNT_SIGMA = 270.37960332144536  # its σ_L for counts on the grid 2^-6


@pytest.mark.parametrize("sigma", [COUNT_SIGMA, SUM_SIGMA])
def test_scratch_memory_is_bounded_for_a_huge_size(sigma):
    """2·10^6 values: the memory beyond the 16 MB output stays under 24 MB (the sampler
    works in batches; without them the two-level path took ~190 MB, ~96 bytes a value)."""
    n = 2_000_000
    discrete_gaussian(sigma, 16, rng=1)  # tables built outside the measurement
    tracemalloc.start()
    try:
        out = discrete_gaussian(sigma, n, rng=np.random.default_rng(60))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.shape == (n,)
    assert peak - out.nbytes < 24 * 2**20, peak
