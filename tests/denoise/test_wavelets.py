"""Wavelet shrinkage: orthonormality, untouched approximation, exact SURE with padding."""

from __future__ import annotations

import builtins
import math

import numpy as np
import pytest

pywt = pytest.importorskip("pywt")

from dpgauss.denoise import wavelet_denoise  # noqa: E402
from dpgauss.denoise.wavelets import _pad, orthonormal_wavelet  # noqa: E402


def _divergence_fd(estimator, y: np.ndarray, h: float = 1e-7) -> float:
    """Σᵢ ∂ŷᵢ/∂yᵢ by forward differences (exact for a piecewise-linear map off the kinks)."""
    base = estimator(y).estimate
    total = 0.0
    for idx in np.ndindex(y.shape):
        yy = y.copy()
        yy[idx] += h
        total += (estimator(yy).estimate[idx] - base[idx]) / h
    return total


@pytest.mark.parametrize("wavelet", ["haar", "db2", "db4", "sym5", "coif2"])
@pytest.mark.parametrize("shape", [(64,), (64, 128)])
def test_periodized_transform_is_orthonormal(wavelet, shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    wav = orthonormal_wavelet(wavelet)
    coeffs = pywt.wavedecn(x, wav, mode="periodization", level=2)
    energy = np.sum(coeffs[0] ** 2) + sum(np.sum(b**2) for lev in coeffs[1:] for b in lev.values())
    assert energy == pytest.approx(np.sum(x**2), rel=1e-12)  # Parseval
    back = pywt.waverecn(coeffs, wav, mode="periodization")
    assert np.max(np.abs(back - x)) < 1e-11


@pytest.mark.parametrize("shape", [(64,), (37,), (8, 16), (7, 11)])
@pytest.mark.parametrize("wavelet", ["haar", "db3"])
def test_zero_threshold_reconstructs_exactly(shape, wavelet):
    y = np.random.default_rng(1).standard_normal(shape)
    res = wavelet_denoise(y, 0.5, wavelet=wavelet, level=2, threshold=0.0)
    assert np.max(np.abs(res.estimate - y)) < 1e-12
    # div of the identity is N, padded or not: Σ_j ⟨w_j, PCw_j⟩ = tr(PC) = N
    assert res.params["df"] == pytest.approx(y.size, rel=1e-10)
    assert res.risk == pytest.approx(y.size * 0.25, rel=1e-9)


@pytest.mark.parametrize("shape", [(64,), (32, 64)])
def test_approximation_coefficients_are_untouched(shape):
    rng = np.random.default_rng(2)
    y = 5 * rng.standard_normal(shape)
    for threshold in (1.0, "sure", 1e6):
        res = wavelet_denoise(y, 1.0, wavelet="db2", level=3, threshold=threshold)
        before = pywt.wavedecn(y, "db2", mode="periodization", level=3)
        after = pywt.wavedecn(res.estimate, "db2", mode="periodization", level=3)
        np.testing.assert_allclose(after[0], before[0], rtol=0, atol=1e-10)
    # an infinite-like threshold leaves exactly the projection on the approximation space
    for lev in after[1:]:
        for band in lev.values():
            assert np.max(np.abs(band)) < 1e-10


def test_detail_coefficients_are_soft_thresholded():
    rng = np.random.default_rng(3)
    y = rng.standard_normal(32)
    lam = 0.7
    res = wavelet_denoise(y, 1.0, level=2, threshold=lam)
    before = pywt.wavedec(y, "haar", mode="periodization", level=2)
    after = pywt.wavedec(res.estimate, "haar", mode="periodization", level=2)
    for b, a in zip(before[1:], after[1:], strict=True):
        np.testing.assert_allclose(a, np.sign(b) * np.maximum(np.abs(b) - lam, 0), atol=1e-12)
    assert res.params["thresholds"] == [lam, lam]


@pytest.mark.parametrize(
    ("shape", "wavelet", "level"),
    [((32,), "haar", 3), ((13,), "haar", 3), ((13,), "db4", 2), ((21,), "sym4", None),
     ((8, 8), "haar", 2), ((7, 11), "db2", 2), ((5, 9), "haar", 2)],
)  # fmt: skip
def test_divergence_matches_finite_differences(shape, wavelet, level):
    y = 2 * np.random.default_rng(4).standard_normal(shape)
    est = lambda v: wavelet_denoise(v, 1.0, wavelet=wavelet, level=level, threshold=1.0)  # noqa: E731
    res = est(y)
    fd = _divergence_fd(est, y)
    assert res.params["df"] == pytest.approx(fd, rel=1e-5, abs=1e-5)
    sure = np.sum((res.estimate - y) ** 2) + 2 * fd - y.size
    assert res.risk == pytest.approx(sure, rel=1e-5, abs=1e-5)


def test_coefficient_domain_sure_without_padding():
    rng = np.random.default_rng(5)
    y = np.repeat(rng.normal(0, 4, 8), 8) + rng.standard_normal(64)
    lam, sigma = 1.1, 1.0
    res = wavelet_denoise(y, sigma, level=3, threshold=lam)
    coeffs = pywt.wavedec(y, "haar", mode="periodization", level=3)
    z = np.concatenate(coeffs[1:])
    coef_sure = (
        np.sum(np.minimum(z**2, lam**2)) + 2 * sigma**2 * (coeffs[0].size + np.sum(np.abs(z) > lam))
    ) - y.size * sigma**2
    assert res.risk == pytest.approx(coef_sure, rel=1e-10)


def _mc_sure_minus_loss(theta, sigma, reps, seed, **kwargs):
    rng = np.random.default_rng(seed)
    diffs = np.empty(reps)
    for r in range(reps):
        y = theta + sigma * rng.standard_normal(theta.shape)
        res = wavelet_denoise(y, sigma, **kwargs)
        diffs[r] = res.risk - np.sum((res.estimate - theta) ** 2)
    return diffs.mean(), diffs.std(ddof=1) / math.sqrt(reps)


def _blocks(n: int) -> np.ndarray:
    t = np.arange(n) / n
    return 4.0 * (t > 0.3) - 2.5 * (t > 0.6) + 1.5 * np.sin(6 * t)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("theta", "kwargs"),
    [
        (_blocks(128), {"wavelet": "haar", "threshold": 1.0}),
        (_blocks(100), {"wavelet": "db2", "threshold": 1.5}),  # padded to 104
        (_blocks(77), {"wavelet": "haar", "threshold": "universal"}),  # padded
        (np.outer(_blocks(12), _blocks(20)) / 3, {"wavelet": "haar", "threshold": 1.0}),
        (np.outer(_blocks(16), _blocks(16)) / 3, {"wavelet": "sym3", "threshold": 0.8}),
    ],
    ids=["1d-haar", "1d-db2-padded", "1d-universal-padded", "2d-padded", "2d-sym3"],
)
def test_sure_is_unbiased_for_a_fixed_threshold(theta, kwargs):
    mean, se = _mc_sure_minus_loss(theta, 0.8, reps=600, seed=theta.size, **kwargs)
    assert abs(mean) < 3 * se


