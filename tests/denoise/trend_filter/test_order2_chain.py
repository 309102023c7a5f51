"""Order 2 on chains: interior point + active set + exact faces, against cvxpy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.linalg.lapack
import scipy.sparse.linalg

from dpgauss.denoise import as_graph
from dpgauss.denoise.trend_filter import (
    _DUAL_ALGORITHM,
    _degrees_of_freedom,
    _least_norm_dual,
    _make_operator,
    trend_filter,
)
from dpgauss.denoise.trend_filter._dual_ipm import BoxIPM
from dpgauss.denoise.trend_filter._dual_newton import DualNewton
from dpgauss.denoise.trend_filter._exact_face import ChainFace, chain_operator

cp = pytest.importorskip("cvxpy")

from .test_trend_filter import difference_matrix, objective, reference_objective  # noqa: E402

RTOL = 1e-6


def chain(n: int) -> np.ndarray:
    return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)


def signal(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    x = np.linspace(0.0, 1.0, n)
    if kind == "linear":  # piecewise linear: kinks
        s = sum(rng.normal(0.0, 20.0) * np.maximum(x - k, 0.0) for k in rng.uniform(0, 1, 4))
    elif kind == "quadratic":  # piecewise quadratic: the model of order 2
        s = sum(rng.normal(0.0, 200.0) * np.maximum(x - k, 0.0) ** 2 for k in rng.uniform(0, 1, 3))
    else:  # noise only
        s = np.zeros(n)
    return s + rng.standard_normal(n)


def lam_max(y: np.ndarray, n: int) -> float:
    op = _make_operator(as_graph(chain(n), n), 2)
    return float(np.max(np.abs(_least_norm_dual(op, y))))


def reference(y: np.ndarray, n: int, lam: float) -> tuple[float, set[int]] | None:
    """cvxpy + Clarabel (tight tolerances): its objective and the df of its solution, the
    rows of ``Δβ`` thresholded at three relative levels (Clarabel leaves ~10⁻⁴ of the largest
    jump on rows next to a kink); None if Clarabel fails (it does near
    ``λ_max`` on hundreds of nodes, where ``λ`` is 10⁸ times ``y``)."""
    mat = difference_matrix(chain(n), n, 2)
    beta = cp.Variable(n)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(y - beta) + lam * cp.norm1(mat @ beta)))
    try:
        problem.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    except cp.error.SolverError:
        return None
    if problem.status != cp.OPTIMAL:
        return None
    b = np.asarray(beta.value)
    d = np.abs(mat @ b)
    op = _make_operator(as_graph(chain(n), n), 2)
    dfs = {_degrees_of_freedom(op, d <= tau * d.max()) for tau in (1e-3, 1e-4, 1e-6)}
    return objective(y, b, mat, lam), dfs


@pytest.mark.parametrize("n", [6, 50, 400])
@pytest.mark.parametrize("kind", ["linear", "quadratic", "noise"])
def test_matches_cvxpy_objective_and_df(n, kind):
    rng = np.random.default_rng(n + len(kind))
    y = signal(kind, n, rng)
    mat = difference_matrix(chain(n), n, 2)
    top = lam_max(y, n)
    checked = 0
    for ratio in (0.999, 0.3, 1e-2, 1e-4, 1e-7):
        lam = ratio * top
        fit = trend_filter(y, None, chain(n), order=2, lam=lam)
        assert fit.params["converged"] and fit.params["gap"] <= 1e-6
        assert fit.params["iterations"] == 0  # no ADMM
        ref = reference(y, n, lam)
        if ref is None:
            continue
        ours = objective(y, fit.estimate, mat, lam)
        assert ours - ref[0] <= RTOL * max(ours, ref[0]), (ratio, ours, ref[0])
        if ratio < 0.999:  # just below λ_max the one kink is far below Clarabel's accuracy
            assert fit.params["df"] in ref[1], (ratio, fit.params["df"], ref[1])
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("n", [50, 400, 4000])
def test_one_kink_just_below_lam_max(n):
    """Just below λ_max the solution has one kink, where the least-norm dual point is
    largest, however small its jump: df = 2 (Clarabel cannot resolve it)."""
    y = signal("linear", n, np.random.default_rng(n + 7))
    op = _make_operator(as_graph(chain(n), n), 2)
    u_ls = _least_norm_dual(op, y)
    top = float(np.max(np.abs(u_ls)))
    lam = (1 - 1e-4) * top
    fit = trend_filter(y, None, chain(n), order=2, lam=lam)
    assert fit.params["df"] == 2 and fit.params["gap"] <= 1e-6
    kinks = np.flatnonzero(op.matrix @ fit.estimate.ravel())
    assert kinks.size == 1
    # at a row where the projection's dual point leaves the box (on 4,000 nodes the top
    # two neighbours agree to 10⁻⁸, below the accuracy of u_ls itself)
    assert abs(u_ls[kinks[0]]) >= lam
    above = trend_filter(y, None, chain(n), order=2, lam=top)
    assert above.params["df"] == 1


@pytest.mark.parametrize("n", [1000, 4000])
def test_sure_path_certified_without_admm(n):
    y = signal("linear", n, np.random.default_rng(0))
    fit = trend_filter(y, 1.0, chain(n), order=2, lam="sure")
    path = fit.params["path"]
    assert fit.params["algorithm"] == f"{_DUAL_ALGORITHM} (banded)"
    assert np.all(path["iterations"] == 0)
    assert np.all(path["gap"] <= 1e-6)  # certified at every λ, λ_max included
    assert path["df"][0] == 1 and path["df"][-1] > 1


def test_path_objectives_match_cvxpy_on_1000_nodes():
    """The benchmark's case at 1,000 nodes: on each λ of the path where Clarabel reports
    success, our objective is not above its objective by more than the tolerance."""
    n = 1000
    y = signal("linear", n, np.random.default_rng(1))
    mat = difference_matrix(chain(n), n, 2)
    path = trend_filter(y, 1.0, chain(n), order=2, lam="sure").params["path"]
    checked = 0
    for lam, ours in zip(path["lam"][1::3], path["objective"][1::3], strict=True):
        try:
            ref = reference_objective(y, mat, float(lam))
        except cp.error.SolverError:
            continue
        assert ours - ref <= RTOL * ref, (lam, ours, ref)
        checked += 1
    assert checked >= 4


def check_snap(face: ChainFace, mat, x: np.ndarray, sign: np.ndarray) -> np.ndarray:
    snapped = face.snap(x, sign)
    assert snapped is not None
    dxs = mat @ snapped
    assert np.all(dxs[sign == 0] == 0.0)  # exactly, in floating point
    assert np.all(np.sign(dxs[sign != 0]) == sign[sign != 0])
    return snapped


@pytest.mark.parametrize("n", [5, 6, 7, 12, 40])
def test_snapped_random_faces_of_short_chains(n):
    """Any face (either end row active or free) of a short chain, where the floating-point
    face solution is accurate: the snapped point is on it exactly and next to it."""
    rng = np.random.default_rng(n)
    mat = chain_operator(n)
    assert ChainFace.matches(mat)
    y = signal("linear", n, rng)
    solver = DualNewton(mat, y, np.zeros(n, dtype=np.int64), ground_rows=False)
    face = ChainFace(n)
    for trial in range(8):
        rows = rng.choice(n - 1, size=min(n - 2, 1 + trial % 3), replace=False)
        if trial >= 6:
            rows = np.array([0, n - 2]) if trial == 6 else np.array([n - 2])
        sign = np.zeros(n - 1)
        sign[rows] = 1.0
        solved = solver.face(0.1, sign, np.zeros(n - 1))
        assert solved is not None
        x = solved[1]
        dx = mat @ x
        sign = np.where(sign != 0, np.sign(dx), 0.0)  # the signs the face actually has
        snapped = check_snap(face, mat, x, sign)
        assert np.max(np.abs(snapped - x)) <= 1e-9 * np.max(np.abs(x))


@pytest.mark.parametrize("n", [360, 1024, 4000])
def test_snapped_solutions_certify(n):
    """On the exact supports of a path (n with many divisors, and a power of two): the
    snapped fit is exactly on its face and certifies a gap no larger than 10⁻⁸ relative."""
    y = signal("quadratic", n, np.random.default_rng(n))
    mat = chain_operator(n)
    solver = DualNewton(mat, y, np.zeros(n, dtype=np.int64), ground_rows=False)
    assert solver.exact_face is not None
    top = lam_max(y, n)
    for ratio in (0.9, 0.1, 1e-3, 1e-5):
        lam = ratio * top
        res = solver.solve(lam, np.zeros(n - 1), 1e-6)
        assert res is not None and res.exact
        sign = np.where(res.free, 0.0, np.sign(res.dbeta))
        u, x = solver.face(lam, sign, res.u)
        snapped = check_snap(solver.exact_face, mat, x, sign)
        # the congruence may move one jump by up to n/2 units of h ~ 2⁻⁴⁸ max|x|: x' − x
        # is then ~10⁻⁵ max|x|, along the face, where it costs only ½‖x' − x‖²
        assert np.max(np.abs(snapped - x)) <= 1e-4 * np.max(np.abs(x))
        r = y - snapped
        primal = 0.5 * float(r @ r) + lam * float(np.abs(mat @ snapped).sum())
        assert solver.gap(lam, snapped, mat @ snapped, u) <= 1e-8 * primal


def test_chain_face_recognises_only_the_chain_operator():
    assert not ChainFace.matches(difference_matrix(chain(8), 8, 1))
    shuffled = difference_matrix(np.array([[0, 2], [2, 1], [1, 3], [3, 4], [4, 5]]), 6, 2)
    assert not ChainFace.matches(shuffled)
    assert not ChainFace.matches(chain_operator(4))  # too short for the recurrence
    assert ChainFace.matches(difference_matrix(chain(9), 9, 2))


def test_interior_point_finds_the_support():
    """The rows the IPM sees at their bounds are the exact solution's support."""
    n = 300
    y = signal("quadratic", n, np.random.default_rng(3))
    op = _make_operator(as_graph(chain(n), n), 2)
    solver = DualNewton(op.matrix, y, op.components, ground_rows=False)
    assert isinstance(solver.ipm, BoxIPM) and solver.ipm.band is not None
    lam = 1e-3 * lam_max(y, n)
    point = solver.ipm.run(lam, np.zeros(op.m), 1e-10, 80)
    assert point is not None and point.steps < 40
    assert np.all(np.abs(point.u) < lam)
    res = solver.solve(lam, np.zeros(op.m), 1e-6)
    assert res is not None and res.exact
    exact_sign = np.where(res.free, 0.0, np.sign(res.dbeta))
    np.testing.assert_array_equal(point.sign(lam), exact_sign)


