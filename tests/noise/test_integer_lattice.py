"""Integer releases without rounding, and lattices over the changed coordinates only.

Every certified guarantee is re-derived in mpmath (the exact CKS20 Thm 7 profile for one
changed coordinate, the module's Poisson-summation and zCDP bounds otherwise, and the μ-GDP
profile of the charge), at the settings of issue #31 and at the extremes.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from mpmath import mp, mpf

from dpgauss import analytic_gaussian_sigma, gdp_mu
from dpgauss.noise.lattice import (
    INTEGER_LATTICE_SCALE_LOG2,
    add_lattice_noise,
    choose_grid,
    gaussian_lattice_law,
    integer_grid,
    integer_lattice_law,
    round_to_grid,
)
from dpgauss.noise.mechanisms import GaussianMechanism
from dpgauss.noise.release import DiscreteGaussianNoise
from dpgauss.privacy.discrete_multivariate import integer_shift_bound

from ..privacy.reference import ref_delta as ref_gdp_delta
from ..privacy.test_discrete_multivariate import ref_smoothing, ref_zcdp

DPS = 40


def ref_scalar_delta(sigma: float, eps: float, sens: int) -> mpf:
    """CKS20 Thm 7, the defining two-tail form, summed directly in mpmath."""
    with mp.workdps(DPS + 20):
        s2 = mpf(sigma) ** 2
        e = mpf(eps)
        a = e * s2 / sens - mpf(sens) / 2
        first = int(mpmath.floor(a)) + 1
        last = first + sens + int(40 * sigma) + 40
        # Z = Σ e^{−x²/(2σ²)} = θ₃(0, e^{−1/(2σ²)}) = σ√(2π) θ₃(0, e^{−2π²σ²}) (Poisson)
        dual = mpmath.exp(-2 * mpmath.pi**2 * s2)
        z = mpmath.sqrt(2 * mpmath.pi * s2) * mpmath.jtheta(3, 0, dual)
        w = [mpmath.exp(-(mpf(x) ** 2) / (2 * s2)) for x in range(first, last)]
        return +((mpmath.fsum(w) - mpmath.exp(e) * mpmath.fsum(w[sens:])) / z)


def ref_certified(law: DiscreteGaussianNoise, sensitivity: float, eps: float) -> mpf:
    """The δ(ε) the law's guarantee rests on, in mpmath: the exact profile when one
    coordinate changes, else the smaller of the module's two bounds."""
    sens_l = law.lattice_sensitivity(sensitivity)
    n = law.support
    if n == 1:
        return ref_scalar_delta(law.sigma_lattice, eps, math.floor(sens_l))
    m, bar = integer_shift_bound(sens_l)
    smooth = ref_smoothing(law.sigma_lattice, eps, bar, min(n, m))
    rho = m / (2.0 * law.sigma_lattice**2)
    with mp.workdps(DPS):
        return min(smooth, ref_zcdp(rho, eps))


def _issue_grid() -> list[object]:
    """The settings of issue #31; the corners in the contributor's loop, the rest slow."""
    out: list[object] = []
    for eps in (0.1, 0.5, 1.0, 2.0):
        for delta in (1e-6, 1e-9):
            for sens in (1.0, 2.0, 5.0, 10.0, 30.0):
                for d in (1, 4091, 10**5):
                    corner = (eps in (0.1, 2.0) and sens in (1.0, 2.0, 30.0) and d != 10**5) or (
                        eps == 1.0 and delta == 1e-6 and sens == 5.0
                    )
                    marks = () if corner else (pytest.mark.slow,)
                    out.append(pytest.param(eps, delta, sens, d, marks=marks))
    return out


ISSUE = _issue_grid()


@pytest.mark.parametrize(("eps", "delta", "sens", "d"), ISSUE)
def test_counts_get_the_analytic_sigma_within_1e4(eps, delta, sens, d):
    """Issue #31 item 1: delivered σ within 0.1 % of the analytic σ (measured: < 1e-5)."""
    law = GaussianMechanism(eps, delta, sens).noise_plan(d, integer=True).noise
    assert isinstance(law, DiscreteGaussianNoise) and not law.rounded
    analytic = float(analytic_gaussian_sigma(eps, delta, sens))
    assert abs(law.std / analytic - 1.0) < 1e-4
    assert law.event(sens).mu <= gdp_mu(eps, delta)  # fits a budget of its own (ε, δ)


