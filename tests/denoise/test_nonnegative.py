"""nonnegative=True (issue #26 item 2): every denoiser's positive part and its exact SURE.

* the divergence each denoiser puts in its SURE equals the sum, over the keys it keeps
  positive, of the diagonal of a finite-difference Jacobian of its frozen-tuning refit;
* SURE of the clipped estimator is unbiased (seeded Monte Carlo, tolerance 4 standard
  errors of the mean difference);
* clipping never loses against the unclipped estimate when θ ≥ 0, and order-0 trend
  filtering's positive part is the solution of the constrained problem.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from dpgauss.denoise import (
    auto,
    graph_wavelet_denoise,
    hard_threshold,
    james_stein,
    soft_threshold,
    trend_filter,
)
from dpgauss.denoise.structure import lattice_graph
from dpgauss.denoise.trend_filter import _clip

pywt = pytest.importorskip("pywt")

from dpgauss.denoise import wavelet_denoise  # noqa: E402

N = 48
CHAIN = np.stack([np.arange(N - 1), np.arange(1, N)], axis=1)


def _sparse_truth(n: int = N, seed: int = 0) -> np.ndarray:
    """Mostly zeros, a few hot spots, counts up to 40 (the issue's sparse maps)."""
    rng = np.random.default_rng(seed)
    theta = np.zeros(n)
    hot = rng.choice(n, max(2, n // 12), replace=False)
    theta[hot] = rng.integers(8, 41, hot.size)
    theta[hot[0] : hot[0] + 3] = 20.0  # one wider block
    return theta[:n]


def _grid_sigma(shape: tuple[int, ...], seed: int = 5) -> np.ndarray:
    return np.random.default_rng(seed).uniform(2.0, 6.0, shape)


#: (name, fit with frozen tuning: y -> Denoised, per-key σ or one σ, input shape)
CASES: list[tuple[str, Callable[..., object], object, tuple[int, ...]]] = [
    ("james_stein zero", lambda y, s: james_stein(y, s, nonnegative=True), 4.0, (N,)),
    (
        "james_stein mean",
        lambda y, s: james_stein(y, s, target="mean", nonnegative=True),
        4.0,
        (N,),
    ),
    (
        "james_stein mean, per key",
        lambda y, s: james_stein(y, s, target="mean", nonnegative=True),
        _grid_sigma((N,)),
        (N,),
    ),
    (
        "soft_threshold",
        lambda y, s: soft_threshold(y, s, threshold=6.0, nonnegative=True),
        4.0,
        (N,),
    ),
    (
        "soft_threshold, per key",
        lambda y, s: soft_threshold(y, s, threshold="universal", nonnegative=True),
        _grid_sigma((N,)),
        (N,),
    ),
    (
        "wavelet, padded 1-D",
        lambda y, s: wavelet_denoise(y[:45], s, threshold=5.0, nonnegative=True),
        4.0,
        (45,),
    ),
    (
        "wavelet 2-D, per key",
        lambda y, s: wavelet_denoise(y, s, threshold=(1.5, 2.0), level=2, nonnegative=True),
        _grid_sigma((6, 8)),
        (6, 8),
    ),
    (
        "graph_wavelet",
        lambda y, s: graph_wavelet_denoise(y, s, CHAIN, threshold=5.0, nonnegative=True),
        4.0,
        (N,),
    ),
    (
        "graph_wavelet, per key",
        lambda y, s: graph_wavelet_denoise(y, s, CHAIN, threshold=5.0, nonnegative=True),
        _grid_sigma((N,)),
        (N,),
    ),
    (
        "trend_filter order 0",
        lambda y, s: trend_filter(y, s, CHAIN, order=0, lam=8.0, nonnegative=True),
        4.0,
        (N,),
    ),
    (
        "trend_filter order 0 lattice",
        lambda y, s: trend_filter(y.ravel(), s, (6, 8), order=0, lam=2.0, nonnegative=True),
        4.0,
        (6, 8),
    ),
    (
        "trend_filter order 0, per key",
        lambda y, s: trend_filter(y, s, CHAIN, order=0, lam=0.5, nonnegative=True),
        _grid_sigma((N,)),
        (N,),
    ),
    (
        "trend_filter order 1",
        lambda y, s: trend_filter(y, s, CHAIN, order=1, lam=6.0, nonnegative=True),
        4.0,
        (N,),
    ),
    (
        "trend_filter order 1 lattice",
        lambda y, s: trend_filter(y.ravel(), s, (6, 8), order=1, lam=1.0, nonnegative=True),
        4.0,
        (6, 8),
    ),
    (
        "trend_filter order 2",
        lambda y, s: trend_filter(y, s, CHAIN, order=2, lam=10.0, nonnegative=True),
        4.0,
        (N,),
    ),
]


def _draw(shape: tuple[int, ...], sigma: object, rng: np.random.Generator) -> np.ndarray:
    theta = _sparse_truth(int(np.prod(shape))).reshape(shape)
    return theta, theta + np.asarray(sigma) * rng.standard_normal(shape)


def _divergence(res: object, y: np.ndarray, sigma: object) -> float:
    """The divergence term the result's SURE uses: (SURE − ‖ŷ − y‖² + Σσ²) / 2."""
    s2 = np.broadcast_to(np.asarray(sigma, dtype=np.float64) ** 2, y.shape)
    r = np.ravel(res.estimate) - np.ravel(y)  # type: ignore[attr-defined]
    return (res.risk - float(r @ r) + float(s2.sum())) / 2.0  # type: ignore[attr-defined]


@pytest.mark.parametrize(("name", "fit", "sigma", "shape"), CASES, ids=[c[0] for c in CASES])
def test_divergence_matches_a_finite_difference_jacobian(name, fit, sigma, shape) -> None:
    rng = np.random.default_rng(11)
    _, y = _draw(shape, sigma, rng)
    res = fit(y, sigma)
    est = np.asarray(res.estimate)
    assert est.min() >= 0.0 and res.params["nonnegative"] is True
    assert np.any(est == 0.0) and np.any(est > 0.0)  # the clip is active here
    s2 = np.broadcast_to(np.asarray(sigma, dtype=np.float64) ** 2, shape).ravel()
    eps = 1e-6 * max(1.0, float(np.max(np.abs(y))))
    base = np.ravel(res.refit(y).estimate)
    np.testing.assert_allclose(base, est.ravel(), atol=1e-9 * np.max(np.abs(y)))
    diag = np.empty(y.size)
    for i in range(y.size):
        up = y.ravel().copy()
        up[i] += eps
        diag[i] = (np.ravel(res.refit(up.reshape(shape)).estimate)[i] - base[i]) / eps
    expected = float(np.sum(s2 * diag))
    assert _divergence(res, y, sigma) == pytest.approx(expected, rel=1e-5, abs=1e-5 * s2.max())


#: SURE unbiasedness (the higher-order trend filters' are slow: 8 s each)
UNBIASED = [
    pytest.param(*c, marks=[pytest.mark.slow] if c[0][-7:] in ("order 1", "order 2") else [])
    for c in CASES
    if not c[0].endswith("lattice")
]


@pytest.mark.parametrize(
    ("name", "fit", "sigma", "shape"), UNBIASED, ids=[c[0] for c in CASES if "lattice" not in c[0]]
)
def test_clipped_sure_is_unbiased(name, fit, sigma, shape) -> None:
    rng = np.random.default_rng(2026)
    reps = 300
    diff = np.empty(reps)
    for b in range(reps):
        theta, y = _draw(shape, sigma, rng)
        res = fit(y, sigma)
        loss = float(np.sum((np.ravel(res.estimate) - np.ravel(theta[: res.estimate.size])) ** 2))
        diff[b] = res.risk - loss
    se = diff.std(ddof=1) / np.sqrt(reps)
    assert abs(diff.mean()) < 4.0 * se, (diff.mean(), se)


def test_clipped_risk_is_below_the_unclipped_on_nonnegative_truth() -> None:
    rng = np.random.default_rng(3)
    theta = _sparse_truth(400, seed=3)
    y = theta + 6.0 * rng.standard_normal(theta.size)
    chain = np.stack([np.arange(399), np.arange(1, 400)], axis=1)
    for fn in (
        lambda nn: james_stein(y, 6.0, nonnegative=nn),
        lambda nn: soft_threshold(y, 6.0, threshold="sure", nonnegative=nn),
        lambda nn: trend_filter(y, 6.0, chain, order=0, nonnegative=nn),
        lambda nn: trend_filter(y, 6.0, chain, order=1, nonnegative=nn),
        lambda nn: graph_wavelet_denoise(y, 6.0, chain, nonnegative=nn),
        lambda nn: wavelet_denoise(y, 6.0, nonnegative=nn),
    ):
        off, on = fn(False), fn(True)
        assert "nonnegative" not in off.params
        assert np.min(off.estimate) < 0.0 <= np.min(on.estimate)
        assert np.sum((on.estimate - theta) ** 2) < np.sum((off.estimate - theta) ** 2)


def test_soft_threshold_sure_rule_minimises_the_clipped_sure() -> None:
    rng = np.random.default_rng(4)
    y = _sparse_truth(200, seed=4) + 5.0 * rng.standard_normal(200)
    chosen = soft_threshold(y, 5.0, threshold="sure", nonnegative=True)
    grid = np.linspace(0.0, 30.0, 601)
    risks = [soft_threshold(y, 5.0, threshold=float(t), nonnegative=True).risk for t in grid]
    assert chosen.risk <= min(risks) + 1e-9
    assert chosen.params["df"] == int(np.count_nonzero(y > chosen.params["lambda"]))


def test_hard_threshold_keeps_only_positive_values() -> None:
    y = np.array([-9.0, -1.0, 0.5, 4.0, 9.0, -12.0])
    res = hard_threshold(y, 1.0, threshold=3.0, nonnegative=True)
    np.testing.assert_array_equal(res.estimate, [0.0, 0.0, 0.0, 4.0, 9.0, 0.0])
    assert res.params["kept"] == 2 and res.params["nonnegative"] is True
    # naive SURE of the clipped estimator: σ² per kept key, y² − σ² per killed key
    assert res.params["risk_proxy"] == pytest.approx(2.0 + (81 + 1 + 0.25 + 144) - 4.0)
    np.testing.assert_array_equal(res.refit(y).estimate, res.estimate)


def test_order0_positive_part_solves_the_constrained_problem() -> None:
    cp = pytest.importorskip("cvxpy")
    rng = np.random.default_rng(7)
    g = lattice_graph((5, 6))
    theta = np.zeros(30)
    theta[[3, 4, 17]] = [12.0, 9.0, 20.0]
    y = theta + 4.0 * rng.standard_normal(30)
    for sigma in (4.0, rng.uniform(2.0, 6.0, 30)):
        lam = 5.0 if np.ndim(sigma) == 0 else 0.4
        ours = trend_filter(y, sigma, g, order=0, lam=lam, nonnegative=True).estimate
        beta = cp.Variable(30)
        # one σ: ½‖y − β‖²; one σ per key: the weighted fidelity ½ Σ (yᵢ − βᵢ)²/σᵢ²
        w = np.ones(30) if np.ndim(sigma) == 0 else 1.0 / np.asarray(sigma) ** 2
        d = np.zeros((g.edges.shape[0], 30))
        d[np.arange(d.shape[0]), g.edges[:, 0]] = 1.0
        d[np.arange(d.shape[0]), g.edges[:, 1]] = -1.0
        obj = 0.5 * cp.sum(cp.multiply(w, cp.square(y - beta))) + lam * cp.norm1(d @ beta)
        cp.Problem(cp.Minimize(obj), [beta >= 0]).solve()
        np.testing.assert_allclose(ours, beta.value, atol=1e-4 * np.abs(y).max())


def test_monte_carlo_divergence_is_deterministic_and_close_to_exact(monkeypatch) -> None:
    rng = np.random.default_rng(8)
    n = 600
    theta = _sparse_truth(n, seed=8)
    y = theta + 4.0 * rng.standard_normal(n)
    chain = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)

    def fit() -> float:
        return trend_filter(y, 4.0, chain, order=1, lam=20.0, nonnegative=True).params["df"]

    harmonic = fit()  # df is small here: the harmonic basis
    monkeypatch.setattr(_clip, "HARMONIC_MAX_DF", -1)
    monkeypatch.setattr(_clip, "EXACT_MAX", n)
    exact = fit()  # one saddle-point solve per key of the smaller side
    assert exact == pytest.approx(harmonic, abs=1e-8)
    monkeypatch.setattr(_clip, "EXACT_MAX", 0)
    mc, mc2 = fit(), fit()
    assert mc == mc2  # a function of y and σ only
    assert mc != exact  # it is an estimate
    assert mc == pytest.approx(exact, abs=3.0)


def test_sure_path_chooses_by_the_clipped_sure() -> None:
    rng = np.random.default_rng(9)
    y = _sparse_truth(300, seed=9) + 8.0 * rng.standard_normal(300)
    chain = np.stack([np.arange(299), np.arange(1, 300)], axis=1)
    res = trend_filter(y, 8.0, chain, order=0, lam="sure", nonnegative=True)
    path = res.params["path"]
    best = int(np.argmin(path["sure"]))
    assert res.params["lam"] == path["lam"][best] and res.risk == path["sure"][best]
    fixed = trend_filter(y, 8.0, chain, order=0, lam=float(path["lam"][best]), nonnegative=True)
    assert fixed.risk == pytest.approx(res.risk)
    assert res.params["df"] <= res.params["df_fit"]


@pytest.mark.parametrize("structure", [None, (20, 20), "graph"])
def test_auto_nonnegative(structure) -> None:
    rng = np.random.default_rng(10)
    theta = _sparse_truth(400, seed=10)
    y = theta + 6.0 * rng.standard_normal(400)
    st: object = structure
    if structure == "graph":
        st = lattice_graph((20, 20))
    if isinstance(structure, tuple):
        y, theta = y.reshape(structure), theta.reshape(structure)
    off = auto(y, 6.0, st)
    on = auto(y, 6.0, st, nonnegative=True)
    assert np.min(on.estimate) >= 0.0 and on.params["nonnegative"] is True
    assert np.shape(on.estimate) == np.shape(y)
    assert all(c["params"].get("nonnegative") is True for c in on.params["candidates"])
    assert on.params["screen"] is False and "screen_off" in on.params
    assert np.min(off.estimate) < 0.0
    assert np.sum((on.estimate - theta) ** 2) < np.sum((off.estimate - theta) ** 2)
    refit = on.refit(y) if on.refit is not None else on
    np.testing.assert_allclose(refit.estimate, on.estimate, atol=1e-8)


def test_nonnegative_must_be_a_flag() -> None:
    for fn in (james_stein, soft_threshold, hard_threshold, wavelet_denoise):
        with pytest.raises(TypeError, match="nonnegative must be True or False"):
            fn(np.ones(8), 1.0, nonnegative=1)
    with pytest.raises(TypeError, match="nonnegative"):
        trend_filter(np.ones(8), 1.0, CHAIN[:7], nonnegative="yes")
    with pytest.raises(TypeError, match="nonnegative"):
        auto(np.ones(8), 1.0, nonnegative=None)


@pytest.mark.parametrize("nonnegative", [False, True])
def test_auto_takes_a_grid_with_one_sigma_per_cell(nonnegative: bool) -> None:
    """A 2-D y with a 2-D σ (the candidates are run on the flattened y: σ too; on main
    before this, the wavelet candidate refused σ's shape)."""
    rng = np.random.default_rng(12)
    theta = _sparse_truth(400, seed=12).reshape(20, 20)
    sigma = rng.uniform(3.0, 8.0, (20, 20))
    y = theta + sigma * rng.standard_normal((20, 20))
    res = auto(y, sigma, (20, 20), nonnegative=nonnegative)
    assert np.shape(res.estimate) == (20, 20)
    names = [c["method"] for c in res.params["candidates"]]
    assert "wavelet" in names and "trend_filter" in names
    if nonnegative:
        assert np.min(res.estimate) >= 0.0
