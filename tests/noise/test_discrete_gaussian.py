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
    """Route every candidate of the rejection path through the Fraction slow path: same
    law (chi-square)."""

    def exact_only(a, prm, source):
        return np.array([dg._accept_exact(int(v), prm, source, None) for v in a], dtype=bool)

    monkeypatch.setattr(dg, "_accept", exact_only)
    samples = dg._sample_rejection(dg._params(1.7), 20_000, np.random.default_rng(16))
    edges, probs = integer_bins(1.7, samples.size)
    assert chi2_pvalue(samples, edges, probs) > 1e-4


def test_params_fit_int64_across_the_range():
    for sigma in [2.0**-30, 1e-7, 0.01, 0.3, 1.0, 3.7, 1e3, 1e6, 123456.789, 1e9, 2.0**40]:
        prm = dg._params(sigma)
        worst = prm.a_big - 1
        assert worst * (prm.r + 1) + worst < 2**63
        assert Fraction(prm.a_big) / Fraction(sigma) - Fraction(sigma) / prm.t >= 32


# ------------------------------------------------------- the three paths (issue #31 item 7)
#
# discrete_gaussian samples by inversion of an exact CDF table for 1 ≤ σ ≤ 2^12, by the
# lean rejection path (merged test, lazily read uniforms, pooled bytes) for t ≤ 2^20, and
# by CKS20 as written beyond.  Each path against the exact law, and each new exact piece
# against its probability.


