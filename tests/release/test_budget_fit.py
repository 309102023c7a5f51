"""A spec at (ε, δ) fits a budget of exactly (ε, δ); ``budget plan`` plans releases as charged.

The privacy-hardening issue: with the default secure noise, the charge (the dominating μ of
the discrete law) was a hair above the budget's μ (``requested mu=0.2367043809 … budget
mu=0.2367043807``), so the taxi example at ε = 1 was refused by ``budget init taxi
--epsilon 1 --delta 1e-6``, and K releases planned by ``budget plan`` did not fit.
"""

from __future__ import annotations

import json
import math
import tempfile
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.cli import main
from dpgauss.privacy import gdp_mu
from dpgauss.privacy._rounding import mu_up_exact as _mu_up
from dpgauss.release import estimate, pipeline
from dpgauss.release.domains.key_domain import resolve_domain
from dpgauss.release.ledger import BudgetExceeded, Ledger
from dpgauss.release.pipeline import run_release
from dpgauss.release.plan import Calibration, sensitivity_of
from dpgauss.release.plan import calibrate as calibrate_spec
from dpgauss.release.spec import ReleaseSpec, load_spec

from ..privacy.reference import ref_delta
from ..privacy.strategies import log_uniform
from .test_spec import EXAMPLE

duckdb = pytest.importorskip("duckdb")

# Every test here runs releases or the CLI many times over (two minutes in all): CI only.
pytestmark = pytest.mark.slow


def spec(
    d: int,
    privacy: dict[str, object],
    kind: str = "count",
    bounds: dict[str, int] | None = None,
    source: str = "/nonexistent/records.parquet",
) -> ReleaseSpec:
    stat: dict[str, object] = {"kind": kind}
    if kind == "mean":
        stat.update(column="x", lower=0.0, upper=10.0)
    return ReleaseSpec.from_dict(
        {
            "source": {"path": source},
            "unit": {"column": "uid"},
            "domain": {"kind": "range", "column": "key", "start": 0, "stop": d},
            "statistic": stat,
            "bounds": bounds or {"max_records_per_unit": 5},
            "privacy": {"dataset": "d", **privacy},
            "denoise": {"method": "none"},
        }
    )


def calibrate(s: ReleaseSpec) -> Calibration:
    domain = resolve_domain(s)
    return calibrate_spec(s, sensitivity_of(s, domain), domain.size)


def charged_mu(cal: Calibration) -> float:
    """What ``Ledger.charge`` records for the release (``pipeline._charge``): μ= the
    calibrated charge for secure noise, ⌈Δ/σ⌉ for continuous noise (sigma=, sensitivity=).
    Written with the APIs of main too, so that these tests run (and fail) there."""
    if cal.probe.noise.name == "gaussian":
        return _mu_up(cal.mechanism.sensitivity, cal.mechanism.sigma)
    return cal.mu


def budget_init(path: Path, dataset: str, eps: str, delta: str) -> None:
    argv = ["budget", "init", dataset, "--epsilon", eps, "--delta", delta, "--ledger", str(path)]
    assert main(argv) == 0


# ------------------------------------------------------ the regression of the issue


def test_the_taxi_example_fits_a_budget_of_its_own_epsilon_delta(tmp_path: Path, capsys) -> None:
    """Refused before (on main at 2f16b54 / a7ef898: BudgetExceeded at the pre-check)."""
    ledger = tmp_path / "budget.sqlite"
    budget_init(ledger, "taxi", "1", "1e-6")
    capsys.readouterr()
    data = load_spec(EXAMPLE).to_dict()
    assert (data["privacy"]["epsilon"], data["privacy"]["delta"]) == (1.0, 1e-6)
    assert data["privacy"]["secure"] is True
    data["denoise"] = {"method": "none"}
    taxi = ReleaseSpec.from_dict(data)
    res = run_release(taxi, out=tmp_path / "taxi.csv", ledger=ledger)
    assert "secure lattice" in res.report["privacy"]["mechanism"]
    with Ledger(ledger, create=False) as led:
        (entry,) = led.charges("taxi")
        status = led.remaining("taxi")
    assert entry.mu <= status.mu_budget == gdp_mu(1.0, 1e-6)
    assert entry.mu >= status.mu_budget * (1 - 1e-9)  # and barely below: tight
    with pytest.raises(BudgetExceeded, match="budget exceeded for dataset 'taxi'"):
        run_release(taxi, out=tmp_path / "again.csv", ledger=ledger)


