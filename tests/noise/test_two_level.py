"""The two-level path of the exact discrete Gaussian sampler (2^12 < σ ≤ 2^20) and the table
inversion it shares with the table path: exact checks of every decision, then the law."""

from __future__ import annotations

from fractions import Fraction

import mpmath
import numpy as np
import pytest
from mpmath import mp

import dpgauss.noise.discrete_sampler as dg
from dpgauss.noise.discrete_sampler import discrete_gaussian
from dpgauss.noise.mechanisms import GaussianMechanism

from .test_discrete_gaussian import bins_for, chi2_pvalue, integer_bins, theta_sum

SUM_SIGMA = 34875.761648714855  # GaussianMechanism(1, 1e-6, 1)'s σ_L on the grid 2^-13


class _Bytes:
    """A byte source serving ``data`` in order (then zeros), for ``dg._Pool``."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def bytes(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out + bytes(n - len(out))


class _NoBits:
    """A source that must not be asked for further bits."""

    def integers(self, *args, **kwargs):
        raise AssertionError("further bits drawn")


class _FixedBits:
    """A source whose ``integers(0, 2^62, size=1)`` is ``word`` (so random_bits(·, k) is the
    leading k of its 62 bits)."""

    def __init__(self, word: int) -> None:
        self.word, self.calls = word, 0

    def integers(self, low, high=None, size=None, dtype=np.int64):
        assert high == 1 << 62 and size == 1
        self.calls += 1
        return np.array([self.word], dtype=np.int64)


def test_params_across_the_range():
    """m = 2^k with σ/m ∈ [64, 128), K ≥ 2^21, and the int64 bound holds at the ends."""
    for sigma in (2.0**12 + 0.5, 5000.5, SUM_SIGMA, 123456.789, 2.0**20 - 0.25, 2.0**20):
        prm = dg._two_level(sigma)
        m = 1 << prm.k
        assert prm.block == Fraction(sigma) / m and 64 <= prm.block < 128
        assert prm.k + 1 <= 16 and prm.inv >= 1 << 21
        assert prm.inv == (Fraction(1 << (52 + prm.shift)) / Fraction(sigma) ** 2).__floor__()
        assert 2 * m * prm.a_fast * (prm.inv + 1) + (1 << prm.shift) <= dg._INT64_MAX


def test_params_refused_outside_the_int64_bounds():
    with pytest.raises(ValueError, match="outside the range of the two-level path"):
        dg._make_two_level(Fraction(2.0**40), 34)  # m = 2^34: r and the sign exceed 16 bits
    with pytest.raises(ValueError, match="outside the range of the two-level path"):
        dg._make_two_level(Fraction(2.0**33), 10)  # num·K cannot fit int64 with K ≥ 2^20


def test_routing_by_sigma():
    called = []
    real = dg._sample_two_level

    def spy(prm, n, source):
        called.append(float(prm.sigma))
        return real(prm, n, source)

    import pytest as _pt

    with _pt.MonkeyPatch.context() as mp_:
        mp_.setattr(dg, "_sample_two_level", spy)
        discrete_gaussian(4096.0, 3, rng=1)  # the table's edge
        discrete_gaussian(0.5, 3, rng=1)  # the lean path
        discrete_gaussian(2.0**20 * 1.5, 3, rng=1)  # CKS20 as written
        assert called == []
        discrete_gaussian(4096.5, 3, rng=1)
        discrete_gaussian(2.0**20, 3, rng=1)
        assert called == [4096.5, 2.0**20]


@pytest.mark.parametrize("sigma", [SUM_SIGMA, 4096.5, 2.0**20])
def test_bracket_of_x_is_exact(sigma):
    """f_lo ≤ x·2^53 ≤ f_hi, x = r(2qm + r)/(2σ²), for every r of a block and blocks from 0
    to the last below a_fast, with int64 arrays equal to the same formula in Python ints
    (so nothing overflowed); the bracket is narrow (at most num/2^E + 2)."""
    prm = dg._two_level(sigma)
    m = 1 << prm.k
    qs = sorted({0, 1, 2, 100, (prm.a_fast - 1) // m - 1, (prm.a_fast - 1) // m})
    qm = np.repeat(np.array(qs, dtype=np.int64) * m, m)
    r = np.tile(np.arange(m, dtype=np.int64), len(qs))
    a, f_lo, f_hi = dg._two_level_bracket(prm, qm, r)
    keep = a < prm.a_fast
    assert keep.sum() >= (len(qs) - 1) * m
    s2 = prm.sigma * prm.sigma
    for ai, lo, hi, qi, ri in zip(
        a[keep].tolist(),
        f_lo[keep].tolist(),
        f_hi[keep].tolist(),
        qm[keep].tolist(),
        r[keep].tolist(),
        strict=True,
    ):
        num = ri * (ai + qi)
        assert lo == (num * prm.inv) >> prm.shift
        assert hi == -((-(num * (prm.inv + 1))) >> prm.shift)
        exact = prm.x(ai) * (1 << 53)
        assert exact == Fraction(num, 1) * (1 << 52) / s2
        assert lo <= exact <= hi, (ai, lo, hi)
        assert hi - lo <= (num >> prm.shift) + 2


def test_x_is_the_block_ratio():
    """exp(-x(a)) = w(a)/w(qm): x(a) = (a² − (qm)²)/(2σ²) with qm = m⌊a/m⌋."""
    prm = dg._make_two_level(Fraction(10), 2)
    assert [prm.x(a) for a in (0, 3, 4, 7)] == [
        0,
        Fraction(9, 200),
        0,
        Fraction(49 - 16, 200),
    ]


@pytest.mark.parametrize("block", [1.625, 3.7, 68.1167219701462, 127.99])
def test_one_sided_table_brackets_the_exact_cdf(block):
    """center = 2: L_j ≤ P[A ≤ j]·2^64 ≤ H_j for P[A = a] ∝ e^{-a²/(2σ'²)} on a ≥ 0 (60
    digits: Σ_{a≥0} = (θ + 1)/2 with θ the sum over Z by Poisson summation)."""
    sig = Fraction(block)
    tab = dg._cdf_table(sig, center=2)
    size = tab.lower.size
    with mp.workdps(60):
        s = mpmath.mpf(sig.numerator) / sig.denominator
        z = (theta_sum(s) + 1) / 2
        total, y0 = mpmath.mpf(0), 0
        for j in sorted({0, 1, 2, size // 3, size // 2, size - 2, size - 1}):
            for y in range(y0, j + 1):
                total += mpmath.exp(-(y * y) / (2 * s * s))
            y0 = j + 1
            exact = total / z * mpmath.mpf(2) ** 64
            assert int(tab.lower[j]) <= exact <= int(tab.upper[j]), (block, j)
        assert 0 < 1 - total / z < mpmath.mpf(2) ** -40


@pytest.mark.parametrize(("sigma", "center"), [(3.7, 1), (270.37960332144536, 1), (68.1, 2)])
def test_guide_search_equals_searchsorted(sigma, center):
    """``_search`` through the guide table = searchsorted of the 32-bit leads, which is the
    first j with L_j ≥ (v + 1)·2^32; and the leads and ceilings are the exact ones."""
    tab = dg._cdf_table(Fraction(sigma), center=center)
    assert tab.lead[:-1].tolist() == [int(x) >> 32 for x in tab.lower.tolist()]
    assert tab.ceil_upper.tolist() == [-(-int(x) >> 32) for x in tab.upper.tolist()]
    lead = tab.lead[:-1]
    one = np.uint32(1)
    words = [lead, lead - one, lead + one]
    buckets = np.arange(1 << (32 - int(tab.shift)), dtype=np.uint32) << tab.shift
    words += [buckets, buckets - one, np.array([0, 2**32 - 1], dtype=np.uint32)]
    words.append(np.random.default_rng(40).integers(0, 2**32, 50_000, dtype=np.uint32))
    v = np.concatenate(words)
    pos = dg._search(tab, v)
    assert np.array_equal(pos, np.searchsorted(lead, v, side="right"))
    wide = (v.astype(object) + 1) << 32
    low = np.append(tab.lower.astype(object), 2**64 + 1)
    assert all(low[p] >= x for p, x in zip(pos.tolist(), wide.tolist(), strict=True))
    assert all(p == 0 or low[p - 1] < x for p, x in zip(pos.tolist(), wide.tolist(), strict=True))


def _exact_cdf(sigma: Fraction, center: int, upto: int) -> list[mpmath.mpf]:
    """[C_0, …, C_upto] in mpmath (the working precision of the caller)."""
    s = mpmath.mpf(sigma.numerator) / sigma.denominator
    z = theta_sum(s) if center == 1 else (theta_sum(s) + 1) / 2
    out, total = [], mpmath.mpf(0)
    for y in range(upto + 1):
        total += (center if y == 0 else 2) * mpmath.exp(-(y * y) / (2 * s * s)) / 2
        out.append(2 * total / z if center == 1 else total / z)
    return out


@pytest.mark.parametrize(("sigma", "center"), [(3.7, 1), (5.0, 2)])
def test_inversion_from_32_bits_decides_only_inside_an_interval(sigma, center):
    """Every leading 32-bit word v next to a boundary C_j·2^32 (and random ones): when
    ``_invert`` answers j without drawing, [v, v + 1)·2^-32 ⊂ [C_{j-1}, C_j) exactly;
    when it draws 32 more bits (a fixed word here), [w, w + 1)·2^-64 is inside it."""
    sig = Fraction(sigma)
    tab = dg._cdf_table(sig, center=center)
    with mp.workdps(50):
        cdf = _exact_cdf(sig, center, tab.lower.size - 1)
        bounds = [int(mpmath.floor(c * 2**32)) for c in cdf]
        near = {b + d for b in bounds for d in (-1, 0, 1)} | {0, 2**32 - 1}
        vs = sorted(v for v in near if 0 <= v < 2**32)
        vs += np.random.default_rng(41).integers(0, 2**32, 300).tolist()
        drawn = 0
        for v in vs:
            pool = dg._Pool(_Bytes(int(v).to_bytes(4, "little")))
            src = _FixedBits(0x2AAAAAAAAAAAAAAA)
            j = int(dg._invert(sig, 1, pool, src, center)[0])
            lo = mpmath.mpf(v) / 2**32
            hi = mpmath.mpf(v + 1) / 2**32
            if src.calls:
                drawn += 1
                w = (v << 32) | (0x2AAAAAAAAAAAAAAA >> 30)
                lo, hi = mpmath.mpf(w) / 2**64, mpmath.mpf(w + 1) / 2**64
            assert (j == 0 or cdf[j - 1] <= lo) and hi <= cdf[j], (v, j)
        assert 0 < drawn < len(vs)  # the boundary words do draw, the others do not


@pytest.mark.parametrize("f", [Fraction(0), Fraction(1, 3), Fraction(3, 1000), Fraction(1, 2**16)])
def test_coins_decided_by_leading_words_are_right(f):
    """``_coins_exp_neg`` with its 16-bit words given: whenever it decides without further
    bits, every coin it read is decided by the words for every value of the undrawn bits
    (coin K = 1 iff (w_K + 1)/2^16 ≤ f/K, 0 iff w_K/2^16 ≥ f/K), and the result is
    "the first 0 coin has odd K"."""
    f_lo = np.array([(f * 2**53).__floor__()], dtype=np.int64)
    f_hi = np.array([-((-f * 2**53).__floor__())], dtype=np.int64)
    rng = np.random.default_rng(42)
    edge = int(f * 2**16)
    decided = 0
    for trial in range(400):
        words = rng.integers(0, 2**16, 6)
        if trial % 4 == 0:
            words[: trial % 3 + 1] = [max(edge // k - 1, 0) for k in range(1, trial % 3 + 2)]
        data = b"".join(int(x).to_bytes(2, "little") for x in words)
        try:
            got = bool(
                dg._coins_exp_neg(f_lo, f_hi, lambda i: f, dg._Pool(_Bytes(data)), _NoBits())[0]
            )
        except AssertionError:
            continue  # a word in the bracket drew further bits: not this test's case
        decided += 1
        for k, w in enumerate(words.tolist(), start=1):
            if (w + 1) * k <= f * 2**16:
                continue  # coin 1: go on
            assert w * k >= f * 2**16  # coin 0, surely
            assert got == bool(k & 1)
            break
    assert decided > 300


def test_coin_with_undecided_leading_word_reads_the_rest():
    """A leading word equal to f's own leading bits: the coin is decided by the 37 further
    bits against f·2^53 exactly (f = 1/3: f·2^53 is not an integer)."""
    f = Fraction(1, 3)
    f_lo = np.array([(f * 2**53).__floor__()], dtype=np.int64)
    f_hi = f_lo + 1
    lead = int(f_lo[0]) >> 37
    for rest, coin1 in ((0, True), ((1 << 37) - 1, False)):
        word = rest << (62 - 37)  # random_bits(·, 37) = the leading 37 of 62 bits
        data = lead.to_bytes(2, "little") + (2**16 - 1).to_bytes(2, "little")
        # coin 1 = Unif < f: then a second coin, its word 0xFFFF: 0, so K = 2: reject
        got = dg._coins_exp_neg(f_lo, f_hi, lambda i: f, dg._Pool(_Bytes(data)), _FixedBits(word))
        full = (lead << 37) | rest
        assert (full < f * 2**53) == coin1
        assert bool(got[0]) == (not coin1)


def test_two_level_law_small_sigma_exact_path():
    """σ = 10, m = 4 (σ' = 2.5): x ≥ 1 already at the third block, so the exact Fraction
    path decides many candidates; chi-square on the exact pmf, integer bins (seeded)."""
    prm = dg._make_two_level(Fraction(10), 2)
    rng = np.random.default_rng(43)
    samples = dg._sample_two_level(prm, 200_000, rng)
    edges, probs = integer_bins(10.0, samples.size)
    assert chi2_pvalue(samples, edges, probs) > 1e-3


def test_two_level_zero_has_its_mass():
    """P[Y = 0] = 1/θ(σ), not twice it (the pair (0, negative) is rejected): σ = 10, m = 4."""
    prm = dg._make_two_level(Fraction(10), 2)
    samples = dg._sample_two_level(prm, 400_000, np.random.default_rng(44))
    with mp.workdps(30):
        p0 = float(1 / theta_sum(mpmath.mpf(10)))
    zeros = int((samples == 0).sum())
    sd = (samples.size * p0 * (1 - p0)) ** 0.5
    assert abs(zeros - samples.size * p0) < 5 * sd


@pytest.mark.parametrize("sigma", [4096.5, SUM_SIGMA, 2.0**20])
def test_two_level_law(sigma):
    """Chi-square with 100 bins of width σ/10 (seeded)."""
    samples = dg._sample_two_level(dg._two_level(sigma), 200_000, np.random.default_rng(45))
    edges, probs = bins_for(sigma, samples.size, 1)
    assert chi2_pvalue(samples, edges, probs) > 1e-3


def test_two_level_beyond_a_fast_is_exact():
    """Candidates at and beyond a_fast go through the Fraction path: force a block q that
    is past a_fast (via a stub table inversion) and check the acceptance frequency."""
    prm = dg._make_two_level(Fraction(10), 2)
    q = prm.a_fast // 4 + 1  # every A = 4q + r is ≥ a_fast

    def stub(sigma, n, pool, source, center=1):
        return np.full(n, q, dtype=np.int64)

    with pytest.MonkeyPatch.context() as mp_:
        mp_.setattr(dg, "_invert", stub)
        z = dg._two_level_trials(
            prm, 20_000, dg._Pool(np.random.default_rng(46)), np.random.default_rng(47)
        )
    # r = 0 accepts surely (x = 0), r ≥ 1 has x ≥ 2q/200 > 2: almost never
    assert set(np.abs(z).tolist()) <= {4 * q, 4 * q + 1}
    assert abs(np.sum(np.abs(z) == 4 * q) - 5000) < 5 * (20_000 * 0.25 * 0.75) ** 0.5


def test_release_of_a_sum_uses_the_two_level_path_and_counts_the_table():
    mech = GaussianMechanism(1, 1e-6, 1)
    seen: list[str] = []
    two, table = dg._sample_two_level, dg._sample_table
    with pytest.MonkeyPatch.context() as mp_:
        mp_.setattr(dg, "_sample_two_level", lambda *a: seen.append("two") or two(*a))
        mp_.setattr(dg, "_sample_table", lambda *a: seen.append("table") or table(*a))
        mech.release(np.linspace(0.0, 100.0, 4000), rng="secure")
        assert seen == ["two"]
        mech.release(np.arange(4000), rng="secure", integer=True)
        assert seen == ["two", "table"]
    law = mech.noise_plan(4000).noise
    assert law.sigma_lattice == pytest.approx(SUM_SIGMA, rel=1e-12)
