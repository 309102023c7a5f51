"""CRSs (``dpgauss.release.domains.crs``): parsing, the transform against known coordinates
(mpmath's meridian arc, Snyder's UTM series), the GeoJSON legacy member, and the rule for a
map's CRS (declared, the file's own, assumed)."""

from __future__ import annotations

import math

import numpy as np
import pytest

pyproj = pytest.importorskip("pyproj")
mpmath = pytest.importorskip("mpmath")

from dpgauss.release.domains.crs import (  # noqa: E402
    WGS84,
    geojson_crs,
    map_crs,
    parse_crs,
    same_crs,
    transform_xy,
)

UTM18 = parse_crs("EPSG:32618", "[domain] crs")
A, F, K0 = 6_378_137.0, 1 / 298.257223563, 0.9996  # WGS84, UTM's scale on its meridian


def meridian_arc(phi_deg: float) -> float:
    """The WGS84 meridian arc from the equator to ``phi`` (metres), by quadrature at 40
    digits: ``a(1 − e²) ∫₀^φ (1 − e² sin² t)^(−3/2) dt``."""
    with mpmath.workdps(40):
        e2 = mpmath.mpf(F) * (2 - mpmath.mpf(F))
        phi = mpmath.radians(mpmath.mpf(phi_deg))
        m = A * (1 - e2) * mpmath.quad(lambda t: (1 - e2 * mpmath.sin(t) ** 2) ** -1.5, [0, phi])
        return float(m)


def snyder_utm(lon: float, lat: float, lon0: float) -> tuple[float, float]:
    """UTM (northern hemisphere) by Snyder's series (USGS PP 1395, eqs. 8-9, 8-10), an
    independent formula: sub-millimetre within 2° of the central meridian ``lon0``."""
    e2 = F * (2 - F)
    ep2 = e2 / (1 - e2)
    phi, lam = math.radians(lat), math.radians(lon - lon0)
    n = A / math.sqrt(1 - e2 * math.sin(phi) ** 2)
    t, c = math.tan(phi) ** 2, ep2 * math.cos(phi) ** 2
    a = lam * math.cos(phi)
    m = meridian_arc(lat)
    x = (
        K0
        * n
        * (a + (1 - t + c) * a**3 / 6 + (5 - 18 * t + t * t + 72 * c - 58 * ep2) * a**5 / 120)
    )
    y = K0 * (
        m
        + n
        * math.tan(phi)
        * (
            a * a / 2
            + (5 - t + 9 * c + 4 * c * c) * a**4 / 24
            + (61 - 58 * t + t * t + 600 * c - 330 * ep2) * a**6 / 720
        )
    )
    return 500_000.0 + x, y


@pytest.mark.parametrize("lat", [0.0, 12.5, 40.7128, 63.0, 83.9])
def test_utm18_on_its_central_meridian_is_the_meridian_arc(lat: float) -> None:
    """On λ₀ = −75°: E = 500,000 m exactly and N = k₀·M(φ) (mpmath), to 1e-6 m; and back to
    (λ, φ) to 1e-9 degrees."""
    (e,), (n,) = transform_xy(WGS84, UTM18, [-75.0], [lat])
    assert e == pytest.approx(500_000.0, abs=1e-6)
    assert n == pytest.approx(K0 * meridian_arc(lat), abs=1e-6)
    (lon2,), (lat2,) = transform_xy(UTM18, WGS84, [e], [n])
    assert lon2 == pytest.approx(-75.0, abs=1e-9) and lat2 == pytest.approx(lat, abs=1e-9)


@pytest.mark.parametrize(("lon", "lat"), [(-74.006, 40.7128), (-76.9, 38.9), (-73.1, 44.5)])
def test_utm18_off_its_meridian_against_snyder_to_1e6_degrees(lon: float, lat: float) -> None:
    """New York, Washington, Vermont: Snyder's (E, N) taken back by pyproj lands on (λ, φ)
    within 1e-8 degrees (measured: 2e-11), and pyproj's (E, N) on Snyder's within 0.1 mm
    (measured: 2e-6 m)."""
    e, n = snyder_utm(lon, lat, -75.0)
    (lon2,), (lat2,) = transform_xy(UTM18, WGS84, [e], [n])
    assert abs(lon2 - lon) < 1e-8 and abs(lat2 - lat) < 1e-8
    (e2,), (n2,) = transform_xy(WGS84, UTM18, [lon], [lat])
    assert abs(e2 - e) < 1e-4 and abs(n2 - n) < 1e-4  # metres


