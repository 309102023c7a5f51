"""The Manhattan road graph loader: sizes, connectivity, contraction and mappings.

The reference numbers (9,888 / 12,955 / 145 components / 9,474 in the largest; 4,091 /
7,287 after contraction; 3,907 / 7,103 also pruning dead ends) are those of
``/work/shared/data/README.md``, computed there independently of this code.  The checks
below re-parse the file with ``numpy.loadtxt`` and use networkx, not the loader's helpers.
"""

from __future__ import annotations

from importlib import resources

import networkx as nx
import numpy as np
import pytest

from dpgauss.datasets import RoadGraph, load_manhattan_graph, load_trips, snap_to_nodes

DATA = resources.files("dpgauss.datasets").joinpath("data")


@pytest.fixture(scope="module")
def raw():
    """Vertices and the undirected simple weighted graph, parsed independently."""
    with DATA.joinpath("taxivis_manhattan_with_weights.txt").open() as fh:
        nv, ne = map(int, fh.readline().split())
        coords = np.loadtxt(fh, max_rows=nv)
        arcs = np.loadtxt(fh, max_rows=ne)
    g = nx.Graph()
    g.add_nodes_from(range(nv))
    for s, d, w in arcs:
        s, d = int(s), int(d)
        if g.has_edge(s, d):
            assert g[s][d]["weight"] == w  # both directions carry the same weight
        g.add_edge(s, d, weight=w)
    return nv, ne, coords, g


def test_raw_file_matches_readme(raw):
    nv, ne, coords, g = raw
    assert (nv, ne) == (9888, 16148)
    assert coords.shape == (9888, 2)
    assert g.number_of_edges() == 12955
    assert nx.number_of_selfloops(g) == 0
    comps = list(nx.connected_components(g))
    assert len(comps) == 145
    assert max(len(c) for c in comps) == 9474


@pytest.mark.parametrize(
    ("junctions", "prune", "n", "m"),
    [
        (True, False, 4091, 7287),
        (True, True, 3907, 7103),
        (False, False, 9474, 12670),
        (False, True, 8635, 11831),
    ],
)
def test_sizes_connected_and_simple(junctions, prune, n, m):
    g = load_manhattan_graph(junctions=junctions, prune_dead_ends=prune)
    assert isinstance(g, RoadGraph)
    assert (g.n, g.m) == (n, m)
    assert g.lat.shape == g.lon.shape == g.vertex_id.shape == (n,)
    assert g.edges.shape == (m, 2) and g.edges.dtype == np.int64
    assert g.lengths.shape == (m,) and np.all(g.lengths > 0)
    assert np.all(g.edges[:, 0] < g.edges[:, 1])
    assert g.edges.min() >= 0 and g.edges.max() < n
    # unique and lexicographically sorted
    key = g.edges[:, 0] * n + g.edges[:, 1]
    assert np.all(np.diff(key) > 0)
    h = nx.Graph()
    h.add_nodes_from(range(n))
    h.add_edges_from(g.edges.tolist())
    assert nx.is_connected(h)
    deg = np.bincount(g.edges.ravel(), minlength=n)
    if prune:
        assert deg.min() >= 2  # no dead ends left
    else:
        assert np.count_nonzero(deg == 1) == 131
    if junctions:
        # degree-2 nodes are exactly the shape points kept to break loops and repeats:
        # 20 repeated chains + 2 x 4 loops (pruning leaves 33)
        assert np.count_nonzero(deg == 2) == (33 if prune else 28)


def test_node_coordinates_and_mappings(raw):
    nv, _, coords, g_raw = raw
    g = load_manhattan_graph()
    assert np.all(np.diff(g.vertex_id) > 0)
    assert np.array_equal(g.lat, coords[g.vertex_id, 0])
    assert np.array_equal(g.lon, coords[g.vertex_id, 1])
    assert g.node_of_vertex.shape == g.edge_of_vertex.shape == (nv,)
    assert np.array_equal(g.node_of_vertex[g.vertex_id], np.arange(g.n))
    assert np.count_nonzero(g.node_of_vertex >= 0) == g.n
    is_node = g.node_of_vertex >= 0
    on_edge = g.edge_of_vertex >= 0
    assert not np.any(is_node & on_edge)
    # every vertex of the largest component is a node or a shape point of an edge
    largest = max(nx.connected_components(g_raw), key=len)
    in_largest = np.zeros(nv, dtype=bool)
    in_largest[list(largest)] = True
    assert np.array_equal(is_node | on_edge, in_largest)
    # every junction of the raw graph (degree != 2) is a node
    deg = np.array([g_raw.degree(v) for v in range(nv)])
    assert np.all(is_node[in_largest & (deg != 2)])


