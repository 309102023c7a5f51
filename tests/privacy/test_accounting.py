"""μ-GDP accounting and the planner (the composition baselines: ``test_composition.py``)."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest

import dpgauss
from dpgauss.privacy.accounting import GaussianAccountant, plan, plan_equal

from .reference import ref_delta, ref_epsilon

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")


def test_accountant_matches_high_precision_composition():
    acc = GaussianAccountant()
    acc.add(1.0, 1.0, count=10)
    acc.add(2.0, 1.0, count=4)  # μ² = 10 + 1 = 11
    mu = math.sqrt(11.0)
    assert acc.mu >= mu and acc.mu == pytest.approx(mu, rel=1e-14)
    eps = acc.epsilon(1e-6)
    exact = ref_epsilon(mu, 1e-6)
    assert eps >= exact and eps == pytest.approx(float(exact), rel=1e-10)
    # δ at that ε is within the request, at high precision.
    assert ref_delta(acc.mu, eps) <= 1e-6
    assert acc.delta(eps) <= 1e-6 * (1 + 1e-9)
    assert acc.n_releases == 14


def test_vectorised_add_equals_loop():
    sigmas = np.linspace(1.0, 5.0, 50)
    a, b = GaussianAccountant(), GaussianAccountant()
    a.add(sigmas, 2.0)
    for s in sigmas:
        b.add(float(s), 2.0, label="q")
    assert a.mu == pytest.approx(b.mu, rel=1e-14)
    assert a.mu >= math.sqrt(np.sum((2.0 / sigmas) ** 2))


def test_empty_accountant():
    acc = GaussianAccountant()
    assert acc.mu == 0.0 and acc.epsilon(1e-6) == 0.0 and acc.delta(0.5) == 0.0


def test_composition_of_1e5_releases_is_fast():
    sigmas = np.full(100_000, 300.0)
    best = math.inf
    for _ in range(5):
        start = time.perf_counter()
        acc = GaussianAccountant()
        acc.add(sigmas)
        acc.epsilon(1e-6)
        best = min(best, time.perf_counter() - start)
    assert best < 0.05  # the benchmark target is 10 ms; generous here for loaded CI


def test_bad_inputs():
    acc = GaussianAccountant()
    with pytest.raises(ValueError, match="sigma"):
        acc.add(0.0)
    with pytest.raises(ValueError, match="sensitivity"):
        acc.add(1.0, -1.0)
    with pytest.raises(ValueError, match="count"):
        acc.add(1.0, count=0)
    with pytest.raises(ValueError, match="mu"):
        acc.add_mu(float("nan"))
    with pytest.raises(TypeError, match="Release"):
        acc.add_release(object())
    with pytest.raises(ValueError, match="do not broadcast"):
        acc.add([1.0, 2.0], [1.0, 2.0, 3.0])


@pytest.mark.parametrize("weights", [None, [1.0, 1.0, 4.0], [0.5, 2.0, 3.0]])
def test_plan_is_exactly_within_budget_and_optimal(weights):
    sens = np.array([1.0, 2.0, 3.0])
    sigma = plan(1.0, 1e-6, sens, weights)
    acc = GaussianAccountant()
    acc.add(sigma, sens)
    assert acc.epsilon(1e-6) <= 1.0
    assert acc.epsilon(1e-6) == pytest.approx(1.0, rel=1e-9)  # budget used up
    # Any feasible perturbation along the constraint costs more weighted variance.
    w = np.ones(3) if weights is None else np.asarray(weights)
    mu2 = float(dpgauss.gdp_mu(1.0, 1e-6)) ** 2
    cost = float(np.sum(w * sigma**2))
    rng = np.random.default_rng(0)
    for _ in range(200):
        trial = sigma * np.exp(rng.normal(0, 0.05, 3))
        scale = math.sqrt(float(np.sum((sens / trial) ** 2)) / mu2)  # back onto the constraint
        trial = trial * scale
        assert float(np.sum(w * trial**2)) >= cost * (1 - 1e-12)


def test_plan_equal_closed_form():
    for k in (1, 10, 1000):
        sigma = plan_equal(0.5, 1e-5, k, 2.0)
        assert sigma == pytest.approx(2.0 * math.sqrt(k) / dpgauss.gdp_mu(0.5, 1e-5), rel=1e-14)
        acc = GaussianAccountant()
        acc.add(sigma, 2.0, count=k)
        assert acc.epsilon(1e-5) <= 0.5
    assert plan_equal(1.0, 1e-6, 1) >= dpgauss.analytic_gaussian_sigma(1.0, 1e-6)


def test_one_add_at_a_time_equals_one_array_call() -> None:
    """The scalar fast path of ``add`` charges exactly what the vectorised path charges."""
    sigmas = [0.3, 1.0, 7.5, 2.0**-20, 1e10]
    one, many = GaussianAccountant(), GaussianAccountant()
    for s in sigmas:
        one.add(s, 2.0)
        one.add(np.float64(s), np.int64(2))
    many.add(np.repeat(sigmas, 2), 2.0)
    assert one.mu == many.mu and one.n_releases == many.n_releases == 2 * len(sigmas)
    assert [float(c.mu[0]) for c in one.charges] == list(np.repeat(many.charges[0].mu, 1))
    with pytest.raises(ValueError, match="sigma"):
        one.add(-1.0)
    with pytest.raises(ValueError, match="count"):
        one.add(1.0, count=0)


def test_threshold_events_compose_with_eta_beside_mu():
    """Gaussian thresholding (``ThresholdEvent``) composes as √Σμ² beside Ση:
    ``δ(ε) = δ_μ(ε) + Ση`` and ``ε(δ) = ε_μ(δ − Ση)`` (mpmath), ∞ once δ ≤ Ση."""
    from fractions import Fraction

    from dpgauss.privacy.events import GaussianEvent, ThresholdEvent

    events = [ThresholdEvent(0.3, 1e-7), GaussianEvent(5.0, 1.0), ThresholdEvent(0.2, 2e-7, 2)]
    acc = GaussianAccountant().compose(events)
    mu = math.sqrt(0.09 + 0.04 + 2 * 0.04)
    assert acc.mu >= mu and acc.mu == pytest.approx(mu, rel=1e-14)
    assert Fraction(acc.eta) >= Fraction(1e-7) + 2 * Fraction(2e-7)
    assert acc.eta == pytest.approx(5e-7, rel=1e-15)
    for eps in (0.0, 0.1, 1.0, 3.0):
        exact = float(ref_delta(acc.mu, eps)) + 5e-7
        assert acc.delta(eps) >= exact and acc.delta(eps) == pytest.approx(exact, rel=1e-12)
    got = acc.epsilon(1e-6)
    assert got >= float(ref_epsilon(acc.mu, 1e-6 - 5e-7))
    assert got == pytest.approx(float(ref_epsilon(acc.mu, 5e-7)), rel=1e-9)
    assert acc.epsilon(5e-7) == math.inf and acc.epsilon(1e-7) == math.inf
    np.testing.assert_array_equal(acc.epsilon(np.array([1e-7, 1e-6])) == math.inf, [True, False])
    assert GaussianAccountant().compose([GaussianEvent(5.0, 1.0)]).eta == 0.0


def test_a_threshold_event_names_its_fields():
    from dpgauss.privacy.events import ThresholdEvent

    with pytest.raises(ValueError, match="eta must be in"):
        ThresholdEvent(0.3, 1.0)
    with pytest.raises(ValueError, match="eta"):
        ThresholdEvent(0.3, -1e-9)
    with pytest.raises(ValueError, match="mu"):
        ThresholdEvent(0.0, 1e-9)
