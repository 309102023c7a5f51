"""Spanning-tree Haar wavelets (Sharpnack et al. 2013) and graph wavelet shrinkage."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.datasets import load_manhattan_graph
from dpgauss.denoise import Denoised, as_graph
from dpgauss.denoise.thresholding import soft_threshold
from dpgauss.denoise.tree_wavelets import graph_wavelet_denoise, tree_wavelet_basis


def orthonormality_error(w: sp.spmatrix) -> float:
    """Frobenius norm of WᵀW − I (≥ the spectral norm)."""
    e = (w.T @ w - sp.eye(w.shape[1])).tocoo()
    return float(np.sqrt(np.sum(e.data**2)))


def level_bound(n: int) -> int:
    """Columns a node can lie in: its component's constant + ⌊log_{3/2}(n − 1)⌋ + 1."""
    return 1 + (math.floor(math.log(n - 1) / math.log(1.5)) + 1 if n > 1 else 0)


def random_tree(n: int, rng: np.random.Generator, max_children: int | None = None) -> np.ndarray:
    """Edges of a random recursive tree (node i attaches to a node < i)."""
    parents = []
    children = np.zeros(n, dtype=int)
    for i in range(1, n):
        while True:
            p = int(rng.integers(0, i))
            if max_children is None or children[p] < max_children:
                break
        children[p] += 1
        parents.append(p)
    return np.stack([np.array(parents, dtype=np.int64), np.arange(1, n)], axis=1)


def check_haar_structure(w: sp.csc_matrix, comp: np.ndarray) -> list[tuple[set, set]]:
    """Columns: component indicators, then two-valued Haar vectors on nested supports."""
    n = w.shape[0]
    c = int(comp.max()) + 1 if n else 0
    dense = w.toarray()
    for j in range(c):
        members = comp == j
        assert np.allclose(dense[members, j], 1 / np.sqrt(members.sum()), rtol=1e-15)
        assert np.all(dense[~members, j] == 0)
    splits = []
    for j in range(c, n):
        col = dense[:, j]
        a, b = np.flatnonzero(col > 0), np.flatnonzero(col < 0)
        assert len(a) and len(b)
        assert np.ptp(col[a]) == 0 and np.ptp(col[b]) == 0  # exactly two values
        na, nb = len(a), len(b)
        assert col[a[0]] == pytest.approx(math.sqrt(nb / (na * (na + nb))), rel=1e-14)
        assert col[b[0]] == pytest.approx(-math.sqrt(na / (nb * (na + nb))), rel=1e-14)
        assert len(set(comp[a]) | set(comp[b])) == 1  # within one component
        splits.append((set(a.tolist()), set(b.tolist())))
    # laminar: supports are nested or disjoint, and a finer one lies inside one side
    for i, (a1, b1) in enumerate(splits):
        s1 = a1 | b1
        for a2, b2 in splits[i + 1 :]:
            s2 = a2 | b2
            assert not (s1 & s2) or s2 <= a1 or s2 <= b1 or s1 <= a2 or s1 <= b2
    return splits


# --------------------------------------------------------------------------- orthonormality


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 40),
    pairs=st.lists(st.tuples(st.integers(0, 39), st.integers(0, 39)), max_size=80),
)
def test_orthonormal_haar_basis_on_random_graphs(n, pairs):
    edges = np.array([(u % n, v % n) for u, v in pairs], dtype=np.int64).reshape(-1, 2)
    g = as_graph(edges, n)
    w = tree_wavelet_basis(g)
    assert sp.isspmatrix_csc(w) or isinstance(w, sp.csc_array)
    assert w.shape == (n, n)
    assert orthonormality_error(w) <= 1e-12
    check_haar_structure(w, g.components)
    assert np.diff(w.tocsr().indptr).max() <= level_bound(n)