# ------------------------------------------- every spec fits a budget of its own (ε, δ)

EPS = log_uniform(1e-3, 50.0)
DELTA = log_uniform(1e-12, 0.1)
DIM = log_uniform(1.0, 1e6).map(lambda x: max(1, round(x)))
#: (max_records_per_unit, max_records_per_key): Δ = c, or √(q b² + r²) for c = q b + r
BOUNDS = st.integers(1, 20).flatmap(
    lambda c: st.tuples(st.just(c), st.one_of(st.none(), st.integers(1, c)))
)


def _bounds(cb: tuple[int, int | None]) -> dict[str, int]:
    c, b = cb
    return {"max_records_per_unit": c, **({"max_records_per_key": b} if b else {})}


def check_fits(s: ReleaseSpec, eps: float, delta: float, ledger_dir: str) -> None:
    cal = calibrate(s)
    mu_b = float(gdp_mu(eps, delta))
    charged = charged_mu(cal)  # what Ledger.charge records for this release
    assert Fraction(charged) ** 2 <= Fraction(mu_b) ** 2
    assert charged >= mu_b * (1 - 1e-4)  # tight: a second one never fits
    if not s.privacy.secure:  # exactly Δ/σ, rounded up
        assert charged == cal.mu or charged == math.nextafter(cal.mu, 0.0)
    else:
        assert charged == cal.mu
    assert float(ref_delta(charged, eps)) <= delta * (1 + 1e-12)  # μ-GDP ⇒ (ε, δ)-DP
    path = Path(ledger_dir) / f"l{len(list(Path(ledger_dir).iterdir()))}.sqlite"
    with Ledger(path) as led:
        led.create_budget("d", eps, delta)
    entry = pipeline._charge(path, "d", cal, "first")
    assert entry.mu == charged
    with pytest.raises(BudgetExceeded):
        pipeline._charge(path, "d", cal, "second")


@settings(max_examples=25, deadline=None)
@given(EPS, DELTA, DIM, st.sampled_from(["count", "mean"]), BOUNDS)
def test_a_secure_spec_fits_a_budget_of_its_own_epsilon_delta(eps, delta, d, kind, cb):
    s = spec(d, {"epsilon": eps, "delta": delta}, kind, _bounds(cb))
    assert s.privacy.secure
    with tempfile.TemporaryDirectory() as tmp:
        check_fits(s, eps, delta, tmp)


@settings(max_examples=60, deadline=None)
@given(EPS, DELTA, DIM, st.sampled_from(["count", "mean"]), BOUNDS)
def test_a_continuous_spec_fits_a_budget_of_its_own_epsilon_delta(eps, delta, d, kind, cb):
    s = spec(d, {"epsilon": eps, "delta": delta, "secure": False}, kind, _bounds(cb))
    with tempfile.TemporaryDirectory() as tmp:
        check_fits(s, eps, delta, tmp)


@pytest.mark.parametrize("secure", [True, False])
@pytest.mark.parametrize("kind", ["count", "mean"])
def test_the_mean_pair_and_the_count_at_1_1e6(secure, kind):
    """The mean releases the normalised pair: sensitivity √2 (rounded up), 2d coordinates."""
    cal = calibrate(spec(100, {"epsilon": 1.0, "delta": 1e-6, "secure": secure}, kind))
    assert cal.dim == (200 if kind == "mean" else 100)
    if kind == "mean":
        assert cal.mechanism.sensitivity == math.sqrt(2.0)  # the double above √2
        assert Fraction(cal.mechanism.sensitivity) ** 2 > 2
    assert charged_mu(cal) <= gdp_mu(1.0, 1e-6)
    with tempfile.TemporaryDirectory() as tmp:
        check_fits(spec(3, {"epsilon": 1.0, "delta": 1e-6, "secure": secure}, kind), 1.0, 1e-6, tmp)


