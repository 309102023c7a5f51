"""privacy/events: typed events, composed by the accountant exactly as releases were charged."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings

from dpgauss.noise.mechanisms import (
    DiscreteGaussianMechanism,
    GaussianMechanism,
    LaplaceMechanism,
)
from dpgauss.noise.release import DiscreteGaussianNoise, GaussianNoise, LaplaceNoise, NoisePlan
from dpgauss.privacy._rounding import mu_up_exact
from dpgauss.privacy.accounting import GaussianAccountant
from dpgauss.privacy.discrete_multivariate import discrete_gaussian_vector_mu
from dpgauss.privacy.events import (
    DiscreteGaussianEvent,
    GaussianEvent,
    GdpEvent,
    LaplaceEvent,
    event_of,
)
from dpgauss.release.ledger import Ledger, charge_mu, event_mu

from .strategies import SENS, log_uniform

SIGMA = log_uniform(1e-6, 1e6)


def _same(a: GaussianAccountant, b: GaussianAccountant) -> None:
    assert a.mu == b.mu
    assert a.n_releases == b.n_releases
    assert [(c.mu.tolist(), c.count, c.label) for c in a.charges] == [
        (c.mu.tolist(), c.count, c.label) for c in b.charges
    ]
    if a.mu > 0:
        assert a.epsilon(1e-6) == b.epsilon(1e-6)
        assert a.delta(1.0) == b.delta(1.0)


# ------------------------------------------------------------- composition is unchanged


@settings(max_examples=60, deadline=None)
@given(SIGMA, SENS, SIGMA, SENS)
def test_gaussian_events_compose_like_add(s1, d1, s2, d2):
    old = GaussianAccountant()
    m1 = old.add(s1, d1, count=3, label="a")
    m2 = old.add(s2, d2, label="a")
    new = GaussianAccountant()
    assert new.add_event(GaussianEvent(s1, d1, count=3), label="a") == m1
    assert new.add_event(GaussianEvent(s2, d2), label="a") == m2
    _same(old, new)
    composed = GaussianAccountant().compose(
        [GaussianEvent(s1, d1, count=3), GaussianEvent(s2, d2)], label="a"
    )
    _same(old, composed)


def test_an_overflowing_quotient_is_charged_inf_as_before():
    old, new = GaussianAccountant(), GaussianAccountant()
    with np.errstate(over="ignore"):
        old.add(1e-300, 1e300)
    new.add_event(GaussianEvent(1e-300, 1e300))
    assert old.charges[0].mu.tolist() == new.charges[0].mu.tolist() == [math.inf]


def test_gdp_events_compose_like_add_mu():
    old = GaussianAccountant()
    old.add_mu(0.3, count=4)
    old.add_mu(1.25)
    new = GaussianAccountant().compose([GdpEvent(0.3, count=4), GdpEvent(1.25)])
    _same(old, new)


@pytest.mark.parametrize("secure", [True, False])
@pytest.mark.parametrize("dim", [1, 7])
def test_gaussian_mechanism_events_equal_todays_charges(secure, dim):
    mech = GaussianMechanism(1.0, 1e-6, sensitivity=2.0)
    plan = mech.noise_plan(dim, secure=secure)
    event = mech.event(dim, secure=secure)
    assert event == plan.event()
    noise = plan.noise
    old = GaussianAccountant()
    if secure:
        assert isinstance(noise, DiscreteGaussianNoise)
        assert isinstance(event, DiscreteGaussianEvent)
        mu = discrete_gaussian_vector_mu(
            noise.sigma_lattice, noise.lattice_sensitivity(plan.sensitivity), noise.dim
        )
        old.add_mu(mu)
        assert noise.dominating_mu(plan.sensitivity) == float(mu)
        assert charge_mu(plan) == float(mu)
    else:
        assert event == GaussianEvent(mech.sigma, 2.0)
        old.add(noise.sigma, plan.sensitivity)
        assert charge_mu(plan) == mu_up_exact(2.0, mech.sigma)
    for new in (
        GaussianAccountant().compose([event]),
        GaussianAccountant().compose([plan.event()]),
    ):
        _same(old, new)
    acc = GaussianAccountant()
    acc.add_release(plan)
    _same(old, acc)
    assert event_mu(event) == charge_mu(plan)


def test_discrete_gaussian_mechanism_event_and_release_event():
    mech = DiscreteGaussianMechanism(0.5, 1e-7, l2_sensitivity=1.0)
    rel = mech.release([3, 4, 5], rng=0)
    event = rel.event()
    assert event == mech.event(3) == mech.noise_plan(3).event()
    assert isinstance(event, DiscreteGaussianEvent) and event.dim == 3
    a, b = GaussianAccountant(), GaussianAccountant()
    a.add_release(rel)
    b.add_event(event)
    _same(a, b)
    assert a.mu == pytest.approx(float(discrete_gaussian_vector_mu(event.sigma_lattice, 1.0, 3)))


def test_mixed_composition_is_the_root_of_the_sum_of_squares():
    events = [
        GaussianEvent(2.0, 1.0, count=2),
        GdpEvent(0.25),
        GaussianMechanism(1.0, 1e-6).event(4),
    ]
    acc = GaussianAccountant().compose(events)
    mus = [e.mu for e in events]
    exact = math.sqrt(2 * mus[0] ** 2 + mus[1] ** 2 + mus[2] ** 2)
    assert exact <= acc.mu <= exact * (1 + 1e-14)
    one_by_one = GaussianAccountant()
    for e in events:
        one_by_one.add_event(e)
    _same(acc, one_by_one)


# ------------------------------------------------------------------- refused and invalid


@pytest.mark.parametrize(
    "make",
    [
        lambda: LaplaceMechanism(1.0, 1.0).event(3),
        lambda: LaplaceMechanism(1.0, 1.0).event(3, secure=False),
        lambda: LaplaceEvent(1.0),
    ],
)
def test_laplace_is_refused_and_compose_charges_nothing(make):
    event = make()
    assert isinstance(event, LaplaceEvent)
    acc = GaussianAccountant()
    with pytest.raises(TypeError, match="laplace noise is not μ-GDP"):
        acc.add_event(event)
    with pytest.raises(TypeError, match="laplace noise is not μ-GDP"):
        acc.compose([GaussianEvent(1.0), event])
    assert acc.charges == []
    plan = NoisePlan(LaplaceNoise(1.0), "laplace", 1, 1.0, 0.0, 1.0)
    with pytest.raises(TypeError, match="a release with laplace noise is not μ-GDP"):
        acc.add_release(plan)
    with pytest.raises(TypeError, match="laplace noise is not μ-GDP"):
        charge_mu(plan)


def test_non_events_are_refused():
    acc = GaussianAccountant()
    with pytest.raises(TypeError, match=r"add_event needs a privacy event.*got float"):
        acc.add_event(1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"compose needs privacy events.*got str"):
        acc.compose(["x"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="add_release needs a Release or NoisePlan; got int"):
        acc.add_release(3)
    with pytest.raises(TypeError, match="add_release needs a Release or NoisePlan"):
        charge_mu(object())


def test_duck_typed_laws_still_charge():
    plan = SimpleNamespace(noise=SimpleNamespace(name="gaussian", sigma=2.0), sensitivity=1.0)
    assert event_of(plan) == GaussianEvent(2.0, 1.0)
    dominated = SimpleNamespace(noise=SimpleNamespace(dominating_mu=lambda s: 0.5), sensitivity=1.0)
    assert event_of(dominated) == GdpEvent(0.5)
    odd = SimpleNamespace(noise=SimpleNamespace(name="cauchy"), sensitivity=1.0)
    with pytest.raises(TypeError, match="cauchy noise is not μ-GDP"):
        GaussianAccountant().add_release(odd)
    bad = SimpleNamespace(noise=SimpleNamespace(event=lambda s: 1.0), sensitivity=1.0)
    with pytest.raises(TypeError, match="event must return a privacy event; got float"):
        event_of(bad)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: GaussianEvent(0.0), ValueError, r"sigma must be in \(0, inf\); got 0.0"),
        (lambda: GaussianEvent(-1.0), ValueError, r"sigma must be in \(0, inf\)"),
        (lambda: GaussianEvent(math.inf), ValueError, r"sigma must be in \(0, inf\); got inf"),
        (lambda: GaussianEvent(math.nan), ValueError, r"sigma must be in \(0, inf\); got nan"),
        (lambda: GaussianEvent(1.0, 0.0), ValueError, r"sensitivity must be in \(0, inf\)"),
        (lambda: GaussianEvent("1"), TypeError, "sigma must be a real number"),
        (lambda: GaussianEvent(True), TypeError, "sigma must be a real number"),
        (lambda: GaussianEvent([1.0, 2.0]), TypeError, "sigma must be a single number"),
        (lambda: GaussianEvent(1.0, count=0), ValueError, "count must be a positive integer"),
        (lambda: GaussianEvent(1.0, count=1.5), ValueError, "count must be a positive integer"),
        (lambda: GaussianEvent(1.0, count=True), ValueError, "count must be a positive integer"),
        (lambda: DiscreteGaussianEvent(0.0, 1.0), ValueError, r"sigma_lattice must be in \(0,"),
        (
            lambda: DiscreteGaussianEvent(1.0, -2.0),
            ValueError,
            r"lattice_sensitivity must be in \(0, inf\)",
        ),
        (
            lambda: DiscreteGaussianEvent(1.0, 1.0, dim=0),
            ValueError,
            r"dim must be an integer in \[1, 2\^53\]",
        ),
        (lambda: DiscreteGaussianEvent(1.0, 1.0, dim=2.0), ValueError, "dim must be an integer"),
        (lambda: GdpEvent(0.0), ValueError, r"mu must be in \(0, inf\)"),
        (lambda: GdpEvent(math.inf), ValueError, r"mu must be in \(0, inf\)"),
        (lambda: LaplaceEvent(0.0), ValueError, r"scale must be in \(0, inf\)"),
        (lambda: LaplaceEvent(1.0, discrete=1), TypeError, "discrete must be a bool"),
    ],
)
def test_invalid_events_are_refused_naming_the_argument(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_events_are_frozen_typed_values():
    event = GaussianEvent(2, 1)
    assert type(event.sigma) is float and type(event.sensitivity) is float
    assert event == GaussianEvent(2.0, 1.0) and hash(event) == hash(GaussianEvent(2.0, 1.0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.sigma = 3.0  # type: ignore[misc]
    assert GaussianEvent(np.float64(2.0), np.int64(1)).mu == GaussianEvent(2.0, 1.0).mu
    assert GaussianEvent(np.array(4.0)).sigma == 4.0


def test_noise_laws_give_their_events():
    assert GaussianNoise(3.0).event(1.5) == GaussianEvent(3.0, 1.5)
    law = DiscreteGaussianNoise(5.0, grid=0.5, rounded=True, dim=4)
    assert law.event(1.0) == DiscreteGaussianEvent(5.0, law.lattice_sensitivity(1.0), 4)
    assert law.dominating_mu(1.0) == law.event(1.0).mu
    assert LaplaceNoise(2.0).event(1.0) == LaplaceEvent(2.0, 1.0)


# ------------------------------------------------------------------------------ ledger


def test_ledger_charges_events_like_sigma_and_mu(tmp_path):
    mech = GaussianMechanism(0.5, 1e-6, sensitivity=1.0)
    with Ledger(tmp_path / "l.sqlite") as led:
        led.create_budget("a", 5.0, 1e-6)
        led.create_budget("b", 5.0, 1e-6)
        e1 = led.charge("a", mech.sigma, 1.0)
        f1 = led.charge_event("b", mech.event(1, secure=False))
        assert (e1.sigma, e1.sensitivity, e1.mu) == (f1.sigma, f1.sensitivity, f1.mu)
        secure = mech.event(3)
        e2 = led.charge("a", mu=charge_mu(mech.noise_plan(3)))
        f2 = led.charge_event("b", secure)
        assert e2.mu == f2.mu and f2.sigma is None
        ra, rb = led.remaining("a"), led.remaining("b")
        assert dataclasses.replace(ra, dataset="b") == rb
        with pytest.raises(ValueError, match=r"event\.count must be 1"):
            led.charge_event("a", GaussianEvent(10.0, count=2))
        with pytest.raises(TypeError, match="not μ-GDP"):
            led.charge_event("a", LaplaceEvent(1.0))
