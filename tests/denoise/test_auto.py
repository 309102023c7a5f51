"""auto: SURE-based choice among denoisers, and the two Monte Carlo requirements of the issue.

* When denoising cannot help (dense, large, rough θ), auto's realised MSE stays within 5 %
  of the identity's dσ² (the paper's soft thresholding loses for ε > 5; auto must not).
* When it can (sparse θ; a smooth signal on a grid), auto stays within 10 % of the best
  fixed candidate, measured on the same draws.
"""

from __future__ import annotations

import importlib
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgauss.denoise import Denoised, auto, james_stein, soft_threshold, trend_filter

pywt = pytest.importorskip("pywt")

from dpgauss.denoise import wavelet_denoise  # noqa: E402

SIGMA = 1.0


def _fixed_candidates(y: np.ndarray, grid_shape: tuple[int, ...] | None) -> dict[str, np.ndarray]:
    out = {
        "identity": y,
        "james_stein_zero": james_stein(y, SIGMA, target="zero").estimate,
        "james_stein_mean": james_stein(y, SIGMA, target="mean").estimate,
        "soft_threshold_sure": soft_threshold(y, SIGMA, threshold="sure").estimate,
    }
    if grid_shape is not None:
        out["wavelet"] = wavelet_denoise(y.reshape(grid_shape), SIGMA).estimate.ravel()
    if grid_shape is not None and len(grid_shape) == 1:
        out["trend_filter"] = trend_filter(
            y, SIGMA, nx.path_graph(y.size), order=0, lam="sure"
        ).estimate
    elif grid_shape is not None and len(grid_shape) == 2:
        # order 0 on the grid's 4-neighbour lattice, auto's newest candidate (issue #15)
        out["trend_filter"] = trend_filter(
            y.reshape(grid_shape), SIGMA, grid_shape, order=0, lam="sure"
        ).estimate.ravel()
    return out


def _monte_carlo(theta_fn, grid_shape, reps, seed):
    """Mean realised squared error of auto and of every fixed candidate on the same draws."""
    rng = np.random.default_rng(seed)
    losses: dict[str, list[float]] = {}
    for _ in range(reps):
        theta = theta_fn(rng)
        y = theta + SIGMA * rng.standard_normal(theta.size)
        for name, est in _fixed_candidates(y, grid_shape).items():
            losses.setdefault(name, []).append(float(np.sum((est - theta) ** 2)))
        res = auto(y, SIGMA, grid_shape)
        losses.setdefault("auto", []).append(float(np.sum((res.estimate - theta) ** 2)))
    return {name: float(np.mean(v)) for name, v in losses.items()}


def _dense_rough(rng):
    return 100 * SIGMA * rng.standard_normal(1000)


def _sparse(rng):
    theta = np.zeros(1000)
    idx = rng.choice(1000, 50, replace=False)
    theta[idx] = 4 * SIGMA * rng.choice([-1.0, 1.0], 50)
    return theta


def _small_offset(rng):
    # dense, small, all positive: James–Stein toward the mean is best; plain minimum-SURE
    # selection (margin=0) picks the noisier wavelet SURE too often here (≈ 1.6 × best)
    return 0.5 * SIGMA * rng.uniform(0.0, 1.0, 1000)


def _steps_1d(rng):
    # an ordered histogram with a few flat stretches: trend filtering's home ground
    return np.repeat(rng.normal(0.0, 3.0 * SIGMA, 8), 125)


def _smooth_grid(rng):
    u = np.linspace(0, 1, 32)
    x, z = np.meshgrid(u, u, indexing="ij")
    return (20 * np.sin(2 * np.pi * x) * np.cos(np.pi * z) + 10 * (x > 0.5)).ravel()


