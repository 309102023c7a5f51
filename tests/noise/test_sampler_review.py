"""Adversarial review of the exact sampler's table inversion and two-level path: bounded
memory for huge sizes, the block table's decisions on the real σ' against a 45-digit CDF,
the guide search on adversarial leads, and the block table's tail."""

from __future__ import annotations

import tracemalloc
from fractions import Fraction
from types import SimpleNamespace

import mpmath
import numpy as np
import pytest
from mpmath import mp

import dpgauss.noise.discrete_sampler as dg
from dpgauss.noise.discrete_sampler import discrete_gaussian

SUM_SIGMA = 34875.761648714855  # GaussianMechanism(1, 1e-6, 1)'s σ_L on the grid 2^-13
COUNT_SIGMA = 270.37960332144536  # its σ_L for counts on the grid 2^-6


@pytest.mark.parametrize("sigma", [COUNT_SIGMA, SUM_SIGMA])
def test_scratch_memory_is_bounded_for_a_huge_size(sigma):
    """2·10^6 values: the memory beyond the 16 MB output stays under 24 MB (the sampler
    works in batches; without them the two-level path took ~190 MB, ~96 bytes a value)."""
    n = 2_000_000
    discrete_gaussian(sigma, 16, rng=1)  # tables built outside the measurement
    tracemalloc.start()
    try:
        out = discrete_gaussian(sigma, n, rng=np.random.default_rng(60))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.shape == (n,)
    assert peak - out.nbytes < 24 * 2**20, peak


# ------------------------------------------------------ the block table, on the real σ'


def _cdf(sigma: Fraction, center: int, n: int) -> list[mpmath.mpf]:
    """[C_0, …, C_{n-1}] of |Y| (center = 1) or of the one-sided law (center = 2), summed
    directly to 40σ + 40 (the rest is below e^-800) at the caller's precision."""
    s = mpmath.mpf(sigma.numerator) / sigma.denominator
    w = [mpmath.exp(-mpmath.mpf(y * y) / (2 * s * s)) for y in range(int(40 * s) + 40)]
    z = sum(w) if center == 2 else 2 * sum(w) - 1
    out, total = [], mpmath.mpf(0)
    for y in range(n):
        total += w[y] if center == 2 or y == 0 else 2 * w[y]
        out.append(total / z)
    return out


BLOCKS = [SUM_SIGMA, 2.0**20, float(np.nextafter(2.0**12, np.inf)), float(np.nextafter(2.0**13, 0))]


class _Recorded:
    """``dg.random_bits`` from a seeded generator, every draw recorded (value, bits)."""

    def __init__(self, seed: int) -> None:
        self.rng, self.drawn = np.random.default_rng(seed), []
        self.real = dg.random_bits

    def __call__(self, source: object, k: int) -> int:
        x = self.real(self.rng, k)
        self.drawn.append((x, k))
        return x


def _interval(word: int, bits: int, drawn: list[tuple[int, int]]) -> tuple[mpmath.mpf, mpmath.mpf]:
    """[lo, hi): where the uniform whose leading bits are ``word`` then ``drawn`` lies."""
    for x, k in drawn:
        word, bits = (word << k) | x, bits + k
    scale = mpmath.mpf(2) ** bits
    return mpmath.mpf(word) / scale, mpmath.mpf(word + 1) / scale


@pytest.mark.parametrize("sigma", BLOCKS)
def test_block_inversion_answers_inside_the_uniforms_interval(sigma):
    """The blocks' table (σ' = σ/m ∈ [64, 128), center = 2), end to end through
    ``_invert``: for every leading 32-bit word within 2 of some ⌊C_j 2^32⌋, lead_j or
    ⌈H_j/2^32⌉ (all the boundaries, the far tail's equal leads, 0 and 2^32 - 1), with the
    further bits it draws (seeded, recorded), the uniform's interval lies in [C_{j-1}, C_j)
    of the answer j (45 digits; beyond C_J when the answer comes from the tail)."""
    block = dg._two_level(sigma).block
    tab = dg._cdf_table(block, center=2)
    size = tab.lower.size
    assert (tab.spread > 1).any()  # the far tail's buckets take the fallback search
    with mp.workdps(45):
        cdf = _cdf(block, 2, size)
        near = [int(mpmath.floor(c * 2**32)) for c in cdf]
    words = {
        b + d
        for b in near + tab.lead[:-1].tolist() + tab.ceil_upper.tolist()
        for d in (-2, -1, 0, 1, 2)
    }
    rec = _Recorded(65)
    tail = dg._sample_tail
    drew = 0
    with mp.workdps(45), pytest.MonkeyPatch.context() as mp_:
        mp_.setattr(dg, "random_bits", rec)
        mp_.setattr(dg, "_sample_tail", lambda size_, s, src: -1)  # marks the tail
        for v in sorted(x for x in words | {0, 2**32 - 1} if 0 <= x < 2**32):
            rec.drawn.clear()
            pool = dg._Pool(SimpleNamespace(bytes=lambda n, v=v: v.to_bytes(4, "little")))
            j = int(dg._invert(block, 1, pool, None, center=2)[0])  # type: ignore[arg-type]
            drew += bool(rec.drawn)
            lo, hi = _interval(v, 32, rec.drawn)
            if j == -1:
                assert lo >= cdf[-1], v
            else:
                assert 0 <= j < size and (j == 0 or cdf[j - 1] <= lo) and hi <= cdf[j], (v, j)
    assert tail is dg._sample_tail
    assert 0 < drew < len(words)


