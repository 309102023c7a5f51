"""The direct route of order 0 on chains and on the chain fibres of products (``_chain``,
``_fibres``) against the general route it replaces there (issue #31 item 2)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from dpgauss.denoise import Graph, as_graph, trend_filter
from dpgauss.denoise.structure import Structure
from dpgauss.denoise.trend_filter import _fibres, _tv1d
from dpgauss.release.domains.axes import product_edges

TF = importlib.import_module("dpgauss.denoise.trend_filter")


def _both(monkeypatch: pytest.MonkeyPatch, y: np.ndarray, sigma, structure, **kw):
    """(direct route, general route) of the same call."""
    fast = trend_filter(y, sigma, structure, **kw)
    with monkeypatch.context() as m:
        m.setattr(TF, "layout_of_structure", lambda known: None)
        general = trend_filter(y, sigma, structure, **kw)
    return fast, general


def _signal(rng: np.random.Generator, n: int, kind: int) -> np.ndarray:
    if kind == 0:
        return rng.standard_normal(n)
    if kind == 1:  # ties: small integer counts
        return rng.integers(0, 3, n).astype(np.float64)
    if kind == 2:  # constant
        return np.full(n, 0.1)
    return np.repeat(rng.normal(0.0, 3.0, 5), n)[:n] + 0.1 * rng.standard_normal(n)


@pytest.mark.parametrize("kind", [0, 1, 2, 3])
@pytest.mark.parametrize("lam", ["sure", 0.5, 0.0, 1e6])
def test_a_chain_gives_what_the_general_route_gives(monkeypatch, kind, lam):
    rng = np.random.default_rng(31 + kind)
    for n in [2, 3, 5, 17, 60]:
        y = _signal(rng, n, kind)
        fast, general = _both(monkeypatch, y, 1.0, (n,), order=0, lam=lam)
        if n == 2:  # not a lattice for the general route: its minimum cuts (or ADMM)
            np.testing.assert_allclose(fast.estimate, general.estimate, rtol=0, atol=1e-9)
            assert fast.params["df"] == general.params["df"]
            continue
        assert fast.params["algorithm"] == general.params["algorithm"]
        np.testing.assert_array_equal(fast.estimate, general.estimate)
        for key in ("df", "lam", "lam_max", "iterations", "converged"):
            assert fast.params[key] == general.params[key], (n, key)
        assert fast.risk == pytest.approx(general.risk, rel=1e-12, abs=1e-12)
        assert fast.params["gap"] == pytest.approx(general.params["gap"], abs=1e-14)
        if "path" in general.params:
            fp, gp = fast.params["path"], general.params["path"]
            np.testing.assert_array_equal(fp["lam"], gp["lam"])
            np.testing.assert_array_equal(fp["df"], gp["df"])
            np.testing.assert_allclose(fp["sure"], gp["sure"], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(fp["rss"], gp["rss"], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(fp["objective"], gp["objective"], rtol=1e-12, atol=1e-12)


def test_a_long_chain_and_its_forms(monkeypatch):
    """The chain as a grid, an edge array, a Graph or a Structure: one answer."""
    rng = np.random.default_rng(7)
    n = 20_000
    y = np.repeat(rng.normal(0.0, 3.0, 40), n // 40) + rng.standard_normal(n)
    fast, general = _both(monkeypatch, y, 1.0, (n,), order=0)
    np.testing.assert_array_equal(fast.estimate, general.estimate)
    assert fast.params["df"] == general.params["df"]
    assert fast.params["lam"] == general.params["lam"]
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    for st in (edges, as_graph(edges, n), Structure(graph=as_graph(edges, n), grid=(n,))):
        other = trend_filter(y, 1.0, st, order=0)
        np.testing.assert_array_equal(other.estimate, fast.estimate)
        assert other.risk == fast.risk
    # the fused pieces are df, and the estimate is piecewise constant on them
    jumps = np.count_nonzero(np.abs(np.diff(fast.estimate)) > 1e-9 * np.abs(y).max())
    assert fast.params["df"] == jumps + 1


@pytest.mark.parametrize("chain_axis", [0, 1])
@pytest.mark.parametrize("lam", ["sure", 0.7])
def test_products_give_what_the_minimum_cuts_give(monkeypatch, chain_axis, lam):
    pytest.importorskip("numba")
    rng = np.random.default_rng(11 + chain_axis)
    for trial in range(12):
        k, length = int(rng.integers(1, 5)), int(rng.integers(2, 30))
        shape = [length, k] if chain_axis == 0 else [k, length]
        edges: list[np.ndarray | None] = [None, None]
        edges[chain_axis] = np.stack([np.arange(length - 1), np.arange(1, length)], axis=1)
        n = k * length
        g = as_graph(product_edges(shape, edges), n)
        assert _fibres.layout_of_edges(n, g.edges) is not None
        y = _signal(rng, n, trial % 4)
        fast, general = _both(monkeypatch, y, 1.0, g, order=0, lam=lam)
        if k > 1:
            assert "chains of the product" in fast.params["algorithm"]
        np.testing.assert_allclose(fast.estimate, general.estimate, rtol=0, atol=1e-12)
        assert fast.params["df"] == general.params["df"]
        assert fast.params["lam"] == general.params["lam"]
        assert fast.params["lam_max"] == general.params["lam_max"]
        assert fast.risk == pytest.approx(general.risk, rel=1e-12, abs=1e-12)


def test_a_chain_of_one_node_and_graphs_without_edges():
    y = np.array([3.0])
    res = trend_filter(y, 1.0, Graph(1, np.zeros((0, 2), dtype=np.int64)), order=0)
    np.testing.assert_array_equal(res.estimate, y)
    assert _fibres.layout_of_edges(1, np.zeros((0, 2), dtype=np.int64)) is None


@pytest.mark.parametrize("compiled", [True, False])
def test_layouts_are_recognised_exactly(monkeypatch, compiled):
    if not compiled:  # the numpy checks (no numba), also for the compiled one's misses
        monkeypatch.setattr(_fibres, "_compiled", ())

    def chain(n):
        return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)

    assert _fibres.layout_of_edges(5, chain(5)) == _fibres.Layout(1, 5, 1)
    prod = product_edges([3, 4], [None, chain(4)])
    assert _fibres.layout_of_edges(12, prod) == _fibres.Layout(3, 4, 1)
    prod = product_edges([4, 3], [chain(4), None])
    assert _fibres.layout_of_edges(12, prod) == _fibres.Layout(1, 4, 3)
    prod = product_edges([2, 4, 3], [None, chain(4), None])
    assert _fibres.layout_of_edges(24, prod) == _fibres.Layout(2, 4, 3)
    # an edge across two fibres, a missing edge, a cycle, a 2-D lattice, a permuted path
    bad = chain(6).copy()
    bad[2] = [2, 4]
    assert _fibres.layout_of_edges(6, bad) is None
    assert _fibres.layout_of_edges(6, chain(6)[[0, 1, 3, 4]]) == _fibres.Layout(2, 3, 1)
    assert _fibres.layout_of_edges(6, chain(6)[1:]) is None  # node 0 alone: unequal chains
    assert _fibres.layout_of_edges(4, np.array([[0, 1], [1, 2], [2, 3], [0, 3]])) is None
    lattice = product_edges([3, 3], [chain(3), chain(3)])
    assert _fibres.layout_of_edges(9, lattice) is None
    assert _fibres.layout_of_edges(4, np.array([[0, 2], [1, 2], [1, 3]])) is None
    # any order of the edges; a repeated edge is not a layout
    assert _fibres.layout_of_edges(6, chain(6)[::-1]) == _fibres.Layout(1, 6, 1)
    assert _fibres.layout_of_edges(4, np.array([[0, 1], [0, 1], [2, 3]])) is None


def test_the_rows_kernel_is_tv1d_row_by_row(monkeypatch):
    """Each row's solution is tv1d's, and the certificate's rebuilt dual is tv1d's dual:
    its gap is tv1d's gap."""
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((7, 300)).cumsum(axis=1)
    rows[2] = np.round(rows[2])  # ties
    lam = 2.0
    for slack in (_tv1d.SLACK, -1):  # the scan, and every row by the dynamic programme
        monkeypatch.setattr(_tv1d, "SLACK", slack)
        x = _tv1d.tv1d_rows(rows, lam)
        tv = dot = dd = 0.0
        for f in range(rows.shape[0]):
            xf, uf = _tv1d.tv1d(rows[f], lam)
            np.testing.assert_array_equal(x[f], xf)
            uc = np.clip(uf, -lam, lam)
            d = xf[:-1] - xf[1:]
            delta = rows[f] - xf - np.concatenate([[uc[0]], np.diff(uc), [-uc[-1]]])
            tv += np.abs(d).sum()
            dot += d @ uc
            dd += delta @ delta
        rss, tv_, dot_, dd_, _, top = _fibres.certificate(rows, x, lam, 1e-9)
        assert np.isnan(top)
        assert rss == pytest.approx(float(np.sum((rows - x) ** 2)), rel=1e-12)
        assert tv_ == pytest.approx(tv, rel=1e-12)
        assert dot_ == pytest.approx(dot, rel=1e-12)
        assert lam * tv_ - dot_ + 0.5 * dd_ == pytest.approx(lam * tv - dot + 0.5 * dd, abs=1e-9)