@pytest.mark.slow
@pytest.mark.parametrize(
    "grid_shape", [None, (25, 40), (1000,)], ids=["no-grid", "grid", "1-D grid"]
)
def test_auto_does_not_lose_when_denoising_cannot_help(grid_shape):
    mse = _monte_carlo(_dense_rough, grid_shape, reps=100, seed=1)
    d = 1000
    assert mse["auto"] <= 1.05 * d * SIGMA**2
    assert mse["auto"] <= 1.05 * mse["identity"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("theta_fn", "grid_shape", "expected_best"),
    [
        (_sparse, None, "soft_threshold_sure"),
        # the lattice trend filter, 485 against the Haar wavelets' 720 (100 draws)
        (_smooth_grid, (32, 32), "trend_filter"),
        (_small_offset, (25, 40), "james_stein_mean"),
        (_steps_1d, (1000,), "trend_filter"),
    ],
    ids=["sparse", "smooth-grid", "small-offset-grid", "steps-1-D-grid"],
)
def test_auto_is_close_to_the_best_fixed_candidate(theta_fn, grid_shape, expected_best):
    mse = _monte_carlo(theta_fn, grid_shape, reps=100, seed=2)
    fixed = {k: v for k, v in mse.items() if k != "auto"}
    best = min(fixed, key=fixed.get)
    assert best == expected_best  # the case really is one where denoising helps
    assert fixed[best] < 0.8 * fixed["identity"]
    assert mse["auto"] <= 1.10 * fixed[best]


def test_candidate_table_and_selection():
    rng = np.random.default_rng(3)
    theta = np.zeros(400)
    theta[:20] = 6.0
    y = theta + rng.standard_normal(400)
    res = auto(y, 1.0, (20, 20))
    table = res.params["candidates"]
    # order-0 trend filtering on the 20 × 20 lattice is the last candidate, computed unless
    # screened out (then ``screened`` says so)
    lattice = [c for c in table[5:] if c["method"] == "trend_filter"]
    screened = [r for r in res.params.get("screened", []) if r["method"] == "trend_filter"]
    assert len(lattice) + len(screened) == 1
    table = table[:5]
    assert [c["method"] for c in table] == [
        "none",
        "james_stein",
        "james_stein",
        "soft_threshold",
        "wavelet",
    ]
    assert [c["params"].get("target") for c in table[1:3]] == ["zero", "mean"]
    expected = [
        400.0,
        james_stein(y, 1.0).risk,
        james_stein(y, 1.0, target="mean").risk,
        soft_threshold(y, 1.0, threshold="sure").risk,
        wavelet_denoise(y.reshape(20, 20), 1.0).risk,
    ]
    np.testing.assert_allclose([c["risk"] for c in table], expected)
    full_table = res.params["candidates"]
    chosen = full_table[res.params["selected"]]
    assert chosen["risk"] == res.risk
    # a flat block in the first row: soft thresholding or the lattice's fused lasso
    if lattice:
        tf = trend_filter(y, 1.0, (20, 20), order=0, lam="sure")
        assert lattice[0]["risk"] == pytest.approx(tf.risk)
        assert tf.risk < soft_threshold(y, 1.0, threshold="sure").risk  # it has the least SURE
        assert chosen["method"] == res.method == "trend_filter"
        np.testing.assert_allclose(res.estimate, tf.estimate)
    else:
        assert chosen["method"] == res.method == "soft_threshold"
        np.testing.assert_array_equal(
            res.estimate, soft_threshold(y, 1.0, threshold="sure").estimate
        )
    assert all(
        isinstance(v, str | int | float | bool | None)
        for c in full_table
        for v in c["params"].values()
    )


def test_margin_zero_is_plain_minimum_sure_and_a_huge_margin_keeps_a_baseline():
    rng = np.random.default_rng(4)
    y = np.repeat(rng.normal(0, 3, 16), 16) + rng.standard_normal(256)
    plain = auto(y, 1.0, (16, 16), margin=0.0)
    risks = [c["risk"] for c in plain.params["candidates"]]
    assert plain.params["selected"] == int(np.argmin(risks))
    assert plain.risk == min(risks)
    cautious = auto(y, 1.0, (16, 16), margin=1e6)
    assert cautious.method in ("none", "james_stein")
    assert cautious.params["selected"] in (0, 1, 2)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("weak", [False, True])
