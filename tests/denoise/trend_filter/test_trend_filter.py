"""Graph trend filtering: optimality against cvxpy + Clarabel, degrees of freedom, SURE."""

from __future__ import annotations

import importlib

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from dpgauss.denoise import as_graph
from dpgauss.denoise.trend_filter import (
    TrendFilterConvergenceWarning,
    _lattice_shape,
    _LatticeDifference,
    _make_operator,
    _n_components,
    _SparseDifference,
    trend_filter,
)

_admm = importlib.import_module("dpgauss.denoise.trend_filter._admm")
_graph_tv = importlib.import_module("dpgauss.denoise.trend_filter._graph_tv")
cp = pytest.importorskip("cvxpy")

RTOL = 1e-6  # relative objective accuracy required against the reference solver


def difference_matrix(edges: np.ndarray, n: int, order: int) -> sp.csr_matrix:
    """Δ^(k+1) built independently of the module: D, DᵀD, D DᵀD."""
    m = edges.shape[0]
    d = sp.csr_matrix(
        (np.tile([1.0, -1.0], m), (np.repeat(np.arange(m), 2), edges.ravel())), shape=(m, n)
    )
    lap = d.T @ d
    return sp.csr_matrix({0: d, 1: lap, 2: d @ lap}[order])


def objective(y: np.ndarray, beta: np.ndarray, mat: sp.spmatrix, lam: float) -> float:
    return 0.5 * float(np.sum((y - beta) ** 2)) + lam * float(np.abs(mat @ beta).sum())


def reference_objective(y: np.ndarray, mat: sp.spmatrix, lam: float) -> float:
    beta = cp.Variable(y.size)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(y - beta) + lam * cp.norm1(mat @ beta)))
    problem.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return objective(y, np.asarray(beta.value), mat, lam)