def test_block_inversion_finished_exactly_at_the_boundaries():
    """64-bit words at ⌊C_j 2^64⌋ - 1, + 0, + 1 of the sum's blocks (σ' = 68.1, center = 2),
    every 7th j and the last: ``_finish_inversion`` draws further bits of the same uniform;
    with all the bits it drew, the uniform's interval lies in [C_{j-1}, C_j) of its
    answer, or beyond C_J when it answers the tail (-1) (120 digits)."""
    block = dg._two_level(SUM_SIGMA).block
    tab = dg._cdf_table(block, center=2)
    size = tab.lower.size
    rec = _Recorded(61)
    drew = 0
    with mp.workdps(120), pytest.MonkeyPatch.context() as mp_:
        mp_.setattr(dg, "random_bits", rec)
        cdf = _cdf(block, 2, size)
        for j in [*range(0, size, 7), size - 1]:
            for off in (-1, 0, 1):
                w = int(mpmath.floor(cdf[j] * 2**64)) + off
                p = int(np.searchsorted(tab.lower, np.uint64(w), side="right"))
                rec.drawn.clear()
                got = dg._finish_inversion(w, p, block, None, 2)  # type: ignore[arg-type]
                drew += bool(rec.drawn)
                lo, hi = _interval(w, 64, rec.drawn)
                if got == -1:
                    assert lo >= cdf[-1], (j, off)
                else:
                    assert (got == 0 or cdf[got - 1] <= lo) and hi <= cdf[got], (j, off, got)
    assert drew > 0  # the boundary words do draw further bits


def test_block_table_tail_is_sampled_not_dropped():
    """A uniform beyond C_J of the blocks' table (leading 32 bits all ones, then 64 more all
    ones) gives a block q ≥ J + 1 from the exact tail sampler, never J or an error."""

    class Ones:
        def integers(self, low, high=None, size=None, dtype=np.int64):
            return np.full(size, high - 1, dtype=np.int64)

    block = dg._two_level(SUM_SIGMA).block
    size = dg._cdf_table(block, center=2).lower.size
    pool = dg._Pool(SimpleNamespace(bytes=lambda n: b"\xff" * n))
    calls: list[int] = []
    real = dg._sample_tail

    def spy(size_, sigma, source):
        calls.append(size_)
        return real(size_, sigma, np.random.default_rng(62))

    with pytest.MonkeyPatch.context() as mp_:
        mp_.setattr(dg, "_sample_tail", spy)
        q = dg._invert(block, 3, pool, Ones(), center=2)
    assert calls == [size] * 3 and (q >= size).all()


# ------------------------------------------------------------------- the guide search


