"""The public report's error estimate (issue #26, item 4): never a zero or negative error."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from dpgauss.release import pipeline
from dpgauss.release.report import (
    BELOW_RESOLUTION,
    PublicReport,
    candidate_label,
    candidates_table,
    components_fields,
    components_text,
    constant_fields,
    error_fields,
    rmse_text,
)
from dpgauss.release.spec import ReleaseSpec

from ..helpers import make_ledger


@pytest.mark.parametrize("risk", [-18006.0, -1e-300, 0.0, 1e-3, float("nan")])
def test_sure_at_or_below_its_resolution_gives_the_bound_only(risk: float) -> None:
    err = error_fields(risk, 900.0, 100)
    assert err["estimated_error"] is None and err["rmse_per_key"] is None
    assert err["rmse_per_key_upper95"] == pytest.approx(3.0)
    if math.isfinite(risk):
        assert err["sure"] == risk and err["estimated_error_note"] == BELOW_RESOLUTION
    else:
        assert err["sure"] is None and "no SURE" in err["estimated_error_note"]
    assert rmse_text(err["rmse_per_key"], err["rmse_per_key_upper95"]).startswith("<= 3")


def test_sure_above_its_resolution_is_the_estimate() -> None:
    err = error_fields(400.0, 900.0, 100)
    assert err["estimated_error"] == 400.0 and err["rmse_per_key"] == pytest.approx(2.0)
    assert "estimated_error_note" not in err
    assert rmse_text(err["rmse_per_key"], err["rmse_per_key_upper95"]).startswith("2 (SURE")
    assert error_fields(9.0, 900.0, 100)["estimated_error"] is None  # 1 % of the bound
    assert error_fields(9.01, 900.0, 100)["estimated_error"] == 9.01


@pytest.mark.slow
def test_a_flat_release_reports_no_zero_error(tmp_path: Path) -> None:
    """James–Stein toward 0 on an empty map: SURE far below its resolution (often < 0).
    The report publishes the bound and the reason, never ``rmse_per_key: 0``."""
    csv = tmp_path / "s.csv"
    csv.write_text("uid,key\n")
    spec = ReleaseSpec.from_dict(
        {
            "source": {"path": str(csv)},
            "unit": {"column": "uid"},
            "domain": {"kind": "values", "column": "key", "values": list(range(400))},
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "james_stein"},
            "output": {"plot": False},
        }
    )
    seen = []
    for _ in range(4):  # SURE's sign varies with the noise: each draw must hold
        res = pipeline.run_release(
            spec, out=tmp_path / f"o{len(seen)}.csv", ledger=make_ledger(tmp_path, 1e3)
        )
        den = json.loads(Path(res.report_path).read_text())["denoise"]
        assert den["rmse_per_key"] is None or den["rmse_per_key"] > 0
        assert den["estimated_error"] is None or den["estimated_error"] > 0
        assert den["rmse_per_key_upper95"] > 0
        if den["estimated_error"] is None:
            assert den["estimated_error_note"] == BELOW_RESOLUTION and "<= " in res.summary
        seen.append(den["sure"])
        (tmp_path / "budget.sqlite").unlink()
    assert np.all(np.isfinite(seen))


def test_the_diagnostics_timing_line_reads_stage_by_stage() -> None:
    """``--diagnostics`` (issue #28): each stage a name and its unit, the total with the
    denoising time and share, and ``auto``'s candidates (whose names hold commas) apart."""
    from dpgauss.release.report import Diagnostics

    timing = {
        "plan_s": 0.123,
        "aggregate_s": 0.4,
        "denoise none, james_stein_s": 0.01,
        "denoise soft_threshold_s": 0.02,
        "denoise_s": 0.25,
        "noise_denoise_s": 0.3,
        "write_s": 0.05,
        "total_s": 0.9,
        "denoise_share": 0.25 / 0.9,
    }
    lines = Diagnostics(timing=timing).text().splitlines()
    assert lines[1] == (
        "timing     : plan 0.12 s, read and aggregate 0.40 s, noise and denoise 0.30 s, "
        "write 0.05 s; total 0.90 s (denoising 0.25 s, 28 % of it)"
    )
    assert lines[2] == "candidates : none, james_stein 0.01 s; soft_threshold 0.02 s"
    text = "\n".join(lines)
    assert not re.search(r"_s\b", text) and "share" not in text  # no raw keys
    only = Diagnostics(timing={"plan_s": 0.5, "other_step_s": 1.0}).text().splitlines()
    assert only[1] == "timing     : plan 0.50 s, other step 1.00 s"
    assert len(Diagnostics().text().splitlines()) == 1  # no timing, no line


# Reports that say what is known (issue #26, item 4).


def _pairs(k: int, start: int = 0) -> list[list[int]]:
    """``k`` disjoint edges: an un-noded street network's lines, each its own component."""
    return [[start + 2 * i, start + 2 * i + 1] for i in range(k)]


def test_one_component_is_not_fragmented() -> None:
    chain = [[i, i + 1] for i in range(99)]
    comp = components_fields(100, chain)
    assert comp["count"] == 1 and comp["largest_share"] == 1.0 and not comp["fragmented"]
    assert "note" not in comp


def test_an_un_noded_street_network_is_flagged() -> None:
    """78 components of 2 nodes (lines crossing without a shared node): the largest holds
    1/78 of the nodes."""
    comp = components_fields(156, _pairs(78))
    assert comp["count"] == 78 and comp["fragmented"]
    assert "un-noded street network" in comp["note"]
    text = components_text(comp)
    assert text.startswith("78 connected components; the largest holds 1% of the nodes")
    assert "\nWARNING: the graph falls apart into 78 components" in text


@pytest.mark.parametrize(
    ("singletons", "fragmented"),
    [(3, False), (9, False), (10, True), (40, True)],
)
def test_a_main_component_with_many_small_ones_is_flagged(singletons, fragmented) -> None:
    """1,000 nodes in one chain plus isolated nodes: the largest holds more than 90 %, so
    only the count of small components (at most 1 % of the nodes each) can flag it."""
    chain = [[i, i + 1] for i in range(999)]
    comp = components_fields(1000 + singletons, chain)
    assert comp["count"] == 1 + singletons and comp["largest_share"] > 0.9
    assert comp["small"] == singletons and comp["fragmented"] is fragmented


def test_two_halves_are_flagged_and_regions_say_islands() -> None:
    halves = [[i, i + 1] for i in range(49)] + [[i, i + 1] for i in range(50, 99)]
    comp = components_fields(100, halves, "regions")
    assert comp["count"] == 2 and comp["largest_share"] == 0.5 and comp["small"] == 0
    assert comp["fragmented"] and "islands" in comp["note"]
    assert components_fields(100, [*halves[:49], [49, 50], *halves[49:]])["count"] == 1


def test_a_constant_denoised_map_says_so_and_why() -> None:
    js = {"method": "james_stein", "params": {"target": "zero", "shrinkage": 0.0}}
    const = constant_fields(np.zeros(50), js)["constant"]
    assert const["value"] == 0.0
    assert const["why"].startswith("James–Stein found no signal above the noise")
    assert const["why"].endswith("every value shrunk to 0")
    fused = constant_fields(np.full(50, 3.25) + 1e-13, {"method": "trend_filter"})
    assert "the trend filter fused everything" in fused["constant"]["why"]
    assert constant_fields(np.r_[np.zeros(49), 1e-6], js) == {}  # not constant
    mean = {"method": "m", "sum": {"method": "james_stein"}, "count": {"method": "none"}}
    why = constant_fields(np.r_[np.full(9, 2.0), np.nan], mean)["constant"]["why"]
    assert why.startswith("the sum: James–Stein") and "the count: the released" in why


def test_candidates_are_listed_with_their_parameters() -> None:
    assert candidate_label("none", {}) == "none"
    assert (
        candidate_label("james_stein", {"target": "mean", "shrinkage": 0.8602, "df": 86.4})
        == "james_stein (target mean, shrinkage 0.86)"
    )
    assert (
        candidate_label("trend_filter", {"order": 1, "lam": 253.1, "lam_max": 6680.0, "df": 10})
        == "trend_filter (order 1, λ 253 of λ_max 6.68e+03, df 10)"
    )
    assert (
        candidate_label("soft_threshold", {"threshold": "sure", "lambda": 0.3616, "df": 82})
        == "soft_threshold (λ 0.362, by SURE)"
    )
    table = candidates_table(
        [
            {"method": "none", "risk": 100.0, "params": {}},
            {"method": "trend_filter", "risk": 9.0, "params": {"order": 0, "lam": 2.0}},
        ],
        selected=1,
    )
    assert [c["selected"] for c in table] == [False, True]
    assert table[1]["params"] == {"order": 0, "lam": 2.0}
    assert table[1]["label"] == "trend_filter (order 0, λ 2)"


def _report(**changes) -> PublicReport:
    base = {
        "version": "0",
        "spec": {},
        "domain": {"kind": "graph", "size": 4, "structure": "graph"},
        "sensitivity": {"summary": "L2 sensitivity 1"},
        "privacy": {
            "sigma": 1.0,
            "mechanism": "gaussian",
            "analytic_sigma": 1.0,
            "classical_sigma": None,
            "epsilon": 1.0,
            "delta": 1e-6,
        },
        "denoise": {"method": "james_stein", "rmse_per_key": 0.5, "rmse_per_key_upper95": 0.6},
        "charge": {"charged": False},
        "output": {"table": "t.csv", "rows": 4, "format": "csv", "report": "t.csv.report.json"},
    }
    for key, value in changes.items():
        base[key] = {**base[key], **value}
    return PublicReport(**base)


def test_the_summary_says_when_no_plot_is_drawn() -> None:
    note = "not drawn: matplotlib is not installed (pip install 'dpgauss[plot]')"
    text = _report(output={"plot": None, "plot_note": note}).text()
    assert f"\nplot       : {note}" in text
    drawn = _report(output={"plot": "t.csv.png", "plot_note": None}).text()
    assert "plot t.csv.png" in drawn and "\nplot       :" not in drawn


def test_the_summary_lists_the_candidates_constant_and_components() -> None:
    cands = candidates_table(
        [
            {"method": "none", "risk": 4.0, "params": {}},
            {"method": "james_stein", "risk": -1.0, "params": {"target": "zero", "shrinkage": 0}},
        ],
        selected=1,
    )
    js = {"method": "james_stein", "params": {"target": "zero"}, "candidates": cands}
    den = {**js, **constant_fields(np.zeros(4), js)}
    text = _report(
        denoise=den, domain={"components": components_fields(4, [[0, 1], [2, 3]])}
    ).text()
    lines = text.splitlines()
    assert any(
        line.startswith("constant   : the denoised values are constant (0): James–Stein found")
        for line in lines
    )
    at = lines.index("candidates : SURE of each candidate auto tried (* the one chosen)")
    assert lines[at + 1].split() == ["none", "SURE", "4"]
    assert lines[at + 2].split()[:2] == ["*", "james_stein"]
    assert any(line.startswith("components : 2 connected components") for line in lines)
    assert any(
        line.startswith("WARNING: the graph falls apart into 2 components") for line in lines
    )


def test_the_summary_says_why_a_smaller_sure_lost() -> None:
    cands = candidates_table(
        [
            {"method": "none", "risk": 100.0, "params": {}},
            {"method": "james_stein", "risk": 80.0, "params": {"target": "zero"}},
            {"method": "trend_filter", "risk": 76.0, "params": {"order": 0}, "bar": 70.0},
            {"method": "soft_threshold", "risk": 90.0, "params": {}, "bar": 60.0},
        ],
        selected=1,
    )
    assert [c.get("bar") for c in cands] == [None, None, 70.0, 60.0]
    den = {"method": "james_stein", "params": {"target": "zero"}, "candidates": cands}
    lines = _report(denoise=den).text().splitlines()
    tf = next(line for line in lines if "trend_filter" in line)
    assert tf.endswith("SURE 76, not below its bar 70")
    soft = next(line for line in lines if "soft_threshold" in line)
    assert soft.endswith("SURE 90")  # a larger SURE needs no reason
    assert any(line.strip().startswith("a smaller SURE lost:") for line in lines)
    # nothing to explain when the smallest SURE won
    cands[2]["risk"] = 65.0
    cands[1]["selected"], cands[2]["selected"] = False, True
    text = _report(denoise={**den, "candidates": cands}).text()
    assert "a smaller SURE lost" not in text and "not below its bar" not in text


def _street_release(tmp_path: Path, pairs: int, **output) -> dict:
    """A graph of ``pairs`` disjoint streets (nodes and edge tables) and no records."""
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "id,lat,lon\n"
        + "".join(f"{i},{40.7 + 0.001 * i},{-74.0 + 0.0005 * (i % 2)}\n" for i in range(2 * pairs))
    )
    edges = tmp_path / "edges.csv"
    edges.write_text("u,v\n" + "".join(f"{u},{v}\n" for u, v in _pairs(pairs)))
    src = tmp_path / "s.csv"
    src.write_text("uid,lat,lon\n")
    return {
        "source": {"path": str(src)},
        "unit": {"column": "uid"},
        "domain": {
            "kind": "graph",
            "nodes": str(nodes),
            "edges": str(edges),
            "lat": "lat",
            "lon": "lon",
        },
        "bounds": {"max_records_per_unit": 1},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        "denoise": {"method": "auto"},
        "output": {"path": str(tmp_path / "r.csv"), **output},
    }


