"""Issue #31 item 1: a secure release delivers the analytic σ (counts) or within the grid's
2^-10 (sums, means), fits a budget of exactly its own (ε, δ), and says both σ."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("duckdb")
pytest.importorskip("pyarrow")

from dpgauss import gdp_mu
from dpgauss.noise.release import DiscreteGaussianNoise
from dpgauss.release.domains.key_domain import resolve_domain
from dpgauss.release.ledger import Ledger
from dpgauss.release.pipeline import run_release
from dpgauss.release.plan import RELEASE_ROUNDING_COST, calibrate, sensitivity_of
from dpgauss.release.sensitivity import changed_keys, derive_sensitivity

from .test_pipeline import ENGINE, make_spec, small_release_data


def _ledger(tmp_path: Path, eps: float, delta: float) -> Path:
    path = tmp_path / "budget.sqlite"
    with Ledger(path) as led:
        led.create_budget("d", eps, delta)
    return path


@pytest.mark.parametrize(
    ("kind", "stat", "tol"),
    [
        ("count", {"kind": "count"}, 1e-4),
        ("sum", {"kind": "sum", "column": "fare", "lower": 0.0, "upper": 50.0}, 2.0**-10),
        ("mean", {"kind": "mean", "column": "fare", "lower": 0.0, "upper": 50.0}, 2.0**-10),
    ],
)
def test_a_secure_release_delivers_the_analytic_sigma(tmp_path: Path, kind, stat, tol) -> None:
    src, truth = small_release_data(tmp_path)
    eps, delta = 1.0, 1e-6
    ledger = _ledger(tmp_path, eps, delta)  # exactly the spec's own (ε, δ)
    spec = make_spec(src, statistic=stat, privacy={"epsilon": eps, "delta": delta, "dataset": "d"})
    res = run_release(spec, out=tmp_path / "r.csv", ledger=ledger, engine=ENGINE)
    priv = res.report["privacy"]
    ratio = priv["sigma"] / priv["analytic_sigma"]
    assert priv["sigma_over_analytic"] == ratio
    assert abs(ratio - 1.0) <= tol
    assert "secure lattice" in priv["mechanism"]
    assert priv["mu"] <= gdp_mu(eps, delta)
    if kind == "count":  # the counts plus lattice noise, on the law's grid 2^-k
        assert priv["mechanism"].endswith("on the integers")
        domain = resolve_domain(spec)
        law = calibrate(spec, sensitivity_of(spec, domain), domain.size).noise
        assert isinstance(law, DiscreteGaussianNoise) and law.grid < 1.0
        steps = res.columns["released"] / law.grid
        assert np.array_equal(steps, np.round(steps)) and not np.array_equal(
            res.columns["released"], truth
        )


@pytest.mark.parametrize("b", [1, 2, 5, 30])
def test_the_plan_routes_counts_to_the_integer_law(b) -> None:
    spec = make_spec(
        "/nonexistent/records.parquet",
        domain={"kind": "range", "column": "key", "start": 0, "stop": 4091},
        bounds={"max_records_per_unit": b},
    )
    domain = resolve_domain(spec)
    sens = sensitivity_of(spec, domain)
    assert sens.integer and sens.changed == min(4091, b)
    cal = calibrate(spec, sens, domain.size)
    law = cal.noise
    assert isinstance(law, DiscreteGaussianNoise) and not law.rounded
    assert law.support == min(b, b * b)  # ⌊Δ²⌋ = b², b keys
    assert cal.options == {"changed": b, "integer": True, "cost": RELEASE_ROUNDING_COST}
    assert abs(cal.probe.sigma / cal.sigma - 1.0) < 1e-4
    assert cal.mu <= gdp_mu(1.0, 1e-6)


def test_changed_keys_and_integer_flags() -> None:
    assert changed_keys(domain_size=100) == 100
    assert changed_keys(max_records_per_unit=5, domain_size=100) == 5
    assert changed_keys(max_records_per_unit=5, max_keys_per_unit=3, domain_size=100) == 3
    assert changed_keys(max_keys_per_unit=300, domain_size=100) == 100
    assert changed_keys(max_records_per_unit=5, domain_size=100, spread=True) == 100
    # a kde record reaches at most its `neighbors` nodes; a unit keeps min(b, c·k) records
    kde5 = {"domain_size": 4091, "spread": True, "keys_per_record": 8}
    assert changed_keys(max_records_per_unit=5, **kde5) == 40
    assert changed_keys(max_records_per_key=2, max_keys_per_unit=3, **kde5) == 48
    assert changed_keys(max_records_per_key=2, **kde5) == 4091  # records unbounded
    assert changed_keys(max_records_per_unit=5, max_keys_per_unit=2, **kde5) == 40
    with pytest.raises(ValueError, match="domain_size"):
        changed_keys(domain_size=0)
    count = derive_sensitivity("count", max_records_per_unit=5, domain_size=10)
    assert count.integer and count.changed == 5
    kde = derive_sensitivity("count", max_records_per_unit=5, domain_size=10, spread=True)
    assert not kde.integer and kde.changed == 10  # spread masses are fractions
    s = derive_sensitivity("sum", max_records_per_unit=5, domain_size=10, lower=0, upper=1)
    assert not s.integer and s.changed == 5
    m = derive_sensitivity("mean", max_records_per_unit=5, domain_size=10, lower=0, upper=1)
    assert not m.integer and m.changed == 10  # the sum and the count of 5 keys
    assert count.as_dict()["changed"] == 5 and count.as_dict()["integer"] is True