@pytest.mark.parametrize(
    ("eps", "delta", "sens", "d"),
    [
        (1.0, 1e-6, 5.0, 4091),  # the issue's example
        (2.0, 1e-6, 1.0, 1),  # one coordinate: the exact profile
        (0.5, 1e-9, 2.0, 10**5),
        (1.0, 1e-300, 1.0, 1),  # tiny δ
        (1.0, 1e-300, 3.0, 10**6),
        (50.0, 1e-6, 1.0, 1),  # huge ε
        (50.0, 1e-6, 5.0, 10**6),
        (1e-3, 1e-6, 1.0, 1),  # tiny ε: γ = 1
        (0.1, 1e-6, 1000.0, 10**6),  # large Δ: every coordinate may change
    ],
)
def test_the_integer_law_is_certified_in_mpmath(eps, delta, sens, d):
    law = integer_lattice_law(eps, delta, sens, d)
    m, _ = integer_shift_bound(sens)
    assert law.support == min(d, m) and law.dim == d
    assert law.lattice_sensitivity(sens) == sens / law.grid  # no rounding term
    with mp.workdps(DPS):
        assert ref_certified(law, sens, eps) <= mpf(delta)
    # the charge: its GDP profile lies above the certified one, and fits (ε, δ)
    mu = law.event(sens).mu
    mu_b = float(gdp_mu(eps, delta))
    assert mu <= mu_b
    with mp.workdps(DPS):
        assert ref_gdp_delta(mu_b, eps) <= mpf(delta) * (1 + mpf(10) ** -12)
    for e in (0.0, 0.5 * eps, 2.0 * eps):
        cert = ref_certified(law, sens, e)
        with mp.workdps(DPS):
            assert cert <= ref_gdp_delta(mu, e) * (1 + mpf(10) ** -9) + mpf(10) ** -300
    analytic = float(analytic_gaussian_sigma(eps, delta, sens))
    assert abs(law.std / analytic - 1.0) < 1e-4


def test_integer_grid_rule():
    for sigma in (1e-3, 0.3, 2.23, 21.12, 255.9, 256.0, 300.0, 1e6):
        g = integer_grid(sigma)
        assert g <= 1.0 and math.frexp(g)[0] == 0.5
        scale = 2.0**INTEGER_LATTICE_SCALE_LOG2
        assert sigma / g >= scale or g == 1.0
        assert g == 1.0 or sigma / (2 * g) < scale  # the largest such grid
    assert integer_grid(300.0) == 1.0 and integer_grid(21.12) == 2.0**-4


def test_a_given_integer_grid_must_be_a_power_of_two_at_most_one():
    law = integer_lattice_law(1.0, 1e-6, 5.0, 10, grid=1.0)
    assert law.grid == 1.0 and law.support == 10
    for bad in (0.3, 2.0, 3.0):
        with pytest.raises(ValueError, match="power of two"):
            integer_lattice_law(1.0, 1e-6, 5.0, 10, grid=bad)


def test_shifts_of_integer_vectors_on_the_grid():
    """(q − q′)/γ is an integer vector of norm ≤ Δ/γ with at most ⌊Δ²⌋ non-zero entries."""
    rng = np.random.default_rng(3)
    gamma = 2.0**-5
    for _ in range(2000):
        s = rng.integers(-3, 4, size=rng.integers(1, 12))
        # a sensitivity is a bound rounded up (sensitivity.py's sqrt_up)
        sens = float(np.nextafter(math.sqrt(int(s @ s)), math.inf)) if s.any() else 1.0
        shift = s / gamma
        assert np.all(shift == np.round(shift))
        assert np.linalg.norm(shift) <= sens / gamma * (1 + 1e-15)
        assert np.count_nonzero(shift) <= integer_shift_bound(sens)[0]


def test_integer_release_is_exactly_on_the_grid():
    mech = GaussianMechanism(1.0, 1e-6, 5.0)
    values = np.array([0, 3, 17, 2**40], dtype=np.int64)
    rel = mech.release(values.astype(np.float64), rng=np.random.default_rng(0), integer=True)
    assert rel.values.shape == (4,)  # a seed: floating-point noise, no grid
    rel = mech.release(values.astype(np.float64), integer=True, changed=2)
    law = rel.noise
    assert isinstance(law, DiscreteGaussianNoise) and law.support == 2
    r = np.asarray(rel.values) / law.grid
    assert np.all(r == np.round(r))
    assert rel.mechanism.endswith("secure lattice discrete gaussian on the integers")
    assert law == mech.noise_plan(4, integer=True, changed=2).noise