@pytest.mark.parametrize(
    ("sigma", "width", "path"),
    [
        (1.0, 1, dg._sample_table),
        (270.37960332144536, 16, dg._sample_table),  # a count's σ_L on the integer lattice
        (4096.0, 256, dg._sample_table),  # the table's edge
        (0.3, 1, "lean"),
        (1.7, 1, "lean"),
        (5000.5, 256, "lean"),
        (34875.761648714855, 2048, "lean"),  # a sum's σ_L on its 2^-13 grid
        (1.7, 1, "rejection"),
        (3000.0, 256, "rejection"),
    ],
)
def test_each_path_chi_square(sigma, width, path):
    """Every path, called directly, on the exact pmf (one bin per `width` integers; at
    σ ≥ 1000 the 100 bins of width σ/10 of ``test_chi_square_large_sigma_wide_bins``)."""
    rng = np.random.default_rng(31)
    if path is dg._sample_table:
        samples = dg._sample_table(Fraction(sigma), N // 4, dg._Pool(rng), rng)
    elif path == "lean":
        samples = dg._sample_lean(dg._params(sigma), N // 4, rng)
    else:
        samples = dg._sample_rejection(dg._params(sigma), N // 4, rng)
    edges, probs = bins_for(sigma, samples.size, width)
    assert chi2_pvalue(samples, edges, probs) > 1e-3


def bins_for(sigma: float, n: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """integer_bins for σ < 1000, else 100 bins of width σ/10 in ±5σ whose masses are Φ
    differences with continuity correction (to ~1e-13 at such σ)."""
    if sigma < 1000:
        return integer_bins(sigma, n, width)
    inner = np.round(np.linspace(-5 * sigma, 5 * sigma, 101))
    cdf = ndtr((inner - 0.5) / sigma)
    return inner, np.concatenate([[cdf[0]], np.diff(cdf), [1 - cdf[-1]]])


def test_paths_by_sigma():
    assert dg._TABLE_SIGMA == (1.0, 2.0**12)
    assert dg._params(0.3).lean and dg._params(5000.5).lean and dg._params(2.0**19).lean
    assert not dg._params(2.0**21).lean  # t > 2^20: CKS20 as written
    x = discrete_gaussian(2.0**21, 20_000, rng=5)
    assert abs(x.std() / 2.0**21 - 1) < 0.05


def test_secure_mode_on_the_new_paths():
    for sigma in (270.37960332144536, 34875.761648714855):
        samples = discrete_gaussian(sigma, 200_000, "secure")
        edges, probs = bins_for(sigma, samples.size, 64)
        assert chi2_pvalue(samples, edges, probs) > 1e-6  # fresh OS randomness


def theta_sum(s: mpmath.mpf) -> mpmath.mpf:
    """Σ_{y∈Z} e^{-y²/(2s²)} = s√(2π)(1 + 2 Σ_k e^{-2π²s²k²}) (Poisson summation), s ≥ 1:
    the terms beyond k = 6 are below e^{-700}."""
    return (
        s
        * mpmath.sqrt(2 * mpmath.pi)
        * (1 + 2 * sum(mpmath.exp(-2 * mpmath.pi**2 * s * s * k * k) for k in range(1, 7)))
    )


@pytest.mark.parametrize("sigma", [1.0, 3.7, 270.37960332144536, 4096.0])
def test_cdf_table_brackets_the_exact_cdf(sigma):
    """L_j ≤ P[|Y| ≤ j]·2^64 ≤ H_j (60 digits; the normalising sum by Poisson summation)."""
    tab = dg._cdf_table(Fraction(sigma))
    size = tab.lower.size
    with mp.workdps(60):
        s = mpmath.mpf(Fraction(sigma).numerator) / Fraction(sigma).denominator
        z = theta_sum(s)
        picks = sorted({0, 1, size // 3, size // 2, size - 2, size - 1})
        total, j0 = mpmath.mpf(0), -1
        for j in picks:
            if j0 < 0:
                total = mpmath.mpf(1)
                j0 = 0
            for y in range(j0 + 1, j + 1):
                total += 2 * mpmath.exp(-(y * y) / (2 * s * s))
            j0 = j
            exact = total / z * mpmath.mpf(2) ** 64
            assert int(tab.lower[j]) <= exact <= int(tab.upper[j]), (sigma, j)
        # the tail beyond the table is below 2^-40 and not empty
        tail = 1 - total / z
        assert 0 < tail < mpmath.mpf(2) ** -40


def test_inversion_left_open_is_finished_with_fresh_bits():
    """A uniform whose leading 64 bits W sit inside the bracket of C_j: |Y| = j − 1 or j
    (here: 0 or 1 at j = 1... the index the walk settles) with P[|Y| < j] =
    frac(C_{j−1}·2^64) when W = ⌊C_{j−1}·2^64⌋."""
    sigma = Fraction(3.7)
    tab = dg._cdf_table(sigma)
    j = 2
    with mp.workdps(80):
        s = mpmath.mpf(sigma.numerator) / sigma.denominator
        z = theta_sum(s)
        c = (1 + 2 * sum(mpmath.exp(-(y * y) / (2 * s * s)) for y in range(1, j + 1))) / z
        w = int(mpmath.floor(c * mpmath.mpf(2) ** 64))
        p = frac_part(c * mpmath.mpf(2) ** 64)  # P[Unif < C_j | leading bits w]
    assert int(tab.lower[j]) <= w < int(tab.upper[j])  # the table cannot decide
    pos = int(np.searchsorted(tab.lower, np.uint64(w), side="right"))
    rng = np.random.default_rng(33)
    got = [dg._finish_inversion(w, pos, sigma, rng) for _ in range(4000)]
    assert set(got) <= {j, j + 1}
    assert binomial_ok(sum(g == j for g in got), 4000, p)


def test_tail_beyond_the_table():
    """|Y| given |Y| ≥ size: chi-square against w_y ∝ e^{-y²/(2σ²)}, y ≥ size."""
    sigma = Fraction(1)
    size = 3
    rng = np.random.default_rng(34)
    draws = np.array([dg._sample_tail(size, sigma, rng) for _ in range(6000)])
    ys = np.arange(size, size + 4)
    w = np.exp(-(ys.astype(float) ** 2) / 2)
    w_tail = np.exp(-(np.arange(size + 4, size + 40.0) ** 2) / 2).sum()
    total = w.sum() + w_tail
    observed = np.array([np.sum(draws == y) for y in ys[:2]] + [np.sum(draws >= ys[2])])
    expected = np.array([w[0], w[1], w[2] + w[3] + w_tail]) / total * draws.size
    assert draws.min() >= size
    assert stats.chisquare(observed, expected).pvalue > 1e-4


def test_bernoulli_exp_neg_rational():
    rng = np.random.default_rng(35)
    for x in (Fraction(0), Fraction(1, 3), Fraction(5, 3), Fraction(7, 2)):
        hits = sum(dg._bernoulli_exp_neg_rational(x, rng) for _ in range(20_000))
        assert binomial_ok(hits, 20_000, math.exp(-float(x)))


@pytest.mark.parametrize("sigma", [0.3, 1.7, 5000.5, 34875.761648714855])
def test_lean_acceptance_probabilities(sigma):
    """P[accept | |Y| = a, U = u] = exp(-(γ(a) + u/t)) in the lean path's merged test."""
    prm = dg._params(sigma)
    rng = np.random.default_rng(36)
    t = prm.t
    for a in (0, t - 1, t, 2 * t + 3, max(prm.a_big - 3 * t, 0)):
        u = a % t
        pool = dg._Pool(rng)
        ones = np.full(50_000, a, dtype=np.int64)
        hits = int(dg._accept_lean(ones, np.full(50_000, u, np.int64), prm, pool, rng).sum())
        p = math.exp(-float(prm.gamma(a) + Fraction(u, t)))
        assert binomial_ok(hits, 50_000, p), (sigma, a)
    big = np.full(500, prm.a_big, dtype=np.int64)
    assert not dg._accept_lean(big, big % t, prm, dg._Pool(rng), rng).any()


def test_lean_all_exact_slow_path(monkeypatch):
    """Route every lean candidate through the Fraction slow path (γ + U/t): same law."""

    def exact_only(a, u, prm, pool, source):
        return np.array(
            [
                dg._accept_exact(int(v), prm, source, None, Fraction(int(w), prm.t))
                for v, w in zip(a, u, strict=True)
            ],
            dtype=bool,
        )

    monkeypatch.setattr(dg, "_accept_lean", exact_only)
    samples = dg._sample_lean(dg._params(5.3e3), 20_000, np.random.default_rng(37))
    edges, probs = bins_for(5.3e3, samples.size, 512)
    assert chi2_pvalue(samples, edges, probs) > 1e-4


def test_lean_geometric_with_undecided_leading_bits():
    """Leading 16 bits equal to those of T[1]: G = 1 or more w.p. frac(e^{-1}·2^16)."""
    prefix = int(dg._PREFIX[1])
    g = dg._geometric_lean(np.full(4000, prefix, dtype=np.int64), np.random.default_rng(38))
    with mp.workdps(40):
        p = frac_part(mpmath.exp(-1) * 2**16)
    assert set(np.unique(g)) <= {0, 1}
    assert binomial_ok(int(g.sum()), 4000, p)
    # a decided prefix: no further bits, the count of thresholds above it
    assert dg._geometric_lean(
        np.array([0xFFFF, prefix + 1]), np.random.default_rng(1)
    ).tolist() == [0, 0]


class _CountingBytes:
    """A source whose bytes are 0, 1, 2, … (mod 256): shows which bytes the pool served."""

    def __init__(self) -> None:
        self.served = 0

    def bytes(self, n: int) -> bytes:
        out = bytes((self.served + i) % 256 for i in range(n))
        self.served += n
        return out


def test_pool_serves_each_byte_once():
    src = _CountingBytes()
    pool = dg._Pool(src)
    pool.reserve(10)
    a = pool.words(3)  # bytes 0..5
    b = pool.bits(9)  # bytes 6, 7
    c = pool.words(4, wide=True)  # bytes 8..23 (a refill of at least _POOL_CHUNK)
    assert a.tolist() == [0x0100, 0x0302, 0x0504]
    assert b.tolist() == [False] * 5 + [True, True, False] + [False]  # 6 = 0b00000110, 7: 0...
    assert c.tolist()[0] == 0x0B0A0908
    assert src.served >= 24