@pytest.mark.parametrize(
    ("name", "graph"),
    [
        ("random tree", nx.from_edgelist(random_tree(3000, np.random.default_rng(1)).tolist())),
        ("star", nx.star_graph(3000)),
        ("complete", nx.complete_graph(200)),
        ("grid", nx.grid_2d_graph(40, 60)),
        (
            "disconnected",
            nx.disjoint_union_all(
                [nx.path_graph(700), nx.empty_graph(50), nx.star_graph(300), nx.cycle_graph(99)]
                + [nx.gnm_random_graph(400, 500, seed=s) for s in range(3)]
            ),
        ),
    ],
)
def test_orthonormal_and_sparse_on_larger_graphs(name, graph):
    n = graph.number_of_nodes()
    w = tree_wavelet_basis(graph)
    assert w.shape == (n, n)
    assert orthonormality_error(w) <= 1e-10
    assert np.diff(w.tocsr().indptr).max() <= level_bound(n)
    assert w.nnz <= n * level_bound(n)  # O(n log n), even for the star (not n²/2)


@pytest.mark.slow
def test_manhattan_junction_graph():
    m = load_manhattan_graph()
    g = as_graph(m.edges, m.n)
    w = tree_wavelet_basis(g)
    assert w.shape == (4091, 4091)
    assert orthonormality_error(w) <= 1e-10
    assert orthonormality_error(w.T.tocsc()) <= 1e-10  # W Wᵀ = I too
    assert w.nnz <= m.n * level_bound(m.n)
    again = tree_wavelet_basis(g)  # cached per Graph, returned as a copy
    assert again is not w and (again != w).nnz == 0


def test_all_input_forms_give_the_same_basis():
    g = nx.gnm_random_graph(60, 90, seed=3)
    edges = np.array(list(g.edges), dtype=np.int64)
    adj = nx.to_scipy_sparse_array(g, nodelist=range(60), format="csr")
    ref = tree_wavelet_basis(g).toarray()
    for form in (
        tree_wavelet_basis(edges, 60),
        tree_wavelet_basis(adj),
        tree_wavelet_basis(as_graph(edges, 60)),
    ):
        assert np.array_equal(form.toarray(), ref)


def test_tiny_graphs():
    assert tree_wavelet_basis(np.zeros((0, 2), dtype=np.int64), 0).shape == (0, 0)
    assert tree_wavelet_basis(np.zeros((0, 2), dtype=np.int64), 1).toarray().tolist() == [[1.0]]
    w = tree_wavelet_basis(np.array([[0, 1]]), 2).toarray()
    s = 1 / math.sqrt(2)
    assert np.allclose(w, [[s, -s], [s, s]], rtol=0, atol=1e-15)  # + on the cut-off subtree
    # no edges: the identity (every node its own component)
    assert np.array_equal(
        tree_wavelet_basis(np.zeros((0, 2), dtype=np.int64), 5).toarray(), np.eye(5)
    )


# --------------------------------------------------------------------------- the splits


@pytest.mark.parametrize("n", [2, 3, 7, 64, 1000, 1023])
def test_path_splits_into_balanced_intervals(n):
    w = tree_wavelet_basis(nx.path_graph(n))
    for a, b in check_haar_structure(w, np.zeros(n, dtype=int)):
        support = sorted(a | b)
        assert support == list(range(support[0], support[-1] + 1))  # an interval
        assert sorted(a) == list(range(min(a), max(a) + 1))  # each side an interval too
        assert abs(len(a) - len(b)) <= 1  # the best split of a path halves it
    # a path of 2^k nodes is the classical Haar basis: every node in k + 1 columns
    if n & (n - 1) == 0:
        assert np.all(np.diff(w.tocsr().indptr) == int(math.log2(n)) + 1)


def test_parts_are_connected_subtrees_for_low_degree_trees():
    """With ≤ 2 children per vertex no virtual vertex is needed: every cut is a tree edge."""
    rng = np.random.default_rng(7)
    edges = random_tree(400, rng, max_children=2)
    tree = nx.from_edgelist(edges.tolist())
    w = tree_wavelet_basis(edges, 400)
    for a, b in check_haar_structure(w, np.zeros(400, dtype=int)):
        assert nx.is_connected(tree.subgraph(a)) and nx.is_connected(tree.subgraph(b))
        # removing exactly one tree edge separates A from B
        assert sum(1 for u, v in tree.edges if (u in a and v in b) or (u in b and v in a)) == 1


