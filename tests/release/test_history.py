"""Denoising across time (issue #29 item 2): ``[series] history`` denoises a period with the
published periods before it, on time × the domain's structure, and writes their revisions
(:mod:`dpgauss.release.history`)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpgauss.denoise import james_stein
from dpgauss.release.domains.key_domain import KeyDomain, resolve_domain
from dpgauss.release.history import product_structure
from dpgauss.release.ledger import Ledger
from dpgauss.release.pipeline import run_release
from dpgauss.release.spec import ReleaseSpec

from ..helpers import read_csv

pytest.importorskip("duckdb")


def _spec(src: Path | str, out: Path | str, history: int = 2, **tables: object) -> ReleaseSpec:
    data: dict[str, object] = {
        "source": {"path": str(src)},
        "unit": {"column": "uid"},
        "domain": {"kind": "range", "column": "key", "start": 0, "stop": 6},
        "series": {"column": "t", "period": "1h", "history": history},
        "bounds": {"max_records_per_unit": 2},
        "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
        "denoise": {"method": "james_stein"},
        "output": {"path": str(out), "plot": False},
    }
    data.update(tables)
    return ReleaseSpec.from_dict(data)


def _records(path: Path) -> Path:
    """Units 0..59; unit u has 2 records in each of the hours 09 … 12 on key u % 6."""
    lines = ["uid,key,t"]
    for u in range(60):
        for h in (9, 10, 11, 12):
            lines += [f"{u},{u % 6},2013-01-13 {h:02}:{m:02}:00" for m in (5, 40)]
    path.write_text("\n".join(lines) + "\n")
    return path


def _ledger(tmp_path: Path) -> Path:
    path = tmp_path / "b.sqlite"
    with Ledger(path) as led:
        led.create_budget("d", 20.0, 1e-5)
    return path


def test_the_product_structure_is_time_times_the_domain() -> None:
    chain = KeyDomain("range", 5, np.arange(5), grid=(5,))
    assert product_structure(chain, 3).grid == (3, 5) and product_structure(chain, 3).graph is None
    edges = np.array([[0, 1], [1, 2], [0, 3]])
    graph = KeyDomain("graph", 4, np.arange(4), edges=edges)
    g = product_structure(graph, 3).graph
    assert g is not None and (g.n, g.m) == (12, 3 * 3 + 2 * 4)
    pairs = {tuple(e) for e in g.edges.tolist()}
    assert {(0, 3), (4, 7), (8, 11), (1, 5), (5, 9)} <= pairs  # within periods, across time
    values = KeyDomain("values", 3, np.arange(3))
    v = product_structure(values, 2).graph
    assert v is not None and v.edges.tolist() == [[0, 3], [1, 4], [2, 5]]
    assert product_structure(values, 1).graph is None


@pytest.mark.parametrize(
    ("tables", "message"),
    [
        (
            {"statistic": {"kind": "mean", "column": "key", "lower": 0, "upper": 1}},
            "counts and sums",
        ),
        ({"denoise": {"method": "wavelet"}}, "method = 'wavelet' cannot"),
        ({"denoise": {"method": "none"}}, "method = 'none' cannot"),
    ],
)
def test_history_needs_a_denoiser_on_counts_or_sums(tables: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _spec("x.csv", "o.csv", **tables)


@pytest.mark.parametrize("bad", [-1, 1001, True, 1.5, "2"])
def test_history_is_a_small_integer(bad: object) -> None:
    with pytest.raises((ValueError, TypeError), match=r"\[series\] history must be an integer"):
        _spec("x.csv", "o.csv", history=bad)  # type: ignore[arg-type]


def test_a_period_is_denoised_with_the_published_ones_and_revises_them(
    tmp_path: Path, zero_noise
) -> None:
    src = _records(tmp_path / "r.csv")
    ledger = _ledger(tmp_path)
    spec = _spec(src, tmp_path / "h.csv")
    results = []
    for h in (9, 10, 11):
        with zero_noise():
            results.append(run_release(spec, ledger=ledger, period=f"2013-01-13T{h:02}:00:00"))
    first, _, third = results
    assert first.report["denoise"]["history"]["used"] == 0
    assert "history    : none used (period 2013-01-13 08:00:00 is not published" in first.summary
    h3 = third.report["denoise"]["history"]
    assert (h3["used"], h3["periods"]) == (2, ["2013-01-13 09:00:00", "2013-01-13 10:00:00"])
    assert h3["revisions"] == "h.2013-01-13T11-00-00.revisions.csv" and h3["keys"] == 18
    assert "history    : denoised with the 2 published period(s)" in third.summary
    # the published values and the public σ reproduce the joint fit exactly
    want = np.bincount(np.arange(60) % 6, minlength=6) * 2.0
    stacked = np.concatenate([want, want, want])
    sigma = float(third.columns["sigma"][0])
    domain = resolve_domain(spec)
    joint = james_stein(stacked, sigma, product_structure(domain, 3))
    assert np.array_equal(third.columns["denoised"], joint.estimate[12:])
    rows = read_csv(tmp_path / "h.2013-01-13T11-00-00.revisions.csv")
    assert [r["period"] for r in rows] == ["2013-01-13 09:00:00"] * 6 + ["2013-01-13 10:00:00"] * 6
    assert [float(r["denoised"]) for r in rows] == pytest.approx(joint.estimate[:12].tolist())
    with Ledger(ledger, create=False) as led:
        labels = [e.label or "" for e in led.charges("d")]
    assert "revises" not in labels[0] and "denoised with the 1 published" in labels[1]
    assert "denoised with the 2 published period(s) from 2013-01-13 09:00:00" in labels[2]


def test_the_history_stops_at_a_gap_or_another_spec(tmp_path: Path, zero_noise) -> None:
    src = _records(tmp_path / "r.csv")
    ledger = _ledger(tmp_path)
    spec = _spec(src, tmp_path / "h.csv", history=3)
    other = _spec(
        src, tmp_path / "h.csv", history=3, privacy={"epsilon": 2.0, "delta": 1e-6, "dataset": "d"}
    )
    with zero_noise():
        run_release(spec, ledger=ledger, period="2013-01-13 09:00")
        run_release(other, ledger=ledger, period="2013-01-13 10:00")  # another ε
        run_release(spec, ledger=ledger, period="2013-01-13 11:00")
        res = run_release(spec, ledger=ledger, period="2013-01-13 12:00")
    hist = res.report["denoise"]["history"]
    assert hist["used"] == 1 and hist["periods"] == ["2013-01-13 11:00:00"]
    assert hist["note"] == "period 2013-01-13 10:00:00 was released with another spec"
    (tmp_path / "h.2013-01-13T11-00-00.csv").unlink()
    with zero_noise():
        res = run_release(spec, ledger=ledger, period="2013-01-13 13:00")
    assert res.report["denoise"]["history"]["used"] == 1  # 12:00, then the gap at 11:00
    assert "11:00:00 is not published" in res.report["denoise"]["history"]["note"]


def test_an_unreadable_history_is_refused_before_the_charge(tmp_path: Path, zero_noise) -> None:
    src = _records(tmp_path / "r.csv")
    ledger = _ledger(tmp_path)
    spec = _spec(src, tmp_path / "h.csv")
    with zero_noise():
        run_release(spec, ledger=ledger, period="2013-01-13 09:00")
    table = tmp_path / "h.2013-01-13T09-00-00.csv"
    table.write_text("key,released\n0,1\n")  # a table of 1 key, not 6
    with pytest.raises(
        ValueError, match=r"history: .*h\.2013-01-13T09-00-00\.csv is not a release"
    ):
        run_release(spec, ledger=ledger, period="2013-01-13 10:00")
    report = tmp_path / "h.2013-01-13T09-00-00.csv.report.json"
    report.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read the report"):
        run_release(spec, ledger=ledger, period="2013-01-13 10:00")
    with Ledger(ledger, create=False) as led:
        assert led.remaining("d").charges == 1
    assert not list(tmp_path.glob("h.2013-01-13T10*"))
    json.dumps(spec.to_dict())  # the spec with history stays a JSON-ready table


def test_the_joint_fit_is_the_structure_of_smallest_sure() -> None:
    """``joint_denoiser`` runs the spec's denoiser on time × the map and on time only, and
    keeps the fit of smaller SURE (saying which); a domain without structure has one."""
    from dpgauss.denoise import Denoised
    from dpgauss.release.history import joint_denoiser, time_structure

    graph = KeyDomain("graph", 3, np.arange(3), edges=np.array([[0, 1], [1, 2]]))
    t = time_structure(graph, 2).graph
    assert t is not None and t.edges.tolist() == [[0, 3], [1, 4], [2, 5]]
    seen: list[int] = []

    def make(structure):  # the risk says which structure it saw: its number of edges
        def fn(y: np.ndarray, sigma: float) -> Denoised:
            m = 0 if structure.graph is None else structure.graph.m
            seen.append(m)
            return Denoised(np.full(y.shape, float(m)), risk=float(risks[m]), method="x")

        return fn

    y = np.zeros(6)
    risks = {7: 5.0, 3: 2.0}  # product: 2·2 + 3 edges; time only: 3
    fit = joint_denoiser(make, graph, 2)(y, 1.0)
    assert fit.params["history_structure"] == "time only" and np.all(fit.estimate == 3.0)
    assert fit.params["history_sure"] == {"time × the domain's structure": 5.0, "time only": 2.0}
    risks = {7: 1.0, 3: 2.0}
    assert joint_denoiser(make, graph, 2)(y, 1.0).params["history_structure"].startswith("time ×")
    values = KeyDomain("values", 3, np.arange(3))
    seen.clear()
    risks = {3: 9.0}
    assert joint_denoiser(make, values, 2)(y, 1.0).params["history_structure"] == "time only"
    assert seen == [3]


def test_groups_of_a_period_denoised_with_history_are_that_periods_sums(
    tmp_path: Path, zero_noise
) -> None:
    """``[output] groups`` with ``[series] history``: the sums are over this period's keys
    (the earlier periods weigh 0 in the joint fit's draws), and a one-key group's interval
    is that key's published interval."""
    src = _records(tmp_path / "r.csv")
    ledger = _ledger(tmp_path)
    groups = tmp_path / "g.csv"
    groups.write_text("group,key\nlow,0\nlow,1\nlow,2\nfour,4\n")
    spec = _spec(
        src,
        tmp_path / "h.csv",
        output={"path": str(tmp_path / "h.csv"), "plot": False, "groups": str(groups)},
    )
    for h in (9, 10):
        with zero_noise():
            rel = run_release(spec, ledger=ledger, period=f"2013-01-13T{h:02}:00:00")
    assert rel.report["denoise"]["history"]["used"] == 1
    rows = read_csv(tmp_path / "h.2013-01-13T10-00-00.csv.groups.csv")
    assert [r["group"] for r in rows] == ["low", "four"]
    den = rel.columns["denoised"]
    assert float(rows[0]["denoised"]) == pytest.approx(float(den[:3].sum()), rel=1e-12)
    assert float(rows[0]["released"]) == pytest.approx(float(rel.columns["released"][:3].sum()))
    assert float(rows[1]["denoised_lower"]) == pytest.approx(rel.columns["denoised_lower"][4])
    assert float(rows[1]["denoised_upper"]) == pytest.approx(rel.columns["denoised_upper"][4])
