"""Noise that differs per key: every denoiser that accepts one σ per key has an unbiased
SURE (Monte Carlo), the exact divergence (finite differences), and reduces to itself when
all σᵢ are equal."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpgauss.denoise import (
    as_graph,
    auto,
    graph_wavelet_denoise,
    hard_threshold,
    james_stein,
    posterior_mean,
    soft_threshold,
    trend_filter,
    wavelet_denoise,
)
from dpgauss.denoise.registry import identity
from dpgauss.denoise.thresholding import weighted_sure_threshold

D = 80
CHAIN = np.stack([np.arange(D - 1), np.arange(1, D)], axis=1)
GRAPH = as_graph(CHAIN, D)
# a cycle with chords: not a chain, so order 0 goes to the weighted minimum cuts
CYCLE = as_graph(
    np.concatenate(
        [CHAIN, [[D - 1, 0]], np.stack([np.arange(0, D, 7), np.arange(3, D + 3, 7) % D], 1)]
    ),
    D,
)


def _sigma() -> np.ndarray:
    return np.linspace(0.5, 3.0, D)


def _theta() -> np.ndarray:
    return np.where(np.arange(D) < D // 2, 1.0, 4.0)


CASES = {
    "identity": lambda y, s: identity(y, s),
    "posterior_mean": lambda y, s: posterior_mean(y, s, prior_variance=4.0, prior_mean=2.0),
    "james_stein_zero": lambda y, s: james_stein(y, s, target="zero"),
    "james_stein_mean": lambda y, s: james_stein(y, s, target="mean"),
    "soft_universal": lambda y, s: soft_threshold(y, s, threshold="universal"),
    "soft_fixed": lambda y, s: soft_threshold(y, s, threshold=1.5),
    "graph_wavelet_universal": lambda y, s: graph_wavelet_denoise(
        y, s, GRAPH, threshold="universal"
    ),
    "graph_wavelet_fixed": lambda y, s: graph_wavelet_denoise(y, s, GRAPH, threshold=2.0),
    "trend_filter_chain": lambda y, s: trend_filter(y, s, GRAPH, lam=0.8),
    "wavelet_universal": lambda y, s: wavelet_denoise(y, s, (D,), threshold="universal"),
    "wavelet_fixed": lambda y, s: wavelet_denoise(y, s, (D,), wavelet="db2", threshold=1.5),
    # padded (10 rows → 12 at level 2) and 2-D: the folded basis vectors
    "wavelet_grid_padded": lambda y, s: wavelet_denoise(
        y, s, (10, 8), wavelet="db2", level=2, threshold=(1.0, 2.0)
    ),
    "trend_filter_graph": lambda y, s: trend_filter(y, s, CYCLE, lam=0.8),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_sure_is_unbiased_with_one_sigma_per_key(name: str) -> None:
    """E[SURE − ‖ŷ − θ‖²] = 0: 4,000 draws, within 4 standard errors."""
    rng = np.random.default_rng(1)
    fn, theta, s = CASES[name], _theta(), _sigma()
    diffs = np.empty(4000)
    for i in range(diffs.size):
        y = theta + s * rng.standard_normal(D)
        res = fn(y, s)
        diffs[i] = res.risk - float(np.sum((res.estimate - theta) ** 2))
    se = diffs.std(ddof=1) / math.sqrt(diffs.size)
    assert abs(diffs.mean()) < 4 * se + 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_sure_carries_the_exact_weighted_divergence(name: str) -> None:
    """SURE − ‖ŷ − y‖² + Σσᵢ² = 2 Σ σᵢ² ∂ŷᵢ/∂yᵢ, against central differences."""
    rng = np.random.default_rng(2)
    fn, s = CASES[name], _sigma()
    y = _theta() + s * rng.standard_normal(D)
    res = fn(y, s)
    div = (res.risk - float(np.sum((res.estimate - y) ** 2)) + float(np.sum(s * s))) / 2.0
    h = 1e-6
    fd = 0.0
    for i in range(D):
        e = np.zeros(D)
        e[i] = h
        fd += s[i] ** 2 * (fn(y + e, s).estimate[i] - fn(y - e, s).estimate[i]) / (2 * h)
    assert div == pytest.approx(fd, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("name", sorted(CASES))
def test_equal_sigmas_give_the_scalar_result(name: str) -> None:
    rng = np.random.default_rng(3)
    y = _theta() + 1.7 * rng.standard_normal(D)
    a, b = CASES[name](y, 1.7), CASES[name](y, np.full(D, 1.7))
    np.testing.assert_allclose(a.estimate, b.estimate)
    assert a.risk == pytest.approx(b.risk, rel=1e-12)


def test_whitened_james_stein_is_the_classical_one_on_y_over_sigma() -> None:
    rng = np.random.default_rng(4)
    s = _sigma()
    y = _theta() + s * rng.standard_normal(D)
    res = james_stein(y, s, target="zero")
    z = y / s
    factor = max(0.0, 1.0 - (D - 2) / float(z @ z))
    np.testing.assert_allclose(res.estimate, factor * y)


def test_the_weighted_sure_threshold_is_the_minimum_over_all_t() -> None:
    rng = np.random.default_rng(5)
    z = np.abs(rng.standard_normal(300) * 2)
    v = rng.uniform(0.2, 4.0, 300)

    def sure(t: float) -> float:
        return float(np.sum(v * (1 - 2 * (z <= t) + np.minimum(z * z, t * t))))

    t, best = weighted_sure_threshold(z, v)
    assert best == pytest.approx(sure(t))
    grid = np.linspace(0, z.max() * 1.1, 4001)
    assert best <= min(sure(g) for g in grid) + 1e-9


def test_hard_thresholding_uses_t_sigma_i() -> None:
    s = _sigma()
    y = 3.0 * s  # 3σ everywhere, just above the universal t = √(2 ln 80) ≈ 2.96
    res = hard_threshold(y, s)
    np.testing.assert_allclose(res.params["lambda"], math.sqrt(2 * math.log(D)) * s)
    assert res.params["kept"] == D


def test_auto_with_one_sigma_per_key_fits_the_weighted_trend_filter() -> None:
    rng = np.random.default_rng(6)
    s = _sigma()
    y = _theta() + s * rng.standard_normal(D)
    res = auto(y, s, GRAPH)
    fitted = [c for c in res.params["candidates"] if c["method"] == "trend_filter"]
    assert [c["params"]["order"] for c in fitted] == [0]
    assert "weighted" in fitted[0]["params"]["algorithm"]
    assert any("order 1" in text and "one σ" in text for text in res.params["skipped"])
    # a two-level step: the weighted fused lasso's SURE is a small part of the identity's,
    # and the winner (it or the graph wavelets, both fit a step) halves the error
    assert fitted[0]["risk"] < 0.25 * float(np.sum(s * s))
    assert res.method in ("trend_filter", "graph_wavelet")
    assert float(np.sum((res.estimate - _theta()) ** 2)) < 0.5 * float(np.sum(s * s))
    lo, hi = res.interval(0.95, draws=8, rng=1)
    # each interval contains the estimate or is the raw y ± zσᵢ (never wider than it)
    z = 1.959963984540054
    raw = np.isclose(lo, y - z * s) & np.isclose(hi, y + z * s)
    assert np.all(((lo <= res.estimate) & (res.estimate <= hi)) | raw)
    assert np.all(hi - lo <= 2 * z * s * (1 + 1e-12))


def test_what_takes_one_sigma_refuses_a_vector_by_name() -> None:
    from dpgauss.denoise import check_observation

    with pytest.raises(TypeError, match="one σ per key is accepted by"):
        check_observation(np.zeros(D), _sigma())
    with pytest.raises(ValueError, match="order 0 only; got order=1"):
        trend_filter(np.zeros(D), _sigma(), GRAPH, order=1, lam=1.0)
    with pytest.raises(ValueError, match="not by ADMM"):
        trend_filter(np.zeros(D), _sigma(), GRAPH, lam=1.0, solver="admm")
    # a constant vector is one σ written per key
    res = trend_filter(np.zeros(D), np.full(D, 2.0), GRAPH, lam=1.0)
    assert res.sigma == 2.0


def test_per_key_wavelets_threshold_each_coefficient_in_its_own_noise_units() -> None:
    """Haar, no padding: the level-1 detail coefficient of keys (2k, 2k+1) has variance
    (σ²_2k + σ²_2k+1)/2; with t = 0 nothing is killed and the estimate is y itself."""
    rng = np.random.default_rng(12)
    s = _sigma()
    y = _theta() + s * rng.standard_normal(D)
    res = wavelet_denoise(y, s, (D,), level=1, threshold=(0.0,))
    np.testing.assert_allclose(res.estimate, y, atol=1e-12)
    assert res.risk == pytest.approx(float(np.sum(s * s)), rel=1e-12)
    detail = (y[0::2] - y[1::2]) / math.sqrt(2)
    sd = np.sqrt((s[0::2] ** 2 + s[1::2] ** 2) / 2)
    t = 1.3
    res = wavelet_denoise(y, s, (D,), level=1, threshold=(t,))
    shrunk = np.sign(detail) * np.maximum(np.abs(detail) - t * sd, 0.0)
    approx = (y[0::2] + y[1::2]) / math.sqrt(2)
    expect = np.empty(D)
    expect[0::2] = (approx + shrunk) / math.sqrt(2)
    expect[1::2] = (approx - shrunk) / math.sqrt(2)
    np.testing.assert_allclose(res.estimate, expect, atol=1e-12)
    assert res.params["threshold_units"] == "noise sd of each coefficient"
    np.testing.assert_allclose(res.refit(y).estimate, res.estimate, atol=1e-12)


def test_per_key_wavelets_survive_sigma_over_many_decades() -> None:
    rng = np.random.default_rng(13)
    s = 10.0 ** rng.uniform(-6, 6, (16, 16))
    y = s * rng.standard_normal((16, 16))
    res = wavelet_denoise(y, s, wavelet="db2")
    assert np.all(np.isfinite(res.estimate)) and math.isfinite(res.risk)
    # the variances are sums of squares: none cancels to zero or below, however far apart
    from dpgauss.denoise.wavelets import _band_sums, _filter_bank, orthonormal_wavelet

    bank = _filter_bank(orthonormal_wavelet("db2"))
    v, _ = _band_sums(bank, [(16, 16), (16, 16)], "dd", 1, s * s)
    assert np.all(v > 0)
    # (a wavelet mixes keys: where σ differs by decades a precise key is averaged with its
    # noisy neighbours, which SURE prices exactly; docs/denoising.md)


def test_per_key_intervals_cover_on_average() -> None:
    rng = np.random.default_rng(7)
    s, theta = _sigma(), _theta()
    cover = []
    for _ in range(30):
        y = theta + s * rng.standard_normal(D)
        lo, hi = graph_wavelet_denoise(y, s, GRAPH).interval(0.95, rng=rng)
        cover.append(np.mean((lo <= theta) & (theta <= hi)))
    assert 0.9 <= float(np.mean(cover)) <= 1.0


def test_the_reported_risk_is_the_minimised_weighted_sure() -> None:
    """t·σᵢ may round below |yᵢ| at the chosen key; it is still killed (review of #14)."""
    rng = np.random.default_rng(3)
    for _ in range(2000):
        s = 10.0 ** rng.uniform(-2, 2, 6)
        y = s * rng.standard_normal(6) * rng.uniform(0, 3)
        best = weighted_sure_threshold(np.abs(y) / s, s * s)[1]
        assert soft_threshold(y, s, threshold="sure").risk == pytest.approx(
            best, rel=1e-9, abs=1e-9
        )


def test_auto_names_no_denoising_as_the_registry_does() -> None:
    from dpgauss.denoise import DENOISERS

    res = auto(np.array([100.0, -100.0]), 1.0)
    assert res.method == "none" and DENOISERS[res.method].name == "none"
