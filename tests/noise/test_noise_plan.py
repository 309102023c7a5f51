"""``noise_plan``: the law and label of a release, known without drawing any noise."""

from __future__ import annotations

import numpy as np
import pytest

from dpgauss.noise import discrete_sampler, lattice
from dpgauss.noise.mechanisms import (
    DiscreteGaussianMechanism,
    GaussianMechanism,
    LaplaceMechanism,
)
from dpgauss.noise.release import (
    DiscreteGaussianNoise,
    DiscreteLaplaceNoise,
    GaussianNoise,
    LaplaceNoise,
    NoisePlan,
)
from dpgauss.privacy import gdp_mu
from dpgauss.privacy.accounting import GaussianAccountant


def _same(plan: NoisePlan, rel: object) -> None:
    assert plan.noise == rel.noise and plan.mechanism == rel.mechanism
    assert plan.sigma == rel.sigma == rel.noise.std
    assert (plan.epsilon, plan.delta, plan.sensitivity) == (
        rel.epsilon,
        rel.delta,
        rel.sensitivity,
    )


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(), (1,), (7,), (10, 30), (2000,)])
@pytest.mark.parametrize("sens", [1.0, 5.0])
def test_the_plan_is_the_law_of_a_real_release(shape, sens):
    values = np.zeros(shape) + 3.25
    d = max(values.size, 1)
    mech = GaussianMechanism(0.7, 1e-7, sens)
    _same(mech.noise_plan(d), mech.release(values))  # secure (default)
    _same(mech.noise_plan(d, secure=False), mech.release(values, rng=3))
    _same(mech.noise_plan(d, grid=0.125), mech.release(values, grid=0.125))
    lap = LaplaceMechanism(0.7, sens)
    _same(lap.noise_plan(d), lap.release(values))
    _same(lap.noise_plan(d, secure=False), lap.release(values, rng=3))
    disc = DiscreteGaussianMechanism(0.7, 1e-7, max(sens, 1.0))
    counts = np.zeros(shape, dtype=np.int64)
    _same(disc.noise_plan(d), disc.release(counts))
    _same(disc.noise_plan(d), disc.release(counts, rng=4))


def test_the_plan_types_and_charges():
    plan = GaussianMechanism(1.0, 1e-6, 5.0).noise_plan(4091)
    assert isinstance(plan.noise, DiscreteGaussianNoise) and plan.noise.dim == 4091
    assert plan.mechanism == "gaussian (analytic), secure lattice discrete gaussian"
    assert plan.noise.rounded and plan.dim == 4091
    mu = GaussianAccountant().add_release(plan)  # charged like a release
    assert mu == plan.noise.dominating_mu(5.0) <= gdp_mu(1.0, 1e-6)
    cont = GaussianMechanism(1.0, 1e-6, 5.0).noise_plan(4091, secure=False)
    assert cont.noise == GaussianNoise(GaussianMechanism(1.0, 1e-6, 5.0).sigma)
    assert cont.mechanism == "gaussian (analytic)"
    assert isinstance(LaplaceMechanism(1.0, 1.0).noise_plan(3).noise, DiscreteLaplaceNoise)
    assert isinstance(LaplaceMechanism(1.0, 1.0).noise_plan(3, secure=False).noise, LaplaceNoise)
    assert DiscreteGaussianMechanism(1.0, 1e-6).noise_plan(5).mechanism == "discrete gaussian"


def test_the_plan_draws_no_noise(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("noise was drawn")

    for module, name in (
        (lattice, "discrete_gaussian"),
        (lattice, "sample_discrete_laplace"),
        (discrete_sampler, "discrete_gaussian"),
    ):
        monkeypatch.setattr(module, name, boom)
    GaussianMechanism(1.0, 1e-6, 5.0).noise_plan(10**6)
    LaplaceMechanism(1.0, 1.0).noise_plan(10**6)
    DiscreteGaussianMechanism(1.0, 1e-6).noise_plan(10**6)
    with pytest.raises(AssertionError, match="noise was drawn"):
        GaussianMechanism(1.0, 1e-6, 5.0).release(np.zeros(3))


def test_plan_arguments_are_checked():
    mech = GaussianMechanism(1.0, 1e-6)
    for bad in (0, -3, 2.5, True, "3", None):
        with pytest.raises(ValueError, match="dim must be a positive integer"):
            mech.noise_plan(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="grid applies to secure releases only"):
        mech.noise_plan(3, secure=False, grid=0.5)
    with pytest.raises(ValueError, match="grid"):
        mech.noise_plan(3, grid=-1.0)
    classical = GaussianMechanism(0.5, 1e-6, calibration="classical")
    with pytest.raises(ValueError, match="classical calibration is a baseline"):
        classical.noise_plan(3)
    assert classical.noise_plan(3, secure=False).mechanism == "gaussian (classical)"


def test_a_law_is_only_added_to_values_of_its_dimension():
    law = GaussianMechanism(1.0, 1e-6).noise_plan(5).noise
    with pytest.raises(ValueError, match="calibrated for 5 coordinates"):
        lattice.add_lattice_noise(np.zeros(6), law, np.random.default_rng(0))
    # a law without rounding is for integer values (on its grid 2^-k) only
    with pytest.raises(ValueError, match="integers"):
        lattice.add_lattice_noise(np.full(5, 0.5), DiscreteGaussianNoise(3.0, dim=5), None)
    with pytest.raises(ValueError, match="calibrated for 5 coordinates"):
        lattice.add_lattice_noise(np.zeros(6), DiscreteGaussianNoise(3.0, dim=5), None)
