"""Regions: GeoJSON polygons read and refused, point in polygon with one border rule,
queen/rook adjacency, the bundled NYC neighbourhoods, and releases over regions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

shapely = pytest.importorskip("shapely")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

from dpgauss.datasets.neighbourhoods import (  # noqa: E402
    convert_data_polygamy,
    nyc_neighbourhoods_path,
)
from dpgauss.release.domains.key_domain import resolve_domain  # noqa: E402
from dpgauss.release.domains.regions import RegionMapper, adjacency, read_geojson  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate, run_release  # noqa: E402
from dpgauss.release.plan import sensitivity_of  # noqa: E402
from dpgauss.release.spec import ReleaseSpec  # noqa: E402

from ...helpers import make_ledger, square  # noqa: E402
from ..test_pipeline import assert_cli_refuses_uncharged  # noqa: E402

ENGINE = DuckDBEngine(threads=2)
SHARED = Path(__file__).resolve().parents[4] / "shared" / "data"


def collection(features: list) -> dict:
    return {"type": "FeatureCollection", "features": features}


def feature(rid: object, geometry: dict, prop: str = "id") -> dict:
    return {"type": "Feature", "properties": {prop: rid}, "geometry": geometry}


def grid_regions(path: Path, n: int = 3, w: float = 0.01) -> Path:
    """n × n squares of w degrees, ids "r<row><col>", row-major; the centre one has a hole."""
    feats = []
    for r in range(n):
        for c in range(n):
            rings = [square(c * w, r * w, w)]
            if (r, c) == (n // 2, n // 2):
                rings.append(square(c * w + w / 4, r * w + w / 4, w / 2)[::-1])  # a hole
            feats.append(feature(f"r{r}{c}", {"type": "Polygon", "coordinates": rings}))
    path.write_text(json.dumps(collection(feats)))
    return path


# ----------------------------------------------------------------------------- reading


def test_polygons_multipolygons_and_ids(tmp_path: Path) -> None:
    p = tmp_path / "r.geojson"
    multi = {"type": "MultiPolygon", "coordinates": [[square(5, 5)], [square(7, 7)]]}
    p.write_text(
        json.dumps(
            collection(
                [
                    feature(10, {"type": "Polygon", "coordinates": [square(0, 0)]}, "code"),
                    feature(-3, multi, "code"),
                ]
            )
        )
    )
    r = read_geojson(p, "code")
    assert r.ids.dtype == np.int64 and r.ids.tolist() == [10, -3]
    assert r.geoms[1].geom_type == "MultiPolygon" and r.name.startswith("GeoJSON file, sha256")


BAD = {
    "not JSON": ("{", "is not JSON"),
    "a Feature, not a collection": (
        json.dumps(feature(1, {"type": "Polygon", "coordinates": [square(0, 0)]})),
        "is not a GeoJSON FeatureCollection",
    ),
    "no features": (json.dumps(collection([])), "has no features"),
    "no id": (
        json.dumps(collection([feature(None, {"type": "Polygon", "coordinates": [square(0, 0)]})])),
        "feature 1 has no id",
    ),
    "a duplicate id": (
        json.dumps(
            collection(
                [feature("a", {"type": "Polygon", "coordinates": [square(x, 0)]}) for x in (0, 2)]
            )
        ),
        "the region id 'a' appears twice",
    ),
    "a point": (
        json.dumps(collection([feature("a", {"type": "Point", "coordinates": [0, 0]})])),
        "has the geometry 'Point'; a region is a Polygon or MultiPolygon",
    ),
    "out of range": (
        json.dumps(
            collection([feature("a", {"type": "Polygon", "coordinates": [square(179.5, 0)]})])
        ),
        "is not [lon, lat] in degrees",
    ),
    "self-intersecting": (
        json.dumps(
            collection(
                [
                    feature(
                        "bow",
                        {
                            "type": "Polygon",
                            "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]],
                        },
                    )
                ]
            )
        ),
        "feature 'bow' is not a valid polygon (Self-intersection",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_geojson_is_refused_naming_the_file(tmp_path: Path, case: str) -> None:
    text, message = BAD[case]
    p = tmp_path / "bad.geojson"
    p.write_text(text)
    with pytest.raises(ValueError) as info:
        read_geojson(p)
    assert str(info.value).startswith(str(p)) and message in str(info.value)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------- point in polygon


def test_borders_go_to_the_first_region_and_holes_are_outside(tmp_path: Path) -> None:
    r = read_geojson(grid_regions(tmp_path / "g.geojson"))
    m = RegionMapper(r)
    lat = np.array([0.005, 0.005, 0.01, 0.01, 0.015, 0.0125, 0.03, -0.001, np.nan])
    lon = np.array([0.005, 0.01, 0.01, 0.005, 0.015, 0.0125, 0.03, 0.005, 0.0])
    got = m.locate(lat, lon).tolist()
    # inside r00; on the r00|r01 border: r00; the corner of r00, r01, r10, r11: r00; the
    # r00|r10 border: r00; inside the hole of r11: outside; on the hole's edge: r11 (closed);
    # the far corner (0.03, 0.03) of r22: r22; below the grid: outside; NaN: outside.
    assert got == [0, 0, 0, 0, -1, 4, 8, -1, -1]


@pytest.mark.slow
def test_point_in_polygon_against_shapely_covers(tmp_path: Path) -> None:
    r = read_geojson(nyc_neighbourhoods_path())
    m = RegionMapper(r)
    rng = np.random.default_rng(3)
    lat = rng.uniform(40.49, 40.92, 20000)
    lon = rng.uniform(-74.26, -73.69, 20000)
    got = m.locate(lat, lon)
    pts = shapely.points(lon, lat)
    covers = np.stack([shapely.covers(g, pts) for g in r.geoms])  # (regions, points)
    want = np.where(covers.any(axis=0), covers.argmax(axis=0), -1)
    assert np.array_equal(got, want)
    assert (got >= 0).mean() > 0.3


def test_queen_and_rook_adjacency(tmp_path: Path) -> None:
    r = read_geojson(grid_regions(tmp_path / "g.geojson"))
    rook, queen = adjacency(r, "rook"), adjacency(r, "queen")
    assert len(rook) == 12 and len(queen) == 20  # 4- and 8-neighbours of a 3 × 3 grid
    assert set(map(tuple, rook.tolist())) < set(map(tuple, queen.tolist()))
    assert adjacency(r, "none") is None


# ------------------------------------------------------------------- the bundled regions


def test_the_bundled_neighbourhoods() -> None:
    r = read_geojson(nyc_neighbourhoods_path())
    assert r.n == 260 and r.ids.tolist() == list(range(260))
    assert all(shapely.is_valid(g) for g in r.geoms)
    assert (nyc_neighbourhoods_path().parent / "LICENSE.data-polygamy.txt").exists()


@pytest.mark.skipif(not SHARED.exists(), reason="the shared data is not beside the checkout")
def test_the_bundled_file_is_the_conversion_of_the_source_and_its_adjacency_the_graph() -> None:
    text = (SHARED / "datapolygamy_neighborhood.txt").read_text()
    assert convert_data_polygamy(text) == json.loads(nyc_neighbourhoods_path().read_text())
    ref = set()
    for line in (SHARED / "datapolygamy_neighborhood-graph.txt").read_text().splitlines()[1:]:
        if line.strip():
            u, v = map(int, line.split())
            ref.add((min(u, v), max(u, v)))
    queen = set(map(tuple, adjacency(read_geojson(nyc_neighbourhoods_path()), "queen").tolist()))
    # data-polygamy's own graph (550 edges): shared borders recover 532; the other 18 join
    # regions across water, which no border rule finds
    assert len(ref & queen) >= 0.95 * len(ref)


# ----------------------------------------------------------------------------- releases


def records(tmp_path: Path, n: int = 3000, seed: int = 0) -> tuple[Path, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    uid = np.repeat(np.arange(n // 2), 2)[:n]
    lat = rng.uniform(-0.002, 0.032, n)
    lon = rng.uniform(-0.002, 0.032, n)
    lat[:3], lon[:3] = 0.01, 0.01  # on a corner shared by four regions
    region = np.array([f"r{int(a // 0.01)}{int(b // 0.01)}" for a, b in zip(lat, lon, strict=True)])
    src = tmp_path / "p.parquet"
    pq.write_table(pa.table({"uid": uid, "lat": lat, "lon": lon, "region_id": region}), src)
    return src, lat, lon


def spec_for(src: Path, regions: Path, **domain: object) -> ReleaseSpec:
    where = {"lat": "lat", "lon": "lon"} if "column" not in domain else {}
    return ReleaseSpec.from_dict(
        {
            "source": {"path": str(src)},
            "unit": {"column": "uid"},
            "domain": {"kind": "regions", "regions": str(regions), **where, **domain},
            "bounds": {"max_records_per_unit": 2},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "auto"},
        }
    )


def test_records_by_point_and_by_id_column(tmp_path: Path) -> None:
    regions = grid_regions(tmp_path / "g.geojson")
    src, lat, lon = records(tmp_path)
    by_point = bounded_aggregate(spec_for(src, regions), salt=1, engine=ENGINE)
    loc = RegionMapper(read_geojson(regions)).locate(lat, lon)
    assert np.array_equal(by_point.counts, np.bincount(loc[loc >= 0], minlength=9))
    assert by_point.rows.outside_domain == (loc < 0).sum()
    by_id = bounded_aggregate(spec_for(src, regions, column="region_id"), salt=1, engine=ENGINE)
    ids = [f"r{r}{c}" for r in range(3) for c in range(3)]
    table = pq.read_table(src).column("region_id").to_pylist()
    assert by_id.counts.tolist() == [float(table.count(i)) for i in ids]


@pytest.mark.slow
def test_neighbouring_datasets_on_regions(tmp_path: Path) -> None:
    """Eve puts 30 records on borders and corners: each counts once, she keeps b = 2 of them,
    and the aggregate moves by exactly her kept records."""
    regions = grid_regions(tmp_path / "g.geojson")
    src, _, _ = records(tmp_path)
    table = pq.read_table(src)
    k = 30
    eve = pa.table(
        {
            "uid": np.full(k, 10**6),
            "lat": np.tile([0.01, 0.02, 0.0], 10),
            "lon": np.tile([0.01, 0.02, 0.01], 10) + np.repeat(np.arange(10) * 1e-9, 3),
            "region_id": ["r11"] * k,
        }
    ).cast(table.schema)
    pq.write_table(pa.concat_tables([table, eve]), tmp_path / "with.parquet")
    pq.write_table(eve, tmp_path / "eve.parquet")
    for salt in (3, 2**63):
        got = [
            bounded_aggregate(spec_for(f, regions), salt=salt, engine=ENGINE).counts
            for f in (src, tmp_path / "with.parquet", tmp_path / "eve.parquet")
        ]
        d, d_eve, u = got
        assert np.array_equal(d_eve - d, u) and u.sum() == 2.0
        assert np.linalg.norm(u) <= sensitivity_of(spec_for(src, regions)).l2


@pytest.mark.slow
def test_a_regions_release_and_its_choropleth(tmp_path: Path, zero_noise) -> None:
    regions = grid_regions(tmp_path / "g.geojson")
    src, _, _ = records(tmp_path)
    spec = ReleaseSpec.from_dict(
        {**spec_for(src, regions).to_dict(), "output": {"path": str(tmp_path / "r.csv")}}
    )
    with zero_noise():
        res = run_release(spec, ledger=make_ledger(tmp_path), engine=ENGINE)
    assert res.columns["key"].tolist() == [f"r{r}{c}" for r in range(3) for c in range(3)]
    report = json.loads(Path(res.report_path).read_text())
    assert report["domain"]["structure"].startswith("9 regions with 20 edges (GeoJSON file")
    assert report["spec"]["domain"]["regions"] == "(local path: not published)"
    if report["output"]["plot"]:
        assert (tmp_path / "r.csv.png").read_bytes()[:4] == b"\x89PNG"


def test_hours_times_regions(tmp_path: Path) -> None:
    regions = grid_regions(tmp_path / "g.geojson")
    src, lat, lon = records(tmp_path)
    t = np.datetime64("2020-03-01T00:00", "us") + np.arange(lat.size) % 5 * np.timedelta64(
        3600 * 10**6, "us"
    )
    table = pq.read_table(src).append_column("t", pa.array(t))
    pq.write_table(table, src)
    hours = {
        "kind": "range",
        "column": "t",
        "start": "2020-03-01",
        "stop": "2020-03-01 04:00",
        "step": "1h",
    }
    part = {"kind": "regions", "regions": str(regions), "lat": "lat", "lon": "lon"}
    spec = ReleaseSpec.from_dict(
        {**spec_for(src, regions).to_dict(), "domain": {"kind": "product", "parts": [hours, part]}}
    )
    agg = bounded_aggregate(spec, salt=5, engine=ENGINE)
    loc = RegionMapper(read_geojson(regions)).locate(lat, lon)
    h = np.arange(lat.size) % 5
    ok = (h < 4) & (loc >= 0)
    # b = 2 and each unit's two records: kept whole (units of two records, one per row pair)
    assert np.array_equal(agg.counts, np.bincount(h[ok] * 9 + loc[ok], minlength=36))
    dom = resolve_domain(spec)
    assert list(dom.key_columns()) == ["t", "region"] and len(dom.edges) == 3 * 9 + 4 * 20


def test_the_cli_refuses_bad_regions_before_the_budget(tmp_path: Path) -> None:
    src, _, _ = records(tmp_path)
    bad = tmp_path / "bad.geojson"
    bad.write_text(json.dumps({"type": "Topology"}))
    domain = {"kind": "regions", "regions": str(bad), "lat": "lat", "lon": "lon"}
    message = "bad.geojson: is not a GeoJSON FeatureCollection"
    assert_cli_refuses_uncharged(tmp_path, src, domain, message, bound=2)


@pytest.mark.parametrize(
    ("domain", "message"),
    [
        ({"lat": "a", "lon": "b", "column": "c"}, "needs either lat and lon"),
        ({}, "needs either lat and lon"),
        ({"lat": "a", "lon": "b", "adjacency": "king"}, "[domain] adjacency must be one of"),
        (
            {"lat": "a", "lon": "b", "adjacency": "rook", "edges": "e.csv"},
            "adjacency and edges are two ways",
        ),
    ],
)
def test_regions_spec_errors(tmp_path: Path, domain: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        ReleaseSpec.from_dict(
            {
                **spec_for(tmp_path / "s.parquet", tmp_path / "g.geojson").to_dict(),
                "domain": {"kind": "regions", "regions": "g.geojson", **domain},
            }
        )
    assert message in str(info.value)


def test_adjacency_from_an_edge_table(tmp_path: Path) -> None:
    regions = grid_regions(tmp_path / "g.geojson")
    (tmp_path / "adj.csv").write_text("from,to\nr00,r22\nr22,r00\nr11,r11\n")
    src, _, _ = records(tmp_path)
    spec = spec_for(
        src, regions, edges=str(tmp_path / "adj.csv"), edge_columns={"u": "from", "v": "to"}
    )
    dom = resolve_domain(spec)
    assert dom.edges.tolist() == [[0, 8]]  # one undirected edge; the self-loop dropped
    assert "edges from a table" in dom.structure
    (tmp_path / "adj.csv").write_text("from,to\nr00,r99\n")
    with pytest.raises(ValueError, match=r"adj\.csv: edge 1 \('r00', 'r99'\) names the unknown"):
        resolve_domain(spec)