@pytest.mark.parametrize("secure", [True, False])
def test_the_law_calibrated_is_the_law_released(secure) -> None:
    s = spec(7, {"epsilon": 0.8, "delta": 1e-7, "secure": secure})
    cal = calibrate(s)
    rel = estimate.add_noise(cal, np.arange(7.0), 5)  # checks rel.noise == cal.probe.noise
    assert rel.noise == cal.probe.noise and rel.mechanism == cal.probe.mechanism


# ------------------------------------------------ budget plan: K fit, K + 1 do not


def plan(eps: str, delta: str, k: int, sens: float, *extra: str) -> dict:
    argv = ["budget", "plan", "--epsilon", eps, "--delta", delta, "--queries", str(k)]
    return ["--sensitivity", str(sens), "--json", *extra], argv


def run_plan(capsys, eps: str, delta: str, k: int, sens: float, *extra: str) -> dict:
    tail, argv = plan(eps, delta, k, sens, *extra)
    assert main(argv + tail) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("secure", [True, False])
@pytest.mark.parametrize("form", ["epsilon", "sigma"])
@pytest.mark.parametrize(
    ("k", "eps", "delta", "c"),
    [(1, "1", "1e-6", 1), (24, "1", "1e-6", 5), (10, "0.3", "1e-9", 2), (7, "20", "1e-5", 3)],
)
def test_k_planned_releases_fit_and_one_more_is_refused(
    tmp_path: Path, capsys, secure, form, k, eps, delta, c
) -> None:
    """The issue: 24 releases at the planned σ into the planned budget, the 24th refused.
    Here calibrated and charged by the pipeline's own functions, 3 keys each."""
    flag = "--secure" if secure else "--no-secure"
    p = run_plan(capsys, eps, delta, k, float(c), flag, "--keys", "3")
    assert p["noise"] == ("secure" if secure else "continuous") and p["fit"] and p["next_refused"]
    ledger = tmp_path / "budget.sqlite"
    budget_init(ledger, "d", eps, delta)
    priv = {form: p["sigma" if form == "sigma" else "epsilon_per_query"], "delta": float(delta)}
    s = spec(3, {**priv, "secure": secure}, bounds={"max_records_per_unit": c})
    for i in range(k):
        cal = calibrate(s)  # a fresh calibration each time, as each release makes one
        assert cal.mu <= p["mu_per_query"] * (1 + 1e-15)
        pipeline._charge(ledger, "d", cal, f"release {i + 1}")
    with pytest.raises(BudgetExceeded):
        pipeline._charge(ledger, "d", calibrate(s), f"release {k + 1}")
    with Ledger(ledger, create=False) as led:
        assert led.remaining("d").charges == k


@pytest.mark.parametrize("form", ["epsilon", "sigma"])
def test_three_planned_releases_end_to_end(tmp_path: Path, capsys, form) -> None:
    """``dpgauss release`` charges secure releases only (secure = false never uses a ledger)."""
    src = tmp_path / "r.csv"
    rng = np.random.default_rng(0)
    src.write_text("uid,key\n" + "".join(f"{u},{rng.integers(0, 4)}\n" for u in range(60)))
    p = run_plan(capsys, "1", "1e-6", 3, 2.0)
    assert p["keys"] is None and p["noise"] == "secure"
    ledger = tmp_path / "budget.sqlite"
    budget_init(ledger, "d", "1", "1e-6")
    value = p["sigma" if form == "sigma" else "epsilon_per_query"]
    s = spec(4, {form: value, "delta": 1e-6}, bounds={"max_records_per_unit": 2}, source=str(src))
    for i in range(3):
        run_release(s, out=tmp_path / f"o{i}.csv", ledger=ledger)
    with pytest.raises(BudgetExceeded):
        run_release(s, out=tmp_path / "o3.csv", ledger=ledger)
    assert not (tmp_path / "o3.csv").exists()


def test_plan_text_names_the_noise(capsys) -> None:
    for flag, name in (("--secure", "noise=secure"), ("--no-secure", "noise=continuous")):
        argv = ["budget", "plan", "--epsilon", "1", "--delta", "1e-6", "--queries", "24"]
        assert main([*argv, "--sensitivity", "5", flag, "--keys", "100"]) == 0
        out = capsys.readouterr().out
        assert name in out and "epsilon per query : 0.1824149963" in out
        assert "24 releases fit, release 25 is refused" in out
    assert main(["budget", "plan", "--epsilon", "1", "--delta", "0.1", "--queries", "1000"]) == 2
    assert "cannot fit" in capsys.readouterr().err


