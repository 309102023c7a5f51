"""Order-1 support solver (bordered Schur complements) and the warm-started active-set path."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from dpgauss.denoise import _tf_order1, as_graph
from dpgauss.denoise._tf_order1 import SupportSolver
from dpgauss.denoise.trend_filter import _make_operator, _polish_saddle, trend_filter

cp = pytest.importorskip("cvxpy")

from .test_trend_filter import reference_objective  # noqa: E402

RTOL = 1e-6


def disconnected_graph() -> tuple[np.ndarray, int]:
    """A random connected block, a cycle, a path and an isolated node (60 nodes)."""
    a = nx.convert_node_labels_to_integers(nx.connected_watts_strogatz_graph(35, 4, 0.3, seed=3))
    b = nx.convert_node_labels_to_integers(nx.cycle_graph(12), first_label=35)
    c = nx.convert_node_labels_to_integers(nx.path_graph(12), first_label=47)
    edges = np.array(list(a.edges()) + list(b.edges()) + list(c.edges()), dtype=np.int64)
    return edges, 60  # node 59 is isolated


GRAPHS = {
    "random": lambda: (np.array(nx.connected_watts_strogatz_graph(50, 4, 0.3, seed=1).edges()), 50),
    "disconnected": disconnected_graph,
    "lattice": lambda: (as_graph(nx.grid_2d_graph(7, 8), 56).edges, 56),
}


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_support_solver_matches_the_saddle_point_polish(kind):
    """For random supports (some components without active nodes, grounds active or
    free), the Schur-complement solve agrees with the sparse saddle-point system, and its
    multipliers satisfy the optimality conditions of the support exactly."""
    edges, n = GRAPHS[kind]()
    op = _make_operator(as_graph(edges, n), 1)
    rng = np.random.default_rng(0)
    y = rng.standard_normal(n) + np.repeat(rng.standard_normal(4), -(-n // 4))[:n]
    solver = SupportSolver(op, y)
    lam = 0.3
    start = None
    for size in (1, 3, 8, 20, 8, 2, 30):
        sign = np.zeros(n)
        active = rng.choice(n - 1, size, replace=False)
        sign[active] = rng.choice([-1.0, 1.0], size)
        if size == 3:
            sign[0] = 1.0  # a ground node in the support
        got = solver.solve(lam, sign, start)
        assert got is not None
        beta, u = got
        start = u
        zero = sign == 0
        ref = _polish_saddle(op, y, lam, sign, zero)
        assert ref is not None
        scale = np.abs(y).max()
        np.testing.assert_allclose(beta, ref[0], atol=1e-8 * scale)
        assert np.max(np.abs(op.apply(beta)[zero])) <= 1e-8 * scale  # (Lβ)_F = 0
        np.testing.assert_allclose(u[~zero], lam * sign[~zero])  # u_A = λ s_A
        np.testing.assert_allclose(y - op.apply(u), beta, atol=1e-9 * scale)  # β = y − Lu


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_order1_path_matches_cvxpy(kind):
    """The warm-started active-set path reaches the optimum at every λ (disconnected
    graphs, lattices), with the reported objective within tolerance of Clarabel's."""
    edges, n = GRAPHS[kind]()
    g = as_graph(edges, n)
    lap = _make_operator(g, 1).matrix.toarray()
    rng = np.random.default_rng(2)
    y = np.repeat(3.0 * rng.standard_normal(5), -(-n // 5))[:n] + rng.standard_normal(n)
    fit = trend_filter(y, 1.0, g, order=1, lam="sure", n_lambdas=8, lam_min_ratio=1e-3)
    path = fit.params["path"]
    assert np.all(path["gap"] <= RTOL)
    for lam, obj in list(zip(path["lam"], path["objective"], strict=True))[1::2]:
        ref = reference_objective(y, lap, float(lam))
        assert obj - ref <= RTOL * max(obj, ref), (lam, obj, ref)


def test_cache_budget_falls_back_to_the_saddle_point_polish(monkeypatch):
    """With no room for the cached block of M⁻¹ the solver declines and the sparse
    saddle-point polish takes over, with the same result."""
    edges, n = GRAPHS["random"]()
    rng = np.random.default_rng(5)
    y = np.repeat(rng.standard_normal(3), 17)[:n] + 0.3 * rng.standard_normal(n)
    kw = {"order": 1, "lam": "sure", "n_lambdas": 6}
    fast = trend_filter(y, 0.3, edges, **kw)
    monkeypatch.setattr(_tf_order1, "_MAX_ENTRIES", 4)
    slow = trend_filter(y, 0.3, edges, **kw)
    np.testing.assert_allclose(fast.params["path"]["df"], slow.params["path"]["df"])
    np.testing.assert_allclose(
        fast.params["path"]["objective"], slow.params["path"]["objective"], rtol=2e-6
    )


@pytest.mark.parametrize("kind", sorted(GRAPHS))
@pytest.mark.parametrize("order", [1, 2])
def test_reordered_factorisations_solve_every_rho(kind, order):
    """One minimum-degree ordering serves every ρ: the solves of ``I + ρG`` (G the gram of
    Δ⁽ᵏ⁺¹⁾) agree with a dense solve, for the first ρ (ordered by SuperLU) and later ones
    (pre-permuted, natural order), vectors and matrices alike."""
    edges, n = GRAPHS[kind]()
    mat = _make_operator(as_graph(edges, n), order).matrix
    gram = (mat.T @ mat).toarray()
    factors = _tf_order1.ReorderedSPD(mat.T @ mat)
    rng = np.random.default_rng(order)
    for rho in (1.0, 0.25, 64.0, 1e-3):
        b = rng.standard_normal((n, 3))
        expected = np.linalg.solve(np.eye(n) + rho * gram, b)
        solve = factors.factor(rho)
        atol = 1e-9 * np.abs(expected).max()
        np.testing.assert_allclose(solve(b), expected, rtol=0, atol=atol)
        np.testing.assert_allclose(solve(b[:, 0]), expected[:, 0], rtol=0, atol=atol)
