"""The graph normal form shared by the graph denoisers, and observation validation."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from dpgauss.denoise import Denoised, as_graph, check_observation


def test_edge_array_is_deduplicated_and_self_loops_dropped():
    g = as_graph(np.array([[0, 1], [1, 0], [2, 2], [3, 2], [1, 0]]), 5)
    assert g.edges.tolist() == [[0, 1], [2, 3]]
    assert g.m == 2 and g.n == 5
    assert g.n_components == 3  # {0,1}, {2,3}, {4}
    assert g.components[0] == g.components[1] != g.components[4]


def test_incidence_and_laplacian():
    g = as_graph(nx.cycle_graph(5), 5)
    d = g.incidence.toarray()
    assert d.shape == (5, 5)
    assert np.all(d.sum(axis=1) == 0) and np.all(np.abs(d).sum(axis=1) == 2)
    lap = nx.laplacian_matrix(nx.cycle_graph(5)).toarray()
    assert np.array_equal(g.laplacian.toarray(), lap)


def test_networkx_uses_node_order():
    graph = nx.Graph()
    graph.add_edges_from([("b", "a"), ("a", "c")])  # nodes in order b, a, c
    g = as_graph(graph, 3)
    assert g.edges.tolist() == [[0, 1], [1, 2]]


def test_sparse_adjacency_any_nonzero_is_an_edge():
    adj = sp.csr_matrix(np.array([[0, 2.5, 0], [0, 0, 0], [1, 0, 7]]))
    assert as_graph(adj, 3).edges.tolist() == [[0, 1], [0, 2]]


def test_graph_instances_pass_through():
    g = as_graph(np.array([[0, 1]]), 2)
    assert as_graph(g, 2) is g
    with pytest.raises(ValueError, match="2 nodes but the released vector has 3"):
        as_graph(g, 3)


@pytest.mark.parametrize(
    ("graph", "exc", "match"),
    [
        (np.array([[0, 7]]), ValueError, r"edge 0 = \(0, 7\)"),
        (np.array([[-1, 0]]), ValueError, "outside"),
        (sp.eye(4), ValueError, "3 x 3"),
        (nx.path_graph(4), ValueError, "4 nodes"),
        ("edges", TypeError, "networkx"),
        (np.array([0.5, 1.5]), TypeError, "integer array"),
        (np.zeros((3, 3), dtype=int), TypeError, "shape"),
    ],
)
def test_bad_graphs(graph, exc, match):
    with pytest.raises(exc, match=match):
        as_graph(graph, 3)


def test_check_observation():
    y, s = check_observation([1, 2, 3], 2)
    assert y.dtype == np.float64 and s == 2.0
    with pytest.raises(ValueError, match=r"y must be finite; got nan at index \(1,\)"):
        check_observation([0.0, np.nan], 1.0)
    for bad in (0.0, -1.0, np.inf, np.nan):
        with pytest.raises(ValueError, match="sigma"):
            check_observation([0.0], bad)
    with pytest.raises(TypeError, match="sigma"):
        check_observation([0.0], [1.0, 2.0])
    with pytest.raises(TypeError, match="y"):
        check_observation("abc", 1.0)


def test_denoised_mse():
    d = Denoised(np.zeros(4), 2.0, "x")
    assert d.mse == 0.5 and d.params == {}
    assert Denoised(np.zeros(4), None, "x").mse is None


@pytest.mark.parametrize("shape", [(2,), (9,), (2, 2), (2, 7), (7, 2), (5, 8), (31, 17)])
def test_a_grid_lattice_is_written_in_normal_form(shape):
    """The lattice of a grid shape, built without a sort, equals the normal form that
    as_graph gives its edge list (sorted, deduplicated pairs u < v)."""
    from dpgauss.denoise.structure import as_structure, lattice_edges, lattice_graph

    n = int(np.prod(shape))
    ref = as_graph(lattice_edges(shape), n)
    got = lattice_graph(shape)
    assert got.n == n and got.edges.dtype == ref.edges.dtype
    np.testing.assert_array_equal(got.edges, ref.edges)
    np.testing.assert_array_equal(as_structure(shape, n).lattice().edges, ref.edges)
