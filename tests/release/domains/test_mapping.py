"""Graph mapping: nearest junction within a cutoff, and KDE spread over nearby junctions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpgauss.datasets import load_manhattan_graph, snap_to_nodes
from dpgauss.release.domains.mapping import EARTH_RADIUS_M, GraphMapper


@pytest.fixture(scope="module")
def graph():
    return load_manhattan_graph()


@pytest.fixture(scope="module")
def points(graph):
    rng = np.random.default_rng(0)
    i = rng.integers(0, graph.n, 2000)
    lat = graph.lat[i] + rng.normal(0, 0.002, i.size)
    lon = graph.lon[i] + rng.normal(0, 0.002, i.size)
    return lat, lon


def haversine(lat1, lon1, lat2, lon2):
    """Great-circle distance (m) on the sphere of radius EARTH_RADIUS_M (the reference)."""
    p1, p2 = np.radians(lat1), np.radians(lat2)
    dp, dl = p2 - p1, np.radians(np.asarray(lon2) - np.asarray(lon1))
    a = np.sin(dp / 2) ** 2 + np.cos(p1) * np.cos(p2) * np.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_M * np.arcsin(np.sqrt(np.minimum(a, 1.0)))


def brute_nearest(node_lat, node_lon, lat, lon, cutoff):
    d = haversine(lat[:, None], lon[:, None], node_lat[None, :], node_lon[None, :])
    i = np.argmin(d, axis=1)
    best = d[np.arange(lat.size), i]
    second = np.partition(d, 1, axis=1)[:, 1] if d.shape[1] > 1 else np.full(lat.size, np.inf)
    return np.where(best < cutoff, i, -1), best, second


@pytest.mark.slow
def test_nearest_matches_the_great_circle_nearest(graph, points) -> None:
    lat, lon = points
    m = GraphMapper.from_graph(graph, cutoff=150.0)
    got = m.nearest(lat, lon)
    want, best, second = brute_nearest(graph.lat, graph.lon, lat, lon, 150.0)
    tie = (np.abs(best - 150.0) < 1e-6) | (second - best < 1e-6)
    assert np.array_equal(got[~tie], want[~tie])
    assert (got == -1).any() and (got >= 0).mean() > 0.5
    # within 0.1 % of the projection snap_to_nodes uses over a city: the same nodes but for
    # near ties and points near the cutoff
    snap, _ = snap_to_nodes(graph, lat, lon, max_distance_m=150.0)
    differ = got != snap
    assert differ.mean() < 0.01


# Cities far from New York's latitude, a graph across the antimeridian, and one at a pole.
PLACES = {
    "helsinki": (60.17, 24.94),
    "santiago": (-33.45, -70.67),
    "antimeridian": (-16.5, 179.999),
    "tromso-north": (89.9, 0.0),
}


@pytest.mark.parametrize("place", sorted(PLACES))
def test_nearest_is_right_at_any_latitude(place) -> None:
    lat0, lon0 = PLACES[place]
    rng = np.random.default_rng(1)
    n = 400
    nlat = np.clip(lat0 + rng.uniform(-0.02, 0.02, n), -90, 90)
    nlon = (lon0 + rng.uniform(-0.04, 0.04, n) + 180.0) % 360.0 - 180.0
    m = GraphMapper(nlat, nlon, cutoff=300.0)
    plat = np.clip(lat0 + rng.uniform(-0.025, 0.025, 3000), -90, 90)
    plon = (lon0 + rng.uniform(-0.05, 0.05, 3000) + 180.0) % 360.0 - 180.0
    got = m.nearest(plat, plon)
    want, best, second = brute_nearest(nlat, nlon, plat, plon, 300.0)
    tie = (np.abs(best - 300.0) < 1e-6) | (second - best < 1e-6)
    assert np.array_equal(got[~tie], want[~tie])
    assert (got >= 0).mean() > 0.3


def test_arc_against_mpmath() -> None:
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    R = mpmath.mpf(EARTH_RADIUS_M)
    for s in (1e-3, 1.0, 150.0, 1e4, 1e6, 1.9e7, float(mpmath.pi * R) - 1.0):
        chord = 2 * R * mpmath.sin(mpmath.mpf(s) / (2 * R))
        got = GraphMapper.arc(np.array([float(chord)]))[0]
        assert abs(got - s) <= 1e-9 * max(1.0, s)


def test_a_cutoff_beyond_half_the_circumference_admits_every_node() -> None:
    m = GraphMapper(np.array([0.0]), np.array([0.0]), cutoff=1e300)
    assert m.nearest(np.array([0.0, -10.0]), np.array([180.0, 170.0])).tolist() == [0, 0]


def test_kde_weights(graph, points) -> None:
    lat, lon = points
    m = GraphMapper.from_graph(graph, mapping="kde", bandwidth=50.0, cutoff=150.0, neighbors=8)
    offsets, nodes, weights = m.spread(lat, lon)
    assert offsets.shape == (lat.size + 1,) and offsets[0] == 0 and offsets[-1] == nodes.size
    assert np.all(weights >= 0)
    counts = np.diff(offsets)
    assert counts.max() <= 8
    sums = np.add.reduceat(weights, offsets[:-1][counts > 0])
    assert np.allclose(sums, 1.0, rtol=0, atol=1e-12)
    nearest = m.nearest(lat, lon)
    has = counts > 0
    assert np.array_equal(has, nearest >= 0)  # outside the cutoff: no node at all
    assert np.array_equal(nodes[offsets[:-1][has]], nearest[has])  # the nearest comes first
    # every node used lies within the cutoff, and nearer nodes get larger weights
    for i in np.flatnonzero(has)[:200]:
        sl = slice(offsets[i], offsets[i + 1])
        d = haversine(lat[i], lon[i], graph.lat[nodes[sl]], graph.lon[nodes[sl]])
        assert np.all(d <= 150.0 + 1e-6)
        assert np.all(np.diff(weights[sl]) <= 1e-15)
        w = np.exp(-(d**2) / (2 * 50.0**2))
        assert np.allclose(weights[sl], w / w.sum(), rtol=1e-9)


def test_kde_tiny_bandwidth_is_nearest(graph, points) -> None:
    lat, lon = points
    m = GraphMapper.from_graph(graph, mapping="kde", bandwidth=1e-3, cutoff=150.0)
    offsets, nodes, weights = m.spread(lat, lon)
    first = offsets[:-1][np.diff(offsets) > 0]
    assert np.allclose(weights[first], 1.0)
    assert np.array_equal(nodes[first], m.nearest(lat, lon)[m.nearest(lat, lon) >= 0])


def test_far_points_never_underflow_to_zero_weights(graph) -> None:
    # 140 m from a node with a 5 m bandwidth: exp(-392) relative to nothing would be 0.
    lat = np.array([graph.lat[0] + 140.0 / EARTH_RADIUS_M * 180 / math.pi])
    m = GraphMapper.from_graph(graph, mapping="kde", bandwidth=5.0, cutoff=150.0)
    _, nodes, weights = m.spread(lat, np.array([graph.lon[0]]))
    if nodes.size:
        assert weights.sum() == pytest.approx(1.0)


def test_invalid_coordinates(graph) -> None:
    m = GraphMapper.from_graph(
        graph, mapping="kde", bandwidth=50.0, bbox=(40.4, 41.0, -74.3, -73.6)
    )
    lat = np.array([np.nan, 91.0, 0.0, 40.2, graph.lat[5]])
    lon = np.array([-73.9, -73.9, 0.0, -73.9, graph.lon[5]])
    assert m.valid(lat, lon).tolist() == [False, False, False, False, True]
    assert m.nearest(lat, lon).tolist() == [-1, -1, -1, -1, 5]
    offsets, nodes, _ = m.spread(lat, lon)
    assert np.diff(offsets).tolist()[:4] == [0, 0, 0, 0] and nodes[0] == 5


def test_nearest_mapping_spread_has_unit_weights(graph, points) -> None:
    lat, lon = points
    m = GraphMapper.from_graph(graph, cutoff=100.0)
    offsets, nodes, weights = m.spread(lat, lon)
    assert np.all(weights == 1.0) and np.all(np.diff(offsets) <= 1)
    assert np.array_equal(nodes, m.nearest(lat, lon)[m.nearest(lat, lon) >= 0])


def test_validation(graph) -> None:
    with pytest.raises(ValueError, match="mapping must be"):
        GraphMapper.from_graph(graph, mapping="idw")
    with pytest.raises(ValueError, match="bandwidth must be a positive number"):
        GraphMapper.from_graph(graph, mapping="kde")
    with pytest.raises(ValueError, match="cutoff must be a positive number"):
        GraphMapper.from_graph(graph, cutoff=0)
    with pytest.raises(ValueError, match="neighbors must be >= 1"):
        GraphMapper.from_graph(graph, mapping="kde", bandwidth=1.0, neighbors=0)
    with pytest.raises(ValueError, match="non-empty"):
        GraphMapper(np.array([]), np.array([]))
