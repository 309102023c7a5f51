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