def test_the_transform_is_total_and_the_identity_is_exact() -> None:
    x, _ = transform_xy(
        UTM18, WGS84, [math.inf, math.nan, 1e300, 583_960.0], [0.0, 0.0, 0.0, 4.5e6]
    )
    assert not np.isfinite(x[:3]).any() and np.isfinite(x[3])  # no exception for a point
    xs = np.array([583_960.123456789, 1.0 / 3.0])
    same = transform_xy(UTM18, parse_crs("urn:ogc:def:crs:EPSG::32618", "k"), xs, xs)
    assert np.array_equal(same[0], xs)  # the same CRS: the very values


def test_parsing_and_refusals_name_the_key() -> None:
    assert (
        parse_crs("EPSG:4326", "k").wgs84 and parse_crs("urn:ogc:def:crs:OGC:1.3:CRS84", "k").wgs84
    )
    assert UTM18.metres_per_unit == 1.0 and not UTM18.geographic
    ft = parse_crs("EPSG:2263", "k")  # New York Long Island, US survey feet
    assert ft.metres_per_unit == pytest.approx(1200 / 3937, rel=1e-15)
    nad83 = parse_crs("EPSG:4269", "k")
    assert nad83.geographic and not nad83.wgs84
    assert same_crs(parse_crs("EPSG:4326", "k"), parse_crs("OGC:CRS84", "k"))
    with pytest.raises(ValueError, match=r"^\[source\] crs must be a CRS pyproj knows .*'EPSG:0'"):
        parse_crs("EPSG:0", "[source] crs")
    with pytest.raises(ValueError, match=r"^\[domain\] crs must be a 2-D geographic or projected"):
        parse_crs("EPSG:4978", "[domain] crs")  # geocentric
    with pytest.raises(TypeError, match=r"^\[domain\] crs must be a CRS as text"):
        parse_crs(32618, "[domain] crs")


def test_the_geojson_legacy_crs_member() -> None:
    def named(name: str) -> dict:
        return {"type": "name", "properties": {"name": name}}

    assert geojson_crs("f", named("urn:ogc:def:crs:EPSG::32618")) == "EPSG:32618"
    assert geojson_crs("f", named("urn:ogc:def:crs:EPSG:6.6:2263")) == "EPSG:2263"
    assert parse_crs(geojson_crs("f", named("urn:ogc:def:crs:OGC:1.3:CRS84")), "k").wgs84
    assert parse_crs(geojson_crs("f", named("urn:ogc:def:crs:EPSG::4326")), "k").wgs84
    assert geojson_crs("f", {"type": "EPSG", "properties": {"code": 32618}}) == "EPSG:32618"
    with pytest.raises(ValueError, match=r"^f: its crs member is null .*\[domain\] crs"):
        geojson_crs("f", None)
    link = {"type": "link", "properties": {"href": "http://x/crs", "type": "proj4"}}
    with pytest.raises(ValueError, match=r"^f: its crs member .* not one dpgauss reads"):
        geojson_crs("f", link)


def test_the_rule_declared_then_the_files_then_assumed() -> None:
    assert map_crs(None, None, "f", "domain") == (WGS84, True)
    assert map_crs(None, "EPSG:32618", "f", "domain")[0].text == "EPSG:32618"
    crs, assumed = map_crs("EPSG:32618", "urn:ogc:def:crs:EPSG::32618", "f", "domain")
    assert crs.text == "EPSG:32618" and not assumed
    with pytest.raises(ValueError, match=r"^f: the file says its CRS is 'EPSG:32619' but "):
        map_crs("EPSG:32618", "EPSG:32619", "f", "domain.parts #2")


# ------------------------------------------------------------- releases over maps in a CRS

shapely = pytest.importorskip("shapely")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("duckdb")

import json  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

from dpgauss.errors import CrsWarning  # noqa: E402
from dpgauss.release.check import check_source  # noqa: E402
from dpgauss.release.domains.key_domain import resolve_domain  # noqa: E402
from dpgauss.release.engines.duckdb import DuckDBEngine  # noqa: E402
from dpgauss.release.pipeline import bounded_aggregate, run_release  # noqa: E402
from dpgauss.release.spec import ReleaseSpec  # noqa: E402

from ...helpers import make_ledger, read_csv, square  # noqa: E402

