"""Order-0 trend filtering with one σ per key (weighted fidelity ``½ Σ (yᵢ − βᵢ)²/σᵢ²``):
the weighted direct 1-D algorithm and the weighted minimum cuts against cvxpy + Clarabel and
their own KKT certificates, the heteroscedastic SURE's divergence, and the scaling identity
with the unweighted problem."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.denoise import as_graph, trend_filter
from dpgauss.denoise.trend_filter import _graph_tv, _tv1d

cp = pytest.importorskip("cvxpy")
NEEDS_NUMBA = pytest.mark.skipif(not _graph_tv.available(), reason="numba is not installed")


def chain(n: int) -> np.ndarray:
    return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)


def incidence(edges: np.ndarray, n: int) -> np.ndarray:
    d = np.zeros((edges.shape[0], n))
    d[np.arange(edges.shape[0]), edges[:, 0]] = 1.0
    d[np.arange(edges.shape[0]), edges[:, 1]] = -1.0
    return d


def objective(y, beta, w, d, lam) -> float:
    r = y - beta
    return 0.5 * float(r @ (w * r)) + lam * float(np.abs(d @ beta).sum())


def reference(y, w, d, lam) -> float:
    beta = cp.Variable(y.size)
    fit = 0.5 * cp.sum(cp.multiply(w, cp.square(y - beta)))
    cp.Problem(cp.Minimize(fit + lam * cp.norm1(d @ beta))).solve(
        solver="CLARABEL", tol_gap_abs=1e-11, tol_gap_rel=1e-11, tol_feas=1e-11
    )
    return objective(y, np.asarray(beta.value), w, d, lam)


def kkt_violation(y, w, edges, lam, beta, u) -> float:
    """Relative violation of ``W(y − β) = Dᵀu``, ``|u| ≤ λ``, ``u_e = λ sign((Dβ)_e)`` on
    jumps: zero certifies optimality."""
    n = y.size
    dtu = np.bincount(edges[:, 0], weights=u, minlength=n) - np.bincount(
        edges[:, 1], weights=u, minlength=n
    )
    db = beta[edges[:, 0]] - beta[edges[:, 1]]
    jump = np.abs(db) > 1e-9 * (1.0 + float(np.abs(y).max()))
    scale = lam + float(np.abs(w * y).max())
    return (
        max(
            float(np.abs(w * (y - beta) - dtu).max()),
            float(np.abs(u).max()) - lam,
            float(np.max(np.where(jump, np.abs(u - lam * np.sign(db)), 0.0), initial=0.0)),
        )
        / scale
    )


@pytest.fixture(params=["compiled", "pure Python", "dynamic programme"])
def kernel(request, monkeypatch):
    """The compiled scan, the plain loops, and the compiled dynamic programme (which takes
    over from the scan on smooth signals) with its check and fallback."""
    if request.param == "pure Python":
        monkeypatch.setattr(_tv1d, "_compiled", _tv1d._PYTHON)
    if request.param == "dynamic programme":
        monkeypatch.setattr(_tv1d, "SLACK", -1)
    return request.param


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(2, 50),
    seed=st.integers(0, 2**32 - 1),
    lam=st.sampled_from([1e-6, 0.05, 0.5, 3.0, 1e4]),
    spread=st.sampled_from([0.0, 1.0, 4.0, 14.0]),
    decimals=st.sampled_from([0, 1, 8]),
)
def test_weighted_1d_certifies_its_kkt_conditions(n, seed, lam, spread, decimals):
    """Weights spread over up to e^±42 (σ over 9 decades either way, as in a mean release
    whose counts run from 1 to 10⁹); rounded y makes exact ties."""
    rng = np.random.default_rng(seed)
    y = np.round(np.repeat(rng.normal(0, 3, 3), -(-n // 3))[:n] + rng.normal(0, 1, n), decimals)
    w = np.exp(spread * rng.standard_normal(n))
    x, u = _tv1d.tv1d(y, lam, w)
    assert kkt_violation(y, w, chain(n), lam, x, u) <= 1e-10


@NEEDS_NUMBA
@settings(max_examples=100, deadline=None)
@given(
    n=st.integers(2, 40),
    seed=st.integers(0, 2**32 - 1),
    lam=st.sampled_from([1e-6, 0.05, 0.5, 3.0, 1e4]),
    spread=st.sampled_from([0.0, 1.0, 4.0, 8.0]),
)
def test_weighted_min_cuts_certify_their_kkt_conditions(n, seed, lam, spread):
    """Weights over up to e^±24 (σ over 10 decades either way).  Beyond about 17 decades of
    weight the heaviest keys' levels are finer than a double's spacing and the certificate
    can fail (trend_filter then warns; docs/denoising.md)."""
    rng = np.random.default_rng(seed)
    e = rng.integers(0, n, size=(3 * n, 2))
    e = np.unique(np.sort(e[e[:, 0] != e[:, 1]], axis=1), axis=0)
    if e.size == 0:
        return
    y = np.round(rng.normal(0, 3, n), 1)
    w = np.exp(spread * rng.standard_normal(n))
    res = _graph_tv.graph_tv(y, e, lam, weight=w)
    assert res is not None
    assert kkt_violation(y, w, e, lam, res.beta, res.u) <= 1e-10


@pytest.mark.parametrize(
    "kind",
    ["chain", pytest.param("graph", marks=NEEDS_NUMBA), pytest.param("lattice", marks=NEEDS_NUMBA)],
)
@pytest.mark.parametrize("lam", [0.02, 0.3, 2.0])
def test_trend_filter_matches_cvxpy_with_one_sigma_per_key(kind, lam, kernel):
    rng = np.random.default_rng(11)
    if kind == "chain":
        n, edges = 45, chain(45)
    elif kind == "graph":
        g = nx.connected_watts_strogatz_graph(40, 4, 0.3, seed=3)
        n, edges = 40, np.array(list(g.edges()))
    else:
        n = 42
        edges = as_graph(nx.convert_node_labels_to_integers(nx.grid_2d_graph(6, 7)), n).edges
    sigma = np.exp(rng.uniform(-1.5, 1.5, n))
    y = np.repeat([0.0, 3.0, -1.0], -(-n // 3))[:n] + sigma * rng.standard_normal(n)
    res = trend_filter(y, sigma, edges, lam=lam)
    w = 1.0 / sigma**2
    d = incidence(edges, n)
    p, p_ref = objective(y, res.estimate, w, d, lam), reference(y, w, d, lam)
    assert p <= p_ref * (1 + 1e-7) + 1e-9
    assert res.params["converged"] and res.params["gap"] <= 1e-9
    assert "weighted" in res.params["algorithm"]


def test_the_scaling_identity_with_the_unweighted_problem():
    """σᵢ = c·(1 + tiny) ≈ c: the weighted solution at λ is the unweighted one at λc²,
    and the SURE values agree (to the tiny perturbation)."""
    rng = np.random.default_rng(5)
    n, c = 60, 2.5
    y = np.repeat([1.0, 5.0, 2.0], 20) + c * rng.standard_normal(n)
    sigma = c * (1.0 + 1e-13 * np.arange(n))
    weighted = trend_filter(y, sigma, chain(n), lam=0.4)
    plain = trend_filter(y, c, chain(n), lam=0.4 * c * c)
    np.testing.assert_allclose(weighted.estimate, plain.estimate, rtol=1e-9, atol=1e-9)
    assert weighted.risk == pytest.approx(plain.risk, rel=1e-9)
    assert weighted.params["df"] == plain.params["df"]


@pytest.mark.parametrize("kind", ["chain", pytest.param("graph", marks=NEEDS_NUMBA)])
def test_sure_path_picks_the_minimum_and_refits(kind):
    rng = np.random.default_rng(8)
    n = 120
    edges = chain(n) if kind == "chain" else np.concatenate([chain(n), [[n - 1, 0], [5, 60]]])
    sigma = np.where(np.arange(n) % 2 == 0, 0.5, 4.0)
    theta = np.repeat([0.0, 6.0, 2.0, 8.0], 30)
    y = theta + sigma * rng.standard_normal(n)
    res = trend_filter(y, sigma, edges)
    path = res.params["path"]
    assert res.risk == pytest.approx(float(np.min(path["sure"])))
    assert res.params["lam"] == pytest.approx(float(path["lam"][np.argmin(path["sure"])]))
    # the weighted fit beats the identity by far on a step signal
    assert float(np.sum((res.estimate - theta) ** 2)) < 0.3 * float(np.sum(sigma**2))
    # the frozen refit reproduces the estimate at the chosen λ
    np.testing.assert_allclose(res.refit(y).estimate, res.estimate, rtol=1e-12, atol=1e-12)
    lo, hi = res.interval(0.95, draws=8, rng=2)
    # each contains the estimate or is the raw y ± zσᵢ (issue #26's fallback)
    z = 1.959963984540054
    raw = np.isclose(lo, y - z * sigma) & np.isclose(hi, y + z * sigma)
    assert np.all(((lo <= res.estimate) & (res.estimate <= hi)) | raw)


def test_extreme_sigma_ratios_stay_finite_and_certified(kernel):
    """σ over 1e-6 … 1e6 (weights over 24 decades): precise keys pin their groups."""
    rng = np.random.default_rng(9)
    n = 50
    sigma = 10.0 ** rng.uniform(-6, 6, n)
    y = sigma * rng.standard_normal(n)
    res = trend_filter(y, sigma, chain(n))
    assert np.all(np.isfinite(res.estimate)) and np.isfinite(res.risk)
    assert res.params["converged"]
    precise = sigma < 1e-4
    assert np.all(np.abs(res.estimate[precise] - y[precise]) <= 1e-2)


@NEEDS_NUMBA
def test_a_mean_like_sigma_on_a_graph_is_certified_on_the_whole_path():
    """σᵢ ∝ 1/√countᵢ with counts over six decades (weights over six decades): every λ of
    the SURE path certified, no warning."""
    import warnings

    rng = np.random.default_rng(21)
    g = nx.connected_watts_strogatz_graph(300, 4, 0.2, seed=4)
    edges = np.array(list(g.edges()))
    counts = 10.0 ** rng.uniform(0, 6, 300)
    sigma = 50.0 / np.sqrt(counts)
    theta = np.where(np.arange(300) < 150, 20.0, 35.0)
    y = theta + sigma * rng.standard_normal(300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = trend_filter(y, sigma, edges)
    assert bool(np.all(res.params["path"]["gap"] <= 1e-6))
    assert float(np.sum((res.estimate - theta) ** 2)) < 0.5 * float(np.sum(sigma**2))