@pytest.mark.parametrize("prune", [False, True])
def test_contracted_lengths_are_path_sums(raw, prune):
    """Edge k is the raw path through its shape points; its length is the weight sum."""
    g = load_manhattan_graph(prune_dead_ends=prune)
    _, _, _, full = raw
    g_raw = full.subgraph(max(nx.connected_components(full), key=len))
    if prune:  # pruning dead ends iteratively leaves the 2-core
        g_raw = nx.k_core(nx.Graph(g_raw), 2)
    kept = (g.node_of_vertex >= 0) | (g.edge_of_vertex >= 0)
    assert set(np.flatnonzero(kept).tolist()) == set(g_raw.nodes)
    members: dict[int, list[int]] = {}
    for v in np.flatnonzero(g.edge_of_vertex >= 0).tolist():
        members.setdefault(int(g.edge_of_vertex[v]), []).append(v)
    n_direct = 0
    for k, (a, b) in enumerate(g.edges.tolist()):
        ends = {int(g.vertex_id[a]), int(g.vertex_id[b])}
        inner = members.get(k, [])
        if not inner:
            n_direct += 1
            assert g_raw.has_edge(*ends)
            assert g.lengths[k] == pytest.approx(g_raw[min(ends)][max(ends)]["weight"])
            continue
        # shape points have degree 2 and their raw edges form one path between the ends
        assert all(g_raw.degree(v) == 2 for v in inner)
        path = nx.Graph()
        for v in inner:
            for w in g_raw[v]:
                path.add_edge(v, w, weight=g_raw[v][w]["weight"])
        assert path.number_of_edges() == len(inner) + 1
        assert set(path.nodes) == set(inner) | ends
        assert nx.is_connected(path)
        assert sorted(d for _, d in path.degree) == [1, 1] + [2] * len(inner)
        total = sum(d["weight"] for _, _, d in path.edges(data=True))
        assert g.lengths[k] == pytest.approx(total, rel=1e-12)
    assert n_direct < g.m


def test_uncontracted_lengths_are_weights(raw):
    _, _, _, g_raw = raw
    g = load_manhattan_graph(junctions=False)
    for (a, b), length in zip(g.edges.tolist(), g.lengths.tolist(), strict=True):
        assert g_raw[int(g.vertex_id[a])][int(g.vertex_id[b])]["weight"] == length
    assert np.all(g.edge_of_vertex == -1)


def test_cached_and_read_only():
    g = load_manhattan_graph()
    assert load_manhattan_graph(True, False) is g
    for arr in (g.lat, g.edges, g.lengths, g.node_of_vertex, g.edge_of_vertex):
        with pytest.raises(ValueError):
            arr[0] = 0
    with pytest.raises(AttributeError):
        g.lat = g.lon  # type: ignore[misc]
    adj = g.adjacency()
    assert adj.shape == (g.n, g.n) and adj.nnz == 2 * g.m
    assert (adj != adj.T).nnz == 0
    assert adj.sum() == 2 * g.m
    assert load_manhattan_graph().adjacency(weighted=True).sum() == pytest.approx(
        2 * g.lengths.sum()
    )


@pytest.mark.parametrize("bad", [1, "yes", None])
def test_bad_flags(bad):
    with pytest.raises(TypeError, match="junctions"):
        load_manhattan_graph(junctions=bad)
    with pytest.raises(TypeError, match="prune_dead_ends"):
        load_manhattan_graph(prune_dead_ends=bad)


def test_snap_to_nodes():
    g = load_manhattan_graph()
    node, dist = snap_to_nodes(g, g.lat[:50], g.lon[:50])
    assert np.array_equal(node, np.arange(50)) and np.all(dist == 0)
    # one block (~80 m) north of a node is not farther than 100 m from some node
    node, dist = snap_to_nodes(g, g.lat[:5] + 0.0007, g.lon[:5])
    assert np.all(dist < 100) and np.all(node >= 0)
    node, dist = snap_to_nodes(g, [0.0, np.nan, 40.76], [0.0, -73.98, -73.98], 150.0)
    assert node[0] == -1 and dist[0] > 1e6
    assert node[1] == -1 and dist[1] == np.inf
    assert node[2] >= 0 and dist[2] <= 150
    # about 90 % of the valid pickups lie within 150 m of a vertex of the raw graph
    trips = load_trips()
    ok = trips.pickup_valid
    raw_graph = load_manhattan_graph(junctions=False)
    _, d = snap_to_nodes(raw_graph, trips.pickup_lat[ok], trips.pickup_lon[ok])
    assert 0.88 < np.mean(d <= 150) < 0.92
    with pytest.raises(TypeError, match="RoadGraph"):
        snap_to_nodes(g.edges, 40.7, -74.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_distance_m"):
        snap_to_nodes(g, 40.7, -74.0, -1.0)