def test_split_balance_at_least_a_third():
    """Every split leaves ≥ (W − 1)/3 of its part's W nodes on each side (degree ≤ 3)."""
    for graph in (
        nx.star_graph(500),
        nx.from_edgelist(random_tree(600, np.random.default_rng(2)).tolist()),
    ):
        w = tree_wavelet_basis(graph)
        for a, b in check_haar_structure(w, np.zeros(graph.number_of_nodes(), dtype=int)):
            total = len(a) + len(b)
            assert min(len(a), len(b)) >= (total - 1) / 3


def test_piecewise_constant_on_subtrees_is_sparse():
    """Cutting s tree edges leaves pieces; a signal constant on them has ≤ s·L + 1 coefs."""
    rng = np.random.default_rng(11)
    n = 3000
    edges = random_tree(n, rng)
    w = tree_wavelet_basis(edges, n)
    levels = int(np.diff(w.tocsr().indptr).max()) - 1  # wavelets a node lies in, at most
    tree = nx.from_edgelist(edges.tolist())
    for s in (1, 3, 10):
        cut = rng.choice(n - 1, size=s, replace=False)
        forest = tree.copy()
        forest.remove_edges_from(edges[cut].tolist())
        theta = np.zeros(n)
        for piece in nx.connected_components(forest):
            theta[list(piece)] = rng.normal(0, 10)
        coef = w.T @ theta
        nnz = np.count_nonzero(np.abs(coef) > 1e-9 * np.abs(theta).max())
        assert nnz <= s * levels + 1
        assert nnz <= 0.05 * n
        assert np.allclose(w @ coef, theta, atol=1e-9)


def test_graph_constant_per_component_has_only_scaling_coefficients():
    g = nx.disjoint_union_all([nx.cycle_graph(30), nx.path_graph(20), nx.complete_graph(5)])
    gg = as_graph(g, 55)
    theta = np.array([3.0, -1.0, 7.5])[gg.components]
    coef = tree_wavelet_basis(gg).T @ theta
    assert np.allclose(coef[3:], 0, atol=1e-12)
    assert np.allclose(coef[:3], [3.0 * math.sqrt(30), -math.sqrt(20), 7.5 * math.sqrt(5)])


# --------------------------------------------------------------------------- denoising


@pytest.fixture(scope="module")
def manhattan():
    m = load_manhattan_graph()
    return as_graph(m.edges, m.n)


def test_denoise_matches_manual_computation(manhattan):
    rng = np.random.default_rng(0)
    n = manhattan.n
    theta = np.where(manhattan.components == 0, 5.0, 0.0) * (np.arange(n) % 7 == 0)
    y = theta + 2.0 * rng.standard_normal(n)
    w = tree_wavelet_basis(manhattan)
    for threshold in ("sure", "universal", 1.5):
        res = graph_wavelet_denoise(y, 2.0, manhattan, threshold=threshold)
        assert isinstance(res, Denoised) and res.method == "graph_wavelet"
        coef = w.T @ y
        ref = soft_threshold(coef[1:], 2.0, threshold=threshold)
        expect = w @ np.concatenate([coef[:1], ref.estimate])
        assert np.allclose(res.estimate, expect, rtol=0, atol=1e-12)
        assert res.risk == pytest.approx(4.0 + ref.risk, rel=1e-12)
        assert res.params["lambda"] == ref.params["lambda"]
        assert res.params["n_components"] == 1
        assert res.params["df"] == 1 + ref.params["df"]
        assert res.params["n_nonzero"] == np.count_nonzero(np.concatenate([coef[:1], ref.estimate]))
    assert graph_wavelet_denoise(y, 2.0, manhattan, threshold=1.5).params["threshold"] == 1.5


