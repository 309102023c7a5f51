"""The plan of a zoom-level release: the tree, Δ per level, one composed charge (issue #29)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mpmath
import numpy as np
import pytest

from dpgauss.release.domains.key_domain import resolve_domain
from dpgauss.release.levels_plan import calibrate_levels, plan_levels, resolve_levels
from dpgauss.release.plan import sensitivity_of
from dpgauss.release.spec import UNPLACED, ReleaseSpec

from ..helpers import square
from ..privacy.reference import ref_delta


def _spec(
    levels: list[dict[str, Any]], domain: dict[str, Any] | None = None, **privacy: Any
) -> ReleaseSpec:
    return ReleaseSpec.from_dict(
        {
            "source": {"path": "r.csv"},
            "unit": {"column": "uid"},
            "domain": domain or {"kind": "values", "column": "k", "values": ["a", "b", "c", "d"]},
            "bounds": {"max_records_per_unit": 3},
            "privacy": {
                "epsilon": 1.0,
                "delta": 1e-6,
                "dataset": "d",
                "secure": False,
                **privacy,
            },
            "levels": levels,
        }
    )


def _map(tmp_path: Path, name: str, rows: list[tuple[str, str]]) -> str:
    p = tmp_path / name
    p.write_text("fine_key,parent\n" + "".join(f"{a},{b}\n" for a, b in rows))
    return str(p)


def test_map_and_total_tree(tmp_path: Path) -> None:
    m = _map(tmp_path, "m.csv", [("a", "x"), ("b", "y"), ("c", "x"), ("d", "y")])
    spec = _spec([{"name": "half", "map": m}, {"name": "all", "kind": "total"}])
    levels = resolve_levels(spec, resolve_domain(spec))
    half, total = levels
    assert half.labels.tolist() == ["x", "y"]
    assert half.of_fine.tolist() == [0, 1, 0, 1]
    assert half.parents.tolist() == [0, 1, 0, 1]
    assert half.children.tolist() == [2, 2]
    assert total.labels.tolist() == ["total"]
    assert total.parents.tolist() == [0, 0]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (
            [("a", "x"), ("b", "y"), ("c", "x")],
            r"1 keys of the domain have no parent \(the first: 'd'\)",
        ),
        (
            [("a", "x"), ("a", "y"), ("b", "x"), ("c", "x"), ("d", "x")],
            r"line 3: the key 'a' is given twice",
        ),
        ([("a", "x"), ("zz", "y")], r"line 3: 'zz' is not a key of the domain"),
        ([("a", "")], r"line 2 must be fine_key,parent"),
    ],
)
def test_bad_maps(tmp_path: Path, rows: list[tuple[str, str]], message: str) -> None:
    spec = _spec([{"name": "half", "map": _map(tmp_path, "m.csv", rows)}])
    with pytest.raises(ValueError, match=r"\[levels #1\] map = .*" + message):
        resolve_levels(spec, resolve_domain(spec))


def test_map_header_and_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "h.csv"
    p.write_text("key,parent\na,x\n")
    with pytest.raises(ValueError, match="header fine_key,parent"):
        resolve_levels(s := _spec([{"name": "h", "map": str(p)}]), resolve_domain(s))
    with pytest.raises(ValueError, match="no such file"):
        resolve_levels(
            s := _spec([{"name": "h", "map": str(tmp_path / "no.csv")}]), resolve_domain(s)
        )


def test_levels_must_nest(tmp_path: Path) -> None:
    one = _map(tmp_path, "1.csv", [("a", "x"), ("b", "x"), ("c", "y"), ("d", "y")])
    two = _map(tmp_path, "2.csv", [("a", "P"), ("b", "Q"), ("c", "Q"), ("d", "Q")])
    spec = _spec([{"name": "one", "map": one}, {"name": "two", "map": two}])
    with pytest.raises(
        ValueError, match=r"\[levels #2\] the levels do not nest: the node 'x'.*'Q' and 'P'"
    ):
        resolve_levels(spec, resolve_domain(spec))


def _regions(tmp_path: Path) -> str:
    feats = [
        {
            "type": "Feature",
            "properties": {"id": rid},
            "geometry": {"type": "Polygon", "coordinates": [square(x, 0.0)]},
        }
        for rid, x in (("west", 0.0), ("east", 1.0), ("far", 5.0))
    ]
    p = tmp_path / "r.geojson"
    p.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return str(p)


@pytest.mark.filterwarnings("ignore::dpgauss.errors.CrsWarning")
def test_regions_level_places_graph_nodes_and_keeps_the_unplaced(tmp_path: Path) -> None:
    pytest.importorskip("shapely")
    nodes = tmp_path / "nodes.csv"
    # lon 0.5 → west, 1.5 → east, 9.0 → no region; lat 0.5 inside
    nodes.write_text("id,lat,lon\n1,0.5,0.5\n2,0.5,1.5\n3,0.5,9.0\n4,0.25,0.75\n")
    edges = tmp_path / "edges.csv"
    edges.write_text("u,v\n1,2\n2,3\n3,4\n")
    domain = {"kind": "graph", "nodes": str(nodes), "edges": str(edges), "lat": "la", "lon": "lo"}
    spec = _spec(
        [{"name": "side", "regions": _regions(tmp_path)}, {"name": "all", "kind": "total"}], domain
    )
    (side, total) = resolve_levels(spec, resolve_domain(spec))
    assert side.labels.tolist() == ["west", "east", UNPLACED]
    assert side.of_fine.tolist() == [0, 1, 2, 0]
    assert side.unplaced == 1 and side.empty == 1  # "far" holds no junction: not a key
    assert total.parents.tolist() == [0, 0, 0]


def test_sensitivity_per_level_and_single_charge(tmp_path: Path) -> None:
    m = _map(tmp_path, "m.csv", [("a", "x"), ("b", "y"), ("c", "x"), ("d", "y")])
    spec = _spec(
        [{"name": "half", "map": m}, {"name": "all", "kind": "total"}], level_weights=[2, 1, 1]
    )
    domain = resolve_domain(spec)
    lp = plan_levels(spec, domain, sensitivity_of(spec, domain))
    # b = 3: the fine vector moves by 3 (3 records on one key), each coarser level by 3
    assert lp.sensitivities == (3.0, 3.0, 3.0)
    assert lp.weights == (0.5, 0.25, 0.25)
    assert lp.event.mu == lp.mu and lp.event.count == 1
    spec_k = ReleaseSpec.from_dict(
        {**spec.to_dict(), "bounds": {"max_keys_per_unit": 2, "max_records_per_key": 1}}
    )
    lp_k = plan_levels(spec_k, domain, sensitivity_of(spec_k, domain))
    # k = 2 keys × c = 1: fine √2; a half holds 2 keys: 2; the total: 2 (k·c, the L1 bound)
    assert lp_k.sensitivities[0] == pytest.approx(2**0.5)
    assert lp_k.sensitivities[1:] == (2.0, 2.0)


@pytest.mark.parametrize(
    ("eps", "delta", "weights", "sens"),
    [
        (1.0, 1e-6, (1, 1, 1), (5.0, 5.0, 5.0)),
        (0.1, 1e-9, (8, 1, 1), (2.0**0.5, 3.0, 7.0)),
        (10.0, 1e-3, (1, 2), (1.0, 40.0)),
        (1e-3, 1e-12, (1, 1, 1, 1), (1.0, 1.0, 2.0, 3.0)),
    ],
)
def test_composed_guarantee_is_the_specs_exactly(
    eps: float, delta: float, weights: tuple, sens: tuple
) -> None:
    levels = [{"name": f"l{i}", "kind": "total"} for i in range(len(weights) - 1)]
    spec = _spec(levels, epsilon=eps, delta=delta, level_weights=list(weights))
    cals, mu, target = calibrate_levels(spec, list(sens), [4] + [1] * (len(weights) - 1))
    mpmath.mp.dps = 60
    # each level's μ = Δ/σ exactly, composed in μ-GDP: √Σ(Δ_ℓ/σ_ℓ)²
    exact = mpmath.sqrt(
        sum(
            (mpmath.mpf(s) / mpmath.mpf(c.mechanism.sigma)) ** 2
            for s, c in zip(sens, cals, strict=True)
        )
    )
    assert exact <= mpmath.mpf(mu)
    # (ε, δ) holds: the μ-GDP profile at ε of the composed μ is at most δ ...
    d_at = ref_delta(mu, eps)
    assert d_at <= mpmath.mpf(delta)
    # ... and is the spec's δ to 1e-6 relative (the noise is not wasted)
    assert float(d_at) == pytest.approx(delta, rel=1e-6)
    # the shares are the weights: μ_ℓ² / μ² = w_ℓ
    shares = [
        float((mpmath.mpf(s) / mpmath.mpf(c.mechanism.sigma)) ** 2 / exact**2)
        for s, c in zip(sens, cals, strict=True)
    ]
    w = np.asarray(weights, dtype=float) / sum(weights)
    assert shares == pytest.approx(w.tolist(), rel=1e-8)
    assert mu <= target


def test_secure_levels_fit_the_budget() -> None:
    spec = _spec([{"name": "t", "kind": "total"}], secure=True, ledger=None, level_weights=[9, 1])
    cals, mu, target = calibrate_levels(spec, [1.0, 10.0], [4, 1])
    assert mu <= target
    assert float(ref_delta(mu, 1.0)) <= 1e-6
    assert mu == pytest.approx(target, rel=1e-2)
    assert all(type(c.event).__name__ == "DiscreteGaussianEvent" for c in cals)


def test_grid_cells_are_placed_by_their_centres(tmp_path: Path) -> None:
    pytest.importorskip("shapely")
    domain = {
        "kind": "grid",
        "y": {"column": "la", "start": 0.0, "stop": 1.0, "step": 0.5},
        "x": {"column": "lo", "start": 0.0, "stop": 2.0, "step": 0.5},
    }
    spec = _spec([{"name": "side", "regions": _regions(tmp_path)}], domain)
    (side,) = resolve_levels(spec, resolve_domain(spec))
    # row-major, y outer: centres x = 0.25, 0.75 (west), 1.25, 1.75 (east), on both rows
    assert side.labels.tolist() == ["west", "east"]
    assert side.of_fine.tolist() == [0, 0, 1, 1, 0, 0, 1, 1]


def test_fine_regions_are_placed_by_their_centroids(tmp_path: Path) -> None:
    pytest.importorskip("shapely")
    feats = [
        {
            "type": "Feature",
            "properties": {"id": f"r{i}"},
            "geometry": {"type": "Polygon", "coordinates": [square(0.5 * i, 0.0, 0.5)]},
        }
        for i in range(4)
    ]
    fine = tmp_path / "fine.geojson"
    fine.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    domain = {"kind": "regions", "regions": str(fine), "column": "rid"}
    spec = _spec([{"name": "side", "regions": _regions(tmp_path)}], domain)
    (side,) = resolve_levels(spec, resolve_domain(spec))
    assert side.labels.tolist() == ["west", "east"]
    assert side.of_fine.tolist() == [0, 0, 1, 1]


def test_a_sum_scales_every_level(tmp_path: Path) -> None:
    m = _map(tmp_path, "m.csv", [("a", "x"), ("b", "y"), ("c", "x"), ("d", "y")])
    spec = ReleaseSpec.from_dict(
        {
            **_spec([{"name": "half", "map": m}]).to_dict(),
            "statistic": {"kind": "sum", "column": "v", "lower": -2.0, "upper": 5.0},
        }
    )
    domain = resolve_domain(spec)
    lp = plan_levels(spec, domain, sensitivity_of(spec, domain))
    assert lp.sensitivities == (15.0, 15.0)  # max(|lower|, |upper|) = 5 times b = 3


@pytest.mark.filterwarnings("ignore::dpgauss.errors.CrsWarning")
def test_a_region_named_like_the_unplaced_parent_is_refused(tmp_path: Path) -> None:
    """Review finding 4: a region whose id is "__unplaced__" beside fine keys that fall in no
    region gave the level two keys written "__unplaced__" (its table's key column no longer
    named one parent); refused before the charge, naming the level."""
    pytest.importorskip("shapely")
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("id,lat,lon\n1,0.5,0.5\n2,0.5,1.5\n3,0.5,9.0\n")
    edges = tmp_path / "edges.csv"
    edges.write_text("u,v\n1,2\n2,3\n")
    regions = Path(_regions(tmp_path))
    regions.write_text(regions.read_text().replace('"east"', json.dumps(UNPLACED)))
    domain = {"kind": "graph", "nodes": str(nodes), "edges": str(edges), "lat": "la", "lon": "lo"}
    spec = _spec([{"name": "side", "regions": str(regions)}], domain)
    with pytest.raises(ValueError, match=r"levels #1.*__unplaced__"):
        resolve_levels(spec, resolve_domain(spec))