def piecewise_signal(n: int, rng: np.random.Generator, pieces: int = 4) -> np.ndarray:
    levels = 3.0 * rng.standard_normal(pieces)
    return np.repeat(levels, -(-n // pieces))[:n] + rng.standard_normal(n)


def random_connected_graph(n: int, seed: int) -> nx.Graph:
    return nx.connected_watts_strogatz_graph(n, 4, 0.3, seed=seed)


# --------------------------------------------------------------------------------------
# Optimality against the reference solver
# --------------------------------------------------------------------------------------

CASES = [("random", 20, 1), ("random", 37, 2), ("random", 60, 3)]
NEEDS_NUMBA = pytest.mark.skipif(not _graph_tv.available(), reason="numba is not installed")
# every order with ADMM, and order 0 also by the exact minimum-cut decomposition
ORDER_SOLVER = [
    (0, "admm"),
    pytest.param(0, "exact", marks=NEEDS_NUMBA),
    (1, "admm"),
    (2, "admm"),
]


@pytest.mark.parametrize(("order", "solver"), ORDER_SOLVER)
@pytest.mark.parametrize(("kind", "n", "seed"), CASES)
def test_objective_matches_cvxpy_on_random_connected_graphs(kind, n, seed, order, solver):
    rng = np.random.default_rng(seed)
    graph = random_connected_graph(n, seed)
    y = piecewise_signal(n, rng)
    edges = as_graph(graph, n).edges
    mat = difference_matrix(edges, n, order)
    for lam in (0.05, 0.5, 4.0):
        fit = trend_filter(y, None, graph, order=order, lam=lam, solver=solver)
        ours = objective(y, fit.estimate, mat, lam)
        ref = reference_objective(y, mat, lam)
        assert ours - ref <= RTOL * max(ours, ref), (order, lam, ours, ref)
        assert fit.params["converged"]


@pytest.mark.parametrize(("order", "solver"), ORDER_SOLVER)
def test_objective_matches_cvxpy_on_disconnected_graph_with_self_loops(order, solver):
    rng = np.random.default_rng(7)
    a = nx.convert_node_labels_to_integers(random_connected_graph(25, 11))
    b = nx.convert_node_labels_to_integers(nx.cycle_graph(10), first_label=25)
    edges = np.array(list(a.edges()) + list(b.edges()), dtype=np.int64)
    n = 36  # node 35 is isolated
    loops = np.array([[3, 3], [30, 30], [35, 35]])
    edges_in = np.concatenate([edges, loops, edges[:5, ::-1]])  # self-loops and repeats
    y = piecewise_signal(n, rng, pieces=6)
    mat = difference_matrix(as_graph(edges, n).edges, n, order)
    for lam in (0.1, 1.0, 10.0):
        fit = trend_filter(y, None, edges_in, order=order, lam=lam, solver=solver)
        ours = objective(y, fit.estimate, mat, lam)
        ref = reference_objective(y, mat, lam)
        assert ours - ref <= RTOL * max(ours, ref)
        assert fit.estimate[35] == pytest.approx(y[35])  # an isolated node keeps its value


@pytest.mark.parametrize(("order", "solver"), ORDER_SOLVER)
def test_objective_matches_cvxpy_on_a_lattice(order, solver):
    """The lattice (DCT) solver gives the same optimum as the general one."""
    rng = np.random.default_rng(5)
    graph = nx.grid_2d_graph(6, 9)
    n = 54
    assert _lattice_shape(as_graph(graph, n)) == (6, 9)
    y = piecewise_signal(n, rng)
    mat = difference_matrix(as_graph(graph, n).edges, n, order)
    for lam in (0.1, 1.0):
        fit = trend_filter(y.reshape(6, 9), None, graph, order=order, lam=lam, solver=solver)
        assert fit.estimate.shape == (6, 9)
        kind = "minimum-cut" if solver == "exact" else "(lattice DCT)"
        assert kind in fit.params["algorithm"]
        ours = objective(y, fit.estimate.ravel(), mat, lam)
        ref = reference_objective(y, mat, lam)
        assert ours - ref <= RTOL * max(ours, ref)


def test_lattice_operator_agrees_with_sparse_operator():
    rng = np.random.default_rng(3)
    for shape in ((1, 12), (5, 7)):
        g = as_graph(nx.grid_2d_graph(*shape), shape[0] * shape[1])
        for order in (0, 1, 2):
            lat, gen = _LatticeDifference(shape, order), _SparseDifference(g, order)
            beta = rng.standard_normal(g.n)
            # same rows up to the order of the edges
            lat_rows = np.sort(np.abs(lat.apply(beta)))
            assert np.allclose(lat_rows, np.sort(np.abs(gen.apply(beta))))
            b = rng.standard_normal(g.n)
            assert np.allclose(lat.solver(2.5)(b), gen.solver(2.5)(b))
            u = rng.standard_normal(lat.m)
            assert np.allclose(lat.adjoint(u), lat.matrix.T @ u)


def same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    """Two label vectors describe the same partition of the nodes."""
    pairs = np.unique(np.stack([a, b], axis=1), axis=0)
    return pairs.shape[0] == np.unique(a).size == np.unique(b).size


@pytest.mark.parametrize("density", [0.0, 0.3, 0.6, 0.9, 1.0])
def test_fused_components_match_the_generic_search(density):
    """The fast component searches (image labelling on lattices, direct CSR with weak
    components otherwise) give the same groups as ``_n_components``."""
    rng = np.random.default_rng(11)
    ops: list[_LatticeDifference | _SparseDifference] = []
    for shape in ((1, 12), (5, 7), (30, 40)):
        g = as_graph(nx.grid_2d_graph(*shape), shape[0] * shape[1])
        ops += [_LatticeDifference(shape, 0), _SparseDifference(g, 0)]
    h = nx.connected_watts_strogatz_graph(60, 4, 0.3, seed=2)
    h.add_nodes_from(range(60, 63))  # isolated nodes
    ops.append(_SparseDifference(as_graph(h, 63), 0))
    for op in ops:
        for _ in range(3):
            zero = rng.random(op.m) < density
            n_comp, labels = op.fused_components(zero)
            ref_n, ref_labels = _n_components(op.n, op.edges[zero])
            assert n_comp == ref_n
            assert labels.shape == (op.n,)
            assert same_partition(labels, ref_labels)


def test_lattice_buffers_and_in_place_solve():
    """``apply(out=)`` fills the buffer; the solver leaves ``b`` alone unless allowed to
    overwrite it, and both variants agree."""
    rng = np.random.default_rng(5)
    op = _LatticeDifference((6, 8), 0)
    beta = rng.standard_normal(op.n)
    buf = np.empty(op.m)
    assert op.apply(beta, out=buf) is buf
    assert np.array_equal(buf, op.apply(beta))
    b = rng.standard_normal(op.n)
    keep = b.copy()
    ref = op.solver(3.0)(b)
    assert np.array_equal(b, keep)
    assert np.allclose(op.solver(3.0, overwrite=True)(b.copy()), ref, rtol=0, atol=1e-13)


def test_rho_moves_by_powers_of_four_for_order_0_with_sparse_lu(monkeypatch):
    """Each new ρ costs a factorisation for a sparse LU, so order 0 there uses powers of
    four (also along the path); the lattice (free ρ changes) and order 1 keep powers of two."""
    # Coarse steps are an option (off by default: they stalled on real data, see the
    # constant's comment); the machinery must keep ρ on its lattice when it is on.
    monkeypatch.setattr(_admm, "_RHO_STEP_LU0", 2)
    g = as_graph(nx.connected_watts_strogatz_graph(40, 4, 0.3, seed=1), 40)
    y = np.random.default_rng(0).standard_normal(40)
    sparse0 = _admm._Solver(y, _SparseDifference(g, 0), 1e-6, 100)
    assert sparse0.rho_step == 2
    for lam in (0.3, 0.7, 1.1, 5.0):
        assert sparse0.initial_state(lam).log2_rho % 2 == 0
    assert _admm._Solver(y, _SparseDifference(g, 1), 1e-6, 100).rho_step == 1
    assert _admm._Solver(y, _LatticeDifference((5, 8), 0), 1e-6, 100).rho_step == 1
    seen = []
    original = _admm._Solver.solve

    def spy(self, lam, state):
        seen.append(state.log2_rho)
        return original(self, lam, state)

    monkeypatch.setattr(_admm._Solver, "solve", spy)
    fit = trend_filter(y, 1.0, g, order=0, lam="sure", n_lambdas=8, solver="admm")
    assert fit.params["converged"]
    assert seen and all(j % 2 == 0 for j in seen)


def test_lattice_is_not_detected_after_relabelling():
    g = as_graph(nx.grid_2d_graph(4, 5), 20)
    perm = np.random.default_rng(0).permutation(20)
    assert _lattice_shape(as_graph(perm[g.edges], 20)) is None
    assert _lattice_shape(as_graph(nx.path_graph(6), 6)) == (1, 6)
    assert _lattice_shape(as_graph(nx.cycle_graph(6), 6)) is None
    assert isinstance(_make_operator(as_graph(perm[g.edges], 20), 0), _SparseDifference)


# --------------------------------------------------------------------------------------
# Degrees of freedom
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("order", "solver"), ORDER_SOLVER)
def test_df_limits(order, solver):
    rng = np.random.default_rng(1)
    a = random_connected_graph(15, 2)
    b = nx.relabel_nodes(nx.path_graph(6), {i: i + 15 for i in range(6)})
    graph = nx.union(a, b)
    graph.add_node(21)  # isolated
    y = rng.standard_normal(22)
    big = trend_filter(y, None, graph, order=order, lam=1e9, solver=solver)
    assert big.params["df"] == 3  # one level per component
    for comp in (range(15), range(15, 21), [21]):
        idx = list(comp)
        assert np.allclose(big.estimate[idx], y[idx].mean())
    small = trend_filter(y, None, graph, order=order, lam=1e-9, solver=solver)
    assert small.params["df"] == 22
    assert np.allclose(small.estimate, y, atol=1e-6)
    assert trend_filter(y, None, graph, order=order, lam=0.0, solver=solver).params["df"] == 22


@pytest.mark.parametrize(("order", "solver"), ORDER_SOLVER)
def test_df_is_the_divergence(order, solver):
    """df equals the numerical nullity of Δ_Z and a finite-difference divergence."""
    rng = np.random.default_rng(4)
    n = 24
    graph = random_connected_graph(n, 9)
    y = piecewise_signal(n, rng)
    mat = difference_matrix(as_graph(graph, n).edges, n, order).toarray()
    lam = 0.6
    fit = trend_filter(y, None, graph, order=order, lam=lam, tol=1e-13, solver=solver)
    zero = np.abs(mat @ fit.estimate) < 1e-8
    nullity = n - (np.linalg.matrix_rank(mat[zero], tol=1e-8) if zero.any() else 0)
    assert fit.params["df"] == nullity
    eps = 1e-7
    divergence = 0.0
    for i in range(n):
        bumped = y.copy()
        bumped[i] += eps
        moved = trend_filter(bumped, None, graph, order=order, lam=lam, tol=1e-13, solver=solver)
        moved = moved.estimate
        divergence += (moved[i] - fit.estimate[i]) / eps
    assert divergence == pytest.approx(fit.params["df"], abs=1e-3)


# --------------------------------------------------------------------------------------
# SURE
# --------------------------------------------------------------------------------------


def test_sure_is_unbiased_for_fixed_lambda_order_0():
    rng = np.random.default_rng(20180710)
    graph = nx.grid_2d_graph(8, 8)
    n, sigma, lam = 64, 1.0, 1.5
    i, j = np.indices((8, 8))
    theta = (2.0 * (i >= 4) + 1.5 * (j >= 5)).ravel()
    g = as_graph(graph, n)
    sure, loss = [], []
    for _ in range(400):
        y = theta + sigma * rng.standard_normal(n)
        fit = trend_filter(y, sigma, g, order=0, lam=lam)
        sure.append(fit.risk)
        loss.append(float(np.sum((fit.estimate - theta) ** 2)))
    diff = np.asarray(sure) - np.asarray(loss)
    se = diff.std(ddof=1) / np.sqrt(diff.size)
    assert abs(diff.mean()) < 3 * se, (np.mean(sure), np.mean(loss), se)


def test_sure_path_chooses_minimum_and_reports_it():
    rng = np.random.default_rng(8)
    graph = nx.grid_2d_graph(10, 10)
    i, _ = np.indices((10, 10))
    theta = 3.0 * (i >= 5).ravel()
    y = theta + rng.standard_normal(100)
    fit = trend_filter(y, 1.0, graph, order=0, lam="sure")
    path = fit.params["path"]
    assert len(path["lam"]) >= 20
    assert np.all(np.diff(path["lam"]) < 0)
    assert path["lam"][0] == pytest.approx(fit.params["lam_max"])
    assert path["df"][0] == 1
    best = int(np.argmin(path["sure"]))
    assert fit.params["lam"] == path["lam"][best]
    assert fit.risk == pytest.approx(path["sure"][best])
    assert fit.risk == pytest.approx(
        float(np.sum((y - fit.estimate) ** 2)) - 100 + 2 * fit.params["df"]
    )
    assert fit.method == "trend_filter" and fit.params["order"] == 0
    # the denoised error is far below the raw noise (100 in expectation)
    assert float(np.sum((fit.estimate - theta) ** 2)) < 30


def test_candidate_lambdas_and_fixed_lambda_risk():
    rng = np.random.default_rng(2)
    graph = nx.path_graph(30)
    y = piecewise_signal(30, rng, pieces=3)
    fit = trend_filter(y, 1.0, graph, order=1, lam=[0.1, 3.0, 1.0])
    assert sorted(fit.params["path"]["lam"].tolist()) == [0.1, 1.0, 3.0]
    assert fit.params["lam"] in (0.1, 1.0, 3.0)
    one = trend_filter(y, None, graph, order=1, lam=1.0)
    assert one.risk is None and "path" not in one.params
    with_sigma = trend_filter(y, 1.0, graph, order=1, lam=1.0)
    assert with_sigma.risk == pytest.approx(
        float(np.sum((y - with_sigma.estimate) ** 2)) - 30 + 2 * with_sigma.params["df"]
    )


def test_graph_without_edges_returns_y():
    y = np.array([1.0, -2.0, 3.0])
    fit = trend_filter(y, 1.0, np.zeros((0, 2), dtype=int), order=1, lam="sure")
    assert np.array_equal(fit.estimate, y)
    assert fit.params["df"] == 3 and fit.risk == pytest.approx(3.0)


def test_convergence_warning():
    rng = np.random.default_rng(0)
    graph = random_connected_graph(40, 1)
    y = piecewise_signal(40, rng)
    with pytest.warns(TrendFilterConvergenceWarning, match="max_iter"):
        fit = trend_filter(y, None, graph, order=0, lam=1.0, max_iter=1, solver="admm")
    assert not fit.params["converged"]


# --------------------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------------------


def test_bad_inputs():
    graph = nx.path_graph(5)
    y = np.arange(5.0)
    with pytest.raises(ValueError, match="5 nodes but the released vector has 6"):
        trend_filter(np.arange(6.0), None, graph, lam=1.0)
    with pytest.raises(ValueError, match="y must be finite"):
        trend_filter(np.array([0.0, np.nan, 1.0, 2.0, 3.0]), None, graph, lam=1.0)
    with pytest.raises(ValueError, match="y must be finite"):
        trend_filter(np.array([0.0, np.inf, 1.0, 2.0, 3.0]), 1.0, graph, lam="sure")
    with pytest.raises(ValueError, match="sigma"):
        trend_filter(y, 0.0, graph, lam="sure")
    with pytest.raises(ValueError, match="sigma"):
        trend_filter(y, -1.0, graph, lam="sure")
    with pytest.raises(ValueError, match="sigma is required"):
        trend_filter(y, None, graph, lam="sure")
    with pytest.raises(ValueError, match="order must be one of"):
        trend_filter(y, None, graph, order=3, lam=1.0)
    with pytest.raises(ValueError, match="order must be one of"):
        trend_filter(y, None, graph, order=-1, lam=1.0)
    for bad in (1.5, "0", True, None):
        with pytest.raises(TypeError, match="order must be an integer"):
            trend_filter(y, None, graph, order=bad, lam=1.0)
    with pytest.raises(ValueError, match="lam must be >= 0"):
        trend_filter(y, None, graph, lam=-1.0)
    with pytest.raises(ValueError, match="lam must be"):
        trend_filter(y, None, graph, lam="auto")
    with pytest.raises(ValueError, match="lam must be finite"):
        trend_filter(y, None, graph, lam=np.nan)
    with pytest.raises(TypeError, match="y must be"):
        trend_filter("abc", None, graph, lam=1.0)
    with pytest.raises(ValueError, match="tol"):
        trend_filter(y, None, graph, lam=1.0, tol=0.0)
    with pytest.raises(ValueError, match="max_iter"):
        trend_filter(y, None, graph, lam=1.0, max_iter=0)
    with pytest.raises(ValueError, match="lam_min_ratio"):
        trend_filter(y, 1.0, graph, lam="sure", lam_min_ratio=2.0)
    with pytest.raises(ValueError, match="solver must be"):
        trend_filter(y, None, graph, lam=1.0, solver="cvx")
    with pytest.raises(ValueError, match="order 0 only"):
        trend_filter(y, None, graph, order=1, lam=1.0, solver="exact")


def test_solver_choice_without_numba(monkeypatch):
    """Without numba, 'auto' uses ADMM on a general graph and the direct 1-D algorithm on a
    chain; 'exact' on a general graph says how to get numba."""
    monkeypatch.setattr(_graph_tv, "available", lambda: False)
    y = np.array([0.0, 0.1, 2.0, 2.1, 1.9])
    auto = trend_filter(y, None, nx.cycle_graph(5), lam=0.05)
    assert auto.params["algorithm"].startswith("ADMM")
    assert (
        trend_filter(y, None, nx.path_graph(5), lam=0.05)
        .params["algorithm"]
        .startswith("direct 1-D")
    )
    with pytest.raises(ImportError, match=r"'\.\[fast\]'"):
        trend_filter(y, None, nx.cycle_graph(5), lam=0.05, solver="exact")


# ------------------------------------------------- the SURE path reaches the raw release


@pytest.mark.parametrize("order", [0, 1, 2])
@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("weighted", [False, True])
def test_the_sure_path_ends_at_the_raw_release(order: int, seed: int, weighted: bool) -> None:
    """Issue #26, item 3: every default λ path includes λ = 0 (β̂ = y, SURE = Σσᵢ²), so the
    fit chosen by SURE is never worse than the raw release by its own SURE.  A rough signal
    far above the noise (every difference a jump) is where a path that stopped at a positive
    λ had nothing to fall back on."""
    if weighted and order > 0:
        pytest.skip("one σ per key: order 0 only")
    rng = np.random.default_rng(seed)
    g = nx.grid_2d_graph(6, 7) if seed != 1 else nx.path_graph(40)
    g = nx.convert_node_labels_to_integers(g)
    n = g.number_of_nodes()
    theta = rng.choice([-50.0, 0.0, 80.0], size=n) * rng.uniform(0.5, 1.5, size=n)
    sigma = rng.uniform(0.5, 2.0, size=n) if weighted else 1.0
    y = theta + rng.normal(size=n) * sigma
    res = trend_filter(y, sigma, as_graph(g, n), order=order)
    lams = np.asarray(res.params["path"]["lam"])
    assert lams[-1] == 0.0 and np.all(lams[:-1] > 0)
    raw = float(np.sum(np.broadcast_to(np.asarray(sigma) ** 2, (n,))))
    assert res.risk <= raw * (1 + 1e-12)
    if res.params["lam"] == 0.0:  # chosen: exactly the raw release, with df = d
        assert np.array_equal(res.estimate, y) and res.params["df"] == n


def test_admm_starts_at_a_tiny_scale_with_a_huge_lambda() -> None:
    """ADMM's first penalty ``ρ ∝ λ / scale(Δy)`` overflowed to inf for y near 1e-155 and
    λ = 1e160, and ``round(log2(inf))`` raised OverflowError; it is now clamped.  At that λ
    the fit is in the penalty's null space: for graph trend filtering of order 1 (``Δ`` the
    graph Laplacian) the constants, so the mean."""
    y = np.random.default_rng(0).standard_normal(30) * 1e-155
    res = trend_filter(y, None, (30,), order=1, lam=1e160, solver="admm")
    np.testing.assert_allclose(res.estimate, np.full(30, y.mean()), rtol=1e-6)
