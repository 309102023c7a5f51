"""Exact discrete Gaussian sampler (CKS20 Algorithms 1-3): distribution, exact paths, API."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from mpmath import mp
from scipy import stats
from scipy.special import ndtr

import dpgauss.noise.discrete_sampler as dg
from dpgauss.noise.discrete_sampler import discrete_gaussian

# ------------------------------------------------------------------------- chi-square helpers


def pmf_integers(sigma: float, lo: int, hi: int) -> np.ndarray:
    """Exact N_Z(0, σ²) probabilities of lo..hi (float64; Z summed over ±(40σ + 40))."""
    span = int(40 * sigma) + 40
    x = np.arange(-span, span + 1, dtype=np.float64)
    z = np.sum(np.exp(-(x * x) / (2 * sigma * sigma)))
    k = np.arange(lo, hi + 1, dtype=np.float64)
    return np.exp(-(k * k) / (2 * sigma * sigma)) / z


def integer_bins(sigma: float, n: int, width: int = 1, min_expected: float = 20.0):
    """Bins of ``width`` consecutive integers around 0 while a single integer still has
    n·p ≥ min_expected; both tails merged into one bin each.  Returns (edges, masses)."""
    half = 1
    while n * pmf_integers(sigma, half + 1, half + 1)[0] >= min_expected:
        half += 1
    half = -(-half // width) * width  # whole bins: [-half, half + 1) split into width-blocks
    edges = np.arange(-half, half + 2, width)
    edges[-1] = half + 1
    probs = pmf_integers(sigma, -half, half)
    masses = np.add.reduceat(probs, edges[:-1] + half)
    tail = (1.0 - probs.sum()) / 2.0
    return edges, np.concatenate([[tail], masses, [tail]])


def chi2_pvalue(samples: np.ndarray, edges: np.ndarray, probs: np.ndarray) -> float:
    """Pearson chi-square p-value of ``samples`` against bins (-inf, e0), [e0, e1), …, [eK, inf)
    with masses ``probs``; end bins with fewer than 5 expected are merged inwards."""
    # bin i holds edges[i-1] <= x < edges[i] (np.histogram would close the last bin)
    counts = np.bincount(np.searchsorted(edges, samples, side="right"), minlength=edges.size + 1)
    expected = probs * samples.size
    lo, hi = 0, len(counts) - 1
    while expected[lo] < 5:
        counts[lo + 1] += counts[lo]
        expected[lo + 1] += expected[lo]
        lo += 1
    while expected[hi] < 5:
        counts[hi - 1] += counts[hi]
        expected[hi - 1] += expected[hi]
        hi -= 1
    observed, expected = counts[lo : hi + 1], expected[lo : hi + 1]
    stat = np.sum((observed - expected) ** 2 / expected)
    return float(stats.chi2.sf(stat, observed.size - 1))


def rounded_normal(sigma: float, n: int, seed: int) -> np.ndarray:
    """A plausible but wrong sampler: round a continuous Gaussian."""
    return np.rint(np.random.default_rng(seed).normal(0.0, sigma, n)).astype(np.int64)


N = 1_000_000


# (σ, bin width): one bin per integer for small σ, blocks of 8 integers (~100 bins) at σ ≥ 100
SIGMAS = [(1.0, 1), (3.7, 1), (123.4, 8)]


@pytest.mark.parametrize(("sigma", "width"), SIGMAS)
def test_chi_square_exact_pmf(sigma, width):
    samples = discrete_gaussian(sigma, N, rng=np.random.default_rng(20240601))
    assert samples.dtype == np.int64 and samples.shape == (N,)
    edges, probs = integer_bins(sigma, N, width)
    assert chi2_pvalue(samples, edges, probs) > 1e-3


@pytest.mark.parametrize(("sigma", "width"), SIGMAS)
def test_chi_square_rejects_a_wrong_sampler(sigma, width):
    """Same test, same size: rounding a continuous Gaussian is rejected overwhelmingly,
    with the right σ at σ = 1 (P[0] is 0.383 instead of 0.399) and with σ 1% too large
    at the other σ."""
    wrong = sigma if sigma == 1.0 else sigma * 1.01
    edges, probs = integer_bins(sigma, N, width)
    assert chi2_pvalue(rounded_normal(wrong, N, 1), edges, probs) < 1e-8


def test_chi_square_large_sigma_wide_bins():
    """σ = 1e6 (t = 10^6 + 1): 100 bins of width σ/10 in ±5σ; for such σ the bin masses are
    Φ differences with continuity correction to ~1e-13."""
    sigma = 1e6
    samples = discrete_gaussian(sigma, N, rng=np.random.default_rng(7))
    inner = np.linspace(-5 * sigma, 5 * sigma, 101)
    cdf = ndtr((inner - 0.5) / sigma)
    probs = np.concatenate([[cdf[0]], np.diff(cdf), [1 - cdf[-1]]])
    assert chi2_pvalue(samples, inner, probs) > 1e-3
    wrong = rounded_normal(sigma * 1.01, N, 2)
    assert chi2_pvalue(wrong, inner, probs) < 1e-8


def test_small_sigma_uses_the_big_candidate_path():
    # σ = 0.3: a_big = 10 so big candidates are exercised; check the three-point law.
    samples = discrete_gaussian(0.3, 200_000, rng=3)
    p = pmf_integers(0.3, -1, 1)
    counts = np.array([np.sum(samples <= -1), np.sum(samples == 0), np.sum(samples >= 1)])
    assert stats.chisquare(counts, p / p.sum() * samples.size).pvalue > 1e-4
    # σ = 0.05: a_big = 2, most candidates are big; P[X ≠ 0] ~ e^-200.
    assert not discrete_gaussian(0.05, 10_000, rng=4).any()


def test_huge_sigma_smoke():
    x = discrete_gaussian(2.0**40, 20_000, rng=5)
    assert abs(x.std() / 2.0**40 - 1) < 0.05


# -------------------------------------------------------------------------- reproducibility


def test_seed_reproducible():
    a = discrete_gaussian(3.7, 5000, rng=42)
    assert np.array_equal(a, discrete_gaussian(3.7, 5000, rng=42))
    assert not np.array_equal(a, discrete_gaussian(3.7, 5000, rng=43))
    g1, g2 = np.random.default_rng(9), np.random.default_rng(9)
    assert np.array_equal(discrete_gaussian(10.0, 100, g1), discrete_gaussian(10.0, 100, g2))
    assert not np.array_equal(discrete_gaussian(10.0, 100, g1), discrete_gaussian(10.0, 100, g1))


def test_no_global_state():
    """numpy's legacy global generator is neither read nor advanced."""
    before = np.random.get_state()[1].copy()  # noqa: NPY002 (inspecting the global state)
    discrete_gaussian(2.0, 1000, rng=1)
    discrete_gaussian(2.0, 1000, rng="secure")
    assert np.array_equal(before, np.random.get_state()[1])  # noqa: NPY002