def test_each_challenger_records_the_bar_it_had_to_go_below(seed, weak):
    """``bar`` is the selection rule itself: the chosen challenger is below its bar, and a
    challenger with a smaller SURE than the choice lost by its bar only.  A weak signal
    (θ's spread 0.3σ) is where that happens: James–Stein kept against smaller SUREs."""
    rng = np.random.default_rng(seed)
    theta = rng.normal(0, 0.3, 300) if weak else np.repeat(rng.normal(0, 1.5, 12), 25)
    y = theta + rng.standard_normal(theta.size)
    res = auto(y, 1.0, (300,))
    table = res.params["candidates"]
    chosen = res.params["selected"]
    baselines = [c for c in table if "bar" not in c]
    assert [c["method"] for c in baselines] == ["none", "james_stein", "james_stein"]
    assert all("bar" in c for c in table[len(baselines) :])
    base_risk = min(c["risk"] for c in baselines)
    for i, c in enumerate(table[len(baselines) :], start=len(baselines)):
        assert c["bar"] <= base_risk
        if i == chosen:
            assert c["risk"] < c["bar"]
        elif c["risk"] < table[chosen]["risk"]:
            assert c["risk"] >= c["bar"]  # it lost by its guard only
    if weak:
        assert res.method == "james_stein"
        assert any(c["risk"] < res.risk for c in table[len(baselines) :])


def test_identity_is_never_preferred_to_james_stein():
    y = np.random.default_rng(5).normal(0, 50, 300)
    res = auto(y, 1.0)
    assert res.method == "james_stein"  # dominates y, SURE strictly below dσ²
    assert res.risk < 300.0


def test_shape_is_kept_and_grid_is_c_order():
    y = np.arange(24.0).reshape(4, 6) + np.random.default_rng(6).standard_normal((4, 6))
    res = auto(y, 1.0, (4, 6), margin=0.0)
    assert res.estimate.shape == (4, 6)
    wav = next(c for c in res.params["candidates"] if c["method"] == "wavelet")
    assert wav["risk"] == pytest.approx(wavelet_denoise(y, 1.0).risk)
    assert auto(y, 1.0, 24).estimate.shape == (4, 6)


def test_small_and_empty_inputs():
    res = auto([1.5], 1.0)
    assert res.estimate.shape == (1,) and isinstance(res, Denoised)
    res = auto(np.zeros(0), 1.0)
    assert res.estimate.shape == (0,) and res.risk == 0.0


