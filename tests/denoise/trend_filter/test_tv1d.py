"""The direct 1-D TV algorithm (order 0 on a chain) against the reference min-cut solver."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.denoise import trend_filter
from dpgauss.denoise.trend_filter import _tv1d

from .exact_graph_tv import fused_lasso_dc


def chain(n: int) -> np.ndarray:
    return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)


def objective(y: np.ndarray, x: np.ndarray, lam: float) -> float:
    return 0.5 * float(np.sum((y - x) ** 2)) + lam * float(np.abs(np.diff(x)).sum())


@pytest.fixture(params=["compiled", "pure Python", "dynamic programme", "pure Python DP"])
def kernel(request, monkeypatch):
    """The numba-compiled kernels (when numba is installed) and the plain loops; the scan
    (Condat), or with no allowance for it, the dynamic programme that takes over from it."""
    if "pure Python" in request.param:
        monkeypatch.setattr(_tv1d, "_compiled", _tv1d._PYTHON)
    if "D" in request.param:
        monkeypatch.setattr(_tv1d, "SLACK", -1)
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


# --- the kernels: compiled against plain Python, unit weights against the weighted kernel ---

NEEDS_NUMBA = pytest.mark.skipif(_tv1d._numba is None, reason="numba is not installed")
EPS = float(np.finfo(float).eps)


def kkt_violation(y: np.ndarray, x: np.ndarray, u: np.ndarray, lam: float) -> float:
    """Relative violation of ``y − x = Dᵀu`` (``(Dᵀu)_i = u_i − u_{i−1}``), ``|u| ≤ λ`` and
    ``u = −λ·sign(x_{k+1} − x_k)`` on jumps: zero certifies optimality."""
    dtu = np.concatenate([u, [0.0]]) - np.concatenate([[0.0], u])
    d = np.diff(x)
    jump = np.abs(d) > 1e-9 * float(np.abs(y).max())
    worst = max(
        float(np.abs((y - x) - dtu).max()),
        float(np.max(np.abs(u), initial=0.0)) - lam,
        float(np.max(np.where(jump, np.abs(u + lam * np.sign(d)), 0.0), initial=0.0)),
    )
    return worst / (lam + float(np.abs(y).max()))


@NEEDS_NUMBA
@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(2, 300),
    seed=st.integers(0, 2**32 - 1),
    lam=st.sampled_from([1e-6, 0.05, 0.5, 3.0, 1e4]),
    spread=st.sampled_from([None, 0.0, 4.0, 14.0]),
    decimals=st.sampled_from([0, 1, 8]),
)
def test_compiled_and_plain_python_agree(n, seed, lam, spread, decimals):
    """The numba kernels and the plain loops on lists (the core-only fallback) give the same
    solution and dual to 1e-12 relative, weighted (over e^±42) or not."""
    rng = np.random.default_rng(seed)
    y = np.round(np.repeat(rng.normal(0, 3, 5), -(-n // 5))[:n] + rng.normal(0, 1, n), decimals)
    w = None if spread is None else np.exp(spread * rng.standard_normal(n))
    x, u = _tv1d.tv1d(y, lam, w)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_tv1d, "_compiled", _tv1d._PYTHON)
        x_py, u_py = _tv1d.tv1d(y, lam, w)
    scale = float(np.abs(y).max()) + lam
    np.testing.assert_allclose(x_py, x, rtol=1e-12, atol=1e-12 * scale)
    np.testing.assert_allclose(u_py, u, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("backend", ["compiled", "pure Python"])
def test_the_unweighted_kernel_is_the_weighted_one_with_unit_weights(backend):
    """Same operations (a product by 1.0 and a division by 1.0 are exact), so the same bits."""
    if backend == "compiled" and _tv1d._numba is None:
        pytest.skip("numba is not installed")
    weighted, unit = (_tv1d._kernels() if backend == "compiled" else _tv1d._PYTHON)[:2]
    arrays = backend == "compiled"
    rng = np.random.default_rng(3)
    for n in (2, 3, 17, 1000):
        for lam in (1e-3, 0.7, 5.0, 1e5):
            y = np.round(np.repeat(rng.normal(0, 3, 4), -(-n // 4))[:n] + rng.normal(0, 1, n), 1)
            yy, ones = (y, np.ones(n)) if arrays else (y.tolist(), [1.0] * n)
            x1, u1, x2, u2 = (np.empty(n) if arrays else [0.0] * n for _ in range(4))
            assert unit(yy, lam, x1, u1, n, n * n)
            assert weighted(yy, ones, lam, x2, u2, n, n * n)
            assert np.array_equal(x1, x2) and np.array_equal(u1, u2)


def test_the_plain_loops_run_on_lists_directly():
    """The fallback without NumPy arrays: certified on its own."""
    y = [0.0, 0.2, 3.1, 2.9, 3.0, -1.0, -1.2, 0.1]
    x, u = [0.0] * 8, [0.0] * 8
    assert _tv1d._condat_unit(y, 0.5, x, u, 8, 64)
    assert kkt_violation(np.array(y), np.array(x), np.array(u[:-1]), 0.5) <= 1e-15
    assert abs(u[-1]) <= 1e-15  # the final segment's residual
    xw, uw = [0.0] * 8, [0.0] * 8
    assert _tv1d._condat(
        y, [2.0] * 8, 1.0, xw, uw, 8, 64
    )  # weight 2 at λ = 1 is weight 1 at λ = 0.5
    assert xw == x


def test_weights_must_match_the_samples():
    with pytest.raises(ValueError, match="3 weights for 4 samples"):
        _tv1d.tv1d(np.zeros(4), 1.0, np.ones(3))


def longest_run(x: np.ndarray) -> int:
    return int(np.diff(np.flatnonzero(np.r_[True, np.diff(x) != 0, True])).max())


@pytest.mark.parametrize("offset", [0.0, 1e6])
def test_the_dual_does_not_drift_along_a_long_chain(offset):
    """2·10⁵ samples: the dual restarts at the exact ±λ after each jump, so the certificate
    is at the rounding level of the longest fused run (a few eps per sample in it), not of
    the whole chain.  (Prefix sums over the chain, as before, were 7–25× further off on
    such signals, beyond this bound.)"""
    rng = np.random.default_rng(4)
    n = 200_000
    y = offset + np.repeat(rng.normal(0, 3, 200), n // 200) + rng.standard_normal(n)
    for lam in (0.3, 2.0):
        x, u = _tv1d.tv1d(y, lam)
        assert kkt_violation(y, x, u, lam) <= 4 * EPS * longest_run(x)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 200),
    seed=st.integers(0, 2**32 - 1),
    lam=st.sampled_from([1e-9, 1e-3, 0.1, 0.5, 2.0, 10.0, 1e6]),
    decimals=st.sampled_from([0, 1, 8]),
    offset=st.sampled_from([0.0, 1e6]),
)
def test_the_dynamic_programme_agrees_with_the_scan(n, seed, lam, decimals, offset):
    """Johnson's DP (the fallback on smooth signals), its levels recomputed from segment
    sums: the scan's solution to 1e-12 of the data's and λ's scale, certified as tightly."""
    rng = np.random.default_rng(seed)
    y = offset + np.round(
        np.repeat(rng.normal(0, 3, 4), -(-n // 4))[:n] + rng.normal(0, 1, n), decimals
    )
    kernels = _tv1d._kernels()
    unit, dp = kernels[1], kernels[3]
    x, u = np.empty(n), np.empty(n)
    assert unit(y, lam, x, u, n, n * n)  # n² advances: the scan always finishes
    x_dp, u_dp = np.empty(n), np.empty(n)
    dp(y, lam, x_dp, u_dp, np.empty(2 * n), np.empty(2 * n), np.empty(2 * n))
    scale = float(np.abs(y).max()) + lam
    assert np.max(np.abs(x_dp - x)) <= 1e-12 * scale
    assert kkt_violation(y, x_dp, u_dp[:-1], lam) <= 4 * EPS * longest_run(x_dp) + 1e-15


@pytest.mark.parametrize("backend", ["compiled", "pure Python"])
def test_smooth_signals_go_to_the_dynamic_programme(backend, monkeypatch):
    """A noiseless ramp at λ = 100 exhausts the scan's budget (about 2√(λ/slope) = 632
    advances per sample); the DP's answer is certified and is the ramp, flattened over
    √(2λ/slope) samples at each end (the shortest stretch whose residuals reach λ)."""
    if backend == "pure Python":
        monkeypatch.setattr(_tv1d, "_compiled", _tv1d._PYTHON)
    n, slope, lam = 5000, 1e-3, 100.0
    y = slope * np.arange(n)
    unit = _tv1d._kernels()[1]
    x, u = (np.empty(n), np.empty(n)) if backend == "compiled" else ([0.0] * n, [0.0] * n)
    yy = y if backend == "compiled" else y.tolist()
    assert not unit(yy, lam, x, u, _tv1d.BUDGET, _tv1d.SLACK)
    x, u = _tv1d.tv1d(y, lam)
    assert kkt_violation(y, x, u, lam) <= 4 * EPS * longest_run(x)
    m = int(np.ceil(np.sqrt(2 * lam / slope)))  # ½·slope·m² ≈ λ, to a sample
    middle = slice(m + 1, -m - 1)  # levels y ∓ λ ± λ: to a rounding of λ
    assert np.max(np.abs(x[middle] - y[middle])) <= 2 * EPS * lam
    assert np.all(x[: m - 1] == x[0]) and np.all(x[-m + 1 :] == x[-1])


def weighted_kkt_violation(y, w, lam, x, u) -> float:
    """:func:`kkt_violation` with fidelity weights: ``W(y − x) = Dᵀu``, relative to
    ``λ + max|w·y|``."""
    dtu = np.concatenate([u, [0.0]]) - np.concatenate([[0.0], u])
    d = np.diff(x)
    jump = np.abs(d) > 1e-9 * float(np.abs(y).max())
    worst = max(
        float(np.abs(w * (y - x) - dtu).max()),
        float(np.max(np.abs(u), initial=0.0)) - lam,
        float(np.max(np.where(jump, np.abs(u + lam * np.sign(d)), 0.0), initial=0.0)),
    )
    return worst / (lam + float(np.abs(w * y).max()))


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 60),
    seed=st.integers(0, 2**32 - 1),
    lam=st.sampled_from([1e-6, 0.05, 0.5, 3.0, 1e4]),
    spread=st.sampled_from([0.0, 1.0, 4.0, 14.0, 24.0]),
    decimals=st.sampled_from([0, 1, 8]),
)
def test_the_weighted_dynamic_programme(n, seed, lam, spread, decimals):
    """The weighted programme (weights over up to e^±72): where its check passes, the
    scan's solution to 1e-12 for weights within e^±12 (measured 4e-16; with more spread
    the problem is too ill-conditioned to compare solutions) and certified to 1e-12
    either way; tv1d forced through it is certified to 1e-12 (the scan takes over where
    the check fails, which it does not for weights within e^±12)."""
    rng = np.random.default_rng(seed)
    y = np.round(np.repeat(rng.normal(0, 3, 3), -(-n // 3))[:n] + rng.normal(0, 1, n), decimals)
    w = np.exp(spread * rng.standard_normal(n))
    scan, _, dp, _, check = _tv1d._kernels()
    x, u = np.empty(n), np.empty(n)
    assert scan(y, w, lam, x, u, 0, _tv1d.UNLIMITED)
    x_dp, u_dp = np.empty(n), np.empty(n)
    try:
        dp(y, w, lam, x_dp, u_dp, np.empty(2 * n), np.empty(2 * n), np.empty(2 * n))
        ok = check(lam, x_dp, u_dp, lam + float(np.abs(w * y).max()), 1e-9 * np.abs(y).max())
    except ZeroDivisionError:
        ok = False
    if ok:
        assert weighted_kkt_violation(y, w, lam, x_dp, u_dp[:-1]) <= 1e-12
    if w.max() / w.min() <= np.exp(24.0):
        assert ok
        assert np.max(np.abs(x_dp - x)) <= 1e-12 * (np.abs(y).max() + lam / w.min())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_tv1d, "SLACK", -1)
        x_f, u_f = _tv1d.tv1d(y, lam, w)
    assert weighted_kkt_violation(y, w, lam, x_f, u_f) <= 1e-12


def test_a_smooth_weighted_signal_goes_to_the_dynamic_programme():
    """A noiseless ramp with weights in [0.5, 2] at λ = 100 exhausts the weighted scan's
    allowance too; the answer is certified."""
    n, lam = 5000, 100.0
    rng = np.random.default_rng(7)
    y = 1e-3 * np.arange(n)
    w = rng.uniform(0.5, 2.0, n)
    scan = _tv1d._kernels()[0]
    assert not scan(y, w, lam, np.empty(n), np.empty(n), _tv1d.BUDGET, _tv1d.SLACK)
    x, u = _tv1d.tv1d(y, lam, w)
    assert weighted_kkt_violation(y, w, lam, x, u) <= 1e-12


def test_the_certificate_rejects_a_wrong_segmentation():
    """``_certified`` accepts the solution and rejects levels recomputed from segment sums
    on a wrong segmentation (a jump inside a run, or runs fused across a jump), as the
    dynamic programme's polish would compute them."""
    y, lam = np.array([0.0, 0.0, 10.0, 10.0]), 1.0
    x, u = _tv1d.tv1d(y, lam)
    assert np.allclose(x, [0.5, 0.5, 9.5, 9.5]) and _tv1d._certified(lam, x, u, 11.0, 1e-9)
    # runs [0], [1], [2, 3] with upward jumps: levels 1 and 0 (a downward jump), u_0 = −1
    assert not _tv1d._certified(
        lam, np.array([1.0, 0.0, 9.5, 9.5]), np.array([-1.0, -1, -0.5]), 11.0, 1e-9
    )
    # one run: the mean, whose dual leaves [−λ, λ]
    assert not _tv1d._certified(lam, np.full(4, 5.0), np.array([-5.0, -10, -5]), 11.0, 1e-9)
    # a tie split in two whose levels differ by a rounding the "wrong" way: only jumps
    # beyond the tolerance need the dual's sign
    x, u = np.array([1.3 - 2e-16, 1.3]), np.array([lam])
    assert _tv1d._certified(lam, x, u, 2.3, 1e-9) and not _tv1d._certified(lam, x, u, 2.3, 0.0)


def test_a_wrong_dynamic_programme_falls_back_to_the_scan(monkeypatch):
    """Were the programme's answer not certified, the scan would run to the end instead."""
    monkeypatch.setattr(_tv1d, "_compiled", _tv1d._PYTHON)
    rng = np.random.default_rng(6)
    y = np.repeat(rng.normal(0, 3, 5), 20) + rng.standard_normal(100)
    x_ref, u_ref = _tv1d.tv1d(y, 1.0)

    def wrong(y, lam, x, u, *scratch):
        x[:] = y  # no denoising, and a zero dual
        u[:] = [0.0] * len(y)

    monkeypatch.setattr(_tv1d, "_dp_unit", wrong)
    monkeypatch.setattr(_tv1d, "SLACK", -1)
    x, u = _tv1d.tv1d(y, 1.0)
    assert np.array_equal(x, x_ref) and np.array_equal(u, u_ref)


# --- against prox_tv (C++; Barbero & Sra's taut-string solvers): a peer, not a dependency ---

try:
    import prox_tv
except ImportError:  # pragma: no cover - depends on the environment
    prox_tv = None

NEEDS_PROX_TV = pytest.mark.skipif(
    prox_tv is None,
    reason="prox_tv is not installed (apt-get install liblapacke-dev; pip install prox_tv)",
)


def alternating(n: int, a: float) -> np.ndarray:
    return np.where(np.arange(n) % 2 == 0, a, -a)


def alternating_solution(n: int, a: float, lam: float) -> np.ndarray:
    """For ``lam ≤ a/2`` (n ≥ 2): the ends move by λ, the interior by 2λ, towards 0."""
    x = alternating(n, a - 2 * lam)
    x[[0, -1]] = np.sign(alternating(n, a)[[0, -1]]) * (a - lam)
    return x


EXTREMES = {
    "n = 1": (np.array([3.0]), 1.0, np.array([3.0])),
    "n = 2, fused": (np.array([1.0, 3.0]), 5.0, np.array([2.0, 2.0])),
    "n = 2, apart": (np.array([1.0, 3.0]), 0.5, np.array([1.5, 2.5])),
    "n = 3": (np.array([1.0, 3.0, -2.0]), 0.7, np.array([1.65, 1.65, -1.3])),
    "constant": (np.full(1000, 2.5), 1.0, np.full(1000, 2.5)),
    "alternating ±1e3": (alternating(11, 1e3), 10.0, alternating_solution(11, 1e3, 10.0)),
    "alternating ±1e150": (alternating(10, 1e150), 1e149, alternating_solution(10, 1e150, 1e149)),
    "alternating ±1e-150": (
        alternating(10, 1e-150),
        1e-151,
        alternating_solution(10, 1e-150, 1e-151),
    ),
    "huge lam: the mean": (np.arange(8.0) * 1e150, 1e300, np.full(8, 3.5e150)),
    "tiny lam: the data": (np.arange(8.0) - 3.3, 1e-300, np.arange(8.0) - 3.3),
    "mixed magnitudes": (np.array([1e150, -1e150, 1e-150, 3.0]), 1e-150, None),
    "ramp": (np.arange(2000.0) * 1e-3, 50.0, None),
    "integer staircase (ties)": (np.repeat([0.0, 2.0, 1.0, 1.0, 3.0], 7), 1.0, None),
}


@NEEDS_PROX_TV
@pytest.mark.parametrize("name", list(EXTREMES))
def test_adversarial_inputs_against_prox_tv(name, kernel):
    """Certified (KKT to 1e-13 relative), the known solution where there is one (to 1e-14
    relative), never a worse objective than prox_tv, and prox_tv's solution wherever
    prox_tv is itself accurate.  (It is not on some extremes: it returns 0 for λ = 1e300
    instead of the mean, and a wrong solution on ±1e-150 data; the known solutions show
    which side is right.)"""
    y, lam, known = EXTREMES[name]
    x, u = _tv1d.tv1d(y, lam)
    scale = float(np.abs(y).max()) + lam
    assert kkt_violation(y, x, u, lam) <= 1e-13
    if known is not None:
        np.testing.assert_allclose(x, known, rtol=1e-14, atol=1e-14 * float(np.abs(y).max()))
    ref = prox_tv.tv1_1d(y, lam)
    p, p_ref = objective(y, x, lam), objective(y, ref, lam)
    assert p <= p_ref * (1 + 1e-12) + 1e-300
    if p_ref <= p * (1 + 1e-12):  # prox_tv optimal too: the (unique) solutions agree
        assert np.max(np.abs(x - ref)) <= 1e-9 * scale
    else:  # where prox_tv is off, the exact answer is known
        assert known is not None


@NEEDS_PROX_TV
@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 400),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1e-3, 1.0, 1e4]),
    rel_lam=st.sampled_from([1e-6, 0.01, 0.5, 3.0, 100.0]),
    decimals=st.sampled_from([None, 0, 2]),
)
def test_random_inputs_match_prox_tv(n, seed, scale, rel_lam, decimals):
    """Piecewise constant + noise (rounded: exact ties) at several scales and λ: the same
    solution as prox_tv to 1e-10 of the data's and λ's scale."""
    rng = np.random.default_rng(seed)
    y = np.repeat(rng.normal(0, 3, 6), -(-n // 6))[:n] + rng.normal(0, 1, n)
    if decimals is not None:
        y = np.round(y, decimals)
    y *= scale
    lam = rel_lam * scale
    x, _ = _tv1d.tv1d(y, lam)
    ref = prox_tv.tv1_1d(y, lam)
    assert np.max(np.abs(x - ref)) <= 1e-10 * (float(np.abs(y).max()) + lam)


@NEEDS_PROX_TV
def test_a_long_signal_matches_prox_tv():
    """The benchmark's signal (10⁵ samples): the same solution to 1e-10."""
    rng = np.random.default_rng(5)
    y = np.repeat(rng.normal(0, 3, 50), 2000) + rng.standard_normal(100_000)
    for lam in (0.3, 3.0, 30.0):
        x, u = _tv1d.tv1d(y, lam)
        assert np.max(np.abs(x - prox_tv.tv1_1d(y, lam))) <= 1e-10 * float(np.abs(y).max())
        assert kkt_violation(y, x, u, lam) <= 4 * EPS * longest_run(x)