ENGINE = DuckDBEngine(threads=2)
E0, N0, W = 583_000.0, 4_506_000.0, 1_000.0  # 3 × 3 squares of 1 km in UTM 18N (Manhattan)
MEMBER = {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::32618"}}


def utm_squares() -> list[tuple[str, list]]:
    """The 3 × 3 squares' ids and rings (UTM metres), row-major, the names "sq<r><c>"."""
    return [(f"r{r}{c}", square(E0 + c * W, N0 + r * W, W)) for r in range(3) for c in range(3)]


def write_layer(path: Path, *, lonlat: bool = False, member: dict | None = None) -> Path:
    """The squares as GeoJSON: in UTM (with the legacy ``member`` if given) or every vertex
    transformed to lon/lat by pyproj (the layer a user would pre-project by hand)."""
    feats = []
    for rid, ring in utm_squares():
        if lonlat:
            x, y = transform_xy(UTM18, WGS84, [p[0] for p in ring], [p[1] for p in ring])
            ring = [[float(a), float(b)] for a, b in zip(x, y, strict=True)]
        feats.append(
            {
                "type": "Feature",
                "properties": {"id": rid, "label": f"sq{rid[1:]}"},
                "geometry": {"type": "Polygon", "coordinates": [ring]},
            }
        )
    data: dict = {"type": "FeatureCollection", "features": feats}
    if member is not None:
        data["crs"] = member
    path.write_text(json.dumps(data))
    return path


def points(tmp_path: Path, n: int = 4000, seed: int = 3) -> tuple[Path, np.ndarray, np.ndarray]:
    """Records around the squares (some outside), with lon/lat and UTM x/y columns."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(E0 - 400, E0 + 3 * W + 400, n)
    y = rng.uniform(N0 - 400, N0 + 3 * W + 400, n)
    lon, lat = transform_xy(UTM18, WGS84, x, y)
    uid = np.arange(n) // 2
    src = tmp_path / "p.parquet"
    pq.write_table(pa.table({"uid": uid, "lat": lat, "lon": lon, "x": x, "y": y}), src)
    return src, x, y


def spec_of(src: Path, domain: dict, source: dict | None = None, **extra: object) -> ReleaseSpec:
    where = {"lat": "lat", "lon": "lon"} if domain["kind"] != "product" else {}
    return ReleaseSpec.from_dict(
        {
            "source": {"path": str(src), **(source or {})},
            "unit": {"column": "uid"},
            "domain": {**where, **domain},
            "bounds": {"max_records_per_unit": 2},
            "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            "denoise": {"method": "none"},
            **extra,
        }
    )


def expected_squares(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The count per square of points (x, y) in UTM (no point falls on a border here)."""
    c = np.floor((x - E0) / W).astype(int)
    r = np.floor((y - N0) / W).astype(int)
    inside = (c >= 0) & (c < 3) & (r >= 0) & (r < 3)
    return np.bincount((r * 3 + c)[inside], minlength=9).astype(float)


def test_a_utm_layer_with_crs_releases_as_the_layer_pre_projected(tmp_path: Path) -> None:
    """The same squares in UTM with ``[domain] crs``, in UTM with the legacy ``crs`` member,
    and pre-projected to lon/lat by hand: the very same aggregate (counts and every row
    counter), and the counts those of the squares in UTM."""
    src, x, y = points(tmp_path)
    utm = write_layer(tmp_path / "utm.geojson")
    with_member = write_layer(tmp_path / "member.geojson", member=MEMBER)
    lonlat = write_layer(tmp_path / "lonlat.geojson", lonlat=True)
    got = [
        bounded_aggregate(spec_of(src, {"kind": "regions", **d}), salt=1, engine=ENGINE)
        for d in (
            {"regions": str(utm), "crs": "EPSG:32618"},
            {"regions": str(with_member)},
            {"regions": str(with_member), "crs": "EPSG:32618"},  # the same CRS twice: fine
            {"regions": str(lonlat)},
        )
    ]
    for agg in got[:3]:
        assert np.array_equal(agg.counts, got[3].counts) and agg.rows == got[3].rows
    assert got[3].rows.outside_domain > 0 and got[3].counts.min() > 0
    # 1 km squares, vertices transformed: a record within ~1 cm of a border may differ
    want = expected_squares(x, y)
    assert np.abs(got[3].counts - want).sum() <= 2


def test_records_in_utm_are_matched_in_utm(tmp_path: Path) -> None:
    """``[source] crs = "EPSG:32618"``: the records' x/y columns are metres, none invalid
    (degrees' range does not apply), each in its square exactly; the map's own UTM polygons
    are used as they are, and a lon/lat map is transformed into UTM."""
    src, x, y = points(tmp_path)
    utm = write_layer(tmp_path / "utm.geojson", member=MEMBER)
    lonlat = write_layer(tmp_path / "lonlat.geojson", lonlat=True)
    for layer in (utm, lonlat):
        spec = spec_of(
            src,
            {"kind": "regions", "regions": str(layer), "lat": "y", "lon": "x"},
            {"crs": "EPSG:32618"},
        )
        agg = bounded_aggregate(spec, salt=1, engine=ENGINE)
        assert agg.rows.invalid_domain == 0
        assert np.abs(agg.counts - expected_squares(x, y)).sum() <= (0 if layer is utm else 2)


def test_a_node_table_in_utm_and_records_in_either_crs(tmp_path: Path) -> None:
    """Nodes in UTM (``[domain] crs``) with records in lon/lat equal the nodes pre-projected
    (the output's lat/lon are the WGS84 degrees); with ``[source] crs`` the records' x/y are
    matched in the plane: the nearest node within the cutoff, by brute force in metres."""
    rng = np.random.default_rng(5)
    nx_, ny_ = E0 + rng.uniform(0, 3000, 40), N0 + rng.uniform(0, 3000, 40)
    nlon, nlat = transform_xy(UTM18, WGS84, nx_, ny_)
    pq.write_table(pa.table({"id": np.arange(40), "lat": ny_, "lon": nx_}), tmp_path / "u.parquet")
    pq.write_table(
        pa.table({"id": np.arange(40), "lat": nlat, "lon": nlon}), tmp_path / "g.parquet"
    )
    src, x, y = points(tmp_path)
    graph = {"kind": "graph", "cutoff": 200.0}
    a = spec_of(src, {**graph, "nodes": str(tmp_path / "u.parquet"), "crs": "EPSG:32618"})
    b = spec_of(src, {**graph, "nodes": str(tmp_path / "g.parquet"), "crs": "EPSG:4326"})
    ga, gb = (bounded_aggregate(s, salt=1, engine=ENGINE) for s in (a, b))
    assert np.array_equal(ga.counts, gb.counts) and ga.rows == gb.rows
    assert np.array_equal(resolve_domain(a).place_columns()["lat"], nlat)
    planar = spec_of(
        src,
        {**graph, "nodes": str(tmp_path / "g.parquet"), "crs": "EPSG:4326", "lat": "y", "lon": "x"},
        {"crs": "EPSG:32618"},
    )
    got = bounded_aggregate(planar, salt=1, engine=ENGINE)
    d = np.hypot(x[:, None] - nx_[None, :], y[:, None] - ny_[None, :])
    near = np.where(d.min(axis=1) <= 200.0, d.argmin(axis=1), -1)
    assert got.rows.invalid_domain == 0 and got.rows.outside_domain == (near < 0).sum() > 0
    # the transform UTM → lon/lat → UTM of the nodes moves them by nanometres
    assert np.array_equal(got.counts, np.bincount(near[near >= 0], minlength=40).astype(float))


def test_the_ambiguity_without_crs(tmp_path: Path) -> None:
    """Out-of-range coordinates are refused, naming ``[domain] crs``; a node table in range
    without a crs warns (degrees are assumed); declaring the CRS silences it."""
    src, _, _ = points(tmp_path)
    utm = write_layer(tmp_path / "utm.geojson")
    with pytest.raises(ValueError, match=r"utm\.geojson: feature 'r00'.*needs \[domain\] crs"):
        resolve_domain(spec_of(src, {"kind": "regions", "regions": str(utm)}))
    nodes = tmp_path / "n.csv"
    nodes.write_text("id,lat,lon\n1,40.7,-74.0\n2,40.71,-74.0\n")
    with pytest.warns(CrsWarning, match=r"n\.csv: .* set \[domain\] crs = 'EPSG:4326'"):
        resolve_domain(spec_of(src, {"kind": "graph", "nodes": str(nodes)}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        resolve_domain(spec_of(src, {"kind": "graph", "nodes": str(nodes), "crs": "EPSG:4326"}))
    nodes.write_text("id,lat,lon\n1,4506000,583000\n")
    with pytest.raises(ValueError, match=r"n\.csv: node '?1'? has the lat 4506000.*\[domain\] crs"):
        resolve_domain(spec_of(src, {"kind": "graph", "nodes": str(nodes)}))


def test_graphml_crs_attribute_as_osmnx_writes_it(tmp_path: Path) -> None:
    nx = pytest.importorskip("networkx")
    g = nx.Graph(crs="EPSG:32618")
    g.add_node("a", x=E0, y=N0)
    g.add_node("b", x=E0 + 100.0, y=N0)
    g.add_edge("a", "b")
    nx.write_graphml(g, tmp_path / "g.graphml")
    src, _, _ = points(tmp_path)
    spec = spec_of(src, {"kind": "graph", "graph": str(tmp_path / "g.graphml")})
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the file says its CRS: no warning
        dom = resolve_domain(spec)
    _, lat = transform_xy(UTM18, WGS84, [E0], [N0])
    assert dom.place_columns()["lat"][0] == lat[0] and "EPSG:32618" in dom.structure
    bad = spec_of(src, {"kind": "graph", "graph": str(tmp_path / "g.graphml"), "crs": "EPSG:2263"})
    with pytest.raises(ValueError, match=r"the file says its CRS is 'EPSG:32618' but \[domain\]"):
        resolve_domain(bad)


@pytest.mark.parametrize(
    ("domain", "source", "message"),
    [
        ({"crs": "EPSG:99999"}, {}, r"^\[domain\] crs must be a CRS pyproj knows"),
        ({}, {"crs": "nonsense"}, r"^\[source\] crs must be a CRS pyproj knows"),
        ({"graph": "manhattan", "crs": "EPSG:32618"}, {}, r"^\[domain\] crs applies to a map"),
        (
            {"bbox": [40, 41, -75, -73]},
            {"crs": "EPSG:32618"},
            r"^\[domain\] bbox is in degrees; the records are in the projected \[source\] crs",
        ),
        ({"name_property": "label"}, {}, r"name_property does not apply to kind = 'graph'"),
    ],
)
def test_spec_refusals_name_the_key(tmp_path: Path, domain: dict, source: dict, message: str):
    base = {"kind": "graph", "nodes": "n.csv"} if "graph" not in domain else {"kind": "graph"}
    with pytest.raises(ValueError, match=message):
        spec_of(tmp_path / "p.csv", {**base, **domain}, source)


def test_source_crs_needs_coordinates(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"^\[source\] crs applies to the records' coordinates"):
        ReleaseSpec.from_dict(
            {
                "source": {"path": "p.csv", "crs": "EPSG:32618"},
                "unit": {"column": "uid"},
                "domain": {"kind": "values", "column": "k", "values": [1]},
                "bounds": {"max_records_per_unit": 1},
                "privacy": {"epsilon": 1.0, "delta": 1e-6, "dataset": "d"},
            }
        )


def test_check_warns_when_most_records_miss_the_map(tmp_path: Path) -> None:
    """The records in UTM read as degrees (no ``[source] crs``): every one is invalid or
    outside, and the check says so; with the right crs, no warning."""
    src, _, _ = points(tmp_path)
    layer = write_layer(tmp_path / "utm.geojson", member=MEMBER)
    wrong = spec_of(src, {"kind": "regions", "regions": str(layer), "lat": "y", "lon": "x"})
    res = check_source(wrong)
    assert len(res.warnings) == 1 and res.ok
    assert res.warnings[0].startswith("100% of the records that reach the domain (4,000 of 4,000)")
    assert "warning: 100% of the records" in res.text() and res.as_dict()["warnings"]
    right = spec_of(src, {"kind": "regions", "regions": str(layer)})
    assert check_source(right).warnings == ()


def test_region_names_are_a_column(tmp_path: Path, zero_noise) -> None:
    src, _, _ = points(tmp_path)
    layer = write_layer(tmp_path / "utm.geojson", member=MEMBER)
    out = tmp_path / "r.csv"
    spec = spec_of(
        src,
        {"kind": "regions", "regions": str(layer), "name_property": "label"},
        output={"path": str(out), "plot": False},
    )
    with zero_noise():
        run_release(spec, ledger=make_ledger(tmp_path), engine=ENGINE)
    rows = read_csv(out)
    assert list(rows[0])[:2] == ["key", "name"]
    assert [r["name"] for r in rows] == [f"sq{r}{c}" for r in range(3) for c in range(3)]
    hours = {"kind": "values", "column": "uid", "values": [0, 1], "name": "u"}
    part = {"kind": "regions", "regions": str(layer), "name_property": "label", "lat": "lat"}
    prod = spec_of(src, {"kind": "product", "parts": [hours, {**part, "lon": "lon"}]})
    cols = resolve_domain(prod).key_columns()
    assert list(cols) == ["u", "region", "region_name"] and cols["region_name"][9] == "sq00"
    with pytest.raises(ValueError, match=r"no feature has the property 'nom' \(name_property"):
        resolve_domain(
            spec_of(src, {"kind": "regions", "regions": str(layer), "name_property": "nom"})
        )


def test_planar_kde_weights_are_the_kernel_of_plane_distances() -> None:
    """A planar mapper (records in a projected CRS, feet here) spreads a record over its
    nodes with ``exp(−d²/2h²)`` of the Euclidean distance in metres, nearest first."""
    from dpgauss.release.domains.mapping import GraphMapper

    ft = 1200 / 3937  # metres per US survey foot
    ny, nx = np.array([0.0, 0.0, 300.0, 5000.0]), np.array([0.0, 200.0, 0.0, 0.0])
    m = GraphMapper(ny, nx, mapping="kde", bandwidth=50.0, cutoff=150.0, neighbors=3, planar=ft)
    off, nodes, w = m.spread([10.0, 4000.0], [20.0, 0.0])
    assert off.tolist() == [0, 3, 3]  # the second point: no node within 150 m
    d = np.hypot(10.0 - ny[:3], 20.0 - nx[:3]) * ft
    k = np.exp(-(d**2) / (2 * 50.0**2))
    assert nodes.tolist() == [0, 1, 2] and np.allclose(w, k / k.sum(), rtol=1e-12)
    assert m.nearest([10.0, math.inf], [20.0, 0.0]).tolist() == [0, -1]
    with pytest.raises(ValueError, match="bbox"):
        GraphMapper(ny, nx, planar=ft, bbox=(0, 1, 0, 1))


def test_the_cli_refuses_a_utm_layer_without_crs_before_the_budget(tmp_path: Path) -> None:
    from ..test_pipeline import assert_cli_refuses_uncharged

    src, _, _ = points(tmp_path)
    utm = write_layer(tmp_path / "utm.geojson")
    domain = {"kind": "regions", "regions": str(utm), "lat": "lat", "lon": "lon"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    message = "needs [domain] crs = 'EPSG:…'"
    assert_cli_refuses_uncharged(tmp_path / "a", src, domain, message, 2)
    domain = {**domain, "crs": "EPSG:326l8"}
    message = "[domain] crs must be a CRS pyproj knows"
    assert_cli_refuses_uncharged(tmp_path / "b", src, domain, message, 2)


def test_without_pyproj_a_crs_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """A spec naming a CRS other than WGS84 needs pyproj, and says how to install it; WGS84
    by name needs nothing."""
    import builtins

    from dpgauss.release.domains import crs as crs_module

    real = builtins.__import__

    def no_pyproj(name: str, *args: object, **kwargs: object):
        if name.partition(".")[0] == "pyproj":
            raise ImportError("No module named 'pyproj'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyproj)
    crs_module._pyproj_crs.cache_clear()
    try:
        assert parse_crs("urn:ogc:def:crs:OGC:1.3:CRS84", "[domain] crs").wgs84
        with pytest.raises(ValueError, match=r"^\[source\] crs = 'EPSG:2263' needs pyproj: pip"):
            parse_crs("EPSG:2263", "[source] crs")
        with pytest.raises(ValueError, match=r"dpgauss\[geo\]"):
            parse_crs("EPSG:2263", "[source] crs")
    finally:
        crs_module._pyproj_crs.cache_clear()


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_region_without_a_name_is_written_empty(tmp_path: Path, zero_noise, suffix) -> None:
    src, _, _ = points(tmp_path)
    layer = write_layer(tmp_path / "utm.geojson", member=MEMBER)
    data = json.loads(layer.read_text())
    data["features"][4]["properties"]["label"] = None  # no name for the centre square
    data["features"][5]["properties"]["label"] = 7  # an integer, written as text
    layer.write_text(json.dumps(data))
    out = tmp_path / f"r.{suffix}"
    spec = spec_of(
        src,
        {"kind": "regions", "regions": str(layer), "name_property": "label"},
        output={"path": str(out), "plot": False},
    )
    with zero_noise():
        run_release(spec, ledger=make_ledger(tmp_path), engine=ENGINE)
    if suffix == "csv":
        names = [r["name"] for r in read_csv(out)]
        assert names[3:6] == ["sq10", "", "7"]
    else:
        assert pq.read_table(out).column("name").to_pylist()[3:6] == ["sq10", None, "7"]
