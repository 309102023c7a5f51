"""Order 0 on 2-D lattices by accelerated alternating 1-D TV
(``dpgauss.denoise.trend_filter._tv2d``): against cvxpy + Clarabel, the min-cut exact
solver, its own certificate, and in ``trend_filter``."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.denoise import as_graph, trend_filter
from dpgauss.denoise.structure import lattice_edges

tv2d = importlib.import_module("dpgauss.denoise.trend_filter._tv2d")
gtv = importlib.import_module("dpgauss.denoise.trend_filter._graph_tv")
tf = importlib.import_module("dpgauss.denoise.trend_filter")
cp = pytest.importorskip("cvxpy")
pytestmark = pytest.mark.skipif(not tv2d.available(), reason="numba is not installed")

TOL = 1e-6
SHAPES = [(2, 2), (2, 11), (11, 2), (5, 8), (9, 6), (13, 13)]


def incidence(shape: tuple[int, int]):
    return as_graph(lattice_edges(shape), shape[0] * shape[1]).incidence


def objective(y: np.ndarray, beta: np.ndarray, d, lam: float) -> float:
    return 0.5 * float(np.sum((y - beta) ** 2)) + lam * float(np.abs(d @ beta).sum())


def clarabel(y: np.ndarray, d, lam: float) -> float:
    beta = cp.Variable(y.size)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(y - beta) + lam * cp.norm1(d @ beta)))
    problem.solve(solver="CLARABEL", tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10)
    return objective(y, np.asarray(beta.value), d, lam)


def blocks(shape: tuple[int, int], seed: int, noise: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    h, w = shape
    levels = rng.integers(-2, 3, (3, 3)).astype(float)
    truth = levels[np.arange(h) * 3 // h][:, np.arange(w) * 3 // w]
    return (truth + noise * rng.standard_normal(shape)).ravel()


def certify(y: np.ndarray, shape: tuple[int, int], lam: float, fit) -> float:
    """The relative duality gap recomputed from the returned β and flows (independently of
    the kernel): feasibility ``|u| ≤ λ`` and ``P(β) − D(u)``."""
    h, w = shape
    assert fit.uh.shape == (h, w - 1) and fit.uv.shape == (h - 1, w)
    assert np.all(np.abs(fit.uh) <= lam) and np.all(np.abs(fit.uv) <= lam)
    dtu = np.zeros(shape)
    dtu[:, :-1] += fit.uh
    dtu[:, 1:] -= fit.uh
    dtu[:-1, :] += fit.uv
    dtu[1:, :] -= fit.uv
    d = incidence(shape)
    p = objective(y, fit.beta, d, lam)
    r = y - dtu.ravel()
    dual = 0.5 * float(y @ y) - 0.5 * float(r @ r)
    return (p - dual) / p


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("lam", [0.03, 0.4, 2.0])
def test_matches_cvxpy_and_certifies_its_gap(shape, lam):
    y = blocks(shape, 3)
    fit = tv2d.LatticeTV(y, shape, TOL, 5000).solve(lam)
    d = incidence(shape)
    p = objective(y, fit.beta, d, lam)
    assert fit.objective == pytest.approx(p, rel=1e-12)
    assert fit.certified and fit.gap <= TOL * p
    assert certify(y, shape, lam, fit) <= TOL
    ref = clarabel(y, d, lam)
    assert p - ref <= TOL * ref


@pytest.mark.parametrize("shape", [(2, 40), (40, 2), (30, 47), (9, 17), (17, 8), (2, 9)])
@pytest.mark.parametrize("lam", [0.05, 0.5, 3.0])
def test_matches_the_min_cut_exact_solver(shape, lam):
    """Same objective as the exact min-cut decomposition, and (a tight tolerance) the same
    fused groups: equal levels to rounding.  Widths around the column blocks of 8 too."""
    y = blocks(shape, 11)
    d = incidence(shape)
    exact = gtv.graph_tv(y, as_graph(lattice_edges(shape), y.size).edges, lam)
    p_exact = objective(y, exact.beta, d, lam)
    fit = tv2d.LatticeTV(y, shape, TOL, 5000).solve(lam)
    assert objective(y, fit.beta, d, lam) - p_exact <= TOL * p_exact
    tight = tv2d.LatticeTV(y, shape, 1e-13, 20_000).solve(lam)
    assert tight.polished
    np.testing.assert_allclose(tight.beta, exact.beta, atol=1e-8 * (1 + np.abs(y).max()))


def test_extremes_constant_checkerboard_tiny_and_huge_lambda():
    shape = (7, 10)
    d = incidence(shape)
    const = np.full(70, 2.5)
    fit = tv2d.LatticeTV(const, shape, TOL, 100).solve(1.0)
    np.testing.assert_array_equal(fit.beta, const)
    assert fit.gap == 0.0
    board = np.where(np.add.outer(np.arange(7), np.arange(10)) % 2 == 0, 1.0, -1.0).ravel()
    for lam in (1e-9, 0.05, 0.2, 10.0):
        fit = tv2d.LatticeTV(board, shape, 1e-9, 20_000).solve(lam)
        p = objective(board, fit.beta, d, lam)
        assert fit.certified and fit.iterations < 20_000
        if lam < 1e-6:  # P is tiny: the gap is rounding relative to |y| (module doc)
            assert fit.gap <= 1e-12 * np.abs(d @ fit.beta).sum()
            np.testing.assert_allclose(fit.beta, board, atol=10 * lam)
        else:
            assert fit.gap <= 1e-9 * p
            assert p - clarabel(board, d, lam) <= 1e-8 * p
    y = blocks(shape, 5, noise=100.0)
    tiny = tv2d.LatticeTV(y, shape, TOL, 100).solve(1e-10)
    np.testing.assert_allclose(tiny.beta, y, atol=1e-8)
    huge = tv2d.LatticeTV(y, shape, TOL, 100).solve(1e6)
    np.testing.assert_allclose(huge.beta, y.mean(), rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    h=st.integers(2, 6),
    w=st.integers(2, 6),
    seed=st.integers(0, 2**16),
    lam=st.floats(1e-3, 5.0),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
)
def test_property_certified_and_no_worse_than_the_exact_solver(h, w, seed, lam, scale):
    rng = np.random.default_rng(seed)
    y = scale * np.round(rng.standard_normal(h * w), 1)  # ties and equal levels too
    lam *= scale
    shape = (h, w)
    fit = tv2d.LatticeTV(y, shape, TOL, 20_000).solve(lam)
    d = incidence(shape)
    p = objective(y, fit.beta, d, lam)
    assert certify(y, shape, lam, fit) <= TOL
    exact = gtv.graph_tv(y, as_graph(lattice_edges(shape), y.size).edges, lam)
    p_exact = objective(y, exact.beta, d, lam)
    assert p - p_exact <= TOL * max(p_exact, 1e-300)


def test_warm_path_equals_cold_solves():
    shape = (20, 31)
    y = blocks(shape, 2)
    d = incidence(shape)
    path = tv2d.LatticeTV(y, shape, TOL, 5000)
    for lam in 2.0 * 0.7 ** np.arange(8):
        warm = path.solve(float(lam))
        cold = tv2d.LatticeTV(y, shape, 1e-12, 20_000).solve(float(lam))
        p = objective(y, warm.beta, d, float(lam))
        assert p - cold.objective <= TOL * p
        assert warm.gap <= TOL * p


@pytest.mark.parametrize("shape", [(40, 23), (2, 60), (60, 2)])
def test_trend_filter_on_a_grid_uses_the_lattice_solver_and_agrees_with_min_cuts(shape):
    y = blocks(shape, 8).reshape(shape)
    fit = trend_filter(y, 1.0, shape, order=0, lam="sure", n_lambdas=12)
    assert fit.params["algorithm"] == tf._LATTICE_ALGORITHM
    exact = trend_filter(y, 1.0, shape, order=0, lam="sure", n_lambdas=12, solver="exact")
    assert "minimum-cut" in exact.params["algorithm"]
    path, ref = fit.params["path"], exact.params["path"]
    np.testing.assert_allclose(path["lam"], ref["lam"])
    assert np.all(path["gap"] <= TOL)
    assert np.all(path["objective"] - ref["objective"] <= TOL * ref["objective"])
    assert np.all(path["iterations"] >= 0) and fit.params["iterations"] > 0
    # refit at the chosen λ reproduces the estimate within the tolerance
    again = fit.refit(y)
    d = incidence(shape)
    lam = fit.params["lam"]
    p1 = objective(y.ravel(), fit.estimate.ravel(), d, lam)
    p2 = objective(y.ravel(), again.estimate.ravel(), d, lam)
    assert abs(p1 - p2) <= TOL * p1


def test_admm_and_exact_solvers_are_still_available_on_grids():
    shape = (12, 9)
    y = blocks(shape, 4).reshape(shape)
    admm = trend_filter(y, None, shape, order=0, lam=0.5, solver="admm")
    exact = trend_filter(y, None, shape, order=0, lam=0.5, solver="exact")
    auto = trend_filter(y, None, shape, order=0, lam=0.5)
    assert admm.params["algorithm"].startswith("ADMM")
    assert exact.params["algorithm"].startswith("minimum-cut")
    assert auto.params["algorithm"] == tf._LATTICE_ALGORITHM
    d = incidence(shape)
    ps = [objective(y.ravel(), f.estimate.ravel(), d, 0.5) for f in (admm, exact, auto)]
    assert max(ps) - min(ps) <= TOL * min(ps)


def test_an_uncertified_lambda_goes_to_the_min_cuts(monkeypatch):
    """With a budget too small to certify (forced), the minimum cuts finish each λ from the
    lattice solver's jumps and flow: exact results, and params say so."""
    monkeypatch.setattr(tf, "_LATTICE_MAX_ITER", 1)
    shape = (15, 14)
    y = blocks(shape, 6).reshape(shape)
    fit = trend_filter(y, 1.0, shape, order=0, lam="sure", n_lambdas=6)
    assert "minimum-cut decomposition where not certified" in fit.params["algorithm"]
    assert fit.params["rounds"] > 0
    assert np.all(fit.params["path"]["gap"] <= 1e-12)