def test_guide_search_on_adversarial_leads():
    """``_search`` = searchsorted for sorted 32-bit leads of every shape the guide must
    survive: random, clustered with duplicates, on bucket edges (first and last word of a
    bucket), only 0 / 1 / 2^32 - 2 / 2^32 - 1, for guide widths 1 to 16 bits (seeded)."""
    rng = np.random.default_rng(63)
    one = np.uint32(1)
    for trial in range(1200):
        n, bits = int(rng.integers(1, 300)), int(rng.integers(1, 17))
        g = 32 - bits
        kind = trial % 4
        if kind == 0:
            lead = rng.integers(0, 2**32, n, dtype=np.uint64)
        elif kind == 1:
            lead = int(rng.integers(0, 2**32 - 1000)) + rng.integers(0, 1000, n, dtype=np.uint64)
        elif kind == 2:
            edge = np.array([0, 1, (1 << g) - 1], dtype=np.uint64)
            lead = (rng.integers(0, 1 << bits, n, dtype=np.uint64) << np.uint64(g)) + rng.choice(
                edge, n
            )
        else:
            lead = rng.choice(np.array([0, 1, 2**32 - 2, 2**32 - 1], dtype=np.uint64), n)
        lead = np.sort(np.minimum(lead, 2**32 - 1)).astype(np.uint32)
        guide, spread = dg._guide(lead, bits)
        tab = SimpleNamespace(
            lead=np.append(lead, np.uint32(0xFFFFFFFF)),
            guide=guide,
            spread=spread,
            shift=np.uint32(g),
        )
        v = np.concatenate(
            [
                lead,
                lead - one,
                lead + one,
                np.array([0, 2**32 - 1], dtype=np.uint32),
                rng.integers(0, 2**32, 100, dtype=np.uint32),
            ]
        ).astype(np.uint32)
        assert np.array_equal(dg._search(tab, v), np.searchsorted(lead, v, side="right"))


# ---------------------------------------------------------------- range edges and sizes


@pytest.mark.parametrize(
    "sigma",
    [
        float(np.nextafter(2.0**12, np.inf)),
        4096.000000001,
        float(np.nextafter(2.0**13, 0)),
        2.0**13,
        float(np.nextafter(2.0**20, 0)),
        2.0**20,
    ],
)
def test_two_level_edges_brackets_exact(sigma):
    """At the edges of the range and of k: σ' ∈ [64, 128), and the int64 bracket of
    x·2^53 holds exactly (Fraction) for every r of blocks 0-3, 100, 1100 (beyond the
    table's ~8.2σ') and the last two below a_fast."""
    prm = dg._two_level(sigma)
    m = 1 << prm.k
    assert 64 <= prm.block < 128 and prm.block * m == Fraction(sigma)
    qs = sorted({0, 1, 2, 3, 100, 1100, (prm.a_fast - 1) // m - 1, (prm.a_fast - 1) // m})
    qm = np.repeat(np.array(qs, dtype=np.int64) * m, m)
    r = np.tile(np.arange(m, dtype=np.int64), len(qs))
    a, f_lo, f_hi = dg._two_level_bracket(prm, qm, r)
    keep = a < prm.a_fast
    for ai, lo, hi in zip(a[keep].tolist(), f_lo[keep].tolist(), f_hi[keep].tolist(), strict=True):
        assert 0 <= lo <= prm.x(ai) * (1 << 53) <= hi


@pytest.mark.parametrize("sigma", [float(np.nextafter(2.0**12, np.inf)), SUM_SIGMA, 2.0**20])
def test_two_level_sizes_zero_and_one(sigma):
    assert discrete_gaussian(sigma, 0, rng="secure").shape == (0,)
    assert discrete_gaussian(sigma, (3, 0), rng=1).shape == (3, 0)
    one = discrete_gaussian(sigma, 1, rng="secure")
    assert one.shape == (1,) and one.dtype == np.int64


# ------------------------------------------------------------- the law inside a block


def test_two_level_offset_in_block_and_sign():
    """The sum's path (m = 512), 2·10^6 seeded values: the mean of (|Y| mod m)/m equals the
    exact law's (the in-block slope exp(-x) gives it; a trial accepting every r moves it by
    ~8 standard errors), and the sign of Y ≠ 0 is independent of the offset's upper half (a
    sign bit overlapping r's would not be)."""
    from scipy import stats

    prm = dg._two_level(SUM_SIGMA)
    m = 1 << prm.k
    y = dg._sample_two_level(prm, 2_000_000, np.random.default_rng(64))
    a = np.arange(0, int(14 * SUM_SIGMA), dtype=np.float64)
    w = np.exp(-a * a / (2 * SUM_SIGMA * SUM_SIGMA))
    w[1:] *= 2
    off = (np.arange(a.size) % m) / m
    mean = float((w * off).sum() / w.sum())
    sd = float(np.sqrt((w * (off - mean) ** 2).sum() / w.sum() / y.size))
    got = float(((np.abs(y) % m) / m).mean())
    assert abs(got - mean) < 4 * sd, (got, mean, sd)
    nz = y[y != 0]
    table = np.histogram2d(nz < 0, (np.abs(nz) % m) >= m // 2, bins=2)[0]
    assert stats.chi2_contingency(table)[1] > 1e-3