def test_integer_release_refuses_non_integers_and_overflow():
    law = integer_lattice_law(1.0, 1e-6, 5.0, 3)
    with pytest.raises(ValueError, match="integers"):
        add_lattice_noise(np.array([1.0, 2.5, 3.0]), law, np.random.default_rng(0))
    with pytest.raises(ValueError, match="magnitude"):
        add_lattice_noise(np.array([1.0, 2.0**61, 3.0]), law, np.random.default_rng(0))
    with pytest.raises(TypeError, match="integers"):
        add_lattice_noise(np.array(["a", "b", "c"]), law, np.random.default_rng(0))


def test_integer_sampling_has_the_planned_law():
    law = integer_lattice_law(2.0, 1e-6, 1.0, 20000, changed=1)
    out = add_lattice_noise(np.zeros(20000), law, np.random.default_rng(5))
    y = out / law.grid
    assert np.all(y == np.round(y))
    assert np.std(out) == pytest.approx(law.std, rel=0.03)


@pytest.mark.parametrize("n", [1, 7, 400])
def test_rounding_moves_only_the_changed_coordinates(n):
    """Values differing in n coordinates by ‖·‖ ≤ Δ: ‖r − r′‖ ≤ Δ/γ + √n."""
    rng = np.random.default_rng(n)
    d, sens, gamma = 1000, 3.0, 2.0**-6
    for _ in range(200):
        v = rng.uniform(-50, 50, size=d)
        idx = rng.choice(d, size=n, replace=False)
        step = rng.normal(size=n)
        step *= sens * rng.uniform() / np.linalg.norm(step)
        w = v.copy()
        w[idx] += step
        diff = round_to_grid(v, gamma) - round_to_grid(w, gamma)
        assert np.count_nonzero(diff) <= n
        assert np.linalg.norm(diff) <= sens / gamma + math.sqrt(n)


def test_changed_narrows_the_lattice_and_its_grid():
    full = gaussian_lattice_law(1.0, 1e-6, 5.0, 4091)
    narrow = gaussian_lattice_law(1.0, 1e-6, 5.0, 4091, changed=5)
    assert narrow.support == 5 and full.support == 4091
    assert narrow.grid == choose_grid(
        float(analytic_gaussian_sigma(1.0, 1e-6, 5.0)), 5, 5.0
    ) and narrow.lattice_sensitivity(5.0) < full.lattice_sensitivity(5.0)
    assert narrow.event(5.0).dim == 5 and narrow.event(5.0).mu <= gdp_mu(1.0, 1e-6)
    fine = gaussian_lattice_law(1.0, 1e-6, 5.0, 4091, changed=5, cost=2.0**-10)
    analytic = float(analytic_gaussian_sigma(1.0, 1e-6, 5.0))
    assert 1.0 < fine.std / analytic <= 1.0 + 2.0**-10 + 1e-5
    with mp.workdps(DPS):
        assert ref_certified(fine, 5.0, 1.0) <= mpf(1e-6)
    with pytest.raises(ValueError, match="changed"):
        DiscreteGaussianNoise(3.0, dim=4, changed=0)
    with pytest.raises(ValueError, match="cost"):
        choose_grid(1.0, 4, 1.0, cost=1.5)


def test_beyond_the_integer_grids_the_rounded_lattice_serves():
    """σ > 2^36 (here ε = 0, δ = 1e-9, Δ = 2^40): a grid ≤ 1 would leave the sampler's
    range, so integer=True gives the rounded lattice of before, over all d coordinates."""
    mech = GaussianMechanism(0.0, 1e-9, 2.0**40)
    law = mech.noise_plan(10, integer=True, changed=2).noise
    assert isinstance(law, DiscreteGaussianNoise) and law.rounded and law.changed is None
    assert law == mech.noise_plan(10).noise
    with pytest.raises(ValueError, match="integer=False"):
        integer_lattice_law(0.0, 1e-12, 5.0, 10)
