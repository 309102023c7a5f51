"""Order 1 on general graphs: the CG face solver and the SURE path on several graph families.

The families (random geometric graphs, 2-D grids in a scrambled node order, random trees,
graphs of several components with isolated nodes, grids with diagonals) are built here
from edge lists, so that no lattice or chain is detected and the general-graph route runs.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import cKDTree

from dpgauss.denoise import as_graph
from dpgauss.denoise.structure import graph_of
from dpgauss.denoise.trend_filter import (
    _DUAL_ALGORITHM,
    _degrees_of_freedom,
    _least_norm_dual,
    _make_operator,
    _order1,
    _sparse_spd,
    trend_filter,
)
from dpgauss.denoise.trend_filter._dual_newton import DualNewton, DualSolution

cp = pytest.importorskip("cvxpy")

RTOL = 1e-6


def scramble(edges: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """The same graph with its nodes relabelled by a random permutation."""
    return rng.permutation(n)[edges]


def grid_edges(h: int, w: int, diagonals: bool = False) -> np.ndarray:
    idx = np.arange(h * w).reshape(h, w)
    parts = [
        np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], axis=1),
        np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], axis=1),
    ]
    if diagonals:
        parts.append(np.stack([idx[:-1, :-1].ravel(), idx[1:, 1:].ravel()], axis=1))
        parts.append(np.stack([idx[:-1, 1:].ravel(), idx[1:, :-1].ravel()], axis=1))
    return np.concatenate(parts)


def geometric(n: int, radius: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random geometric graph (points in the unit square, edges shorter than ``radius``)
    and the points."""
    pts = np.random.default_rng(seed).uniform(size=(n, 2))
    pairs = np.array(sorted(cKDTree(pts).query_pairs(radius)), dtype=np.int64)
    return pairs.reshape(-1, 2), pts