# ------------------------------------- budget plan --target-rmse: the least ε that meets R


@pytest.mark.parametrize("secure", [pytest.param(True, marks=pytest.mark.slow), False])
@pytest.mark.parametrize(("k", "target", "c"), [(1, "21.26", 5), (6, "10", 5), (3, "0.5", 1)])
def test_target_plan_meets_the_error_and_fits(tmp_path: Path, capsys, secure, k, target, c):
    """Every planned release's σ, as the pipeline calibrates it, meets the target; the ε one
    decimal step (1e-9 relative) below does not; K of them fit the planned budget and one
    more is refused."""
    flag = "--secure" if secure else "--no-secure"
    argv = ["budget", "plan", "--target-rmse", target, "--delta", "1e-6", "--queries", str(k)]
    assert main([*argv, "--sensitivity", str(c), "--keys", "3", flag, "--json"]) == 0
    p = json.loads(capsys.readouterr().out)["raw"]
    eps_q, total = p["epsilon_per_query"], p["epsilon_total"]
    s = spec(
        3, {"epsilon": eps_q, "delta": 1e-6, "secure": secure}, bounds={"max_records_per_unit": c}
    )
    delivered = calibrate(s).probe.sigma  # the law drawn: the secure lattice's σ, or σ
    assert delivered <= float(target) and delivered == p["noise_sigma"]
    below = spec(
        3,
        {"epsilon": eps_q * (1 - 2e-9), "delta": 1e-6, "secure": secure},
        bounds={"max_records_per_unit": c},
    )
    assert calibrate(below).probe.sigma > float(target)
    ledger = tmp_path / "budget.sqlite"
    budget_init(ledger, "d", repr(total), "1e-6")
    for i in range(k):
        pipeline._charge(ledger, "d", calibrate(s), f"release {i + 1}")
    if k > 1:  # the budget is the least 10-digit decimal for K: one more never fits
        with pytest.raises(BudgetExceeded):
            pipeline._charge(ledger, "d", calibrate(s), f"release {k + 1}")


def test_target_plan_from_a_report(tmp_path: Path, capsys):
    """The denoised estimate is labelled so and follows the model of
    ``dpgauss.privacy.target_error`` (σ = σ₀R/r₀ above the previous error)."""
    report = tmp_path / "r.json"
    report.write_text(
        json.dumps(
            {
                "privacy": {"sigma": 20.0},
                "denoise": {"method": "trend_filter", "rmse_per_key": 4.0},
            }
        )
    )
    argv = ["budget", "plan", "--target-rmse", "8", "--delta", "1e-6", "--no-secure"]
    assert main([*argv, "--from-report", str(report), "--json"]) == 0
    est = json.loads(capsys.readouterr().out)["denoised_estimate"]
    assert est["label"].startswith("estimate") and est["denoiser"] == "trend_filter"
    assert est["sigma"] == pytest.approx(40.0, rel=1e-12)
    assert main([*argv, "--from-report", str(report)]) == 0
    assert "ESTIMATE" in capsys.readouterr().out
    report.write_text(json.dumps({"privacy": {"sigma": 20.0}, "denoise": {"method": "none"}}))
    assert main([*argv, "--from-report", str(report)]) == 2
    assert "gives no denoised error" in capsys.readouterr().err
    assert main([*argv, "--from-report", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--delta", "1e-6", "--queries", "2"], "exactly one of --epsilon E and --target-rmse R"),
        (["--epsilon", "1", "--target-rmse", "3", "--delta", "1e-6"], "exactly one of"),
        (["--target-rmse", "0", "--delta", "1e-6"], "--target-rmse must be a number > 0"),
        (["--target-rmse", "nan", "--delta", "1e-6"], "--target-rmse must be a number > 0"),
        (["--epsilon", "1", "--delta", "1e-6"], "--epsilon needs --queries K"),
        (
            ["--epsilon", "1", "--delta", "1e-6", "--queries", "2", "--from-report", "x"],
            "goes with",
        ),
    ],
)
def test_target_plan_refusals_are_one_line(capsys, argv, message):
    assert main(["budget", "plan", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
