"""The reference min-cut graph-TV solver, and the ADMM and library min-cut paths against it."""

from __future__ import annotations

import importlib

import networkx as nx
import numpy as np
import pytest

from dpgauss.denoise import as_graph

from .exact_graph_tv import fused_lasso_dc, fused_lasso_repair

tf = importlib.import_module("dpgauss.denoise.trend_filter")
cp = pytest.importorskip("cvxpy")
NEEDS_NUMBA = pytest.mark.skipif(
    not importlib.import_module("dpgauss.denoise.trend_filter._graph_tv").available(),
    reason="numba is not installed",
)


def disconnected() -> tuple[np.ndarray, int]:
    """A random block, a cycle, a path and an isolated node (50 nodes)."""
    a = nx.convert_node_labels_to_integers(nx.connected_watts_strogatz_graph(25, 4, 0.3, seed=3))
    b = nx.convert_node_labels_to_integers(nx.cycle_graph(12), first_label=25)
    c = nx.convert_node_labels_to_integers(nx.path_graph(12), first_label=37)
    return np.array(list(a.edges()) + list(b.edges()) + list(c.edges()), dtype=np.int64), 50


GRAPHS = {
    "random": lambda: (np.array(nx.connected_watts_strogatz_graph(40, 4, 0.3, seed=1).edges()), 40),
    "disconnected": disconnected,
    "lattice": lambda: (as_graph(nx.grid_2d_graph(6, 7), 42).edges, 42),
    "path": lambda: (np.stack([np.arange(29), np.arange(1, 30)], axis=1), 30),
}


def objective(y: np.ndarray, beta: np.ndarray, d, lam: float) -> float:
    return 0.5 * float(np.sum((y - beta) ** 2)) + lam * float(np.abs(d @ beta).sum())


def reference(y: np.ndarray, d, lam: float) -> float:
    beta = cp.Variable(y.size)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(y - beta) + lam * cp.norm1(d @ beta)))
    problem.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return objective(y, np.asarray(beta.value), d, lam)


