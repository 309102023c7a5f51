"""The capacitance route of the order-1 face solver (:mod:`trend_filter._capacitance`).

Against the existing routes: the faces against the sparse LU of the augmented system, and
whole SURE paths against the same paths with the capacitance route switched off (the CG
route on factorisations of ``(L²)_RR``), on random graphs of several families (2-D grids
in a scrambled order, random geometric and Delaunay graphs, random trees, graphs of several
components with isolated nodes), at λ near ``λ_max`` and near 0 and with σ tiny and huge.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import Delaunay, cKDTree

from dpgauss.denoise import as_graph
from dpgauss.denoise.trend_filter import _capacitance, _make_operator, _order1, trend_filter

from .test_order1 import augmented, face_rows

RTOL = 1e-6
KINDS = ["grid", "geometric", "delaunay", "tree", "components"]


def graph(kind: str, seed: int) -> tuple[np.ndarray, int, np.ndarray]:
    """``(edges, n, points)``: a random graph of the family, nodes in a random order, and a
    position in the unit square for each node (for smooth signals)."""
    rng = np.random.default_rng(seed)
    if kind == "grid":
        h, w = int(rng.integers(4, 12)), int(rng.integers(4, 12))
        idx = np.arange(h * w).reshape(h, w)
        edges = np.concatenate(
            [
                np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], axis=1),
                np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], axis=1),
            ]
        )
        r, c = np.divmod(np.arange(h * w), w)
        pts = np.stack([r / h, c / w], axis=1)
        n = h * w
    elif kind in ("geometric", "delaunay"):
        n = int(rng.integers(15, 120))
        pts = rng.uniform(size=(n, 2))
        if kind == "geometric":
            pairs = sorted(cKDTree(pts).query_pairs(float(rng.uniform(0.12, 0.3))))
            edges = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        else:
            tri = Delaunay(pts).simplices
            e = np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [0, 2]]])
            edges = np.unique(np.sort(e, axis=1), axis=0)
    elif kind == "tree":
        n = int(rng.integers(10, 120))
        parent = np.array([rng.integers(0, i) for i in range(1, n)], dtype=np.int64)
        edges = np.stack([parent, np.arange(1, n)], axis=1)
        pts = rng.uniform(size=(n, 2))
    elif kind == "components":
        # a geometric block, a path, a triangle and isolated nodes
        m = int(rng.integers(15, 60))
        pts_b = rng.uniform(size=(m, 2))
        block = np.array(sorted(cKDTree(pts_b).query_pairs(0.3)), dtype=np.int64).reshape(-1, 2)
        p = int(rng.integers(3, 20))
        path = np.stack([np.arange(p - 1), np.arange(1, p)], axis=1) + m
        tri = np.array([[0, 1], [1, 2], [0, 2]]) + m + p
        isolated = int(rng.integers(1, 5))
        n = m + p + 3 + isolated
        edges = np.concatenate([block, path, tri])
        pts = np.concatenate([pts_b, rng.uniform(size=(n - m, 2))])
    else:
        raise ValueError(kind)
    perm = rng.permutation(n)
    out = np.empty_like(pts)
    out[perm] = pts
    return perm[edges], n, out


@contextlib.contextmanager
def capacitance_off() -> Iterator[None]:
    with mock.patch.object(_order1, "_CAPACITANCE_MAX", -1):
        yield


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    seed=st.integers(0, 2**16),
    scale=st.sampled_from([1e-8, 1.0, 1e8]),
    spread=st.sampled_from([0.0, 1.0, 1e3, 1e6]),
)
def test_capacitance_faces_match_the_augmented_system(kind, seed, scale, spread):
    """A sequence of faces (active sets growing, shrinking, moving; grounds where a
    component has none): the capacitance route gives the augmented system's fit, on the
    face to the solver's rounding floor, for multipliers from 0 to 10⁶ × the data."""
    edges, n, _ = graph(kind, seed)
    op = _make_operator(as_graph(edges, n), 1)
    lap = op.matrix
    faces = _order1.FaceSolver(lap, 1e-13, op.components)
    rng = np.random.default_rng(seed)
    y = scale * rng.standard_normal(n)
    active: np.ndarray = np.zeros(0, dtype=np.int64)
    for size in (0, 1, 3, 8, n // 3, n // 3 + 2, 5, n // 2, 1):
        keep = active[: min(size, active.size) // 2]  # half the old ones stay
        fresh = rng.permutation(np.setdiff1d(np.arange(n), keep))[: max(size - keep.size, 0)]
        active = np.concatenate([keep, fresh]).astype(np.int64)
        rows = face_rows(op, active)
        u = rng.uniform(-1.0, 1.0, n) * scale * spread
        beta = y - lap @ u
        got = faces.solve(beta, rows)
        assert got is not None
        want = augmented(op, beta, rows)
        big = max(float(np.max(np.abs(beta))), 1e-300)
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-9 * big)
        floor = 1e-13 * float(np.max(np.abs(lap.data))) ** 2 * float(np.max(np.abs(got[1])))
        assert np.max(np.abs((lap @ got[1])[rows]), initial=0.0) <= floor
    assert faces.capacitance_solves > 0


@pytest.mark.parametrize("kind", KINDS)
def test_capacitance_route_falls_back_when_refused(kind, monkeypatch):
    """With every bordered Cholesky step refused (a singular capacitance matrix), a column
    cache of 2, or a preconditioner that does not reach the floor in CG's budget, the face
    goes to the factorisation route and gets the same fit."""
    edges, n, _ = graph(kind, 5)
    op = _make_operator(as_graph(edges, n), 1)
    lap = op.matrix
    rng = np.random.default_rng(1)
    active = rng.choice(n, 6, replace=False)
    rows = face_rows(op, active)
    beta = rng.standard_normal(n) - lap @ rng.uniform(-50.0, 50.0, n)
    want = augmented(op, beta, rows)
    big = float(np.max(np.abs(beta)))

    def check(faces: _order1.FaceSolver) -> None:
        got = faces.solve(beta, rows)
        assert got is not None
        np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-9 * big)
        assert faces.capacitance_solves == 0 and faces.factorisations >= 1

    with monkeypatch.context() as m:
        m.setattr(_capacitance, "PIVOT_MIN", 2.0)
        check(_order1.FaceSolver(lap, 1e-13, op.components))
    faces = _order1.FaceSolver(lap, 1e-13, op.components)
    faces.capacitance.max_columns = 2
    check(faces)
    faces = _order1.FaceSolver(lap, 1e-13, op.components)
    real = faces.capacitance.face

    def poor(removed, max_new):  # no preconditioning: CG does not converge in its budget
        solve = real(removed, max_new)
        return None if solve is None else (lambda r: np.where(removed, 0.0, r))

    faces.capacitance.face = poor  # type: ignore[method-assign]
    got = faces.solve(beta, rows)
    assert got is not None
    np.testing.assert_allclose(got[1], want[1], rtol=0, atol=1e-9 * big)
    assert faces.capacitance_refused == 1 and faces.capacitance_solves == 0


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    seed=st.integers(0, 2**16),
    sigma=st.sampled_from([1e-6, 1.0, 1e6]),
    strength=st.floats(0.0, 6.0),
)
def test_sure_path_is_the_path_without_the_capacitance_route(kind, seed, sigma, strength):
    """The SURE path and a λ list reaching ``λ_max (1 − 10⁻⁹)`` and ``10⁻⁹ λ_max`` give the
    same df at every λ, and SUREs and objectives within the solver's tolerance, with the
    capacitance route and without it; every λ is certified, none by ADMM."""
    edges, n, pts = graph(kind, seed)
    rng = np.random.default_rng(seed)
    y = sigma * (strength * np.abs(pts[:, 0] - 0.4) + 2.0 * (pts[:, 1] > 0.6))
    y = y + sigma * rng.standard_normal(n)
    got = trend_filter(y, sigma, edges, order=1, lam="sure", n_lambdas=8)
    with capacitance_off():
        ref = trend_filter(y, sigma, edges, order=1, lam="sure", n_lambdas=8)
    p, q = got.params["path"], ref.params["path"]
    np.testing.assert_array_equal(p["lam"], q["lam"])
    np.testing.assert_array_equal(p["df"], q["df"])
    np.testing.assert_allclose(p["sure"], q["sure"], rtol=1e-9, atol=1e-9 * n * sigma**2)
    assert np.all(p["gap"] <= RTOL) and np.all(p["iterations"] == 0)
    assert got.risk == pytest.approx(ref.risk, rel=1e-9, abs=1e-9 * n * sigma**2)
    lam_max = float(got.params["lam_max"])
    if lam_max > 0:
        lams = [lam_max * (1 - 1e-9), lam_max * 0.5, lam_max * 1e-3, lam_max * 1e-9]
        a = trend_filter(y, sigma, edges, order=1, lam=lams).params["path"]
        with capacitance_off():
            b = trend_filter(y, sigma, edges, order=1, lam=lams).params["path"]
        np.testing.assert_array_equal(a["df"], b["df"])
        assert np.all(a["gap"] <= RTOL)
        np.testing.assert_allclose(a["objective"], b["objective"], rtol=2 * RTOL)