def test_the_dual_is_the_least_norm_dual():
    """Running sums along the chain solve ``Dᵀu = y − ȳ``; λ_max is their largest size and
    the solution at λ_max is the mean (and just below it is not)."""
    rng = np.random.default_rng(3)
    y = rng.standard_normal(50)
    u = _fibres.dual(y.reshape(1, -1))[0]
    dtu = np.concatenate([[u[0]], np.diff(u), [-u[-1]]])
    np.testing.assert_allclose(dtu, y - y.mean(), atol=1e-13)
    means, scale = _fibres.scan(y.reshape(1, -1))
    lam_max = _fibres.lam_max(y.reshape(1, -1), means)
    assert lam_max == np.max(np.abs(u)) and scale == np.max(np.abs(y))
    x = _tv1d.tv1d_rows(y.reshape(1, -1), 0.3)
    assert _fibres.certificate(y.reshape(1, -1), x, 0.3, 0.0, means)[-1] == lam_max
    at = trend_filter(y, 1.0, (50,), order=0, lam=lam_max)
    assert at.params["df"] == 1
    below = trend_filter(y, 1.0, (50,), order=0, lam=lam_max * (1 - 1e-6))
    assert below.params["df"] == 2


def test_an_uncertified_lambda_goes_to_the_general_route(monkeypatch):
    chain_mod = importlib.import_module("dpgauss.denoise.trend_filter._chain")

    def bad_certificate(y, x, lam, atol, means=None):
        return 0.0, 0.0, -1.0, 1e300, 0, 1e300  # a huge ‖δ‖²: never certified

    monkeypatch.setattr(chain_mod, "certificate", bad_certificate)
    y = np.random.default_rng(2).standard_normal(40)
    res = trend_filter(y, 1.0, (40,), order=0, lam=0.5)
    assert "chains of the product" not in res.params["algorithm"]
    x, _ = _tv1d.tv1d(y, 0.5)
    np.testing.assert_array_equal(res.estimate, x)  # the general route's chain solver