def random_tree(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    parent = np.array([rng.integers(0, i) for i in range(1, n)], dtype=np.int64)
    return scramble(np.stack([parent, np.arange(1, n)], axis=1), n, rng)


def several_components(seed: int) -> tuple[np.ndarray, int]:
    """A scrambled 8 × 9 grid, a random geometric block, a path and two isolated nodes."""
    rng = np.random.default_rng(seed)
    grid = scramble(grid_edges(8, 9), 72, rng)
    rgg, _ = geometric(60, 0.25, seed)
    path = np.stack([np.arange(19), np.arange(1, 20)], axis=1)
    edges = np.concatenate([grid, rgg + 72, path + 132])
    n = 154  # nodes 152 and 153 are isolated
    return scramble(edges, n, rng), n


def family(name: str) -> tuple[np.ndarray, int, np.ndarray]:
    """``(edges, n, y)``: a graph of the family and a noisy signal that is smooth with a
    few kinks on it."""
    rng = np.random.default_rng(sum(map(ord, name)))
    if name == "geometric":
        edges, pts = geometric(150, 0.14, 1)
        n = 150
        signal = 4.0 * np.abs(pts[:, 0] - 0.4) + 3.0 * (pts[:, 1] > 0.6)
    elif name == "scrambled grid":
        n = 12 * 13
        perm = rng.permutation(n)
        edges = perm[grid_edges(12, 13)]
        r, c = np.divmod(np.arange(n), 13)
        signal = np.empty(n)
        signal[perm] = 0.5 * np.abs(r - 5) + 0.3 * c
    elif name == "tree":
        n = 140
        edges = random_tree(n, 2)
        signal = np.repeat(3.0 * rng.standard_normal(4), n // 4)
    elif name == "components":
        edges, n = several_components(3)
        signal = np.repeat(3.0 * rng.standard_normal(7), -(-n // 7))[:n]
    elif name == "grid with diagonals":
        n = 11 * 12
        perm = rng.permutation(n)
        edges = perm[grid_edges(11, 12, diagonals=True)]
        r, c = np.divmod(np.arange(n), 12)
        signal = np.empty(n)
        signal[perm] = np.where(r + c > 10, 0.6 * r, 2.0)
    else:
        raise ValueError(name)
    return edges, n, signal + rng.standard_normal(n)


FAMILIES = ["geometric", "scrambled grid", "tree", "components", "grid with diagonals"]


def cvxpy_df(y: np.ndarray, edges: np.ndarray, n: int, lam: float) -> tuple[float, int]:
    """Clarabel's objective and the df of its solution, ``|A| + c_Z`` with ``A`` the nodes
    where ``|Lβ|`` exceeds a threshold far above its accuracy."""
    g = as_graph(edges, n)
    op = _make_operator(g, 1)
    lap = op.matrix
    beta = cp.Variable(n)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(y - beta) + lam * cp.norm1(lap @ beta)))
    problem.solve(solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11)
    b = np.asarray(beta.value)
    lb = lap @ b
    zero = np.abs(lb) <= 1e-5 * max(float(np.max(np.abs(y))), 1.0)
    obj = 0.5 * float((y - b) @ (y - b)) + lam * float(np.abs(lb).sum())
    return obj, _degrees_of_freedom(op, zero)


@pytest.mark.parametrize("name", FAMILIES)
def test_order1_path_matches_cvxpy_on_graph_families(name):
    """At every λ of the SURE path the certified gap is within tol and the objective within
    tol of Clarabel's; df agrees with the df of Clarabel's solution (kinks counted with a
    threshold) at every other λ; the path never falls back to ADMM."""
    edges, n, y = family(name)
    fit = trend_filter(y, 1.0, edges, order=1, lam="sure", n_lambdas=12)
    path = fit.params["path"]
    assert fit.params["algorithm"] == f"{_DUAL_ALGORITHM} (CG on cached sparse factorisations)"
    assert np.all(path["gap"] <= RTOL)
    assert np.all(path["iterations"] == 0)  # no ADMM
    for lam, obj, df in list(zip(path["lam"], path["objective"], path["df"], strict=True))[1::2]:
        ref, ref_df = cvxpy_df(y, edges, n, float(lam))
        assert obj - ref <= RTOL * max(obj, ref), (lam, obj, ref)
        assert df == ref_df, (lam, df, ref_df)


def test_order1_path_on_graphs_makes_no_dense_factorisation(monkeypatch):
    """The whole order-1 SURE path on a general graph runs on sparse factorisations: every
    dense solver of numpy and scipy raises if called (the capacitance route's only dense
    algebra is its bordered Cholesky factor of the active nodes, by BLAS ``dtrsv``)."""

    def forbidden(*args, **kwargs):
        raise AssertionError("dense factorisation on the order-1 path")

    for name in ("lu_factor", "lu_solve", "solve", "cho_factor", "cho_solve", "inv", "lstsq"):
        monkeypatch.setattr(scipy.linalg, name, forbidden)
    for name in ("solve", "inv", "lstsq", "cholesky"):
        monkeypatch.setattr(np.linalg, name, forbidden)
    for name in ("components", "geometric"):
        edges, _, y = family(name)
        fit = trend_filter(y, 1.0, edges, order=1, lam="sure")
        assert fit.params["converged"]
        assert np.all(fit.params["path"]["iterations"] == 0)


def augmented(op, beta: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The face by the sparse LU of the augmented system (2) of :mod:`trend_filter._dual_newton`."""
    newton = DualNewton(op.matrix, np.zeros(op.n), op.components, ground_rows=True)
    newton.faces = None
    solved = newton.newton(beta, rows)
    assert solved is not None
    return solved


def face_rows(op, active: np.ndarray) -> np.ndarray:
    """The solve rows of the face with the nodes ``active`` fixed, and the first node of
    each component without one (its ground)."""
    comp = op.components
    first = np.full(int(comp.max()) + 1, -1)
    first[comp[::-1]] = np.arange(op.n)[::-1]
    fixed = np.zeros(op.n, dtype=bool)
    fixed[active] = True
    has = np.bincount(comp, weights=fixed.astype(float), minlength=first.size) > 0
    fixed[first[~has]] = True
    return np.flatnonzero(~fixed)


@pytest.mark.parametrize("name", ["components", "grid with diagonals", "tree"])
def test_face_solver_agrees_with_the_augmented_system(name, monkeypatch):
    """A sequence of faces (a growing then shrinking active set, grounds in the components
    without active nodes): the CG solves, refactorised or not, give the augmented system's
    solution, on the face to rounding (the capacitance route off: its own tests are in
    ``test_capacitance.py``)."""
    monkeypatch.setattr(_order1, "_CAPACITANCE_MAX", -1)
    edges, n, y = family(name)
    op = _make_operator(as_graph(edges, n), 1)
    lap = op.matrix
    faces = _order1.FaceSolver(lap, 1e-13)
    rng = np.random.default_rng(7)
    scale = float(np.max(np.abs(y)))
    for size in (1, 2, 4, 30, 31, 60, 58, 5, 0):
        rows = face_rows(op, rng.choice(n, size, replace=False))
        beta = y - lap @ (rng.uniform(-1.0, 1.0, n) * scale)
        got = faces.solve(beta, rows)
        assert got is not None
        want = augmented(op, beta, rows)
        big = float(np.max(np.abs(beta)))
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-9 * big)
        np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-8 * big)
        assert np.max(np.abs((lap @ got[1])[rows])) <= 1e-10 * big
    assert 1 <= faces.factorisations < 9  # some faces were solved without refactorising


def test_face_solver_refactorises_when_cg_stalls(monkeypatch):
    """With no CG steps allowed on an old factorisation the solver refactorises at the
    current face and gets the same answer."""
    edges, n, y = family("geometric")
    op = _make_operator(as_graph(edges, n), 1)
    lap = op.matrix
    u = _least_norm_dual(op, y)
    lam = 0.3 * float(np.max(np.abs(u)))
    monkeypatch.setattr(_order1, "_CG_SLACK", 0)
    monkeypatch.setattr(_order1, "_CG_PER_MOVED", 0)
    monkeypatch.setattr(_order1, "_REFACTOR_MOVED", 10**9)
    monkeypatch.setattr(_order1, "_CAPACITANCE_MAX", -1)
    faces = _order1.FaceSolver(lap, 1e-13)
    rng = np.random.default_rng(1)
    for k in (3, 9):
        rows = face_rows(op, rng.choice(n, k, replace=False))
        beta = y - lap @ np.clip(u, -lam, lam)
        got = faces.solve(beta, rows)
        assert got is not None
        want = augmented(op, beta, rows)
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-9 * np.max(np.abs(beta)))
    assert faces.factorisations == 2


@pytest.mark.slow
@pytest.mark.parametrize("order", [1, 2])
def test_reordered_factorisations_solve_every_rho(order):
    """One minimum-degree ordering serves every ρ: the solves of ``I + ρG`` (G the gram of
    Δ⁽ᵏ⁺¹⁾) agree with a dense solve, for the first ρ (ordered by SuperLU) and later ones
    (pre-permuted, natural order), vectors and matrices alike."""
    edges, n = several_components(4)
    mat = _make_operator(as_graph(edges, n), order).matrix
    gram = (mat.T @ mat).toarray()
    factors = _sparse_spd.ReorderedSPD(mat.T @ mat)
    rng = np.random.default_rng(order)
    for rho in (1.0, 0.25, 64.0, 1e-3):
        b = rng.standard_normal((n, 3))
        expected = np.linalg.solve(np.eye(n) + rho * gram, b)
        solve = factors.factor(rho)
        atol = 1e-9 * np.abs(expected).max()
        np.testing.assert_allclose(solve(b), expected, rtol=0, atol=atol)
        np.testing.assert_allclose(solve(b[:, 0]), expected[:, 0], rtol=0, atol=atol)


def test_fill_reducing_order_is_a_permutation_with_little_fill():
    edges = scramble(grid_edges(20, 20), 400, np.random.default_rng(0))
    lap = _make_operator(as_graph(edges, 400), 1).matrix
    mat = sp.csc_matrix(lap + sp.identity(400))
    order = _sparse_spd.fill_reducing_order(mat)
    assert np.array_equal(np.sort(order), np.arange(400))
    ordered = _sparse_spd.spd_lu(sp.csc_matrix(mat[order][:, order]), ordered=True)
    natural = _sparse_spd.spd_lu(mat, ordered=True)  # the scrambled order itself
    assert ordered.L.nnz < 0.5 * natural.L.nnz


def test_spd_lu_panel_size_solves_the_same_system():
    """``panel_size`` (the faces' narrower SuperLU panels) is passed through: an invalid
    width is refused, and narrow panels solve a lattice's ``L² + I`` as the default does."""
    lap = _make_operator(as_graph(grid_edges(15, 17), 255), 1).matrix
    mat = sp.csc_matrix(lap @ lap + sp.identity(255))
    b = np.random.default_rng(1).standard_normal(255)
    expected = np.linalg.solve(mat.toarray(), b)
    for panel in (None, 1, 4):
        x = _sparse_spd.spd_lu(mat, panel_size=panel).solve(b)
        np.testing.assert_allclose(x, expected, rtol=0, atol=1e-10 * np.abs(expected).max())
    with pytest.raises((ValueError, RuntimeError)):
        _sparse_spd.spd_lu(mat, panel_size=-3)


def test_scrambled_path_matches_the_banded_chain_solver():
    """A 2,000-node path in a random node order is not detected as a chain, and its faces
    are badly conditioned (the multipliers near λ_max are ~10⁶ × |y|): the general route
    still certifies every λ without ADMM, with the objectives and df of the banded chain
    solver on the same path in order."""
    n = 2000
    rng = np.random.default_rng(0)
    x = np.linspace(0.0, 1.0, n)
    y = 20.0 * np.maximum(x - 0.3, 0.0) - 30.0 * np.maximum(x - 0.7, 0.0)
    y += rng.standard_normal(n)
    chain = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    perm = rng.permutation(n)
    scrambled = np.empty(n)
    scrambled[perm] = y
    ref = trend_filter(y, 1.0, chain, order=1, lam="sure").params["path"]
    got = trend_filter(scrambled, 1.0, perm[chain], order=1, lam="sure").params["path"]
    assert np.all(got["iterations"] == 0)
    assert np.all(got["gap"] <= RTOL)
    np.testing.assert_allclose(got["lam"], ref["lam"], rtol=1e-9)
    np.testing.assert_allclose(got["objective"], ref["objective"], rtol=2 * RTOL)
    np.testing.assert_array_equal(got["df"], ref["df"])


def test_active_set_breaks_a_cycle_by_changing_the_worst_violator():
    """On a lattice near λ_max the active set from one kink swaps between two single kinks,
    each of the wrong sign alone; changing only the worst violator (adding the second kink)
    ends on the exact solution instead of handing the λ to projected Newton."""
    side = 20
    rng = np.random.default_rng(0)
    r, c = np.divmod(np.arange(side * side), side)
    y = 0.05 * np.abs(r - side / 2) + 3.0 * (c > 0.6 * side) + rng.standard_normal(side * side)
    op = _make_operator(graph_of((side, side), side * side, "test"), 1)
    u = _least_norm_dual(op, y)
    lam_max = float(np.max(np.abs(u)))
    newton = DualNewton(op.matrix, y, op.components, ground_rows=True)
    for f in (0.9, 0.8, 0.7, 0.6):  # 0.6 cycled with the chain's rule
        lam = f * lam_max
        res = newton.pdas(lam, np.clip(u * f, -lam, lam), RTOL)
        assert isinstance(res, DualSolution), f
        assert res.gap <= RTOL * res.primal
        assert np.all(np.abs(res.u) <= lam)


@pytest.mark.parametrize("name", FAMILIES)
def test_path_warm_start_keeps_the_last_support_at_exactly_lam(name, monkeypatch):
    """Along the SURE path each λ's active set starts from the last λ's support: the rows the
    last dual point held at ±λ' start at exactly ±λ (``λ'·(λ/λ')`` may round below ``λ``,
    and the active set then restarted from an empty support: on the Manhattan graph one λ
    took 29 steps instead of 5).  The path (λ, df, SURE) is unchanged, and is certified."""
    edges, _, y = family(name)
    starts: list[tuple[float, np.ndarray]] = []
    original = DualNewton.solve

    def spy(self, lam, u0, tol):
        starts.append((lam, np.array(u0, dtype=np.float64)))
        return original(self, lam, u0, tol)

    monkeypatch.setattr(DualNewton, "solve", spy)
    fit = trend_filter(y, 1.0, edges, order=1, lam="sure", n_lambdas=12)
    path = fit.params["path"]
    assert np.all(path["gap"] <= RTOL)
    assert len(starts) >= 2
    for lam, u in starts:  # every start is in the box
        assert np.all(np.abs(u) <= lam)
    held = [np.count_nonzero(np.abs(u) == lam) for lam, u in starts[1:]]
    # after λ_max (df from the projection) the support only grows on these paths: never 0
    assert all(h > 0 for h in held[1:]), held


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(20, 90),
    radius=st.floats(0.15, 0.35),
    seed=st.integers(0, 2**16),
    scale=st.floats(0.0, 4.0),
)
def test_order1_sure_path_does_not_depend_on_its_warm_starts(n, radius, seed, scale):
    """The SURE path (warm-started λ to λ) gives at every λ the df and SURE of that λ solved
    alone from λ_max: so how the path is warm-started never changes what ``auto`` compares."""
    edges, pts = geometric(n, radius, seed)
    if edges.size == 0:
        return
    rng = np.random.default_rng(seed)
    y = scale * np.abs(pts[:, 0] - 0.5) + rng.standard_normal(n)
    fit = trend_filter(y, 1.0, edges, order=1, lam="sure", n_lambdas=8)
    path = fit.params["path"]
    lams = path["lam"]
    for j in range(1, len(lams) - 1):
        alone = trend_filter(y, 1.0, edges, order=1, lam=[float(lams[0]), float(lams[j])])
        p = alone.params["path"]
        assert p["df"][-1] == path["df"][j]
        assert p["sure"][-1] == pytest.approx(path["sure"][j], rel=1e-9, abs=1e-9)
