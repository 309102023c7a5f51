"""The estimates of a release (:mod:`dpgauss.release.estimate`): the noise seam, the mean's
ratios and their ranges, and the typed calibration they use (:mod:`dpgauss.release.plan`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpgauss.release import estimate
from dpgauss.release.plan import Calibration, calibrate, sensitivity_of
from dpgauss.release.spec import ReleaseSpec


def count_spec(secure: bool = True) -> ReleaseSpec:
    return ReleaseSpec.from_dict(
        {
            "source": {"path": "/nonexistent/records.parquet"},
            "unit": {"column": "uid"},
            "domain": {"kind": "range", "column": "key", "start": 0, "stop": 5},
            "statistic": {"kind": "count"},
            "bounds": {"max_records_per_unit": 5},
            "privacy": {"dataset": "d", "epsilon": 1.0, "delta": 1e-6, "secure": secure},
            "denoise": {"method": "none"},
        }
    )


@pytest.mark.parametrize("secure", [True, False])
def test_the_calibration_is_typed_and_frozen(secure: bool) -> None:
    s = count_spec(secure)
    cal = calibrate(s, sensitivity_of(s), 5)
    assert isinstance(cal, Calibration) and cal.secure is secure and cal.dim == 5
    assert (cal.epsilon, cal.delta, cal.sensitivity) == (1.0, 1e-6, 5.0)
    assert cal.sigma == cal.mechanism.sigma and cal.noise == cal.probe.noise
    assert cal.label == cal.probe.mechanism and cal.mu > 0
    with pytest.raises(AttributeError):
        cal.mu = 0.0  # type: ignore[misc]


def test_seeded_noise_is_reproducible_and_the_law_planned() -> None:
    s = count_spec(secure=False)
    cal = calibrate(s, sensitivity_of(s), 5)
    a, b = (estimate.add_noise(cal, np.zeros(5), 3) for _ in range(2))
    assert np.array_equal(a.values, b.values) and a.noise == cal.noise


def test_the_seam_replaced_is_said(zero_noise) -> None:
    assert not estimate.noise_replaced()
    with zero_noise():
        assert estimate.noise_replaced()
    assert not estimate.noise_replaced()


def test_ratio_is_clipped_and_empty_below_one() -> None:
    s, c = np.array([10.0, -100.0, 1.0]), np.array([2.0, 4.0, 0.5])
    out = estimate.ratio(s, c, 5.0, 0.0, 10.0)
    assert out[0] == 10.0 and out[1] == 0.0 and np.isnan(out[2])


def test_ratio_range_covers_the_corners() -> None:
    s, c = np.array([2.0, 0.0]), np.array([4.0, 1.0])
    lower, upper = estimate.ratio_range(s, c, 1.0, 1.0, 5.0, 0.0, 10.0)
    corners = [5.0 + (2.0 + a) / (4.0 + b) for a in (-1, 1) for b in (-1, 1)]
    assert lower[0] == pytest.approx(min(corners)) and upper[0] == pytest.approx(max(corners))
    assert (lower[1], upper[1]) == (0.0, 10.0)  # the count's interval reaches 0: all of it


@pytest.mark.parametrize("secure", [True, False])
def test_the_charge_event_is_what_the_ledger_charged(secure: bool) -> None:
    """``Calibration.event`` (issue #27: the plan owns the charge event) is charged exactly the
    μ the ledger charged before events: ``⌈Δ/σ⌉`` for continuous noise, the secure law's
    dominating μ otherwise; and a μ no smaller than the exact Δ/σ (never under-charged)."""
    from fractions import Fraction

    from dpgauss.privacy._rounding import mu_up_exact
    from dpgauss.privacy.events import GaussianEvent, GdpEvent
    from dpgauss.release.ledger import event_mu

    s = count_spec(secure)
    cal = calibrate(s, sensitivity_of(s), 5)
    ev = cal.event
    if cal.noise.name == "gaussian":
        assert isinstance(ev, GaussianEvent)
        assert event_mu(ev) == mu_up_exact(cal.mechanism.sensitivity, cal.mechanism.sigma)
        assert Fraction(event_mu(ev)) >= Fraction(cal.sensitivity) / Fraction(cal.sigma)
    else:
        assert isinstance(ev, GdpEvent) and event_mu(ev) == cal.mu
    assert secure is (cal.noise.name != "gaussian")


@pytest.mark.parametrize("kind", ["count", "sum"])
def test_a_secure_release_of_an_aggregate_beyond_the_lattice_does_not_fail(kind: str) -> None:
    """Rule 5 (a release is a total function of the data): an aggregate too large for the
    secure lattice (``|value|/γ ≥ 2^51``, or beyond int64 for an integer release) used to
    raise after the charge; it is clamped to the law's public ``value_limit`` instead."""
    s = count_spec(secure=True)
    if kind == "sum":
        s = ReleaseSpec.from_dict(
            {**s.to_dict(), "statistic": {"kind": "sum", "column": "v", "lower": 0, "upper": 1}}
        )
    cal = calibrate(s, sensitivity_of(s), 5)
    limit = cal.noise.value_limit
    assert limit > 0 and math.isfinite(limit)
    y = np.array([0.0, 3.0, 2.0**70, -(2.0**70), limit])
    rel = estimate.add_noise(cal, y, None)
    assert rel.noise == cal.noise and np.all(np.isfinite(rel.values))
    # the clamped coordinates are released around the bound, the others around themselves
    tol = 60 * cal.noise.std
    assert abs(rel.values[2] - limit) < tol and abs(rel.values[3] + limit) < tol
    assert abs(rel.values[1] - 3.0) < tol
    with pytest.raises(ValueError):  # the mechanism alone still refuses such values
        cal.mechanism.release(np.array([0.0, 0.0, 2.0**70, 0.0, 0.0]), rng="secure", **cal.options)
