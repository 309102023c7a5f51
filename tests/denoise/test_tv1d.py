"""The direct 1-D TV algorithm (order 0 on a chain) against the reference min-cut solver."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.denoise import _tv1d, trend_filter

from .exact_graph_tv import fused_lasso_dc


def chain(n: int) -> np.ndarray:
    return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)


def objective(y: np.ndarray, x: np.ndarray, lam: float) -> float:
    return 0.5 * float(np.sum((y - x) ** 2)) + lam * float(np.abs(np.diff(x)).sum())


@pytest.fixture(params=["compiled", "pure Python"])
def kernel(request, monkeypatch):
    """Both the numba-compiled kernel (when numba is installed) and the plain loop."""
    if request.param == "pure Python":
        monkeypatch.setattr(_tv1d, "_compiled", _tv1d._PYTHON)
    return request.param


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 60),
    seed=st.integers(0, 2**32 - 1),
    lam=st.sampled_from([1e-9, 1e-3, 0.1, 0.5, 2.0, 10.0, 1e6]),
    decimals=st.sampled_from([0, 1, 8]),
)
def test_matches_the_reference_and_certifies(n, seed, lam, decimals):
    """The KKT conditions hold to rounding (Dᵀu = y − x: the prefix sums of y − x end at 0;
    |u| ≤ λ; u = −λ·sign of every jump), which certify optimality; and where the min-cut
    reference can run (its integer capacities need λ not far below the data's scale) the
    objectives agree to 1e-9.  Rounding y makes exact ties."""
    rng = np.random.default_rng(seed)
    y = np.round(np.repeat(rng.normal(0, 3, 3), -(-n // 3))[:n] + rng.normal(0, 1, n), decimals)
    x, u = _tv1d.tv1d(y, lam)
    # rounding: levels are formed from y ± λ (so errors ~ λ·eps) and u is a prefix sum
    atol = 1e-12 * (float(np.abs(y).sum()) + n * lam)
    assert abs(float(np.sum(y - x))) <= atol
    assert np.max(np.abs(u)) <= lam + atol
    d = np.diff(x)
    jumps = np.abs(d) > 1e-12 * (float(np.abs(y).max()) + lam)  # (equal levels to rounding)
    assert np.allclose(u[jumps], -lam * np.sign(d[jumps]), rtol=1e-9, atol=atol)
    if lam >= 1e-3:
        ref = fused_lasso_dc(y, chain(n), lam).beta
        p, p_ref = objective(y, x, lam), objective(y, ref, lam)
        assert abs(p - p_ref) <= 1e-9 * max(p_ref, 1e-300) + 1e-12


def test_both_kernels_agree_on_a_long_signal(kernel):
    rng = np.random.default_rng(1)
    y = np.repeat(rng.normal(0, 3, 40), 500) + rng.standard_normal(20_000)
    x, u = _tv1d.tv1d(y, 2.0)
    x_ref = fused_lasso_dc(y, chain(y.size), 2.0).beta
    assert objective(y, x, 2.0) == pytest.approx(objective(y, x_ref, 2.0), rel=1e-10)
    assert np.max(np.abs(u)) <= 2.0 * (1 + 1e-12)


def test_trend_filter_uses_it_on_chains_with_exact_df(kernel):
    """A chain (nodes labelled in order) goes to the direct algorithm, whose fused runs give
    df; the path's SURE matches the one from the reference solution."""
    rng = np.random.default_rng(2)
    y = np.repeat([0.0, 4.0, 1.0, 3.0], 50) + rng.standard_normal(200)
    fit = trend_filter(y, 1.0, nx.path_graph(200), order=0, lam="sure")
    assert fit.params["algorithm"] == "direct 1-D TV (Condat 2013)"
    assert fit.params["iterations"] == 0
    path = fit.params["path"]
    assert np.all(path["gap"] <= 1e-12)
    for lam, df in zip(path["lam"], path["df"], strict=True):
        ref = fused_lasso_dc(y, chain(200), float(lam)).beta
        assert df == 1 + int(np.count_nonzero(np.abs(np.diff(ref)) > 1e-9 * np.abs(y).max()))


def test_degenerate_inputs():
    x, u = _tv1d.tv1d(np.array([3.0]), 1.0)
    assert x.tolist() == [3.0] and u.size == 0
    y = np.array([1.0, -2.0, 5.0])
    x, u = _tv1d.tv1d(y, 0.0)
    assert np.array_equal(x, y)
    x, _ = _tv1d.tv1d(np.full(6, 2.5), 3.0)
    assert np.all(x == 2.5)
    x, _ = _tv1d.tv1d(y, 1e9)  # one level: the mean
    assert np.allclose(x, y.mean())