def test_manhattan_sized_path_uses_the_capacitance_route():
    """On a 60 × 70 scrambled grid (4,200 nodes) the faces at large λ go through the
    capacitance route, with one factorisation of the grounded ``L²``, and the path is the
    one without it (df at every λ, SURE to 1e-9)."""
    edges, n, _ = graph("grid", 0)
    rng = np.random.default_rng(3)
    h, w = 60, 70
    idx = np.arange(h * w).reshape(h, w)
    edges = np.concatenate(
        [
            np.stack([idx[:, :-1].ravel(), idx[:, 1:].ravel()], axis=1),
            np.stack([idx[:-1, :].ravel(), idx[1:, :].ravel()], axis=1),
        ]
    )
    n = h * w
    perm = rng.permutation(n)
    r, c = np.divmod(np.arange(n), w)
    y = np.empty(n)
    y[perm] = 0.05 * np.abs(r - 25) + 2.0 * (c > 40) + rng.standard_normal(n)
    seen: list[_order1.FaceSolver] = []
    real = _order1.FaceSolver.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        seen.append(self)

    with mock.patch.object(_order1.FaceSolver, "__init__", spy):
        got = trend_filter(y, 1.0, perm[edges], order=1, lam="sure", n_lambdas=10)
    with capacitance_off():
        ref = trend_filter(y, 1.0, perm[edges], order=1, lam="sure", n_lambdas=10)
    assert len(seen) == 1
    faces = seen[0]
    assert faces.capacitance_solves > 0 and faces.capacitance.factorisations == 1
    np.testing.assert_array_equal(got.params["path"]["df"], ref.params["path"]["df"])
    np.testing.assert_allclose(got.params["path"]["sure"], ref.params["path"]["sure"], rtol=1e-9)
