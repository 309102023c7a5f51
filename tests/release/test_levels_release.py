"""Zoom-level releases end to end (issue #29 item 1): files, consistency, one charge."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dpgauss.release import writers
from dpgauss.release.ledger import Ledger
from dpgauss.release.outputs import OutputError, OutputExistsError
from dpgauss.release.pipeline import ReleaseDeliveryError, run_release
from dpgauss.release.plan import plan_release
from dpgauss.release.spec import ReleaseSpec

from ..helpers import charges, csv_number, make_ledger, read_csv

pytest.importorskip("duckdb")

KEYS = ["a", "b", "c", "d", "e", "f"]


def _source(tmp_path: Path) -> Path:
    rng = np.random.default_rng(3)
    n = 600
    uid = rng.integers(0, 150, n)
    key = rng.choice(KEYS, n, p=[0.4, 0.3, 0.1, 0.1, 0.05, 0.05])
    p = tmp_path / "r.csv"
    p.write_text("uid,k\n" + "".join(f"{u},{k}\n" for u, k in zip(uid, key, strict=True)))
    return p


def _spec(tmp_path: Path, **over: Any) -> ReleaseSpec:
    m = tmp_path / "m.csv"
    m.write_text("fine_key,parent\na,x\nb,x\nc,y\nd,y\ne,z\nf,z\n")
    data: dict[str, Any] = {
        "source": {"path": str(_source(tmp_path))},
        "unit": {"column": "uid"},
        "domain": {"kind": "values", "column": "k", "values": KEYS},
        "bounds": {"max_records_per_unit": 4},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d", "secure": False, "seed": 5},
        "denoise": {"method": "none"},
        "output": {"path": str(tmp_path / "out.csv")},
        "levels": [{"name": "half", "map": str(m)}, {"name": "all", "kind": "total"}],
    }
    for k, v in over.items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) else v
    return ReleaseSpec.from_dict(data)


def _tables(tmp_path: Path) -> tuple[list[dict[str, str]], ...]:
    return tuple(
        read_csv(tmp_path / name) for name in ("out.csv", "out.csv.half.csv", "out.csv.all.csv")
    )


def _col(rows: list[dict[str, str]], name: str) -> np.ndarray:
    return np.array([csv_number(r[name]) for r in rows])


def _check_consistent(tmp_path: Path) -> None:
    fine, half, total = _tables(tmp_path)
    parent = [r["half"] for r in fine]
    sums = {k: 0.0 for k in ("x", "y", "z")}
    for p, v in zip(parent, _col(fine, "denoised"), strict=True):
        sums[p] += v
    for r in half:
        assert float(r["denoised"]) == pytest.approx(sums[r["key"]], rel=1e-12, abs=1e-9)
    assert float(total[0]["denoised"]) == pytest.approx(
        _col(half, "denoised").sum(), rel=1e-12, abs=1e-9
    )


def test_tables_per_level_with_parents_and_exact_consistency(tmp_path: Path) -> None:
    res = run_release(_spec(tmp_path))
    fine, half, total = _tables(tmp_path)
    assert [r["half"] for r in fine] == ["x", "x", "y", "y", "z", "z"]
    assert {r["all"] for r in fine} == {"total"}
    assert list(half[0]) == [
        "key",
        "children",
        "released",
        "denoised",
        "sigma",
        "released_lower",
        "released_upper",
        "denoised_lower",
        "denoised_upper",
        "all",
    ]
    assert [r["key"] for r in half] == ["x", "y", "z"]
    assert [r["children"] for r in half] == ["2", "2", "2"]
    assert total[0]["key"] == "total" and total[0]["children"] == "6"
    _check_consistent(tmp_path)
    levels = res.report["privacy"]["levels"]
    assert [lv["name"] for lv in levels["levels"]] == ["finest", "half", "all"]
    assert [lv["weight"] for lv in levels["levels"]] == pytest.approx([1 / 3] * 3)
    assert levels["mu"] <= levels["target_mu"]
    assert res.report["output"]["levels"] == {"half": "out.csv.half.csv", "all": "out.csv.all.csv"}
    assert "level      : half (3 keys)" in res.summary
    # method none: exact intervals, centred on the GLS value
    assert "exact" in res.report["denoise"]["levels"]["intervals"]["meaning"]


def test_coarse_values_are_the_sums_of_the_bounded_aggregate(tmp_path: Path, zero_noise) -> None:
    with zero_noise():
        run_release(_spec(tmp_path))
    fine, half, total = _tables(tmp_path)
    rel = _col(fine, "released")
    assert _col(half, "released").tolist() == [rel[:2].sum(), rel[2:4].sum(), rel[4:].sum()]
    assert float(total[0]["released"]) == rel.sum()
    # without noise, GLS of consistent measurements is the truth itself
    np.testing.assert_allclose(_col(fine, "denoised"), rel, rtol=1e-12)


def test_a_denoised_count_release_is_never_negative_and_adds_up(tmp_path: Path) -> None:
    spec = _spec(
        tmp_path,
        denoise={"method": "soft_threshold"},
        privacy={"epsilon": 0.05},
        bounds={"max_records_per_unit": 20},
    )
    res = run_release(spec)
    fine, half, total = _tables(tmp_path)
    for rows in (fine, half, total):
        assert np.all(_col(rows, "denoised") >= 0.0)
        assert np.all(_col(rows, "denoised_lower") >= 0.0)
        assert np.all(_col(rows, "denoised_lower") <= _col(rows, "denoised"))
        assert np.all(_col(rows, "denoised") <= _col(rows, "denoised_upper"))
    _check_consistent(tmp_path)
    assert res.report["denoise"]["levels"]["nonnegative"] is True
    assert "approximate" in res.report["denoise"]["levels"]["intervals"]["meaning"]


def test_one_charge_for_every_level(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path, epsilon=5.0)
    spec = _spec(tmp_path, privacy={"secure": True, "seed": None, "ledger": str(ledger)})
    plan = plan_release(spec)
    plan.outputs.release()  # the plan holds the output directory's lock
    assert plan.levels is not None
    run_release(spec)
    assert charges(ledger) == 1
    with Ledger(ledger, create=False) as led:
        spent = led.remaining("d").mu_spent
    assert spent == pytest.approx(plan.levels.mu, rel=1e-12)
    assert plan.levels.mu <= plan.levels.target_mu
    _check_consistent(tmp_path)


def test_an_existing_level_table_is_refused_before_the_charge(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path, epsilon=5.0)
    (tmp_path / "out.csv.half.csv").write_text("old\n")
    spec = _spec(tmp_path, privacy={"secure": True, "seed": None, "ledger": str(ledger)})
    with pytest.raises(OutputExistsError, match=r"out\.csv\.half\.csv"):
        run_release(spec)
    assert charges(ledger) == 0
    assert not (tmp_path / "out.csv").exists()


def test_all_tables_or_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = writers.write_table

    def fail_on_total(path: str, fmt: str, columns: dict[str, np.ndarray]) -> None:
        if "key" in columns and list(columns["key"]) == ["total"]:
            raise OSError("disk full")
        real(path, fmt, columns)

    monkeypatch.setattr(writers, "write_table", fail_on_total)
    with pytest.raises(OutputError, match="disk full"):  # uncharged: the error itself
        run_release(_spec(tmp_path))
    for name in ("out.csv", "out.csv.half.csv", "out.csv.all.csv", "out.csv.report.json"):
        assert not (tmp_path / name).exists()
    ledger = make_ledger(tmp_path, epsilon=5.0)
    spec = _spec(tmp_path, privacy={"secure": True, "seed": None, "ledger": str(ledger)})
    with pytest.raises(ReleaseDeliveryError, match="disk full"):
        run_release(spec)
    assert not (tmp_path / "out.csv").exists()


def test_the_example_spec_resolves() -> None:
    pytest.importorskip("shapely")
    from dpgauss.release.domains.key_domain import resolve_domain
    from dpgauss.release.levels_plan import resolve_levels
    from dpgauss.release.spec import load_spec

    root = Path(__file__).resolve().parents[2]
    spec = load_spec(root / "examples" / "zoom_levels.toml")
    hood, total = resolve_levels(spec, resolve_domain(spec))
    assert hood.labels[-1] == "__unplaced__"  # a few junctions lie in no neighbourhood
    assert int(hood.children.sum()) == 4091 == int(total.children[0])
    assert spec.privacy.level_weights == (0.6, 0.3, 0.1)


def test_the_report_names_no_local_path(tmp_path: Path) -> None:
    res = run_release(_spec(tmp_path))
    text = json_text = json.dumps(res.report)
    assert str(tmp_path) not in json_text
    assert "sha256" in text
    assert res.report["spec"]["levels"][0]["map"] == "(local path: not published)"


def test_levels_fit_a_budget_of_exactly_their_epsilon_delta(tmp_path: Path) -> None:
    from dpgauss.release.ledger import BudgetExceeded

    ledger = make_ledger(tmp_path, epsilon=1.0)  # (1, 1e-5)
    secure = {"secure": True, "seed": None, "ledger": str(ledger), "delta": 1e-5}
    with pytest.raises(BudgetExceeded):
        run_release(_spec(tmp_path, privacy={**secure, "epsilon": 1.01}))
    assert charges(ledger) == 0
    run_release(_spec(tmp_path, privacy={**secure, "epsilon": 1.0}))  # all of it, once
    assert charges(ledger) == 1


@pytest.mark.slow
def test_the_example_runs_from_the_command_line(tmp_path: Path, monkeypatch) -> None:
    """``examples/zoom_levels.toml`` as its comment says: junction → neighbourhood → total,
    secure noise, one charge; the tables add up."""
    pytest.importorskip("shapely")
    from dpgauss.cli.app import main

    root = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "budget",
                "init",
                "taxi",
                "--epsilon",
                "10",
                "--delta",
                "1e-5",
                "--ledger",
                "budget.sqlite",
            ]
        )
        == 0
    )
    assert (
        main(["release", str(root / "examples" / "zoom_levels.toml"), "--out", "pickups.csv"]) == 0
    )
    fine = read_csv(tmp_path / "pickups.csv")
    hoods = read_csv(tmp_path / "pickups.csv.neighbourhood.csv")
    total = read_csv(tmp_path / "pickups.csv.total.csv")
    sums: dict[str, float] = {}
    for r in fine:
        sums[r["neighbourhood"]] = sums.get(r["neighbourhood"], 0.0) + float(r["denoised"])
        assert float(r["denoised"]) >= 0.0
    for r in hoods:
        assert float(r["denoised"]) == pytest.approx(sums[r["key"]], rel=1e-12, abs=1e-9)
    assert float(total[0]["denoised"]) == pytest.approx(
        sum(float(r["denoised"]) for r in hoods), rel=1e-12
    )
    assert charges(tmp_path / "budget.sqlite", "taxi") == 1