def test_graph_candidates_when_available():
    n = 64
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    y = np.repeat([0.0, 4.0], n // 2) + np.random.default_rng(7).standard_normal(n)
    res = auto(y, 1.0, edges, screen=False)  # every candidate computed
    methods = [c["method"] for c in res.params["candidates"]]
    assert methods == [
        "none",
        "james_stein",
        "james_stein",
        "soft_threshold",
        "graph_wavelet",
        "trend_filter",
        "trend_filter",
    ]
    # A two-level piecewise-constant signal on a path: a graph method wins.
    assert res.method in ("graph_wavelet", "trend_filter")
    assert res.estimate.shape == (n,)
    # with screening, order 1 is computed or screened out (it cannot win here)
    fast = auto(y, 1.0, edges)
    kept = [(c["method"], c["params"].get("order")) for c in fast.params["candidates"]]
    out = [(r["method"], r["order"]) for r in fast.params.get("screened", [])]
    assert ("trend_filter", 1) in kept + out and ("trend_filter", 0) in kept
    assert (fast.method, fast.params.get("order")) == (res.method, res.params.get("order"))


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"structure": (10, 10)}, ValueError, "grid"),
        ({"structure": (2, 3, 10)}, TypeError, "structure"),
        ({"structure": (1, 60)}, ValueError, "grid"),
        ({"structure": (6.0, 10)}, TypeError, "structure"),
        ({"structure": "6x10"}, TypeError, "structure"),
        ({"structure": True}, TypeError, "structure"),
        ({"margin": -1.0}, ValueError, "margin"),
        ({"margin": math.nan}, ValueError, "margin"),
        ({"margin": "1"}, TypeError, "margin"),
        ({"structure": np.array([[0, 60]])}, ValueError, "node|graph"),
        ({"structure": "path"}, TypeError, "structure"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        auto(np.zeros(60), 1.0, **kwargs)


@pytest.mark.parametrize(
    ("y", "sigma", "exc", "match"),
    [
        ([1.0, np.nan], 1.0, ValueError, "y must be finite"),
        ("abc", 1.0, TypeError, "y must be"),
        ([1.0, 2.0], -1.0, ValueError, "sigma"),
        ([1.0, 2.0], None, TypeError, "sigma"),
    ],
)
def test_bad_observations(y, sigma, exc, match):
    with pytest.raises(exc, match=match):
        auto(y, sigma)


def test_a_weak_smooth_signal_on_a_graph_is_found():
    # θ's whole variation is below the absolute guard σ²√(2d): an absolute guard keeps
    # James–Stein (a flat estimate, ≈ 3 × trend filtering's error here).  Trend filtering's
    # SURE is compared with the baseline's on the scale of their difference instead.
    n = 400
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    theta = 0.35 * np.sin(2 * np.pi * np.linspace(0, 1, n))
    rng = np.random.default_rng(0)
    loss_auto, loss_js = [], []
    for _ in range(6):
        y = theta + rng.standard_normal(n)
        loss_auto.append(np.sum((auto(y, 1.0, edges).estimate - theta) ** 2))
        loss_js.append(np.sum((james_stein(y, 1.0, target="mean").estimate - theta) ** 2))
    assert np.mean(loss_auto) < 0.6 * np.mean(loss_js)


def test_a_missing_optional_dependency_skips_its_candidate(monkeypatch):
    """Without PyWavelets, auto on a grid still compares the others (here the 1-D trend
    filter wins on steps), warns once and says what it skipped."""
    wavelets = importlib.import_module("dpgauss.denoise.wavelets")

    def missing():
        raise ImportError("wavelet denoising needs PyWavelets")

    monkeypatch.setattr(wavelets, "_import_pywt", missing)
    rng = np.random.default_rng(5)
    y = _steps_1d(rng) + SIGMA * rng.standard_normal(1000)
    with pytest.warns(UserWarning, match="wavelet candidate is skipped"):
        res = auto(y, SIGMA, (1000,))
    assert res.method == "trend_filter"
    assert "PyWavelets" in res.params["skipped"][0]
    assert all(c["method"] != "wavelet" for c in res.params["candidates"])


def test_order_one_trend_filtering_is_skipped_beyond_its_size_limit(monkeypatch) -> None:
    """Above TF1_MAX_SIZE keys the order-1 SURE path (minutes there) is not a candidate, and
    ``skipped`` says so; order 0 and the graph wavelets stay."""
    auto_module = importlib.import_module("dpgauss.denoise.auto")
    monkeypatch.setattr(auto_module, "TF1_MAX_SIZE", 30)
    rng = np.random.default_rng(0)
    d = 40
    chain = np.stack([np.arange(d - 1), np.arange(1, d)], axis=1)
    res = auto_module.auto(rng.normal(0, 1, d), 1.0, chain)
    methods = [(c["method"], c["params"].get("order")) for c in res.params["candidates"]]
    assert ("trend_filter", 1) not in methods and ("trend_filter", 0) in methods
    assert any("trend_filter order 1 (d = 40 > 30" in s for s in res.params["skipped"])


# ------------------------------------------------------------------------------ screening


def _chain(n: int) -> np.ndarray:
    return np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)