def test_a_release_on_an_un_noded_graph_says_constant_components_and_no_plot(
    tmp_path: Path, zero_noise, monkeypatch
) -> None:
    """No records and no noise (the test hook): every candidate finds nothing, the denoised
    map is 0; the graph of 40 disjoint streets is flagged; without matplotlib the summary
    says the plot was not drawn and why."""
    from dpgauss.release import plan as plan_module

    real = plan_module.optional
    monkeypatch.setattr(
        plan_module, "optional", lambda name: None if name == "matplotlib" else real(name)
    )
    spec = ReleaseSpec.from_dict(_street_release(tmp_path, 40))
    with zero_noise():
        res = pipeline.run_release(spec, ledger=make_ledger(tmp_path, 10.0))
    report = json.loads(Path(res.report_path).read_text())
    comp = report["domain"]["components"]
    assert comp["count"] == 40 and comp["fragmented"] and comp["largest"] == 2
    den = report["denoise"]
    assert den["constant"]["value"] == 0.0 and den["constant"]["why"]
    chosen = [c for c in den["candidates"] if c["selected"]]
    assert len(chosen) == 1 and chosen[0]["method"] == den["method"]
    orders = {c["params"].get("order") for c in den["candidates"] if c["method"] == "trend_filter"}
    assert orders == {0, 1}
    assert {
        c["params"].get("target") for c in den["candidates"] if c["method"] == "james_stein"
    } == {
        "zero",
        "mean",
    }
    assert report["output"]["plot"] is None
    assert "the denoised values are constant (0)" in res.summary
    assert "WARNING: the graph falls apart into 40 components" in res.summary
    assert "plot       : not drawn: matplotlib is not installed" in res.summary
    assert not (tmp_path / "r.csv.png").exists()


def test_a_mean_lists_the_candidates_of_its_sum_and_its_count() -> None:
    part = {
        "method": "none",
        "candidates": candidates_table([{"method": "none", "risk": 3.0, "params": {}}], 0),
    }
    text = _report(denoise={"method": "sum: none, count: none", "sum": part, "count": part}).text()
    assert "candidates : SURE of each candidate auto tried for the sum (* the one chosen)" in text
    assert "candidates : SURE of each candidate auto tried for the count (* the one chosen)" in text