def test_no_dense_or_sparse_lu_factorisation(monkeypatch):
    """On a chain the whole order-2 (and order-1) path uses banded factorisations only."""
    calls: list[str] = []

    def forbid(name):
        def boom(*args, **kwargs):
            calls.append(name)
            raise AssertionError(f"{name} called")

        return boom

    for mod, names in (
        (np.linalg, ("solve", "inv", "lstsq", "cholesky", "qr", "svd", "eig", "eigh")),
        (
            scipy.linalg,
            ("solve", "inv", "lstsq", "lu", "lu_factor", "cho_factor", "cholesky", "qr", "svd"),
        ),
        (scipy.linalg.lapack, ("dgesv", "dgetrf", "dpotrf", "dsytrf", "dgeqrf", "dgesdd")),
        (scipy.sparse.linalg, ("splu", "spsolve", "factorized")),
    ):
        for name in names:
            monkeypatch.setattr(mod, name, forbid(f"{mod.__name__}.{name}"))
    n = 800
    for order in (1, 2):
        y = signal("linear", n, np.random.default_rng(order))
        fit = trend_filter(y, 1.0, chain(n), order=order, lam="sure")
        assert fit.params["algorithm"] == f"{_DUAL_ALGORITHM} (banded)"
        assert np.all(fit.params["path"]["gap"] <= 1e-6)
    assert calls == []