def _screening_cases():
    from dpgauss.denoise.structure import lattice_edges

    rng = np.random.default_rng(11)
    lat = lattice_edges((15, 20))
    blocks = np.repeat(np.repeat(rng.normal(0, 3, (3, 4)), 5, 0), 5, 1).ravel()
    return {
        # dense and rough: James–Stein wins; order 1 is screened out (below)
        "rough-chain": (100 * rng.standard_normal(300) + rng.standard_normal(300), _chain(300)),
        "steps-chain": (np.repeat(rng.normal(0, 3, 6), 50) + rng.standard_normal(300), _chain(300)),
        "blocks-lattice-graph": (blocks + rng.standard_normal(300), lat),
        "rough-lattice-graph": (30 * rng.standard_normal(300) + rng.standard_normal(300), lat),
        "blocks-grid": (blocks + rng.standard_normal(300), (15, 20)),
        "rough-grid": (50 * rng.standard_normal(600), (20, 30)),
    }


@pytest.mark.parametrize("name", list(_screening_cases()))
def test_screening_never_changes_the_choice(name):
    """auto with screening makes the choice of auto computing every candidate (same method,
    order, estimate and SURE), and a candidate it screened out has, computed in full, a SURE
    at or above the threshold it was screened against."""
    y, structure = _screening_cases()[name]
    fast = auto(y, 1.0, structure)
    slow = auto(y, 1.0, structure, screen=False)
    assert "screened" not in slow.params and slow.params["screen"] is False
    assert (fast.method, fast.params.get("order")) == (slow.method, slow.params.get("order"))
    assert fast.risk == pytest.approx(slow.risk, rel=1e-9)
    np.testing.assert_allclose(fast.estimate, slow.estimate, atol=1e-8)
    full = {(c["method"], c["params"].get("order")): c for c in slow.params["candidates"]}
    for rec in fast.params.get("screened", []):
        cand = full[(rec["method"], rec["order"])]
        assert cand["risk"] >= rec["threshold"] - 1e-6 * abs(rec["threshold"])
        assert slow.params["candidates"].index(cand) != slow.params["selected"]
    if name in ("rough-chain", "rough-lattice-graph"):
        # the case the screening exists for: order 1 cannot beat James–Stein there
        assert [(r["method"], r["order"]) for r in fast.params["screened"]] == [("trend_filter", 1)]
        assert fast.params["screened"][0]["probes"] <= 3
        assert "cannot be chosen" in fast.params["screened"][0]["reason"]
        kept = [(c["method"], c["params"].get("order")) for c in fast.params["candidates"]]
        assert ("trend_filter", 1) not in kept


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("graph", ["chain", "lattice"])
def test_the_bounds_behind_screening_hold_on_the_sure_path(order, graph):
    """The two facts screening rests on, on a computed path: df at every λ is at least the
    bound from |Δy| > κλ, and the RSS is nondecreasing in λ."""
    import importlib

    from dpgauss.denoise import as_graph
    from dpgauss.denoise.structure import lattice_edges

    auto_module = importlib.import_module("dpgauss.denoise.auto")
    rng = np.random.default_rng(12 + order)
    edges = _chain(200) if graph == "chain" else lattice_edges((10, 20))
    g = as_graph(edges, 200)
    y = np.repeat(rng.normal(0, 2, 8), 25) + 3 * rng.standard_normal(200)
    res = trend_filter(y, 1.0, g, order=order, lam="sure")
    path = res.params["path"]
    bound = auto_module._DfLowerBound(y, g, order)
    lower = np.array([bound(float(v)) for v in path["lam"]])
    assert np.all(path["df"] >= lower)
    assert lower.max() > 10  # the bound is not vacuous on this path
    rss = path["rss"]  # λ decreasing along the path
    assert np.all(np.diff(rss) <= 1e-6 * rss[0])


def test_screen_must_be_a_bool():
    with pytest.raises(TypeError, match="screen"):
        auto(np.zeros(10), 1.0, screen=1)


