"""Secure lattice releases: exact rounding, the noise law, exact intervals, grid choice."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from mpmath import mp, mpf
from scipy import stats

import dpgauss.noise.release as release_module
from dpgauss import analytic_gaussian_sigma
from dpgauss.noise.discrete_sampler import discrete_gaussian
from dpgauss.noise.lattice import (
    choose_grid,
    laplace_lattice_scale,
    lattice_sigma,
    round_to_grid,
    sample_discrete_laplace,
    secure_gaussian_release,
    secure_laplace_release,
)
from dpgauss.noise.mechanisms import GaussianMechanism, LaplaceMechanism
from dpgauss.noise.randomness import SecureRandom
from dpgauss.noise.release import DiscreteGaussianNoise, DiscreteLaplaceNoise
from dpgauss.privacy.discrete_multivariate import (
    discrete_gaussian_vector_delta,
    integer_shift_bound,
)

# ------------------------------------------------------------------------------- helpers


def dg_pmf(sigma: float, half: int) -> np.ndarray:
    """N_Z(0, σ²) probabilities of -half..half (Z summed over ±(40σ + 40))."""
    span = max(half, int(40 * sigma) + 40)
    x = np.arange(-span, span + 1, dtype=np.float64)
    w = np.exp(-(x * x) / (2 * sigma * sigma))
    return (w / w.sum())[span - half : span + half + 1]


def dg_cdf(sigma: float):
    """P(Y ≤ y) of N_Z(0, σ²) for integer arrays y (|y| ≤ 12σ + 20), from summed pmf."""
    half = int(12 * sigma) + 20
    cdf = np.cumsum(dg_pmf(sigma, half))
    cdf += (1.0 - cdf[-1]) / 2.0  # the mass beyond ±half, split evenly
    return lambda y: cdf[np.asarray(y) + half]


def dl_cdf(t: float):
    """P(Y ≤ y) for P[Y = y] ∝ e^{−|y|/t}, in closed form."""
    q = math.exp(-1.0 / t)

    def cdf(y):
        y = np.asarray(y, dtype=np.float64)
        return np.where(y >= 0, 1 - np.exp(-(y + 1) / t) / (1 + q), np.exp(y / t) / (1 + q))

    return cdf


def chi2_pvalue(samples: np.ndarray, cdf, scale: float, bins: int = 40) -> float:
    """Pearson p-value on ~equal-mass bins (−inf, c₀], (c₀, c₁], …, (c_K, inf), integer
    cut points placed at the quantiles of a continuous law of the same scale."""
    quant = stats.norm.ppf(np.linspace(0, 1, bins + 1)[1:-1]) * scale
    cuts = np.unique(np.floor(quant).astype(np.int64))
    masses = np.diff(np.concatenate([[0.0], cdf(cuts), [1.0]]))
    counts = np.bincount(np.searchsorted(cuts, samples, side="left"), minlength=cuts.size + 1)
    keep = masses * samples.size >= 5
    assert keep.all()
    return float(stats.chisquare(counts, masses * samples.size).pvalue)


# ------------------------------------------------------------------------------ rounding


def test_round_to_grid_is_exact_for_any_grid():
    rng = np.random.default_rng(3)
    for grid in (0.1, 0.3, 1.0 / 3.0, 7.77, 2.0**-10):
        k = rng.integers(-(10**9), 10**9, size=300)
        ties = (k + 0.5) * grid  # float products: exactly, or ulps off, half-way
        near = np.concatenate([ties, np.nextafter(ties, np.inf), np.nextafter(ties, -np.inf)])
        values = np.concatenate([near, rng.normal(0, 1e6, 300), [0.0, -0.0, 1e-300]])
        got = round_to_grid(values, grid)
        want = [round(Fraction(float(v)) / Fraction(grid)) for v in values]
        assert got.dtype == np.int64 and got.tolist() == want, grid


def test_round_to_grid_rejects_values_too_large_for_the_grid():
    with pytest.raises(ValueError, match=r"2\^51.*at index \(1,\).*coarser grid"):
        round_to_grid(np.array([1.0, 1e30]), 1.0)


def test_choose_grid_rule():
    for dim in (1, 2, 100, 12345, 10**6):
        for sens in (0.3, 1.0, 7.0):
            g = choose_grid(4.0 * sens, dim, sens)
            assert math.frexp(g)[0] == 0.5  # a power of two
            assert g * math.sqrt(dim) <= 0.01 * sens < 2 * g * math.sqrt(dim)
            g1 = choose_grid(sens, dim, sens, norm=1)
            assert g1 * dim <= 0.01 * sens < 2 * g1 * dim
    # the sampler's range wins over the 1 % rule only for absurd sigma/grid ratios
    assert choose_grid(1e12, 4, 1.0) == 2.0 ** (40 - 36)
    with pytest.raises(ValueError, match="norm"):
        choose_grid(1.0, 2, 1.0, norm=3)
    with pytest.raises(ValueError, match="dim"):
        choose_grid(1.0, 2.5, 1.0)


# ---------------------------------------------------------------------- the noise law


@pytest.mark.slow
def test_secure_gaussian_lattice_noise_has_the_discrete_gaussian_law():
    """Seeded Generator (test hook): (release/γ − round(values/γ)) ~ N_Z(0, σ_L²)."""
    n = 200_000
    values = np.linspace(-3.0, 3.0, n)
    noisy, law = secure_gaussian_release(values, 1.0, 1e-6, 1.0, source=np.random.default_rng(5))
    y = noisy / law.grid - round_to_grid(values, law.grid)
    assert np.array_equal(y, np.round(y))  # exactly on the lattice
    s = law.sigma_lattice
    assert chi2_pvalue(y.astype(np.int64), dg_cdf(s), s) > 1e-3
    assert law.rounded and law.grid == choose_grid(analytic_gaussian_sigma(1.0, 1e-6, 1.0), n, 1.0)


def test_secure_path_default_rng_has_the_law():
    """The OS-CSPRNG path (the default of release) over many coordinates."""
    n = 100_000
    values = np.full(n, 2.5)
    rel = GaussianMechanism(1.0, 1e-5, 2.0).release(values)
    law = rel.noise
    assert isinstance(law, DiscreteGaussianNoise) and "secure lattice" in rel.mechanism
    y = (rel.values - 2.5) / law.grid
    assert np.array_equal(y, np.round(y))
    s = law.sigma_lattice
    assert chi2_pvalue(y.astype(np.int64), dg_cdf(s), s) > 1e-3


def test_secure_laplace_lattice_noise_has_the_discrete_laplace_law():
    n = 100_000
    values = np.linspace(-1.0, 1.0, n)
    noisy, law = secure_laplace_release(values, 0.5, 2.0, source=np.random.default_rng(8))
    y = noisy / law.grid - round_to_grid(values, law.grid)
    assert chi2_pvalue(y.astype(np.int64), dl_cdf(law.scale), 1.5 * law.scale) > 1e-3
    # secure source, small integer scale: exact sampler from CKS20 Alg. 2
    ys = sample_discrete_laplace(3, (50_000,), SecureRandom())
    assert chi2_pvalue(ys, dl_cdf(3.0), 4.0, bins=15) > 1e-3


def test_laplace_lattice_is_epsilon_dp_by_construction():
    t, grid = laplace_lattice_scale(0.7, 3.0, 1000)
    sens_lattice = math.floor(Fraction(3.0) / Fraction(grid) + 1000)
    assert Fraction(sens_lattice, t) <= Fraction(0.7)  # e^{Δ_L / t} ≤ e^ε
    assert t == math.ceil(Fraction(sens_lattice) / Fraction(0.7))


@pytest.mark.slow
def test_lattice_sigma_is_certified_and_within_one_percent():
    for dim in (1, 100, 10**4, 10**6):
        sigma_l, grid = lattice_sigma(1.0, 1e-6, 1.0, dim)
        sens_l = 1.0 / grid + math.sqrt(dim)
        assert discrete_gaussian_vector_delta(sigma_l, 1.0, sens_l, dim) <= 1e-6
        cont = analytic_gaussian_sigma(1.0, 1e-6, 1.0)
        assert cont <= sigma_l * grid <= 1.011 * cont, dim


def test_grid_override():
    values = np.array([0.1, 0.2, 7.3])
    rel = GaussianMechanism(1.0, 1e-6).release(values, grid=0.25)
    assert rel.noise.grid == 0.25
    assert np.array_equal(rel.values / 0.25, np.round(rel.values / 0.25))
    assert rel.noise.sigma_lattice == lattice_sigma(1.0, 1e-6, 1.0, 3, 0.25)[0]
    rel = LaplaceMechanism(1.0, 1.0).release(values, grid=0.5)
    assert rel.noise.grid == 0.5 and np.array_equal(rel.values * 2, np.round(rel.values * 2))
    for bad, exc in (
        (0.0, ValueError),
        (-1.0, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        ([0.1, 0.2], TypeError),
        ("0.1", TypeError),
    ):
        with pytest.raises(exc, match="grid"):
            GaussianMechanism(1.0, 1e-6).release(values, grid=bad)


def test_coarse_grid_outside_sampler_range():
    with pytest.raises(ValueError, match="sampler's range"):
        secure_gaussian_release(np.zeros(2), 1.0, 1e-6, 1.0, grid=1e-12, source=SecureRandom())


# ------------------------------------------------------------------ exact half-widths


def ref_half_width(pmf, level: float, rounded: bool) -> float:
    """Brute force: the smallest W ∈ ½Z whose worst-case coverage over offsets e ∈
    {−1/2, …, 1/2} (a fine grid, endpoints included) is ≥ level; pmf(y) in mpmath."""
    offsets = [mpf(0)] if not rounded else [mpf(j) / 40 - mpf(1) / 2 for j in range(41)]
    w2 = 0
    while True:
        w = mpf(w2) / 2
        worst = min(
            mpmath.fsum(pmf(y) for y in range(int(-w - 2), int(w + 3)) if abs(y + e) <= w)
            for e in offsets
        )
        if worst >= level:
            return float(w)
        w2 += 1


@pytest.mark.parametrize("sigma", [0.4, 1.3, 3.0])
@pytest.mark.parametrize("level", [0.3, 0.9, 0.99])
@pytest.mark.parametrize("rounded", [False, True])
def test_discrete_gaussian_half_width_is_exact(sigma, level, rounded):
    with mp.workdps(30):
        s2 = mpf(sigma) ** 2
        z = mpmath.fsum(mpmath.exp(-(mpf(y) ** 2) / (2 * s2)) for y in range(-200, 201))

        def pmf(y):
            return mpmath.exp(-(mpf(y) ** 2) / (2 * s2)) / z

        want = ref_half_width(pmf, mpf(level), rounded)
    assert DiscreteGaussianNoise(sigma, 1.0, rounded).half_width(level) == want


@pytest.mark.slow
@pytest.mark.parametrize("scale", [0.5, 2.0, 7.0])
@pytest.mark.parametrize("level", [0.3, 0.9, 0.99])
@pytest.mark.parametrize("rounded", [False, True])
def test_discrete_laplace_half_width_is_exact(scale, level, rounded):
    with mp.workdps(30):
        q = mpmath.exp(-1 / mpf(scale))

        def pmf(y):
            return (1 - q) / (1 + q) * q ** abs(y)

        want = ref_half_width(pmf, mpf(level), rounded)
    assert DiscreteLaplaceNoise(scale, 1.0, rounded).half_width(level) == want


def test_half_width_far_tail_and_grid_units():
    law = DiscreteGaussianNoise(25.0, 2.0**-7, rounded=False)
    level = 1 - 1e-12
    w = law.half_width(level)
    k = round(w * 2**7)
    pmf = dg_pmf(25.0, 400)
    # 1 − C(k) ≤ 1e-12 < 1 − C(k − 1), the tails summed from the outside in
    tail = lambda j: 2 * np.sum(pmf[400 + j + 1 :][::-1])  # noqa: E731
    assert tail(k) <= 1e-12 < tail(k - 1)


def test_half_width_large_sigma_matches_direct_summation(monkeypatch):
    """σ > 2^16 uses Euler-Maclaurin brackets: compare with the direct sums at σ ≈ 1e4."""
    for sigma in (3000.0, 12345.6):
        for level in (0.2, 0.95, 0.999999):
            for rounded in (False, True):
                direct = DiscreteGaussianNoise(sigma, 1.0, rounded).half_width(level)
                monkeypatch.setattr(release_module, "_DIRECT_MAX_SIGMA", 1.0)
                em = DiscreteGaussianNoise(sigma, 1.0, rounded).half_width(level)
                monkeypatch.undo()
                assert em == direct


def test_std_is_exact():
    with mp.workdps(30):
        for sigma in (0.3, 0.8, 1.0, 2.5, 40.0):
            s2 = mpf(sigma) ** 2
            ys = range(-int(40 * sigma) - 10, int(40 * sigma) + 11)
            w = [mpmath.exp(-(mpf(y) ** 2) / (2 * s2)) for y in ys]
            var = mpmath.fsum(y * y * wi for y, wi in zip(ys, w, strict=True)) / mpmath.fsum(w)
            got = DiscreteGaussianNoise(sigma, 0.5).std
            assert got == pytest.approx(0.5 * float(mpmath.sqrt(var)), rel=1e-13)
            assert got <= 0.5 * sigma
        q = mpmath.exp(-1 / mpf(3))
        want = float(mpmath.sqrt(2 * q) / (1 - q))
        assert DiscreteLaplaceNoise(3.0, 1.0).std == pytest.approx(want, rel=1e-13)


@pytest.mark.parametrize("level", [0.5, 0.9, 0.99])
def test_rounded_interval_coverage_monte_carlo(level):
    """Worst-case offsets e = ±1/2 and e = 0: coverage matches the exact prediction ≥ level."""
    sigma, n = 1.7, 400_000
    law = DiscreteGaussianNoise(sigma, 1.0, rounded=True)
    w = law.half_width(level)
    y = discrete_gaussian(sigma, n, rng=np.random.default_rng(11))
    pmf = dg_pmf(sigma, 60)
    for e in (-0.5, 0.0, 0.5):
        covered = np.mean(np.abs(y + e) <= w)
        ys = np.arange(-60, 61)
        exact = pmf[np.abs(ys + e) <= w].sum()
        assert exact >= level
        assert abs(covered - exact) < 5 * math.sqrt(exact * (1 - exact) / n)


def test_discrete_releases_can_be_charged_by_a_gdp_accountant():
    from dpgauss.noise.mechanisms import DiscreteGaussianMechanism
    from dpgauss.privacy.accounting import GaussianAccountant

    releases = [
        GaussianMechanism(1.0, 1e-6).release(np.zeros(50)),
        DiscreteGaussianMechanism(1.0, 1e-6, 2.0).release(np.zeros(50, dtype=np.int64)),
    ]
    for rel in releases:
        law = rel.noise
        assert law.dim == 50
        # integer shifts: only ‖s‖ ≤ √⌊Δ_L²⌋ occurs
        sens = integer_shift_bound(law.lattice_sensitivity(rel.sensitivity))[1]
        mu = GaussianAccountant().add_release(rel)
        # at least the continuous μ of the lattice problem, and barely more
        assert sens / law.sigma_lattice <= mu <= 1.03 * sens / law.sigma_lattice
        acc = GaussianAccountant()
        acc.add_release(rel)
        assert 0.99 <= acc.epsilon(1e-6) <= 1.03