def _line(y: np.ndarray, lam: float, signs: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    tv2d._kernel()
    x = np.empty(y.size)
    sg = np.zeros(y.size - 1, dtype=np.int8) if signs is None else signs.astype(np.int8)
    tv2d._line(y, y.size, lam, x, sg, signs is not None)
    return x, sg


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 60),
    seed=st.integers(0, 2**16),
    lam=st.sampled_from([1e-3, 0.1, 0.5, 2.0, 50.0]),
    start=st.sampled_from(["exact", "nearby", "random", "flat"]),
)
def test_warm_line_is_exact_whatever_the_recorded_signs(n, seed, lam, start):
    """A warm 1-D solve (verified segments, Condat's scan where they fail, retreats on a
    wrong jump sign) returns the exact 1-D TV solution from any sign record: that of the
    same input, of a nearby one, random signs or none; and records its own jump signs."""
    from dpgauss.denoise.trend_filter._tv1d import tv1d

    rng = np.random.default_rng(seed)
    y = np.round(rng.standard_normal(n) * rng.choice([0.3, 1.0, 3.0]), 1)  # ties too
    cold, cold_signs = _line(y, lam, None)
    if n >= 2:
        np.testing.assert_allclose(cold, tv1d(y, lam)[0], rtol=0, atol=1e-12)
    if start == "exact":
        signs = cold_signs
    elif start == "nearby":
        signs = _line(y + 0.2 * rng.standard_normal(n), lam, None)[1]
    elif start == "random":
        signs = rng.integers(-1, 2, max(n - 1, 0))
    else:
        signs = np.zeros(max(n - 1, 0))
    warm, warm_signs = _line(y, lam, signs)
    np.testing.assert_allclose(warm, cold, rtol=0, atol=1e-12 * (1 + np.abs(y).max()))
    jump = warm[:-1] - warm[1:]
    real = np.abs(jump) > 1e-9  # equal levels may carry either sign (a zero jump)
    np.testing.assert_array_equal(warm_signs[real], np.sign(jump[real]))


def test_a_lattice_needs_two_rows_and_columns():
    with pytest.raises(ValueError, match="at least 2 rows"):
        tv2d.LatticeTV(np.zeros(5), (1, 5), TOL, 10)