def test_timing_per_candidate_is_in_params():
    rng = np.random.default_rng(13)
    res = auto(rng.standard_normal(300), 1.0, _chain(300))
    timing = res.params["timing"]
    assert {"none, james_stein", "soft_threshold", "graph_wavelet"} <= set(timing)
    assert "trend_filter order 0" in timing
    assert any(k.startswith("trend_filter order 1") for k in timing)
    assert all(isinstance(v, float) and v >= 0.0 for v in timing.values())


# --------------------------------------------------------------- order 0 on a 2-D lattice


def test_order_zero_trend_filtering_on_a_two_dimensional_grid():
    """A 2-D grid without a graph: order-0 trend filtering on its lattice is a candidate, and
    on flat regions with diagonal and curved edges it is the one chosen (the Haar wavelets'
    SURE is about 3 × larger there), with trend_filter's own SURE and estimate."""
    rng = np.random.default_rng(14)
    # a diagonal step and a disc: flat regions whose edges the Haar squares do not follow
    i, j = np.meshgrid(np.arange(30), np.arange(30), indexing="ij")
    theta = 4.0 * (i + j > 29) + 3.0 * ((i - 10) ** 2 + (j - 20) ** 2 < 40)
    y = theta + rng.standard_normal(theta.shape)
    res = auto(y, 1.0, (30, 30))
    tf = trend_filter(y, 1.0, (30, 30), order=0, lam="sure")
    assert res.method == "trend_filter" and res.params["order"] == 0
    assert res.risk == pytest.approx(tf.risk)
    np.testing.assert_allclose(res.estimate, tf.estimate)
    assert res.estimate.shape == (30, 30)
    assert np.sum((res.estimate - theta) ** 2) < 0.5 * np.sum((y - theta) ** 2)


def test_lattice_trend_filtering_is_skipped_beyond_its_size_limit(monkeypatch):
    auto_module = importlib.import_module("dpgauss.denoise.auto")
    monkeypatch.setattr(auto_module, "LATTICE_TF_MAX_SIZE", 100)
    rng = np.random.default_rng(15)
    res = auto_module.auto(rng.standard_normal((10, 12)), 1.0, (10, 12))
    assert all(c["method"] != "trend_filter" for c in res.params["candidates"])
    assert any("lattice (d = 120 > 100" in s for s in res.params["skipped"])


@pytest.mark.parametrize("scale", [1e-100, 1e100])
def test_auto_is_scale_equivariant_at_extreme_sigma(scale):
    """``auto(c·y, c·σ)`` chooses as ``auto(y, σ)`` and returns ``c`` times its estimate: the
    guard ``√(2Σσ⁴)`` once overflowed at σ ≈ 1e100 (no challenger was ever chosen)."""
    rng = np.random.default_rng(1)
    theta = np.repeat([0.0, 5.0, 2.0], 100)
    y = theta + rng.standard_normal(300)
    a = auto(y, 1.0, (300,))
    b = auto(y * scale, scale, (300,))
    assert b.method == a.method == "trend_filter"
    np.testing.assert_allclose(b.estimate / scale, a.estimate, rtol=1e-9, atol=1e-9)


def test_the_screen_solves_the_path_s_own_lambdas():
    """The screen's λ grid (``_path_grid``) is bit for bit the λ the SURE path solves."""
    from dpgauss.denoise.trend_filter import _path_grid

    rng = np.random.default_rng(21)
    y = np.repeat(rng.normal(0, 3, 6), 40) + rng.standard_normal(240)
    for order in (0, 1):
        path = trend_filter(y, 1.0, _chain(240), order=order).params["path"]
        lam = path["lam"][:-1]  # the last is λ = 0
        grid = _path_grid(float(lam[0]), 1e-3, 20)
        assert lam.size >= 20
        np.testing.assert_array_equal(lam, grid[: lam.size])


