"""Graph mapping: nearest junction within a cutoff, and KDE spread over nearby junctions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpgauss.datasets import load_manhattan_graph, snap_to_nodes
from dpgauss.release.mapping import EARTH_RADIUS_M, GraphMapper, load_graph


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


def test_nearest_matches_snap_to_nodes(graph, points) -> None:
    lat, lon = points
    m = GraphMapper.from_graph(graph, cutoff=150.0)
    got = m.nearest(lat, lon)
    want, dist = snap_to_nodes(graph, lat, lon, max_distance_m=150.0)
    near_tie = np.abs(dist - 150.0) < 1e-6
    assert np.array_equal(got[~near_tie], want[~near_tie])
    assert (got == -1).any() and (got >= 0).mean() > 0.5


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
    lat0 = math.radians(float(np.mean(graph.lat)))
    for i in np.flatnonzero(has)[:200]:
        sl = slice(offsets[i], offsets[i + 1])
        dx = EARTH_RADIUS_M * math.cos(lat0) * np.radians(graph.lon[nodes[sl]] - lon[i])
        dy = EARTH_RADIUS_M * np.radians(graph.lat[nodes[sl]] - lat[i])
        d = np.hypot(dx, dy)
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
    with pytest.raises(ValueError, match="unknown graph"):
        load_graph("paris")
    assert load_graph("manhattan-pruned").n == 3907
