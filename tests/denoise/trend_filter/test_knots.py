"""Order 1 on a chain: the active set on the knots (``_knots``) against the banded route.

The knot faces must be the faces of ``_dual_newton`` (the projection onto the piecewise-linear
functions with those knots and flat ends, and the dual that reproduces ``y − x``), and the
SURE path through them must be the path without them: the same df at every λ, the same
chosen λ, SURE and estimate to rounding.
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.denoise import as_graph, trend_filter

_knots = importlib.import_module("dpgauss.denoise.trend_filter._knots")
_dual_newton = importlib.import_module("dpgauss.denoise.trend_filter._dual_newton")

NEEDS_NUMBA = pytest.mark.skipif(_knots.kernel() is None, reason="numba is not installed")


def _chain(n: int) -> np.ndarray:
    return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)


def _laplacian(n: int) -> sp.csr_matrix:
    return sp.csr_matrix(as_graph(_chain(n), n).laplacian, dtype=np.float64)


def _signal(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    x = np.linspace(0.0, 1.0, n)
    if kind == "ramps":
        knots = np.sort(rng.uniform(0.0, 1.0, 6))
        return np.interp(x, knots, rng.normal(0.0, 5.0, 6))
    if kind == "steps":
        return np.repeat(rng.normal(0.0, 3.0, 5), n // 5 + 1)[:n]
    if kind == "rough":
        return 50.0 * rng.standard_normal(n)
    return 5.0 * np.sin(10.0 * x)


def test_the_face_is_the_projection_on_the_knots_splines():
    """``_face`` (plain Python, no numba needed): ``x`` is the least-squares projection of
    ``y − λLs`` onto the piecewise-linear functions with these knots and flat ends (dense
    least squares), ``u`` is λs on the knots and solves ``Lu = y − x``."""
    rng = np.random.default_rng(3)
    face = getattr(_knots._face, "py_func", _knots._face)
    for n, knots in [(12, [0, 5, 11]), (30, [4, 9, 10, 22]), (25, [13]), (40, [0, 39]), (9, [8])]:
        y = rng.normal(0.0, 2.0, n)
        lam = 3.7
        knots_a = np.array(knots, dtype=np.int64)
        signs = rng.choice([-1.0, 1.0], knots_a.size)
        y0, y1 = _knots.prefix_sums(y)
        c, x, u = np.empty(n), np.empty(n), np.empty(n)
        assert face(y, y0, y1, lam, knots_a, signs, c, x, u)
        lap = _laplacian(n).toarray()
        s = np.zeros(n)
        s[knots_a] = signs
        z = y - lam * lap @ s
        basis = np.stack(
            [
                np.interp(np.arange(n), knots_a, np.eye(knots_a.size)[k])
                for k in range(knots_a.size)
            ],
            axis=1,
        )
        coef = np.linalg.lstsq(basis, z, rcond=None)[0]
        np.testing.assert_allclose(x, basis @ coef, rtol=0, atol=1e-10 * (1 + np.abs(z).max()))
        np.testing.assert_array_equal(u[knots_a], lam * signs)
        np.testing.assert_allclose(lap @ u, y - x, rtol=0, atol=1e-9 * (1 + np.abs(u).max()))


def _both_routes(y: np.ndarray, sigma: float, g) -> tuple:
    """Order 1's SURE path on ``g`` by the knot route (with, per λ, whether the knots
    finished it) and by the banded route (the knot kernel made unavailable)."""
    finished: list[bool] = []
    spy = _dual_newton.DualNewton._knot_pdas

    def counting(self, *args):
        res = spy(self, *args)
        finished.append(isinstance(res, _dual_newton.DualSolution))
        return res

    mp = pytest.MonkeyPatch()
    mp.setattr(_dual_newton.DualNewton, "_knot_pdas", counting)
    try:
        fast = trend_filter(y, sigma, g, order=1)
    finally:
        mp.undo()
    mp.setattr(_knots, "_compiled", None)
    mp.setattr(_knots, "_tried", True)
    try:
        slow = trend_filter(y, sigma, g, order=1)
    finally:
        mp.undo()
    return fast, slow, finished


@NEEDS_NUMBA
def test_the_knots_solve_the_path_of_the_chain_cases():
    """The 4,000-bin chain of ``benchmarks/bench_auto.py`` (8 flat steps, σ = 1): the knot
    route is taken and gives the path of the banded route (df at every λ, chosen λ)."""
    rng = np.random.default_rng(17)
    y = np.repeat(rng.normal(0.0, 3.0, 8), 500) + rng.standard_normal(4000)
    fast, slow, calls = _both_routes(y, 1.0, as_graph(_chain(4000), 4000))
    assert sum(calls) >= 30  # most λ finished on the knots
    np.testing.assert_array_equal(fast.params["path"]["df"], slow.params["path"]["df"])
    np.testing.assert_allclose(fast.params["path"]["sure"], slow.params["path"]["sure"], rtol=1e-9)
    assert fast.params["lam"] == slow.params["lam"]
    np.testing.assert_allclose(fast.estimate, slow.estimate, rtol=0, atol=1e-9)


@NEEDS_NUMBA
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(["ramps", "steps", "rough", "smooth"]),
    n=st.integers(min_value=2, max_value=800),
    scale=st.sampled_from([1e-6, 1e-2, 1.0, 1e3, 1e6]),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_the_knot_path_is_the_banded_path(kind, n, scale, seed):
    """Property: on random chains (2 to 800 nodes, data from 10⁻⁶ to 10⁶), the SURE path with
    the knot route has the df of the banded route at every λ, the same chosen λ, and SURE
    and estimate equal to rounding."""
    rng = np.random.default_rng(seed)
    y = scale * (_signal(kind, n, rng) + rng.standard_normal(n))
    fast, slow, finished = _both_routes(y, scale, as_graph(_chain(n), n))
    if n >= 20:
        assert any(finished)  # the knots solved some λ of the path
    if "path" not in slow.params:  # y in the null space
        np.testing.assert_allclose(fast.estimate, slow.estimate, rtol=1e-12, atol=0)
        return
    np.testing.assert_array_equal(fast.params["path"]["df"], slow.params["path"]["df"])
    s2 = scale**2
    np.testing.assert_allclose(
        fast.params["path"]["sure"], slow.params["path"]["sure"], rtol=1e-9, atol=1e-9 * n * s2
    )
    assert fast.params["lam"] == slow.params["lam"]
    np.testing.assert_allclose(
        fast.estimate, slow.estimate, rtol=0, atol=1e-7 * (np.abs(y).max() + scale)
    )


def test_only_a_chain_labelled_in_order_takes_the_knots():
    """The knot route needs the path's own Laplacian: not a relabelled path, nor a cycle."""
    for n in (2, 3, 50):
        assert _dual_newton._is_path_laplacian(_laplacian(n))
    perm = np.random.default_rng(0).permutation(50)
    scrambled = as_graph(np.stack([perm[:-1], perm[1:]], axis=1), 50).laplacian
    cycle = as_graph(np.concatenate([_chain(50), [[0, 49]]]), 50).laplacian
    for mat in (scrambled, cycle, sp.identity(5)):
        assert not _dual_newton._is_path_laplacian(sp.csr_matrix(mat, dtype=np.float64))
