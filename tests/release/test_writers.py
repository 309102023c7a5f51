"""release/writers.py: the plot of a product domain is small multiples of its map (issue #26,
item 5); the marked keys are those whose interval excludes the denoised map's mean."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from dpgauss import plotting
from dpgauss.release import pipeline
from dpgauss.release.spec import ReleaseSpec

from ..helpers import make_ledger

needs_mpl = pytest.mark.skipif(not plotting.have_matplotlib(), reason="matplotlib is missing")


def _spec(tmp_path: Path, domain: dict) -> ReleaseSpec:
    rng = np.random.default_rng(0)
    src = tmp_path / "s.csv"
    rows = [
        f"{i},{rng.integers(0, 14)},{rng.uniform(0, 1):.4f},{rng.uniform(0, 1):.4f}"
        for i in range(400)
    ]
    src.write_text("uid,zone,x,y\n" + "\n".join(rows) + "\n")
    return ReleaseSpec.from_dict(
        {
            "source": {"path": str(src)},
            "unit": {"column": "uid"},
            "domain": domain,
            "bounds": {"max_records_per_unit": 1},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "james_stein"},
            "output": {"path": str(tmp_path / "r.csv")},
        }
    )


ZONES = {"kind": "values", "column": "zone", "values": list(range(14))}
X = {"kind": "range", "column": "x", "start": 0, "stop": 1, "step": 0.1}
Y = {"kind": "range", "column": "y", "start": 0, "stop": 1, "step": 0.125}


@needs_mpl
@pytest.mark.parametrize(
    ("parts", "geometry", "total"),
    [
        ([ZONES, Y, X], plotting.GridGeometry, 14),  # 14 zones: 12 images drawn, 2 left out
        ([X, ZONES], plotting.SeriesGeometry, 14),  # one series per zone
        ([ZONES, {**X, "step": 0.25}], plotting.SeriesGeometry, 14),
    ],
)
def test_a_product_is_drawn_as_small_multiples(tmp_path, monkeypatch, parts, geometry, total):
    seen = {}
    real = plotting.draw_small_multiples

    def spy(path, geo, maps, **kw):
        seen.update(geo=geo, maps=maps, **kw)
        return real(path, geo, maps, **kw)

    monkeypatch.setattr(plotting, "draw_small_multiples", spy)
    spec = _spec(tmp_path, {"kind": "product", "parts": parts})
    res = pipeline.run_release(spec, ledger=make_ledger(tmp_path, 10.0))
    report = json.loads(Path(res.report_path).read_text())
    assert report["output"]["plot"] == "r.csv.png"
    assert (tmp_path / "r.csv.png").read_bytes()[:4] == b"\x89PNG"
    assert isinstance(seen["geo"], geometry)
    assert seen["total"] == total and len(seen["maps"]) == min(total, plotting.MAX_MULTIPLES)
    assert seen["what"] == "values of zone"
    cols = res.columns
    mean = float(np.mean(cols["denoised"]))
    expected = plotting.stand_out(cols["denoised_lower"], cols["denoised_upper"], mean)
    drawn = sum(int(np.sum(np.asarray(m.marks) != 0)) for m in seen["maps"])
    assert drawn <= int(np.sum(expected != 0))
    # the marks are per-key tests: the label says how many chance alone would mark, and each
    # map knows its error bars' scale (a map flat within them is drawn on it)
    assert "by chance alone about 5% of the" in seen["label"]
    half = (cols["denoised_upper"] - cols["denoised_lower"]) / 2
    assert all(m.resolution == pytest.approx(float(np.median(half))) for m in seen["maps"])


@needs_mpl
def test_a_map_says_what_chance_alone_would_mark(tmp_path, monkeypatch):
    seen = {}
    real = plotting.draw_maps

    def spy(path, geo, panels, **kw):
        seen.update(panels=panels, **kw)
        return real(path, geo, panels, **kw)

    monkeypatch.setattr(plotting, "draw_maps", spy)
    spec = _spec(tmp_path, {"kind": "grid", "x": X, "y": Y})
    res = pipeline.run_release(spec, ledger=make_ledger(tmp_path, 10.0))
    n = res.columns["denoised"].size
    den = seen["panels"][1]
    assert den.label.endswith(
        f"(marked: interval excludes the mean;\nby chance alone about 5% of the {n:,} keys "
        "would be marked)"
    )
    half = (res.columns["denoised_upper"] - res.columns["denoised_lower"]) / 2
    assert den.resolution == pytest.approx(float(np.median(half)))


def test_a_product_of_values_only_is_not_drawn_and_the_summary_says_so(tmp_path):
    other = {"kind": "values", "column": "uid", "values": list(range(5))}
    spec = _spec(tmp_path, {"kind": "product", "parts": [ZONES, other]})
    res = pipeline.run_release(spec, ledger=make_ledger(tmp_path, 10.0))
    assert "plot       : not drawn (a product of values parts only" in res.summary