def test_sure_threshold_denoises_a_piecewise_smooth_signal():
    rng = np.random.default_rng(6)
    theta = 3 * _blocks(1000)
    y = theta + rng.standard_normal(1000)
    res = wavelet_denoise(y, 1.0)
    assert res.params["padded_shape"] == (1024,)
    assert np.sum((res.estimate - theta) ** 2) < 0.3 * y.size
    assert res.risk < 0.3 * y.size
    assert len(res.params["thresholds"]) == res.params["level"]


def test_pad_is_a_bridge_back_to_the_first_sample():
    x = np.array([[0.0, 1.0, 2.0], [4.0, 5.0, 6.0]])
    padded = _pad(x, (4, 4))
    assert padded.shape == (4, 4)
    np.testing.assert_allclose(padded[:2, :3], x)
    np.testing.assert_allclose(padded[2, :3], (2 * x[1] + x[0]) / 3)
    np.testing.assert_allclose(padded[:, 3], (padded[:, 2] + padded[:, 0]) / 2)


def test_default_level_and_metadata():
    res = wavelet_denoise(np.zeros((32, 48)), 1.0, wavelet="haar")
    assert res.params["level"] == 5
    assert res.params["wavelet"] == "haar"
    assert res.params["threshold"] == "sure"
    assert res.method == "wavelet"
    res = wavelet_denoise(np.zeros(10), 1.0, wavelet=pywt.Wavelet("db2"), threshold=0.5)
    assert res.params["threshold"] == [0.5] * res.params["level"]
    assert res.params["wavelet"] == "db2"


def test_missing_pywavelets_gives_install_hint(monkeypatch):
    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "pywt":
            raise ImportError("No module named 'pywt'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"pip install 'dpgauss\[wavelets\]'"):
        wavelet_denoise(np.zeros(8), 1.0)


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"wavelet": "bior2.2"}, ValueError, "orthonormal"),
        ({"wavelet": "dmey"}, ValueError, "orthonormal"),
        ({"wavelet": "morl"}, ValueError, "wavelet"),
        ({"wavelet": "nonsense"}, ValueError, "wavelet"),
        ({"wavelet": 3}, TypeError, "wavelet"),
        ({"level": 0}, ValueError, "level"),
        ({"level": 6}, ValueError, "level"),
        ({"level": 2.0}, TypeError, "level"),
        ({"level": True}, TypeError, "level"),
        ({"threshold": -1.0}, ValueError, "threshold"),
        ({"threshold": "minimax"}, ValueError, "threshold"),
    ],
)
def test_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        wavelet_denoise(np.zeros(32), 1.0, **kwargs)


@pytest.mark.parametrize(
    ("y", "sigma", "exc", "match"),
    [
        (np.zeros((2, 2, 2)), 1.0, ValueError, "1-D"),
        (np.zeros(()), 1.0, ValueError, "1-D"),
        (np.zeros(1), 1.0, ValueError, "at least 2"),
        (np.zeros((1, 8)), 1.0, ValueError, "at least 2"),
        ([1.0, np.nan], 1.0, ValueError, "y must be finite"),
        (np.zeros(8), 0.0, ValueError, "sigma"),
    ],
)
def test_bad_observations(y, sigma, exc, match):
    with pytest.raises(exc, match=match):
        wavelet_denoise(y, sigma)