def signal(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.repeat(rng.integers(-2, 3, 4).astype(float), -(-n // 4))[:n] + rng.standard_normal(n)


@pytest.mark.parametrize("kind", sorted(GRAPHS))
@pytest.mark.parametrize("lam", [0.05, 0.4, 1.5])
def test_min_cut_solver_matches_cvxpy_and_certifies(kind, lam):
    """The divide-and-conquer solution agrees with Clarabel to 1e-6 (relative objective),
    its flow is dual feasible and certifies it (gap = rounding only)."""
    edges, n = GRAPHS[kind]()
    g = as_graph(edges, n)
    d = g.incidence
    y = signal(n, 7)
    res = fused_lasso_dc(y, g.edges, lam)
    assert res is not None
    p = objective(y, res.beta, d, lam)
    r = y - d.T @ res.u
    dual = 0.5 * float(y @ y) - 0.5 * float(r @ r)
    assert np.max(np.abs(res.u)) <= lam
    assert p - dual <= 1e-10 * p
    ref = reference(y, d, lam)
    assert abs(p - ref) <= 1e-6 * ref


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_repair_releases_wrong_jumps(kind):
    """Jumps fixed at random (many wrong) are released until the result is certified."""
    edges, n = GRAPHS[kind]()
    g = as_graph(edges, n)
    d = g.incidence
    y = signal(n, 11)
    lam = 0.5
    rng = np.random.default_rng(0)
    jump = rng.choice([-1.0, 0.0, 0.0, 1.0], g.m)
    res = fused_lasso_repair(y, g.edges, lam, jump, None, repairs=g.m, atol=1e-12)
    assert res is not None
    p = objective(y, res.beta, d, lam)
    r = y - d.T @ res.u
    assert p - (0.5 * float(y @ y) - 0.5 * float(r @ r)) <= 1e-10 * p
    assert abs(p - objective(y, fused_lasso_dc(y, g.edges, lam).beta, d, lam)) <= 1e-9 * p


@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_admm_path_agrees_with_the_exact_min_cut_solver(kind):
    """At every λ of the ADMM SURE path, the exact min-cut solver (certified gap ~1e-13)
    reaches the same objective to 1e-6 relative."""
    edges, n = GRAPHS[kind]()
    g = as_graph(edges, n)
    d = g.incidence
    y = signal(n, 3)
    fit = tf.trend_filter(y, 1.0, g, order=0, lam="sure", n_lambdas=8, solver="admm")
    path = fit.params["path"]
    for lam, p_admm in zip(path["lam"], path["objective"], strict=True):
        exact = fused_lasso_dc(y, g.edges, float(lam))
        p_exact = objective(y, exact.beta, d, float(lam))
        assert abs(p_admm - p_exact) <= 1e-6 * p_exact


def exact_df(y: np.ndarray, g, lam: float) -> int:
    """Fused groups of the reference solution (scipy's integer max-flow, independent)."""
    beta = fused_lasso_dc(y, g.edges, lam).beta
    fused = np.abs(g.incidence @ beta) <= 1e-9 * np.abs(y).max()
    return tf._n_components(g.n, g.edges[fused])[0]


@NEEDS_NUMBA
@pytest.mark.parametrize("kind", sorted(GRAPHS))
def test_mincut_path_equals_the_reference_solver(kind):
    """The library's minimum-cut path (compiled push-relabel, real capacities, warm
    starts and repairs) gives the reference's objective to 1e-9, the same fused groups
    (so the exact df), and a certified gap at rounding level, at every λ."""
    edges, n = GRAPHS[kind]()
    g = as_graph(edges, n)
    y = signal(n, 5)
    fit = tf.trend_filter(y, 1.0, g, order=0, lam="sure", n_lambdas=12, solver="exact")
    path = fit.params["path"]
    assert fit.params["iterations"] == 0
    if kind == "path":  # a chain goes to the direct 1-D algorithm (test_tv1d.py)
        assert fit.params["algorithm"].startswith("direct 1-D")
    else:
        assert fit.params["rounds"] > 0
    assert np.all(path["gap"] <= 1e-12)
    for lam, p_cut, df in zip(path["lam"], path["objective"], path["df"], strict=True):
        exact = fused_lasso_dc(y, g.edges, float(lam))
        p_exact = objective(y, exact.beta, g.incidence, float(lam))
        assert abs(p_cut - p_exact) <= 1e-9 * p_exact
        assert df == exact_df(y, g, float(lam))


@NEEDS_NUMBA
@pytest.mark.parametrize("lam", [1e-12, 0.3, 1e12])
@pytest.mark.parametrize("scale", [1e-8, 1.0, 1e8])
def test_mincut_extremes_of_scale_and_penalty(lam, scale):
    """Tiny and huge λ and data scales: β̂ = y, the component means, and between them a
    certified solution; ties in y (equal neighbours) are fused exactly."""
    edges, n = GRAPHS["disconnected"]()
    g = as_graph(edges, n)
    y = scale * np.round(signal(n, 9), 1)  # rounding makes exact ties between neighbours
    fit = tf.trend_filter(y, None, g, order=0, lam=lam * scale, solver="exact")
    assert fit.params["gap"] <= 1e-12
    if lam == 1e-12:
        np.testing.assert_allclose(fit.estimate, y, rtol=0, atol=1e-9 * scale)
    if lam == 1e12:
        means = tf._null_projection(tf._make_operator(g, 0), y)
        np.testing.assert_allclose(fit.estimate, means, rtol=0, atol=1e-9 * scale)
    assert "minimum-cut" in fit.params["algorithm"] and "ADMM" not in fit.params["algorithm"]
    assert fit.estimate[49] == y[49]  # the isolated node
    if lam == 0.3:  # (the reference's integer scaling is not meant for the extremes)
        p = objective(y, fit.estimate, g.incidence, lam * scale)
        exact = fused_lasso_dc(y, g.edges, lam * scale)
        assert abs(p - objective(y, exact.beta, g.incidence, lam * scale)) <= 1e-9 * p


@NEEDS_NUMBA
def test_mincut_repairs_wrong_warm_starts():
    """Jumps and flows fixed at random (many wrong) are released until the solution is
    certified; the result is the reference's."""
    gtv = importlib.import_module("dpgauss.denoise.trend_filter._graph_tv")
    edges, n = GRAPHS["random"]()
    g = as_graph(edges, n)
    y = signal(n, 11)
    rng = np.random.default_rng(0)
    for lam in (0.05, 0.5, 3.0):
        jump = rng.choice([-1.0, 0.0, 0.0, 1.0], g.m)
        flow = rng.uniform(-2 * lam, 2 * lam, g.m)
        res = gtv.graph_tv_warm(y, g.edges, lam, jump, flow)
        assert res is not None and np.max(np.abs(res.u)) <= lam
        p = objective(y, res.beta, g.incidence, lam)
        r = y - g.incidence.T @ res.u
        assert p - (0.5 * float(y @ y) - 0.5 * float(r @ r)) <= 1e-12 * p
        exact = fused_lasso_dc(y, g.edges, lam)
        assert abs(p - objective(y, exact.beta, g.incidence, lam)) <= 1e-10 * p


@pytest.mark.slow
@pytest.mark.parametrize("solver", ["admm", pytest.param("exact", marks=NEEDS_NUMBA)])
def test_manhattan_path_matches_the_exact_solver(solver):
    """On the pruned Manhattan junction graph the path's objective equals the reference
    min-cut solver's (1e-6 relative) at every λ, by ADMM and by the library's min-cut."""
    datasets = pytest.importorskip("dpgauss.datasets")
    road = datasets.load_manhattan_graph(junctions=True, prune_dead_ends=True)
    n = len(road.lat)
    g = as_graph(np.asarray(road.edges, dtype=np.int64), n)
    rng = np.random.default_rng(1)
    y = np.where(np.asarray(road.lat) > np.median(road.lat), 2.0, 0.0) + rng.standard_normal(n)
    kw = {"order": 0, "lam": "sure", "n_lambdas": 6, "lam_min_ratio": 1e-2}
    kw["solver"] = solver
    path = tf.trend_filter(y, 1.0, g, **kw).params["path"]
    for lam, p_admm in zip(path["lam"], path["objective"], strict=True):
        exact = fused_lasso_dc(y, g.edges, float(lam))
        p_exact = objective(y, exact.beta, g.incidence, float(lam))
        assert abs(p_admm - p_exact) <= 1e-6 * p_exact


@NEEDS_NUMBA
def test_an_uncertified_lambda_goes_to_admm(monkeypatch):
    """If the exact solver fails at some λ (forced here), ADMM solves that λ from the last
    exact solution, the path stays optimal, and params say which solvers ran."""
    gtv = importlib.import_module("dpgauss.denoise.trend_filter._graph_tv")
    real = gtv.graph_tv_warm
    calls = []

    def flaky(y, edges, lam, jump, flow, repairs=20):
        calls.append(lam)
        return None if len(calls) % 2 == 0 else real(y, edges, lam, jump, flow, repairs)

    monkeypatch.setattr(gtv, "graph_tv_warm", flaky)
    edges, n = GRAPHS["random"]()
    g = as_graph(edges, n)
    y = signal(n, 4)
    fit = tf.trend_filter(y, 1.0, g, order=0, lam="sure", n_lambdas=8, solver="exact")
    assert "where not certified" in fit.params["algorithm"] and fit.params["iterations"] > 0
    path = fit.params["path"]
    assert np.any(path["iterations"] > 0) and np.any(path["iterations"] == 0)
    for lam, p in zip(path["lam"], path["objective"], strict=True):
        exact = fused_lasso_dc(y, g.edges, float(lam))
        assert abs(p - objective(y, exact.beta, g.incidence, float(lam))) <= 1e-6 * p