def test_secure_mode():
    samples = discrete_gaussian(3.7, 200_000)  # default rng="secure"
    assert samples.dtype == np.int64
    edges, probs = integer_bins(3.7, samples.size)
    assert chi2_pvalue(samples, edges, probs) > 1e-6  # fresh OS randomness: fails w.p. 1e-6


def test_shapes():
    assert discrete_gaussian(1.0, (2, 3), rng=0).shape == (2, 3)
    assert discrete_gaussian(1.0, 0, rng=0).shape == (0,)
    assert discrete_gaussian(1.0, (), rng=0).shape == ()
    assert discrete_gaussian(1.0, np.int64(4), rng=0).shape == (4,)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sigma": 0.0}, ValueError, "sigma must be in"),
        ({"sigma": -1.0}, ValueError, "sigma must be in"),
        ({"sigma": math.nan}, ValueError, "sigma"),
        ({"sigma": math.inf}, ValueError, "sigma"),
        ({"sigma": 2.0**41}, ValueError, "sigma must be in"),
        ({"sigma": [1.0, 2.0]}, ValueError, "scalar"),
        ({"sigma": "1"}, TypeError, "sigma"),
        ({"sigma": None}, TypeError, "sigma"),
        ({"sigma": 1.0, "size": -1}, ValueError, "size"),
        ({"sigma": 1.0, "size": (2, -1)}, ValueError, "size"),
        ({"sigma": 1.0, "size": 1.5}, TypeError, "size"),
        ({"sigma": 1.0, "size": True}, TypeError, "size"),
        ({"sigma": 1.0, "size": [2, 3]}, TypeError, "size"),
        ({"sigma": 1.0, "rng": None}, TypeError, "rng"),
        ({"sigma": 1.0, "rng": "fast"}, ValueError, "rng"),
    ],
)
def test_validation(kwargs, error, match):
    kwargs = {"size": 3, **kwargs}
    with pytest.raises(error, match=match):
        discrete_gaussian(**kwargs)


# ----------------------------------------------------------------- the exact building blocks


def frac_part(x: mpmath.mpf) -> float:
    return float(x - mpmath.floor(x))


def test_thresholds_are_exact_floors():
    with mp.workdps(120):
        for k in range(0, 60):
            assert int(dg._THRESHOLDS[k]) == int(mpmath.floor(mpmath.exp(-k) * 2**62))
        for k, bits in [(1, 200), (7, 300), (43, 94), (500, 800), (3, 62)]:
            assert dg._floor_exp_neg(k, bits) == int(
                mpmath.floor(mpmath.exp(-k) * mpmath.mpf(2) ** bits)
            )


def binomial_ok(successes: int, trials: int, p: float) -> bool:
    return stats.binomtest(successes, trials, p).pvalue > 1e-5