def test_the_descent_leaves_order_1_out_of_a_chain_of_steps():
    """On a chain of flat steps order 0 wins by far: the descent screen shows that order 1
    cannot be chosen, solving fewer λ than its path, and the choice is that of screen=False
    bit for bit (method, order, λ, estimate, SURE)."""
    rng = np.random.default_rng(17)
    y = np.repeat(rng.normal(0.0, 3.0, 8), 125) + rng.standard_normal(1000)
    fast = auto(y, 1.0, _chain(1000))
    slow = auto(y, 1.0, _chain(1000), screen=False)
    rec = [r for r in fast.params["screened"] if r["order"] == 1]
    assert len(rec) == 1 and "descent" in rec[0]["reason"]
    order1 = next(c for c in slow.params["candidates"] if c["params"].get("order") == 1)
    path_size = len(trend_filter(y, 1.0, _chain(1000), order=1).params["path"]["lam"])
    assert rec[0]["probes"] < path_size - 1
    assert order1["risk"] >= rec[0]["threshold"]
    assert rec[0]["lower_bound"] >= rec[0]["threshold"]
    assert (fast.method, fast.params.get("order")) == (slow.method, slow.params.get("order"))
    assert fast.params["lam"] == slow.params["lam"] and fast.risk == slow.risk
    np.testing.assert_array_equal(fast.estimate, slow.estimate)


_CHAIN_SIGNALS = ("steps", "ramps", "smooth", "rough", "flat")