def test_zero_threshold_returns_y_and_huge_threshold_the_means():
    g = nx.disjoint_union(nx.path_graph(30), nx.cycle_graph(20))
    rng = np.random.default_rng(5)
    y = rng.normal(size=50)
    res = graph_wavelet_denoise(y, 0.5, g, threshold=0.0)
    assert np.allclose(res.estimate, y, atol=1e-13)
    assert res.risk == pytest.approx(50 * 0.25)
    res = graph_wavelet_denoise(y, 0.5, g, threshold=1e6)
    assert np.allclose(res.estimate[:30], y[:30].mean()) and np.allclose(
        res.estimate[30:], y[30:].mean()
    )
    assert res.params["n_nonzero"] == 2 and res.params["n_components"] == 2


def test_denoising_helps_on_a_piecewise_constant_signal(manhattan):
    rng = np.random.default_rng(3)
    m = load_manhattan_graph()
    theta = np.where(m.lat > np.median(m.lat), 10.0, 0.0) + np.where(m.lon > -73.97, 5.0, 0.0)
    y = theta + rng.standard_normal(m.n)
    res = graph_wavelet_denoise(y, 1.0, manhattan)
    error = np.sum((res.estimate - theta) ** 2)
    assert error < 0.6 * m.n  # the noisy release has error ≈ n
    assert abs(res.risk - error) < 0.15 * m.n


@pytest.mark.parametrize("threshold", [2.0, "universal"])
def test_sure_is_unbiased_at_a_fixed_threshold(manhattan, threshold):
    """Monte Carlo: mean(SURE − squared error) is 0 within 3 standard errors."""
    rng = np.random.default_rng(2024)
    m = load_manhattan_graph()
    theta = 3.0 * np.sin(20 * (m.lat - m.lat.min()) / np.ptp(m.lat) * np.pi) + np.where(
        m.lon > -73.97, 4.0, 0.0
    )
    sigma, reps = 1.5, 300
    diffs = np.empty(reps)
    for r in range(reps):
        y = theta + sigma * rng.standard_normal(m.n)
        res = graph_wavelet_denoise(y, sigma, manhattan, threshold=threshold)
        diffs[r] = res.risk - np.sum((res.estimate - theta) ** 2)
    se = diffs.std(ddof=1) / math.sqrt(reps)
    assert abs(diffs.mean()) <= 3 * se
    assert se < 0.02 * m.n * sigma**2  # the test has power: SE is small next to the risk


# --------------------------------------------------------------------------- bad inputs


def test_bad_inputs():
    path = nx.path_graph(5)
    with pytest.raises(TypeError, match="n"):
        tree_wavelet_basis(np.array([[0, 1]]))  # edge array without n
    with pytest.raises(ValueError, match="n must be"):
        tree_wavelet_basis(np.array([[0, 1]]), -1)
    with pytest.raises(ValueError, match="n must be"):
        tree_wavelet_basis(np.array([[0, 1]]), True)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="outside"):
        tree_wavelet_basis(np.array([[0, 5]]), 3)
    with pytest.raises(TypeError, match="graph"):
        tree_wavelet_basis("not a graph", 3)
    with pytest.raises(ValueError, match="nodes"):
        graph_wavelet_denoise(np.zeros(4), 1.0, path)
    with pytest.raises(ValueError, match="1-D"):
        graph_wavelet_denoise(np.zeros((5, 1)), 1.0, path)
    with pytest.raises(ValueError, match="y"):
        graph_wavelet_denoise([0, 1, np.nan, 3, 4], 1.0, path)
    with pytest.raises(ValueError, match="sigma"):
        graph_wavelet_denoise(np.zeros(5), 0.0, path)
    with pytest.raises(TypeError, match="sigma"):
        graph_wavelet_denoise(np.zeros(5), "1", path)
    with pytest.raises(ValueError, match="threshold"):
        graph_wavelet_denoise(np.zeros(5), 1.0, path, threshold="hard")
    with pytest.raises(ValueError, match="threshold"):
        graph_wavelet_denoise(np.zeros(5), 1.0, path, threshold=-1.0)
    with pytest.raises(ValueError, match="threshold"):
        graph_wavelet_denoise(np.zeros(5), 1.0, path, threshold=[1.0, 2.0])