def test_tie_is_continued_with_fresh_bits():
    """If the 62-bit uniform equals T_k the comparison continues on further bits, so
    P[yes] = frac(e^{-k} 2^62)."""
    rng = np.random.default_rng(11)
    for k in (1, 5):
        thr = int(dg._THRESHOLDS[k])
        hits = sum(dg._less_than_exp_neg([thr, 62], k, rng) for _ in range(4000))
        with mp.workdps(60):
            p = frac_part(mpmath.exp(-k) * 2**62)
        assert binomial_ok(hits, 4000, p)
    # far below the threshold region: e^{-1000} needs > 1440 leading zero bits
    assert not dg._less_than_exp_neg([0, 62], 1000, rng) or False


class TiedSource:
    """First 62-bit draw returns a fixed value (a tie); everything else is a real Generator."""

    def __init__(self, value: int, seed: int) -> None:
        self.value, self.gen, self.first = value, np.random.default_rng(seed), True

    def integers(self, low, high=None, size=None, dtype=np.int64):
        if self.first:
            self.first = False
            return np.full(size, self.value, dtype=np.int64)
        return self.gen.integers(low, high, size=size, dtype=dtype)


def test_geometric_tie_path():
    """A tie with T_1 gives G = 1 w.p. frac(e^{-1} 2^62), else 0; a zero draw gives G ≥ 42."""
    thr = int(dg._THRESHOLDS[1])
    ones = sum(int(dg._geometric(1, TiedSource(thr, s))[0]) for s in range(3000))
    with mp.workdps(60):
        p = frac_part(mpmath.exp(-1) * 2**62)
    assert binomial_ok(ones, 3000, p)
    assert dg._geometric(1, TiedSource(0, 1))[0] >= 42


def test_geometric_law():
    g = dg._geometric(1_000_000, np.random.default_rng(12))
    counts = np.bincount(g, minlength=12)[:12]
    tail = g.size - counts.sum()
    k = np.arange(12)
    p = np.exp(-k) * (1 - np.exp(-1))
    expected = np.concatenate([p, [math.exp(-12)]]) * g.size
    observed = np.concatenate([counts, [tail]])
    keep = expected >= 5
    assert (
        stats.chisquare(
            observed[keep], expected[keep] * observed[keep].sum() / expected[keep].sum()
        ).pvalue
        > 1e-4
    )


def test_bernoulli_exp_neg_ratio_law():
    rng = np.random.default_rng(13)
    for num, den in [(0, 5), (3, 7), (7, 7), (999_999, 1_000_001)]:
        hits = int(dg._bernoulli_exp_neg_ratio(np.full(100_000, num), den, rng).sum())
        assert binomial_ok(hits, 100_000, math.exp(-num / den))


def test_exact_python_bernoullis():
    rng = np.random.default_rng(14)
    f = Fraction(1, 3)
    hits = sum(dg._bernoulli_exp_neg_fraction(f, rng) for _ in range(20_000))
    assert binomial_ok(hits, 20_000, math.exp(-1 / 3))
    r = Fraction(2, 7)
    hits = sum(dg._bernoulli_fraction(r, rng) for _ in range(20_000))
    assert binomial_ok(hits, 20_000, 2 / 7)
    assert dg._bernoulli_fraction(Fraction(-1, 2), rng) is False
    assert dg._bernoulli_fraction(Fraction(3, 2), rng) is True


@pytest.mark.parametrize("sigma", [1.0, 3.7, 1e6])
def test_vectorised_acceptance_probabilities(sigma):
    """P[accept | |Y| = a] = exp(-(a - σ²/t)²/(2σ²)) for the int64 fast path."""
    prm = dg._params(sigma)
    rng = np.random.default_rng(15)
    for a in (0, prm.t - 1, prm.t, 2 * prm.t + 3, prm.a_big - 3 * prm.t):
        hits = int(dg._accept(np.full(100_000, a, dtype=np.int64), prm, rng).sum())
        assert binomial_ok(hits, 100_000, math.exp(-float(prm.gamma(a))))
    # γ ≈ 512 (fast path, often straddling 511/512) and γ ≥ 512 (big path): all rejected
    assert not dg._accept(np.full(500, prm.a_big - 1, dtype=np.int64), prm, rng).any()
    assert not dg._accept(np.full(1000, prm.a_big, dtype=np.int64), prm, rng).any()


def test_all_exact_slow_path(monkeypatch):
    """Route every candidate through the Fraction slow path: same law (chi-square)."""

    def exact_only(a, prm, source):
        return np.array([dg._accept_exact(int(v), prm, source, None) for v in a], dtype=bool)

    monkeypatch.setattr(dg, "_accept", exact_only)
    samples = discrete_gaussian(1.7, 20_000, rng=16)
    edges, probs = integer_bins(1.7, samples.size)
    assert chi2_pvalue(samples, edges, probs) > 1e-4


def test_params_fit_int64_across_the_range():
    for sigma in [2.0**-30, 1e-7, 0.01, 0.3, 1.0, 3.7, 1e3, 1e6, 123456.789, 1e9, 2.0**40]:
        prm = dg._params(sigma)
        worst = prm.a_big - 1
        assert worst * (prm.r + 1) + worst < 2**63
        assert Fraction(prm.a_big) / Fraction(sigma) - Fraction(sigma) / prm.t >= 32
