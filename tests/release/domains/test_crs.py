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
    x, y = transform_xy(
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