def test_the_refit_and_nonnegative_and_admm_keep_their_routes():
    rng = np.random.default_rng(9)
    y = np.repeat([0.0, 4.0, 1.0], 30) + rng.standard_normal(90)
    res = trend_filter(y, 1.0, (90,), order=0)
    again = res.refit(y)
    np.testing.assert_array_equal(again.estimate, res.estimate)
    assert again.params["lam"] == res.params["lam"]
    clipped = trend_filter(y - 2.0, 1.0, (90,), order=0, nonnegative=True)
    assert np.all(clipped.estimate >= 0)
    admm = trend_filter(y, 1.0, (90,), order=0, lam=1.0, solver="admm")
    assert "ADMM" in admm.params["algorithm"]


def test_the_numpy_kernels_give_the_compiled_answer(monkeypatch):
    """Without numba (``_fibres``' kernels in numpy): the same fit to rounding."""
    rng = np.random.default_rng(13)
    y = np.repeat(rng.normal(0.0, 3.0, 6), 50) + rng.standard_normal(300)
    y[100:120] = 1.0  # ties
    compiled = trend_filter(y, 1.0, (300,), order=0)
    monkeypatch.setattr(_fibres, "_compiled", ())
    plain = trend_filter(y, 1.0, (300,), order=0)
    assert plain.params["df"] == compiled.params["df"]
    assert plain.params["lam"] == pytest.approx(compiled.params["lam"], rel=1e-12)
    np.testing.assert_allclose(plain.estimate, compiled.estimate, rtol=0, atol=1e-9)
    assert plain.risk == pytest.approx(compiled.risk, rel=1e-10)
    assert plain.params["gap"] < 1e-12