def _random_graph(n: int, rng: np.random.Generator) -> np.ndarray:
    """A connected graph: a random tree plus about n/2 random extra edges."""
    parent = np.array([rng.integers(0, i) for i in range(1, n)])
    edges = np.stack([parent, np.arange(1, n)], axis=1)
    extra = rng.integers(0, n, (n // 2, 2))
    extra = extra[extra[:, 0] != extra[:, 1]]
    return np.concatenate([edges, np.sort(extra, axis=1)])


@pytest.mark.slow
@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(_CHAIN_SIGNALS),
    graph=st.sampled_from(["chain", "chain", "graph"]),
    n=st.integers(min_value=20, max_value=400),
    scale=st.sampled_from([1e-3, 1.0, 50.0]),
    pieces=st.integers(min_value=1, max_value=12),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_screened_choice_equals_unscreened_on_random_chains(kind, graph, n, scale, pieces, seed):
    """Property: on a chain (order 1 screened by the descent) and on a random graph (by the
    bounds and probes), ``auto`` makes bit for bit the choice of ``screen=False``: the same
    candidate, λ, estimate and SURE; a candidate it screened out has, computed in full, a
    SURE that could not have been chosen."""
    rng = np.random.default_rng(seed)
    x = np.linspace(0.0, 1.0, n)
    knots = np.sort(rng.uniform(0.0, 1.0, pieces))
    if kind == "steps":
        theta = rng.normal(0.0, 4.0, pieces + 1)[np.searchsorted(knots, x)]
    elif kind == "ramps":  # piecewise linear: order 1's own model on a chain
        theta = np.interp(x, np.concatenate([[0.0], knots, [1.0]]), rng.normal(0, 6, pieces + 2))
    elif kind == "smooth":
        theta = 5.0 * np.sin(2.0 * np.pi * pieces * x / 4.0)
    elif kind == "rough":
        theta = 20.0 * rng.standard_normal(n)
    else:
        theta = np.zeros(n)
    y = scale * (theta + rng.standard_normal(n))
    edges = _chain(n) if graph == "chain" else _random_graph(min(n, 150), rng)
    y = y[: int(edges.max()) + 1]
    fast = auto(y, scale, edges)
    slow = auto(y, scale, edges, screen=False)
    assert (fast.method, fast.params.get("order")) == (slow.method, slow.params.get("order"))
    assert fast.params.get("lam") == slow.params.get("lam")
    assert fast.risk == slow.risk
    np.testing.assert_array_equal(fast.estimate, slow.estimate)
    full = {(c["method"], c["params"].get("order")): c for c in slow.params["candidates"]}
    for rec in fast.params.get("screened", []):
        # it could not be chosen: its SURE is not below both the earlier best and its bar
        cand = full[(rec["method"], rec["order"])]
        assert cand["risk"] >= min(rec["threshold"], cand["bar"])


def _adversarial_graph(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Edges on nodes ``0 … n−1`` (n ≥ 1): a random graph, several components with isolated
    nodes, a star, a grid, a cycle, or none at all."""
    from dpgauss.denoise.structure import lattice_edges

    if kind == "random" and n >= 2:
        return _random_graph(n, rng)
    if kind == "pieces" and n >= 6:
        half = n // 2 - 1  # two random graphs; the last one or two nodes isolated
        other = _random_graph(half, rng) + half
        return np.concatenate([_random_graph(half, rng), other])
    if kind == "star" and n >= 2:
        return np.stack([np.zeros(n - 1, dtype=np.int64), np.arange(1, n)], axis=1)
    if kind == "grid" and n >= 4:
        return lattice_edges((2, n // 2))
    if kind == "cycle" and n >= 3:
        return np.stack([np.arange(n), (np.arange(n) + 1) % n], axis=1)
    return np.zeros((0, 2), dtype=np.int64)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    kind=st.sampled_from(["random", "pieces", "star", "grid", "cycle", "none"]),
    n=st.integers(min_value=1, max_value=60),
    order=st.sampled_from([1, 2]),
    data=st.sampled_from(["noise", "null", "zero", "huge", "tiny"]),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_the_top_fit_is_the_warm_solver_s_first_fit(kind, n, order, data, seed):
    """``_top_fit`` (λ_max and its fit without a solver, for the screen on graphs that are
    not chains) gives bit for bit what the path's solver gives at λ_max: the same λ_max,
    fit, zero rows, df and objective, on adversarial graphs (several components, isolated
    nodes, stars, grids, one node, no edges) and data (noise, in the null space, zero,
    1e±150)."""
    from dpgauss.denoise import as_graph
    from dpgauss.denoise.trend_filter import _top_fit, _warm_solver

    rng = np.random.default_rng(seed)
    edges = _adversarial_graph(kind, n, rng)
    g = as_graph(edges, n)
    y = rng.standard_normal(n)
    if data == "null":  # a constant per component: the null space of L (and of D L)
        y = rng.standard_normal(g.n_components)[g.components]
    elif data == "zero":
        y = np.zeros(n)
    elif data == "huge":
        y = y * 1e150
    elif data == "tiny":
        y = y * 1e-150
    lam_max, fit = _top_fit(y, g, order)
    warm_max, solve = _warm_solver(y, g, order)
    warm = solve(warm_max)
    assert lam_max == warm_max
    np.testing.assert_array_equal(fit.beta, warm.beta)
    np.testing.assert_array_equal(fit.zero, warm.zero)
    assert (fit.df, fit.objective, fit.gap, fit.lam) == (
        warm.df,
        warm.objective,
        warm.gap,
        warm.lam,
    )


def test_the_screen_builds_no_solver_on_a_graph_that_is_not_a_chain(monkeypatch):
    """Order 1 on a graph that is not a chain is screened by bounds and separate probes: no
    warm solver is built for λ_max (its set-up was all of the screen's time on the
    Manhattan graph), and the choice is that of ``screen=False``."""
    from dpgauss.denoise.structure import lattice_edges

    auto_module = importlib.import_module("dpgauss.denoise.auto")

    def refuse(*args, **kwargs):
        raise AssertionError("the screen built the path's solver")

    rng = np.random.default_rng(5)
    blocks = np.repeat(np.repeat(rng.normal(0, 3, (3, 4)), 5, 0), 5, 1).ravel()
    y = blocks + rng.standard_normal(300)
    slow = auto(y, 1.0, lattice_edges((15, 20)), screen=False)
    with monkeypatch.context() as patch:
        patch.setattr(auto_module, "_warm_solver", refuse)
        fast = auto(y, 1.0, lattice_edges((15, 20)))
    assert (fast.method, fast.params.get("order")) == (slow.method, slow.params.get("order"))
    assert fast.risk == slow.risk
    np.testing.assert_array_equal(fast.estimate, slow.estimate)
