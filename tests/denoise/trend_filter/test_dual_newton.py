"""Orders 1 and 2 by projected Newton on the dual (banded / sparse LU), against cvxpy."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dpgauss.denoise import as_graph
from dpgauss.denoise.trend_filter import (
    _DUAL_ALGORITHM,
    _least_norm_dual,
    _make_operator,
    trend_filter,
)
from dpgauss.denoise.trend_filter._dual_newton import DualNewton

cp = pytest.importorskip("cvxpy")

from .test_trend_filter import difference_matrix, objective, reference_objective  # noqa: E402

RTOL = 1e-6


def chain(n: int) -> np.ndarray:
    return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)


def piecewise_linear(n: int, rng: np.random.Generator) -> np.ndarray:
    x = np.linspace(0.0, 1.0, n)
    signal = np.zeros(n)
    for knot in rng.uniform(0.0, 1.0, 4):
        signal += rng.normal(0.0, 20.0) * np.maximum(x - knot, 0.0)
    return signal + rng.standard_normal(n)


def check(y: np.ndarray, edges: np.ndarray, n: int, order: int, lams) -> None:
    mat = difference_matrix(as_graph(edges, n).edges, n, order)
    for lam in lams:
        fit = trend_filter(y, None, edges, order=order, lam=lam)
        ours = objective(y, fit.estimate, mat, lam)
        ref = reference_objective(y, mat, lam)
        assert ours - ref <= RTOL * max(ours, ref, 1e-300), (order, lam, ours, ref)
        assert fit.params["converged"]
        assert fit.params["gap"] <= 1e-6


def direct_matches_cvxpy(y: np.ndarray, edges: np.ndarray, n: int, lams) -> None:
    """The sparse-LU dual Newton itself (on general graphs ``trend_filter`` first tries the
    active-set method of its ADMM route and calls it only where that does not certify)."""
    op = _make_operator(as_graph(edges, n), 1)
    solver = DualNewton(op.matrix, y, op.components, ground_rows=True)
    assert not solver.banded
    u_ls = _least_norm_dual(op, y)
    mat = difference_matrix(as_graph(edges, n).edges, n, 1)
    for lam in lams:
        res = solver.solve(lam, np.clip(u_ls, -lam, lam), 1e-6)
        assert res is not None and res.exact
        ours = objective(y, res.beta, mat, lam)
        ref = reference_objective(y, mat, lam)
        assert ours - ref <= RTOL * max(ours, ref), (lam, ours, ref)
        assert res.gap <= 1e-6 * res.primal


@pytest.mark.parametrize("order", [1, 2])
@pytest.mark.parametrize("n", [2, 3, 5, 60, 300])
def test_chain_matches_cvxpy(order, n):
    rng = np.random.default_rng(n + order)
    y = piecewise_linear(n, rng)
    check(y, chain(n), n, order, (1e-3, 0.3, 3.0, 100.0))


@pytest.mark.parametrize("order", [1, 2])
def test_chain_uses_the_banded_dual_solver(order):
    n = 200
    y = piecewise_linear(n, np.random.default_rng(1))
    fit = trend_filter(y, 1.0, chain(n), order=order, lam="sure")
    assert fit.params["algorithm"] == f"{_DUAL_ALGORITHM} (banded)"
    assert fit.params["iterations"] == 0  # no ADMM iteration anywhere on the path
    assert np.all(fit.params["path"]["gap"] <= 1e-6)


@pytest.mark.parametrize("order", [1, 2])
def test_chain_hard_cases(order):
    n = 40
    edges = chain(n)
    # constant y: every λ gives y back (λ_max = 0)
    const = trend_filter(np.full(n, 2.5), 1.0, edges, order=order, lam="sure")
    assert np.allclose(const.estimate, 2.5)
    # linear y (the graph operator has boundary rows, so its penalty is not zero)
    lin = np.linspace(-3.0, 5.0, n)
    check(lin, edges, n, order, (1e-6, 0.01, 1.0, 1e4))
    # huge λ: the mean; tiny λ: y itself
    y = piecewise_linear(n, np.random.default_rng(3))
    big = trend_filter(y, None, edges, order=order, lam=1e9)
    assert np.allclose(big.estimate, y.mean())
    assert big.params["df"] == 1
    small = trend_filter(y, None, edges, order=order, lam=1e-10)
    assert np.allclose(small.estimate, y, atol=1e-6)
    assert small.params["algorithm"].startswith(_DUAL_ALGORITHM)


def test_sparse_random_graph_order1_matches_cvxpy():
    n = 80
    graph = nx.gnm_random_graph(n, 200, seed=4)
    edges = np.array(graph.edges(), dtype=np.int64)
    rng = np.random.default_rng(4)
    y = np.repeat(3.0 * rng.standard_normal(4), n // 4) + rng.standard_normal(n)
    check(y, edges, n, 1, (0.01, 0.3, 3.0))
    direct_matches_cvxpy(y, edges, n, (0.01, 0.3, 3.0))


def test_disconnected_graph_order1_and_forest_order2():
    a = nx.convert_node_labels_to_integers(nx.connected_watts_strogatz_graph(30, 4, 0.3, seed=2))
    b = nx.convert_node_labels_to_integers(nx.path_graph(15), first_label=30)
    edges = np.array(list(a.edges()) + list(b.edges()), dtype=np.int64)
    n = 46  # node 45 is isolated
    rng = np.random.default_rng(8)
    y = rng.standard_normal(n) + np.repeat([0.0, 4.0], [23, 23])
    check(y, edges, n, 1, (0.05, 1.0, 20.0))
    tree = nx.random_labeled_tree(40, seed=5) if hasattr(nx, "random_labeled_tree") else None
    if tree is None:
        tree = nx.random_tree(40, seed=5)
    t_edges = np.array(tree.edges(), dtype=np.int64)
    forest = np.concatenate([t_edges, chain(10) + 40])
    y2 = rng.standard_normal(50)
    check(y2, forest, 50, 2, (0.05, 1.0, 20.0))
    fit = trend_filter(y2, 1.0, forest, order=2, lam="sure")
    assert fit.params["algorithm"].startswith(_DUAL_ALGORITHM)


def test_order2_with_a_cycle_is_left_to_admm():
    """On a graph with a cycle the rows of DL are dependent: no dual Newton there."""
    edges = np.array(nx.cycle_graph(30).edges(), dtype=np.int64)
    y = np.random.default_rng(0).standard_normal(30)
    fit = trend_filter(y, 1.0, edges, order=2, lam=0.5)
    assert fit.params["algorithm"].startswith("ADMM")
    check(y, edges, 30, 2, (0.5,))


@pytest.mark.slow
@pytest.mark.parametrize("order", [1, 2])
def test_sure_path_agrees_with_admm(order):
    n = 120
    y = piecewise_linear(n, np.random.default_rng(11))
    edges = chain(n)
    fast = trend_filter(y, 1.0, edges, order=order, lam="sure")
    slow = trend_filter(y, 1.0, edges, order=order, lam="sure", solver="admm")
    pf, ps = fast.params["path"], slow.params["path"]
    k = min(pf["lam"].size, ps["lam"].size)
    np.testing.assert_allclose(pf["lam"][:k], ps["lam"][:k], rtol=1e-12)
    # the exact solver's objective is never above ADMM's by more than the tolerance
    assert np.all(pf["objective"][:k] - ps["objective"][:k] <= 1e-6 * ps["objective"][:k])
    assert fast.params["solver"] == "auto"
    assert set(fast.params) >= {"order", "lam", "df", "iterations", "gap", "converged", "path"}


@pytest.mark.parametrize("order", [1, 2])
def test_normal_equations_agree_with_the_augmented_system(order):
    """The banded Cholesky (refined) and the banded LU of (2) give the same face."""
    n = 150
    y = piecewise_linear(n, np.random.default_rng(order))
    op = _make_operator(as_graph(chain(n), n), order)
    solver = DualNewton(op.matrix, y, op.components, ground_rows=order == 1)
    assert solver.q_band is not None and solver.banded
    rng = np.random.default_rng(5)
    rows = np.sort(rng.choice(op.m, size=op.m - 12, replace=False))
    beta = y - op.matrix.T @ rng.standard_normal(op.m)
    normal = solver._normal(beta, rows)
    solver.q_band = None
    augmented = solver.newton(beta, rows)
    assert normal is not None and augmented is not None
    np.testing.assert_allclose(normal[1], augmented[1], atol=1e-8 * np.max(np.abs(beta)))
    # x is on the face: Δ_R x = 0
    assert np.max(np.abs(op.matrix[rows] @ normal[1])) <= 1e-9 * np.max(np.abs(beta))


def test_dual_point_is_feasible_and_certifies():
    n = 300
    y = piecewise_linear(n, np.random.default_rng(2))
    op = _make_operator(as_graph(chain(n), n), 1)
    u_ls = _least_norm_dual(op, y)
    lam = 0.05 * float(np.max(np.abs(u_ls)))
    solver = DualNewton(op.matrix, y, op.components, ground_rows=True)
    res = solver.solve(lam, np.clip(u_ls, -lam, lam), 1e-6)
    assert res is not None
    assert np.all(np.abs(res.u) <= lam)
    r = y - op.matrix.T @ res.u
    dual = 0.5 * float(y @ y) - 0.5 * float(r @ r)
    assert res.primal - dual <= 1e-6 * res.primal
    assert np.all(res.dbeta[res.free] == pytest.approx(0.0, abs=1e-8 * np.max(np.abs(y))))


def test_lattice_order1_sparse_dual_solver():
    """A 2-D lattice (its operator diagonalised by the DCT for ADMM) is not banded: the
    dual solver factorises the augmented system by sparse LU, and matches cvxpy."""
    graph = nx.grid_2d_graph(7, 9)
    n = 63
    rng = np.random.default_rng(6)
    y = np.repeat(3.0 * rng.standard_normal(3), 21) + rng.standard_normal(n)
    edges = as_graph(graph, n).edges
    check(y, edges, n, 1, (0.05, 1.0))
    direct_matches_cvxpy(y, edges, n, (0.05, 1.0))
    fit = trend_filter(y.reshape(7, 9), 1.0, graph, order=1, lam="sure")
    assert fit.estimate.shape == (7, 9)
