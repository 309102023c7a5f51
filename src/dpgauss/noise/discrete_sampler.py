"""Exact, vectorised sampling of the discrete Gaussian N_Z(0, σ²).

``N_Z(0, σ²)`` puts mass ``exp(-x²/(2σ²)) / Σ_{y∈Z} exp(-y²/(2σ²))`` on every integer x.
Adding it to an integer-valued query is the discrete Gaussian mechanism of Canonne, Kamath
& Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020, "CKS20"); its
privacy profile is :func:`dpgauss.privacy.discrete_profile.discrete_gaussian_delta`.

The sampler follows CKS20 Algorithms 1-3 and is *exact*: with a perfect source of uniform
bits, every output has exactly the distribution N_Z(0, σ²), where σ is the exact rational
value ``fractions.Fraction(sigma) = p/q`` of the float passed in.  No floating-point number
takes part in any accept/reject decision; every decision compares uniform random integers
with integer thresholds that are exact, or bracket the exact value (see below).

Algorithm (t = ⌊σ⌋ + 1)
-----------------------
1. *Discrete Laplace* (CKS20 Alg. 2), P[Y = y] ∝ exp(-|y|/t): draw U uniform on
   {0, …, t-1} and keep it with probability exp(-U/t) (Alg. 1: K = 1, 2, … while a
   Bernoulli(U/(tK)) coin — a uniform integer below tK compared with U — comes up 1;
   keep iff the last K is odd); draw V with P[V ≥ k] = e^{-k}; X = U + tV; a fair sign
   bit B; reject (X = 0, B = 1); Y = (1 - 2B) X.
2. *Rejection* (CKS20 Alg. 3): accept Y with probability exp(-γ), where
   γ = (|Y| - σ²/t)² / (2σ²) = u²/2 with u = |Y|/σ - σ/t.  Then Y ~ N_Z(0, σ²).

Bernoulli(exp(-γ)) is CKS20 Alg. 1: with k = ⌊γ⌋ and f = γ - k, it is the conjunction of
k Bernoulli(e^{-1}) coins and one Bernoulli(exp(-f)), the latter decided by coins
Bernoulli(f/K), K = 1, 2, … as above.  Two exact reformulations make this vectorisable:

* *k coins Bernoulli(e^{-1}) all equal to 1* has probability e^{-k}, and so has
  ``Unif[0,1) < e^{-k}``.  One 62-bit uniform integer W decides it against the exact
  integer threshold T_k = ⌊e^{-k} 2^62⌋ (computed once with integer arithmetic from a
  bracketing of the series of e^{-1}): W < T_k means yes, W > T_k no, and W = T_k (chance
  2^-62) draws further bits and compares against ⌊e^{-k} 2^b⌋ at growing b.  The same
  table gives the geometric V of step 1 by inverse CDF.
* A coin Bernoulli(f/K) is the event ``Unif[0,1) < f/K``, with Unif = (W + R) 2^-53 for a
  53-bit uniform integer W and an undrawn remainder R ∈ [0, 1).  For each candidate we
  compute, in ``int64``, integers fL ≤ f·2^53 ≤ fU with fU - fL ≈ 6|u|·2^26 (relative
  width ~1e-7): W < ⌊fL/K⌋ decides 1, W ≥ ⌈fU/K⌉ decides 0, and only in between (chance
  < 1e-7 per coin) is the coin resolved exactly with Python integers: it equals 1 with
  probability clip(f·2^53/K - W, 0, 1), a rational drawn as a uniform integer below its
  denominator compared with its numerator.

Why brackets, and how int64 overflow is avoided
-----------------------------------------------
For a float σ = p/q, p < 2^53 and q a power of two up to 2^52 or more, so
γ = (|Y| t q² - p²)² / (2 p² t²) has a numerator of ~200 bits: no exact product fits in
``int64``.  Instead u·2^26 is bracketed from precomputed integers
R = ⌊q 2^(26+E)/p⌋ (so |Y|/σ·2^(26+E) ∈ [|Y|R, |Y|R + |Y|)) and C = ⌊σ 2^26 / t⌋, and
γ·2^53 = (u 2^26)² is bracketed by squaring the bracket.  Candidates are kept in this
fast path only while every product provably fits in ``int64``: |Y| < a_big, the smallest
integer with a_big/σ - σ/t ≥ 32, and E ≤ 31 chosen so that a_big (R + 1) < 2^63.  For
|Y| ≥ a_big, γ ≥ 512 exactly, and the candidate is rejected unless its 62-bit uniform is
0 (then it is finished exactly with ``fractions.Fraction``).  Candidates whose bracket
straddles an integer (so k = ⌊γ⌋ is unknown; chance ~1e-7 for σ ≤ 2^31, growing to ~1e-3
at σ = 2^40 where |Y|/2^E widens the bracket) are also finished exactly with Python
integers.  The exact slow paths are rare enough not to matter for throughput.

Three faster paths give the same law (issue #31 item 7; ``_sample``): for 1 ≤ σ ≤ 2^12,
inversion of an exact CDF table (``_cdf_table``, "the table path" below); for
2^12 < σ ≤ 2^20, the two-level path (the block of |Y| by inversion of a small table,
the offset in the block by an exact rejection; ``_sample_two_level``, with its proof);
for σ < 1, the lean path (the discrete Laplace's test merged into the final one, uniforms
read 16 bits at a time, bytes read in bulk).  The path described above serves σ > 2^20.
A secure release of 4,000 counts (σ_L ≈ 270, the table path) costs about 3.7x the CPU
time of ``Generator.normal`` for the same size; of a sum on a 2^-13 grid (σ_L ≈ 34876,
the two-level path) about 5x (``benchmarks/bench_sampler.py --release``; 50-55x with
CKS20 as written; 8x and 26-35x before the two-level path and the guide table).

Timing: the number of loop rounds is random and depends on the samples drawn (as in every
rejection sampler); this Python implementation makes no attempt at constant time.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .._validation import Interval, as_real_array, check_int, check_interval
from .randomness import RandomSource, random_below, random_bits, resolve_rng

__all__ = ["SIGMA_RANGE", "discrete_gaussian"]

SIGMA_RANGE = Interval(2.0**-30, 2.0**40, low_closed=True, high_closed=True)
"""Allowed σ, [2^-30, 2^40] (≈ 9.3e-10 to 1.1e12): ``_params`` checks the int64 bounds of
the fast path for each σ (and raises if they failed); they hold across this range."""

_INT64_MAX = (1 << 63) - 1
_SQRT_INT64_MAX = math.isqrt(_INT64_MAX)
_F = 26  # fractional bits of u = |Y|/σ - σ/t
_B = 2 * _F + 1  # fractional bits of γ = u²/2, so γ·2^53 = (u·2^26)²
_GEO_BITS = 62  # bits of the uniform compared with e^{-k}
_BIG = 512  # γ ≥ 512 for |Y| ≥ a_big
_BATCH = 1 << 16  # candidates per vectorised round (bounded memory, cache friendly)


# ---------------------------------------------------------------- exact constants e^{-k}


@lru_cache(maxsize=64)
def _exp_neg_one(prec: int) -> tuple[int, int]:
    """Integers lo ≤ e^{-1}·2^prec ≤ hi from the alternating series Σ (-1)^j / j!.

    Its terms 1/j! decrease, so e^{-1} lies between consecutive partial sums.
    """
    total, term, j = Fraction(0), Fraction(1), 0
    while term > Fraction(1, 1 << (prec + 2)):
        total += term if j % 2 == 0 else -term
        j += 1
        term /= j
    nxt = total + (term if j % 2 == 0 else -term)
    lo, hi = min(total, nxt), max(total, nxt)
    return math.floor(lo * (1 << prec)), math.ceil(hi * (1 << prec))


@lru_cache(maxsize=4096)
def _floor_exp_neg(k: int, bits: int) -> int:
    """⌊e^{-k}·2^bits⌋ exactly (k ≥ 0), by interval powering in fixed point.

    e^{-k} is irrational for k ≥ 1, so the floors of a fine enough bracket agree; the
    precision doubles until they do.
    """
    if k == 0:
        return 1 << bits
    prec = bits + 64 + 2 * k.bit_length()
    while True:
        lo1, hi1 = _exp_neg_one(prec)
        one = 1 << prec
        lo, hi, blo, bhi, e = one, one, lo1, hi1, k
        while e:  # square and multiply; floor for the lower end, ceiling for the upper
            if e & 1:
                lo, hi = (lo * blo) >> prec, -((-hi * bhi) >> prec)
            e >>= 1
            if e:
                blo, bhi = (blo * blo) >> prec, -((-bhi * bhi) >> prec)
        a, b = lo >> (prec - bits), hi >> (prec - bits)
        if a == b:
            return a
        prec *= 2


# T[k] = ⌊e^{-k} 2^62⌋ for k = 0..512 (T[0] = 2^62; T[k] = 0 for k ≥ 44).
_THRESHOLDS = np.array([_floor_exp_neg(k, _GEO_BITS) for k in range(_BIG + 1)], dtype=np.int64)
_LAST = int(np.flatnonzero(_THRESHOLDS == 0)[0])  # first k with T[k] = 0 (43)
_ASCENDING = _THRESHOLDS[1 : _LAST + 1][::-1].copy()  # T[_LAST] = 0, ..., T[1]


def _less_than_exp_neg(state: list[int], k: int, source: RandomSource) -> bool:
    """Decide Unif < e^{-k} where Unif's leading ``state[1]`` bits are ``state[0]``.

    Draws further bits (32 at a time, appended to ``state``) only while undecided, so
    several calls with decreasing e^{-k} compare one and the same uniform real.
    """
    if k == 0:
        return True
    limit = (k * 144) // 100  # log2(e) > 1.44, so e^{-k} < 2^-limit
    while True:
        w, bits = state
        if bits <= limit:
            if w > 0:  # Unif ≥ 2^-bits ≥ 2^-limit > e^{-k}
                return False
        else:
            thr = _floor_exp_neg(k, bits)
            if w != thr:
                return w < thr
        state[0] = (w << 32) | random_bits(source, 32)
        state[1] = bits + 32


def _geometric(n: int, source: RandomSource) -> np.ndarray:
    """n draws of G with P[G ≥ k] = e^{-k} (k Bernoulli(e^{-1}) successes in a row)."""
    w = source.integers(0, 1 << _GEO_BITS, size=n)
    pos = np.searchsorted(_ASCENDING, w, side="right")
    g = (_LAST - pos).astype(np.int64)
    tied = np.flatnonzero(_ASCENDING[np.maximum(pos - 1, 0)] == w)
    for i in tied.tolist():  # w equals some T[k]: finish exactly (chance ~1e-17)
        g[i] = _geometric_one(int(w[i]), source)
    return g


def _geometric_one(w: int, source: RandomSource) -> int:
    """G from the leading 62 bits ``w`` of its uniform (exact: ties draw further bits)."""
    state, k = [w, _GEO_BITS], 1
    while _less_than_exp_neg(state, k, source):
        k += 1
    return k - 1


def _bernoulli_exp_neg_int(k: np.ndarray, source: RandomSource) -> np.ndarray:
    """Elementwise Bernoulli(e^{-k}) for integers 0 ≤ k ≤ 512 (or any k ≥ 44, clipped)."""
    w = source.integers(0, 1 << _GEO_BITS, size=k.size)
    thr = _THRESHOLDS[np.minimum(k, _BIG)]
    out = w < thr
    for i in np.flatnonzero(w == thr).tolist():
        out[i] = _less_than_exp_neg([int(w[i]), _GEO_BITS], int(k[i]), source)
    return out


def _bernoulli_exp_neg_ratio(num: np.ndarray, den: int, source: RandomSource) -> np.ndarray:
    """Elementwise Bernoulli(exp(-num/den)) for integers 0 ≤ num ≤ den (CKS20 Alg. 1)."""
    out = np.empty(num.size, dtype=bool)
    idx = np.arange(num.size)
    big_k = 1
    while idx.size:
        if den * big_k > _INT64_MAX:  # needs K ~ 2^20 coins in a row: chance < 1/(2^20)!
            raise OverflowError("discrete_gaussian: coin bound exceeds int64")
        coin = source.integers(0, den * big_k, size=idx.size) < num[idx]  # Bern(num/(den K))
        out[idx[~coin]] = bool(big_k & 1)
        idx = idx[coin]
        big_k += 1
    return out


def _bernoulli_exp_neg_fraction(f: Fraction, source: RandomSource) -> bool:
    """Bernoulli(exp(-f)) for a rational 0 ≤ f ≤ 1, exactly (CKS20 Alg. 1, Python ints)."""
    big_k = 1
    while random_below(source, f.denominator * big_k) < f.numerator:
        big_k += 1
    return bool(big_k & 1)


def _bernoulli_fraction(r: Fraction, source: RandomSource) -> bool:
    """Bernoulli(r) for a rational r, clipped to [0, 1]."""
    if r <= 0:
        return False
    if r >= 1:
        return True
    return random_below(source, r.denominator) < r.numerator


# --------------------------------------------------------------------------- parameters


@dataclass(frozen=True)
class _Params:
    """Exact constants for one σ = p/q (all Python ints, all fit in int64 except p, q)."""

    p: int
    q: int
    t: int  # ⌊σ⌋ + 1
    shift: int  # E
    r: int  # ⌊q 2^(F+E) / p⌋
    c: int  # ⌊p 2^F / (q t)⌋ = ⌊σ/t · 2^F⌋
    a_big: int  # smallest a with a/σ - σ/t ≥ 32, i.e. γ(a) ≥ 512
    inv_t: int = 0  # ⌊2^B / t⌋, so that U·inv_t ≤ (U/t)·2^B < U·inv_t + U
    lean: bool = False  # the lean path's int64 bounds hold (_sample_lean)

    def gamma(self, a: int) -> Fraction:
        """γ(a) = (a - σ²/t)² / (2σ²), exactly."""
        s = Fraction(self.p * self.p, self.q * self.q)
        return (a - s / self.t) ** 2 / (2 * s)


@lru_cache(maxsize=32)
def _params(sigma: float) -> _Params:
    frac = Fraction(sigma)
    p, q = frac.numerator, frac.denominator
    t = p // q + 1
    a_big = math.ceil(frac * (32 + frac / t))
    for shift in range(31, -1, -1):
        r = (q << (_F + shift)) // p
        if a_big * (r + 1) + a_big <= _INT64_MAX:
            break
    else:  # unreachable inside SIGMA_RANGE
        raise ValueError(f"sigma={sigma!r} is too small for the int64 fast path")
    c = (p << _F) // (q * t)
    worst = a_big - 1  # largest fast-path candidate: its bracket must square inside int64
    u_top = ((worst * r + worst) >> shift) + 1 - c
    if u_top > _SQRT_INT64_MAX:  # unreachable in SIGMA_RANGE
        raise ValueError(f"sigma={sigma!r} is outside the range of the int64 fast path")
    # The lean path adds U/t·2^B < 2^B + U to the bracket of γ·2^B: it must still fit.
    lean = t <= _LEAN_T and u_top * u_top + (1 << _B) + t <= _INT64_MAX
    return _Params(
        p=p, q=q, t=t, shift=shift, r=r, c=c, a_big=a_big, inv_t=(1 << _B) // t, lean=lean
    )


# ----------------------------------------------------------------------------- sampling


def _discrete_laplace(t: int, m: int, source: RandomSource) -> np.ndarray:
    """Up to m draws (about 0.6 m) with P[Y = y] ∝ exp(-|y|/t) (CKS20 Alg. 2, s = 1)."""
    if t == 1:
        u = np.zeros(m, dtype=np.int64)
    else:
        u = source.integers(0, t, size=m)
        u = u[_bernoulli_exp_neg_ratio(u, t, source)]
    v = _geometric(u.size, source)
    if v.size and int(v.max()) > (_INT64_MAX - t) // t:  # chance < e^-(2^22) for σ ≤ 2^40
        raise OverflowError("discrete_gaussian: candidate exceeds int64")
    x = u + t * v
    negative = source.integers(0, 2, size=x.size).astype(bool)
    keep = ~(negative & (x == 0))
    return np.where(negative, -x, x)[keep]


def _accept_exact(
    a: int,
    prm: _Params,
    source: RandomSource,
    state: list[int] | None,
    extra: Fraction = Fraction(0),
) -> bool:
    """Bernoulli(exp(-(γ(a) + extra))) with Fraction arithmetic; ``state`` = bits already
    drawn for the e^{-⌊γ + extra⌋} part (or None to start afresh)."""
    gamma = prm.gamma(a) + extra
    k = math.floor(gamma)
    if state is None:
        state = [random_bits(source, _GEO_BITS), _GEO_BITS]
    if not _less_than_exp_neg(state, k, source):
        return False
    return _bernoulli_exp_neg_fraction(gamma - k, source)


def _accept(a: np.ndarray, prm: _Params, source: RandomSource) -> np.ndarray:
    """Elementwise Bernoulli(exp(-γ(a))) for candidates a = |Y| ≥ 0 (CKS20 Alg. 3 test)."""
    out = np.zeros(a.size, dtype=bool)

    # |Y| ≥ a_big: γ ≥ 512, so the e^{-⌊γ⌋} part fails unless the 62-bit uniform is 0.
    big = np.flatnonzero(a >= prm.a_big)
    if big.size:
        w = source.integers(0, 1 << _GEO_BITS, size=big.size)
        for i in np.flatnonzero(w == 0).tolist():
            out[big[i]] = _accept_exact(int(a[big[i]]), prm, source, [0, _GEO_BITS])

    fast = np.flatnonzero(a < prm.a_big)
    af = a[fast]
    prod = af * prm.r  # < 2^63 by the choice of E
    u_lo = (prod >> prm.shift) - prm.c - 1  # u·2^F ∈ (u_lo, u_hi)
    u_hi = ((prod + af) >> prm.shift) + 1 - prm.c
    sq_lo, sq_hi = u_lo * u_lo, u_hi * u_hi  # |u|·2^F < 2^31 + 2: no overflow
    g_lo = np.where(u_lo >= 0, sq_lo, np.where(u_hi <= 0, sq_hi, 0))  # γ·2^B ∈ [g_lo, g_hi]
    g_hi = np.maximum(sq_lo, sq_hi)
    k = g_lo >> _B
    straddle = k != (g_hi >> _B)
    for i in np.flatnonzero(straddle).tolist():  # ⌊γ⌋ unknown: finish exactly
        out[fast[i]] = _accept_exact(int(af[i]), prm, source, None)

    # e^{-k}: k Bernoulli(e^{-1}) coins at once; then Bernoulli(exp(-f)), f = γ - k.
    sure = np.flatnonzero(~straddle)
    passed = sure[_bernoulli_exp_neg_int(k[sure], source)]
    f_lo = g_lo[passed] - (k[passed] << _B)
    f_hi = g_hi[passed] - (k[passed] << _B)
    live = np.arange(passed.size)
    big_k = 1
    while live.size:
        w = source.integers(0, 1 << _B, size=live.size)
        coin = w < f_lo[live] // big_k  # Unif < f/K for sure
        unsure = np.flatnonzero(~coin & (w < -(-f_hi[live] // big_k)))
        for j in unsure.tolist():  # resolve Bernoulli(clip(f 2^B / K - w, 0, 1)) exactly
            i = passed[live[j]]
            f = prm.gamma(int(af[i])) - int(k[i])
            coin[j] = _bernoulli_fraction(f * (1 << _B) / big_k - int(w[j]), source)
        out[fast[passed[live[~coin]]]] = bool(big_k & 1)
        live = live[coin]
        big_k += 1
    return out


# ---------------------------------------------------------------- the lean path (t ≤ 2^20)
#
# The same law with fewer random bits and fewer array passes (``discrete_gaussian`` takes
# it for σ < 1, where ``_Params.lean`` holds; the table and the two-level path serve
# 1 ≤ σ ≤ 2^20, and the path above σ > 2^20 and the unit tests of its pieces):
#
# * CKS20 Alg. 2's test "keep U with probability exp(-U/t)" is merged into the final
#   acceptance: a candidate X = U + tV with U *uniform* on {0, …, t-1} has probability
#   ∝ e^{-V}, and accepting it with probability exp(-(U/t + γ(X))) gives
#   e^{-V}·e^{-U/t}·e^{-γ(X)} = e^{-X/t - γ(X)}, CKS20 Alg. 3's product exactly.  One
#   Bernoulli(exp(-γ')) with γ' = γ + U/t (bracketed in int64 like γ, U/t·2^53 ∈
#   [U⌊2^53/t⌋, U⌊2^53/t⌋ + U]) replaces the two.
# * U from a 16-bit word (32-bit for t > 2^16) W < t·⌊2^16/t⌋, U = W mod t: exactly uniform,
#   a word is rejected with chance below t/2^16.
# * Every comparison "Unif < p" of a uniform real with a threshold reads the uniform's
#   leading 16 bits first: they decide unless they equal the threshold's own leading bits
#   (chance ~2^-16), and only then are the further bits drawn (from the source, one
#   candidate at a time) and the comparison finished as in the path above — the law is
#   unchanged, the bits per comparison drop from 62 or 53 to 16.
# * The bits come from one bulk read per batch (``_Pool``: ``os.urandom`` for the secure
#   source, ``Generator.bytes`` for a seeded one); each byte is used once, and what a call
#   leaves unused is dropped.

_LEAN_T = 1 << 20
_LAZY = 16  # leading bits of a lazily read uniform
_GEO_REST = _GEO_BITS - _LAZY  # 46 further bits of a 62-bit uniform
_COIN_REST = _B - _LAZY  # 37 further bits of a 53-bit uniform
_PREFIX = _THRESHOLDS >> _GEO_REST  # leading 16 bits of T[k] (T[0] = 2^62: 2^16)
_ASC_PREFIX = _ASCENDING >> _GEO_REST
# Candidates drawn per sample still needed: the lean path accepts about 0.45 of them
# (measured: 0.46 at σ = 270, 0.47 at σ = 34876), so 2.35 finishes in one round almost
# always; the bytes reserved per candidate cover U, V, the sign and about 1.7 lazy coins.
_LEAN_RATIO = 2.35
_LEAN_BYTES = 10
_POOL_CHUNK = 1 << 12


class _Pool:
    """Uniform random bytes read from ``source`` in bulk and served once each, as arrays of
    uniform 16- or 32-bit words or single bits."""

    __slots__ = ("_buf", "_pos", "_read")

    def __init__(self, source: RandomSource) -> None:
        self._read = source.bytes
        self._buf = memoryview(b"")
        self._pos = 0

    def reserve(self, nbytes: int) -> None:
        """Make ``nbytes`` available with (at most) one read of the source."""
        if self._pos + nbytes > len(self._buf):
            rest = self._buf[self._pos :].tobytes()
            self._buf = memoryview(rest + self._read(max(nbytes - len(rest), _POOL_CHUNK)))
            self._pos = 0

    def _take(self, nbytes: int) -> memoryview:
        self.reserve(nbytes)
        start = self._pos
        self._pos = start + nbytes
        return self._buf[start : self._pos]

    def words(self, n: int, wide: bool = False) -> np.ndarray:
        """n uniform words as int64: 16-bit, or 32-bit if ``wide``."""
        dtype = np.uint32 if wide else np.uint16
        return np.frombuffer(self._take(n * (4 if wide else 2)), dtype=dtype).astype(np.int64)

    def bits(self, n: int) -> np.ndarray:
        """n uniform bits as bool."""
        raw = np.frombuffer(self._take((n + 7) // 8), dtype=np.uint8)
        return np.unpackbits(raw, count=n).view(bool)


def _geometric_lean(w: np.ndarray, source: RandomSource) -> np.ndarray:
    """G with P[G ≥ k] = e^{-k} from the leading 16 bits ``w`` of each uniform: G counts the
    k with T[k] ≥ (w + 1)·2^46 (then Unif < e^{-k} surely) unless w equals the leading
    bits of some T[k]; those few are finished with 46 further bits (``_geometric_one``)."""
    pos = np.searchsorted(_ASC_PREFIX, w, side="right")
    g = _LAST - pos
    for i in np.flatnonzero(_ASC_PREFIX[pos - 1] == w).tolist():
        g[i] = _geometric_one((int(w[i]) << _GEO_REST) | random_bits(source, _GEO_REST), source)
    return g


def _laplace_lean(
    t: int, m: int, pool: _Pool, source: RandomSource
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidates of the lean path from m uniform words: (X = U + tV, the sign bits, U),
    with U uniform on {0, …, t-1} (not yet weighted by exp(-U/t): see above) and the pair
    (X = 0, negative) removed."""
    if t == 1:
        u = np.zeros(m, dtype=np.int64)
    else:
        wide = t > 1 << 16
        w = pool.words(m, wide)
        span = 1 << (32 if wide else 16)
        u = w[w < t * (span // t)] % t
    v = _geometric_lean(pool.words(u.size), source)
    if v.size and int(v.max()) > (_INT64_MAX - t) // t:  # chance < e^-(2^40)
        raise OverflowError("discrete_gaussian: candidate exceeds int64")
    x = u + t * v
    negative = pool.bits(x.size)
    keep = ~(negative & (x == 0))
    if keep.all():
        return x, negative, u
    return x[keep], negative[keep], u[keep]


def _accept_lean(
    a: np.ndarray, u: np.ndarray, prm: _Params, pool: _Pool, source: RandomSource
) -> np.ndarray:
    """Elementwise Bernoulli(exp(-(γ(a) + u/t))) (the lean path's merged test), with the
    bracket of ``_accept`` and lazily read uniforms."""
    out = np.zeros(a.size, dtype=bool)
    t = prm.t
    big = a >= prm.a_big
    if big.any():  # γ ≥ 512: rejected unless the 62-bit uniform is 0
        idx = np.flatnonzero(big)
        w = pool.words(idx.size)
        for i in idx[w == 0].tolist():
            if random_bits(source, _GEO_REST) == 0:
                out[i] = _accept_exact(
                    int(a[i]), prm, source, [0, _GEO_BITS], Fraction(int(u[i]), t)
                )
        fast = np.flatnonzero(~big)
        af, uf = a[fast], u[fast]
    else:
        fast, af, uf = None, a, u
    prod = af * prm.r
    u_lo = (prod >> prm.shift) - prm.c - 1
    u_hi = ((prod + af) >> prm.shift) + 1 - prm.c
    sq_lo, sq_hi = u_lo * u_lo, u_hi * u_hi
    g_lo = np.where(u_lo >= 0, sq_lo, np.where(u_hi <= 0, sq_hi, 0))
    g_hi = np.maximum(sq_lo, sq_hi)
    extra = uf * prm.inv_t  # (U/t)·2^B ∈ [extra, extra + U]
    g_lo += extra
    g_hi += extra
    g_hi += uf
    k = g_lo >> _B
    res = np.zeros(af.size, dtype=bool)
    straddle = k != (g_hi >> _B)
    if straddle.any():
        for i in np.flatnonzero(straddle).tolist():  # ⌊γ'⌋ unknown: finish exactly
            res[i] = _accept_exact(int(af[i]), prm, source, None, Fraction(int(uf[i]), t))
        sure = np.flatnonzero(~straddle)
    else:
        sure = np.arange(af.size)
    ks = k[sure]
    # e^{-k}: Unif < T[k]/2^62 surely if its leading 16 bits are below T[k]'s, surely not
    # if above; equal: 46 more bits, and a tie with T[k] goes on as in ``_accept``.
    w = pool.words(sure.size)
    pk = _PREFIX[ks]
    yes = w < pk
    for i in np.flatnonzero(w == pk).tolist():
        kk = int(ks[i])
        full = (int(w[i]) << _GEO_REST) | random_bits(source, _GEO_REST)
        thr = int(_THRESHOLDS[kk])
        yes[i] = full < thr if full != thr else _less_than_exp_neg([full, _GEO_BITS], kk, source)
    passed = sure[yes]
    f_lo = g_lo[passed] - (k[passed] << _B)  # f·2^B ∈ [f_lo, f_hi], f = γ' - k ∈ [0, 1)
    f_hi = g_hi[passed] - (k[passed] << _B)

    def exact_f(i: int) -> Fraction:
        c = int(passed[i])
        return prm.gamma(int(af[c])) + Fraction(int(uf[c]), t) - int(k[c])

    res[passed] = _coins_exp_neg(f_lo, f_hi, exact_f, pool, source)
    if fast is None:
        return res
    out[fast] = res
    return out


def _coins_exp_neg(
    f_lo: np.ndarray,
    f_hi: np.ndarray,
    exact_f: Callable[[int], Fraction],
    pool: _Pool,
    source: RandomSource,
) -> np.ndarray:
    """Elementwise Bernoulli(exp(-f)) for 0 ≤ f < 1 given integer brackets
    f_lo ≤ f·2^B ≤ f_hi, by CKS20 Alg. 1: coins Bernoulli(f/K), K = 1, 2, … until one is
    0, true iff that K is odd.  Each coin "Unif < f/K" reads the uniform's leading 16 bits
    w: surely 1 if (w + 1)·K ≤ ⌊f_lo/2^37⌋ (then Unif·2^B < (w + 1)·2^37 ≤ f_lo/K ≤
    f·2^B/K), surely 0 if w·K ≥ ⌈f_hi/2^37⌉ (integer products only, no division);
    otherwise 37 more bits, and inside the bracket the exact f = ``exact_f(i)``."""
    lead_lo = f_lo >> _COIN_REST
    lead_hi = (f_hi + ((1 << _COIN_REST) - 1)) >> _COIN_REST
    res = np.empty(f_lo.size, dtype=bool)
    live = np.arange(f_lo.size)
    big_k = 1
    while live.size:
        if big_k == 1:  # every element: no gathers (the same comparisons as below)
            wk = pool.words(live.size)
            coin = wk < lead_lo
            unsure = ~coin & (wk < lead_hi)
        else:
            wk = pool.words(live.size) * big_k
            coin = wk + big_k <= lead_lo[live]
            unsure = ~coin & (wk < lead_hi[live])
        for j in np.flatnonzero(unsure).tolist():  # 37 more bits, then as in ``_accept``
            i = int(live[j])
            full = ((int(wk[j]) // big_k) << _COIN_REST) | random_bits(source, _COIN_REST)
            if full < int(f_lo[i]) // big_k:
                coin[j] = True
            elif full < -(-int(f_hi[i]) // big_k):  # Bernoulli(clip(f 2^B / K - full, 0, 1))
                coin[j] = _bernoulli_fraction(exact_f(i) * (1 << _B) / big_k - full, source)
        if big_k == 1:
            np.logical_not(coin, out=res)  # a first coin 0: K = 1, odd, true
            live = np.flatnonzero(coin)
        else:
            res[live[~coin]] = bool(big_k & 1)
            live = live[coin]
        big_k += 1
    return res


def _sample_lean(prm: _Params, n: int, source: RandomSource) -> np.ndarray:
    """n exact samples of N_Z(0, σ²) by the lean path (``_Params.lean``)."""
    pool = _Pool(source)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        m = min(_BATCH, int(need * _LEAN_RATIO) + 64)
        pool.reserve(_LEAN_BYTES * m)
        x, negative, u = _laplace_lean(prm.t, m, pool, source)
        accepted = _accept_lean(x, u, prm, pool, source)
        z = np.where(negative, -x, x)[accepted][:need]
        out[filled : filled + z.size] = z
        filled += z.size
    return out


# ------------------------------------------------------- the table path (1 ≤ σ ≤ 2^12)
#
# For moderate σ (counts on the integer lattice have σ_L ∈ [256, 512)) the law is sampled
# by inversion of its exact CDF, with no rejection at all: |Y| is the smallest j with
# Unif < C_j = P[|Y| ≤ j], the sign a fair bit (none at 0).  The C_j are irrational, so the
# table holds integer brackets L_j ≤ C_j·2^64 ≤ H_j (``_cdf_table``, built once per σ with
# exact fixed-point interval arithmetic: no floating point) and a uniform's leading 64
# bits W decide wherever the brackets allow — j is the first index with W + 1 ≤ L_j and
# W ≥ H_{j-1} confirms it; otherwise (chance ~2^-63 per sample) the comparison is
# finished exactly with further bits and a table of twice the precision
# (``_finish_inversion``).  The table stops at J where P[|Y| > J] < 2^-40; a uniform
# beyond C_J draws |Y| from that tail exactly (``_sample_tail``).

_TABLE_SIGMA = (1.0, 2.0**12)  # σ range of the table path (its size grows like 7.5σ)
_TABLE_PREC = 128  # fixed-point bits of the table's interval arithmetic
_TABLE_TAIL_BITS = 40  # the table ends where the tail's mass is below 2^-40
_U64 = 1 << 64


def _exp_neg_bracket(x: Fraction, prec: int) -> tuple[int, int]:
    """Integers lo ≤ e^{-x}·2^prec ≤ hi for a rational 0 ≤ x ≤ 1 (alternating series)."""
    total, term, j = Fraction(0), Fraction(1), 0
    while term > Fraction(1, 1 << (prec + 2)):
        total += term if j % 2 == 0 else -term
        j += 1
        term = term * x / j
    nxt = total + (term if j % 2 == 0 else -term)
    lo, hi = min(total, nxt), max(total, nxt)
    return math.floor(lo * (1 << prec)), math.ceil(hi * (1 << prec))


@dataclass(frozen=True)
class _CdfTable:
    """Brackets of the CDF of |Y| for one σ at one precision (see above)."""

    sigma: Fraction
    prec: int
    s_lo: list[int]  # S_j = w_0 + 2 Σ_{1≤y≤j} w_y, w_y = e^{-y²/(2σ²)}, times 2^prec
    s_hi: list[int]
    z_lo: int  # Z = Σ_{y∈Z} w_y, times 2^prec
    z_hi: int
    lower: np.ndarray  # L_j = ⌊S_lo_j 2^64 / Z_hi⌋ (uint64; the base table only)
    upper: np.ndarray  # H_j = ⌈S_hi_j 2^64 / Z_lo⌉ (uint64, all < 2^64; the base table only)
    lead: np.ndarray  # ⌊L_j / 2^32⌋ (uint32; the base table only), then one more entry
    ceil_upper: np.ndarray  # ⌈H_j / 2^32⌉ (uint64, ≤ 2^32; the base table only)
    guide: np.ndarray  # guide[b] = #{j: lead_j ≤ b·2^g} (int32; ``_guide``, ``_search``)
    spread: np.ndarray  # min(2, #{j: b·2^g < lead_j ≤ (b + 1)·2^g - 1}) (uint8)
    shift: np.uint32  # g = 32 - the guide's bits


@lru_cache(maxsize=16)
def _cdf_table(
    sigma: Fraction, prec: int = _TABLE_PREC, size: int | None = None, center: int = 1
) -> _CdfTable:
    """The CDF brackets of N_Z(0, σ²) for σ ≥ 1, exactly: with c = 1/(2σ²),
    w_{y+1} = w_y·r_y and r_{y+1} = r_y·e^{-2c} (r_0 = e^{-c}), each product rounded down
    for the lower and up for the upper end; the tail beyond J is at most
    w_{J+1}/(1 - r_{J+1}) (the ratios decrease).  ``size``: the base table's length J + 1,
    passed to the finer tables (which are at least as long, so that its indexes exist).

    ``center = 2`` counts w_0 twice: S_j = 2 Σ_{0≤y≤j} w_y and Z = 2 Σ_{y≥0} w_y, the CDF of
    the one-sided law P[A = a] ∝ w_a on a ≥ 0 (the two-level path's blocks)."""
    c = 1 / (2 * sigma * sigma)
    one = 1 << prec
    e1 = _exp_neg_bracket(c, prec)
    e2 = _exp_neg_bracket(2 * c, prec)
    w_lo = w_hi = one
    r_lo, r_hi = e1
    s_lo, s_hi = [center * one], [center * one]
    # The base table ends where w_y < 2^-48 (the tail is below 2^-40 of Z, so that H_J < 2^64);
    # a finer one (``size`` given) goes on to w_y < 2^-(prec/2) and at least ``size``
    # entries: the bracket of its tail, [w_{J+1}, w_{J+1}/(1 - r)], must shrink with it.
    stop = one >> (_TABLE_TAIL_BITS + 8 if size is None else prec // 2)
    while True:
        w_lo, w_hi = (w_lo * r_lo) >> prec, -((-w_hi * r_hi) >> prec)
        r_lo, r_hi = (r_lo * e2[0]) >> prec, -((-r_hi * e2[1]) >> prec)
        if w_hi < stop and (size is None or len(s_lo) >= size):
            break
        s_lo.append(s_lo[-1] + 2 * w_lo)
        s_hi.append(s_hi[-1] + 2 * w_hi)
    # w_lo, w_hi bound w_{J+1} and r_hi bounds r_{J+1}: w_{J+1} ≤ Σ_{y>J} w_y ≤ w_{J+1}/(1-r)
    tail_hi = -((-w_hi * one) // (one - r_hi))
    z_lo, z_hi = s_lo[-1] + 2 * w_lo, s_hi[-1] + 2 * tail_hi  # w_{J+1} ≤ tail
    if size is not None:  # a finer table: only its exact brackets are read
        lower, upper = [], []
    else:
        lower = [(v << 64) // z_hi for v in s_lo]
        upper = [-((-v << 64) // z_lo) for v in s_hi]
    if upper and upper[-1] >= _U64:  # unreachable: the tail keeps C_J below 1 - 2^-41
        raise ValueError(f"discrete_gaussian: CDF table of sigma={float(sigma)!r} reaches 1")
    low = np.array(lower, dtype=np.uint64)
    high = np.array(upper, dtype=np.uint64)
    lead = (low >> np.uint64(32)).astype(np.uint32)
    ceil_upper = -((-np.array(upper, dtype=object)) // (1 << 32))  # exact, as Python ints
    # 2^8 to 2^16 buckets: 4 to 8 per entry up to 16,384 entries (σ ≲ 2,000), down to 2 per
    # entry at σ = 2^12 (33,413 entries); one comparison decides nearly always
    bits = min(16, max(8, low.size.bit_length() + 2))
    guide, spread = _guide(lead, bits) if lower else (np.zeros(0, np.int32), np.zeros(0, np.uint8))
    return _CdfTable(
        sigma,
        prec,
        s_lo,
        s_hi,
        z_lo,
        z_hi,
        low,
        high,
        np.append(lead, np.uint32(0xFFFFFFFF)),
        ceil_upper.astype(np.uint64),
        guide,
        spread,
        np.uint32(32 - bits),
    )


def _guide(lead: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The guide table of the sorted ``lead`` (Chen & Asau 1974): for each bucket b of the
    32-bit words, [b·2^g, (b + 1)·2^g) with g = 32 - bits, the number of entries ≤ its
    first word and how many more (0, 1, or 2 meaning 2 or more) are ≤ its last."""
    g = 32 - bits
    starts = np.arange(1 << bits, dtype=np.uint32) << np.uint32(g)
    ends = starts | np.uint32((1 << g) - 1)
    first = np.searchsorted(lead, starts, side="right")
    last = np.searchsorted(lead, ends, side="right")
    return first.astype(np.int32), np.minimum(last - first, 2).astype(np.uint8)


def _search(tab: _CdfTable, v: np.ndarray) -> np.ndarray:
    """``np.searchsorted(tab.lead[:-1], v, side="right")`` for uint32 words v (the first j
    with ⌊L_j/2^32⌋ > v, i.e. L_j ≥ (v + 1)·2^32), through the guide table: in v's bucket
    at most one entry decides it by one comparison; buckets holding two or more (the far
    tail's) fall back to the search."""
    b = v >> tab.shift
    spread = tab.spread[b]
    pos = tab.guide[b].astype(np.intp)
    pos += (spread > 0) & (tab.lead[pos] <= v)  # spread ≥ 1: pos < size, lead_pos in b
    many = np.flatnonzero(spread > 1)
    if many.size:
        pos[many] = np.searchsorted(tab.lead[:-1], v[many], side="right")
    return pos


def _finish_inversion(
    w: int, pos: int, sigma: Fraction, source: RandomSource, center: int = 1
) -> int:
    """|Y| for a uniform with leading 64 bits w whose index the table left open: pos is
    the first j with w + 1 ≤ L_j (the table's length if none)."""
    state = [w, 64]  # the same uniform's bits, shared by the comparisons below
    j = max(pos - 1, 0)
    # Unif < C_{pos-1}?  Then smaller indexes may be in doubt too: walk down.
    while j >= 0 and _below_cdf_state(state, j, sigma, source, center):
        j -= 1
    j += 1  # Unif ≥ C_{j-1} (or j = 0) and Unif < C_j, unless j = len: the tail
    size = len(_cdf_table(sigma, center=center).s_lo)
    while j < size and not _below_cdf_state(state, j, sigma, source, center):
        j += 1
    return j if j < size else -1


def _below_cdf_state(
    state: list[int], j: int, sigma: Fraction, source: RandomSource, center: int = 1
) -> bool:
    """Unif < C_j for the uniform of ``state`` (its bits, appended to as drawn)."""
    tab = _cdf_table(sigma, center=center)
    w, bits = state
    if (w + 1) * tab.z_hi <= tab.s_lo[j] << bits:
        return True
    if w * tab.z_lo >= tab.s_hi[j] << bits:
        return False
    prec, size = 2 * _TABLE_PREC, len(tab.s_lo)
    while True:
        state[0] = w = (w << 64) | random_bits(source, 64)
        state[1] = bits = bits + 64
        tab = _cdf_table(sigma, prec, size, center)
        if (w + 1) * tab.z_hi <= tab.s_lo[j] << bits:
            return True
        if w * tab.z_lo >= tab.s_hi[j] << bits:
            return False
        prec *= 2


def _bernoulli_exp_neg_rational(x: Fraction, source: RandomSource) -> bool:
    """Bernoulli(exp(-x)) for a rational x ≥ 0, exactly (e^{-⌊x⌋} by the exact thresholds,
    then CKS20 Alg. 1 for the fraction)."""
    k = math.floor(x)
    if k and not _less_than_exp_neg([random_bits(source, _GEO_BITS), _GEO_BITS], k, source):
        return False
    return _bernoulli_exp_neg_fraction(x - k, source)


def _sample_tail(size: int, sigma: Fraction, source: RandomSource) -> int:
    """|Y| conditioned on |Y| ≥ size (the table's end), exactly: y = size + G with
    P[G ≥ g] = ρ^g, ρ = e^{-c(2 size + 1)} (c = 1/(2σ²)), which dominates w_y/w_size since
    the ratios w_{y+1}/w_y decrease, accepted with probability
    w_y/(w_size ρ^G) = exp(-c G(G - 1))."""
    c = 1 / (2 * sigma * sigma)
    ratio = c * (2 * size + 1)
    while True:
        g = 0
        while _bernoulli_exp_neg_rational(ratio, source):
            g += 1
        if _bernoulli_exp_neg_rational(c * g * (g - 1), source):
            return size + g


def _invert(
    sigma: Fraction, n: int, pool: _Pool, source: RandomSource, center: int = 1
) -> np.ndarray:
    """n exact draws of |Y| (``center = 1``; ``center = 2``: of A with P[A = a] ∝ w_a on
    a ≥ 0) by inversion of the table, from the uniforms' leading 32 bits v: they decide
    j = the first index with (v + 1)·2^32 ≤ L_j whenever v·2^32 ≥ H_{j-1} (then every
    uniform in [v·2^-32, (v + 1)·2^-32) lies in [C_{j-1}, C_j)); otherwise (chance about
    the table's length times 2^-32) 32 more bits are drawn and the 64-bit test follows."""
    tab = _cdf_table(sigma, center=center)
    v = np.frombuffer(pool._take(4 * n), dtype=np.uint32)
    pos = _search(tab, v)  # the first j with L_j ≥ (v + 1)·2^32
    size = tab.lower.size
    prev = tab.ceil_upper.take(pos - 1, mode="clip")  # ⌈H_{pos-1}/2^32⌉ (pos = 0: unread)
    open_ = np.flatnonzero((pos >= size) | ((pos > 0) & (v < prev)))  # v·2^32 < H_{pos-1}
    a = pos.astype(np.int64)
    for i in open_.tolist():
        w = (int(v[i]) << 32) | random_bits(source, 32)
        p = int(np.searchsorted(tab.lower, np.uint64(w), side="right"))
        if p < size and (p == 0 or w >= int(tab.upper[p - 1])):
            j = p
        elif p >= size and w >= int(tab.upper[-1]):
            j = -1  # surely beyond C_J: the tail
        else:
            j = _finish_inversion(w, p, sigma, source, center)
        a[i] = j if j >= 0 else _sample_tail(size, sigma, source)
    return a


def _sample_table(sigma: Fraction, n: int, pool: _Pool, source: RandomSource) -> np.ndarray:
    """n exact samples of N_Z(0, σ²) by inversion of the CDF (1 ≤ σ ≤ 2^12), at most
    ``_BATCH`` at a time (bounded scratch memory for any n; the draws are independent)."""
    if n <= _BATCH:
        a = _invert(sigma, n, pool, source)
        return np.where(pool.bits(n), -a, a)
    out = np.empty(n, dtype=np.int64)
    for start in range(0, n, _BATCH):
        out[start : start + _BATCH] = _sample_table(sigma, min(_BATCH, n - start), pool, source)
    return out


# --------------------------------------------- the two-level path (2^12 < σ ≤ 2^20)
#
# For larger σ a table of the CDF would have ~8σ entries (284,494 at σ = 34,876: 3.4 s to
# build, 36 MB, and its lookups miss the cache).  The two-level path keeps the table small
# by inverting only the *block* of |Y| and finishing inside the block by rejection; the
# algorithm and the proof of its law are in ``_sample_two_level``.

_TWO_LEVEL_SIGMA = (2.0**12, 2.0**20)  # σ range of the two-level path (σ_L of a sum ≈ 34,876)
_BLOCK_SIGMA = 64  # σ' = σ/m ∈ [64, 128)
_TWO_LEVEL_RATIO = 1.01  # candidates per sample still needed (acceptance ≥ 0.99)


@dataclass(frozen=True)
class _TwoLevel:
    """Exact constants of the two-level path for one σ (all fit in int64)."""

    sigma: Fraction
    k: int  # m = 2^k
    block: Fraction  # σ' = σ/m
    inv: int  # K = ⌊2^(52+E)/σ²⌋
    shift: int  # E
    a_fast: int  # candidates A ≥ a_fast take the exact path

    def x(self, a: int) -> Fraction:
        """x = (a² − (qm)²)/(2σ²), q = ⌊a/m⌋: the exponent of step 3, exactly."""
        qm = (a >> self.k) << self.k
        return Fraction(a * a - qm * qm) / (2 * self.sigma * self.sigma)


@lru_cache(maxsize=32)
def _two_level(sigma: float) -> _TwoLevel:
    """The two-level constants for σ (``_make_two_level`` with σ/2^k ∈ [64, 128))."""
    frac = Fraction(sigma)
    return _make_two_level(frac, max(0, (math.floor(frac) // _BLOCK_SIGMA).bit_length() - 1))


def _make_two_level(frac: Fraction, k: int) -> _TwoLevel:
    """The constants for σ = ``frac`` and blocks of m = 2^k (any k with σ/m ≥ 1: the
    tests use small σ and m, where x ≥ 1 occurs and the exact path is exercised)."""
    sigma = float(frac)
    m = 1 << k
    a_fast = 64 * math.ceil(frac)
    num_max = 2 * m * a_fast  # num = r(A + qm) < m·2·a_fast
    p, d = frac.numerator, frac.denominator
    for shift in range(62, -1, -1):
        inv = (d * d << (_B - 1 + shift)) // (p * p)
        if num_max * (inv + 1) + (1 << shift) <= _INT64_MAX:
            break
    else:
        inv = 0  # no shift fits int64: refused below
    if k + 1 > 16 or inv < 1 << 20:  # unreachable for σ ≤ 2^20 (there K ≥ 2^21)
        raise ValueError(
            f"sigma={sigma!r} with blocks of 2^{k} is outside the range of the two-level path"
        )
    return _TwoLevel(frac, k, frac / m, inv, shift, a_fast)


def _sample_two_level(prm: _TwoLevel, n: int, source: RandomSource) -> np.ndarray:
    """n exact samples of N_Z(0, σ²) by the two-level path (2^12 < σ ≤ 2^20).

    With w(a) = exp(-a²/(2σ²)), m = 2^k and σ' = σ/m (exact: m is a power of two), one
    trial (``_two_level_trials``) is

    1. q ≥ 0 with P[q] ∝ w(qm) = exp(-q²/(2σ'²)), by inversion of the one-sided table of
       σ' (``_cdf_table(σ', center=2)``, ~8σ' entries: σ' ∈ [64, 128), ≤ 1,100 entries);
    2. r uniform on {0, …, m-1}, A = qm + r;
    3. accept A with probability w(A)/w(qm) = exp(-x), x = r(2qm + r)/(2σ²) ≥ 0 (at most
       1 because w decreases on a ≥ 0, so a block's largest weight is at r = 0);
    4. a fair sign bit; the pair (A = 0, negative) is rejected; Y = ±A.

    *Proof that Y ~ N_Z(0, σ²) exactly.*  Every a ≥ 0 is qm + r for exactly one (q, r), so
    a trial yields A = a *and* accepts with probability

        P[q] · (1/m) · w(a)/w(qm) = w(qm)/W · 1/m · w(a)/w(qm) = w(a)/(mW),

    W = Σ_{q≥0} w(qm): proportional to w(a), so given acceptance P[A = a] ∝ w(a) on a ≥ 0.
    With the sign bit each signed pair (a, s) has probability ∝ w(a)/2, and dropping
    (0, −) leaves P[Y = y] ∝ w(|y|) for every y ∈ Z, the discrete Gaussian.  Trials are
    independent and whether one is kept depends on it alone, so the kept ones, in the
    order drawn, are independent draws of that law.  Acceptance:
    Σ_a w(a) / (mW) ≈ (1.2533σ + ½)/(1.2533σ + m/2) ≥ 1 − 1/(2.5σ') ≥ 0.99.

    Step 1 is exact by the table's brackets (``_invert``); step 3 is Bernoulli(exp(-x)) by
    CKS20 Alg. 1 (``_coins_exp_neg``) with x bracketed in int64 (``_two_level_bracket``):
    x·2^53 = num·2^52/σ², num = r(2qm + r) = r(A + qm), and with K = ⌊2^(52+E)/σ²⌋ (exact
    integers from σ = p/d: ⌊d²2^(52+E)/p²⌋), num·K/2^E ≤ x·2^53 < num·(K + 1)/2^E.  E is
    the largest shift with num·(K + 1) + 2^E < 2^63 for every num of a candidate below
    a_fast = 64⌈σ⌉ (num < 2m·a_fast); candidates at or beyond a_fast, or whose bracket
    reaches x ≥ 1 (only near or beyond a_fast), take the exact path with ``Fraction``
    (``_bernoulli_exp_neg_rational``).  Random bits: 4 bytes for the block's uniform, one
    16-bit word for r and the sign (k + 1 ≤ 16 of its bits), one 16-bit word per coin
    (~1.003 coins per trial): about 8 bytes a sample, against ~21 in the lean path.
    """
    pool = _Pool(source)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        c = min(_BATCH, int(need * _TWO_LEVEL_RATIO) + 16)  # bounded scratch memory
        z = _two_level_trials(prm, c, pool, source)[:need]
        out[filled : filled + z.size] = z
        filled += z.size
    return out


def _two_level_bracket(
    prm: _TwoLevel, qm: np.ndarray, r: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A = qm + r and f_lo ≤ x·2^53 ≤ f_hi for x = r(2qm + r)/(2σ²), in int64: exact (no
    overflow) wherever A < a_fast; elsewhere the brackets are not used."""
    a = qm + r
    num = r * (a + qm)
    prod = num * prm.inv
    f_lo = prod >> prm.shift
    f_hi = (prod + num + ((1 << prm.shift) - 1)) >> prm.shift
    return a, f_lo, f_hi


def _two_level_trials(prm: _TwoLevel, c: int, pool: _Pool, source: RandomSource) -> np.ndarray:
    """The accepted values, in order, of c independent trials of the two-level path."""
    pool.reserve(8 * c + 256)  # 4 + 2 + 2 bytes a trial, and the rare second coins
    k = prm.k
    qm = _invert(prm.block, c, pool, source, center=2) << k
    word = pool.words(c)
    r = word & ((1 << k) - 1)
    negative = (word >> k) & 1
    a, f_lo, f_hi = _two_level_bracket(prm, qm, r)
    if int(a.max()) < prm.a_fast and int(f_hi.max()) < 1 << _B:
        ok = _coins_exp_neg(f_lo, f_hi, lambda i: prm.x(int(a[i])), pool, source)
    else:  # far beyond a_fast (chance < 2^-40 per batch): those candidates exactly
        slow = (a >= prm.a_fast) | (f_hi >= 1 << _B)
        ok = np.empty(c, dtype=bool)
        quick = np.flatnonzero(~slow)
        ok[quick] = _coins_exp_neg(
            f_lo[quick], f_hi[quick], lambda i: prm.x(int(a[quick[i]])), pool, source
        )
        for i in np.flatnonzero(slow).tolist():
            ok[i] = _bernoulli_exp_neg_rational(prm.x(int(a[i])), source)
    zero = np.flatnonzero(a == 0)
    ok[zero[negative[zero] == 1]] = False  # the pair (0, negative)
    return ((a ^ -negative) + negative)[ok]  # -a where negative (two's complement)


def _check_size(size: object) -> tuple[int, ...]:
    if isinstance(size, numbers.Integral) and not isinstance(size, bool | np.bool_):
        dims: tuple[object, ...] = (size,)
    elif isinstance(size, tuple):
        dims = size
    else:
        raise TypeError(
            f"size must be a non-negative int or a tuple of them; got {type(size).__name__}"
        )
    many = isinstance(size, tuple)
    return tuple(check_int(d, f"size[{i}]" if many else "size", 0) for i, d in enumerate(dims))


def discrete_gaussian(
    sigma: float, size: int | tuple[int, ...], rng: object = "secure"
) -> np.ndarray:
    """Exact samples of the discrete Gaussian N_Z(0, σ²) (CKS20 Algorithms 1-3).

    P[X = x] = exp(-x²/(2σ²)) / Σ_{y∈Z} exp(-y²/(2σ²)) for every integer x, with σ the
    exact rational value of the float ``sigma``.  Adding X to an integer query of
    sensitivity Δ gives the (ε, δ) guarantee of
    :func:`dpgauss.privacy.discrete_profile.discrete_gaussian_delta` (CKS20 Thm 7).

    Parameters
    ----------
    sigma
        Scale σ, a float in [2^-30, 2^40].  Note Var[X] < σ² (slightly, CKS20 Cor. 9).
    size
        Output shape: a non-negative int or a tuple of them.
    rng
        ``"secure"`` (default: ``os.urandom``, for releases), an int seed or a
        :class:`numpy.random.Generator` (reproducible experiments, not secure); see
        :func:`dpgauss.noise.randomness.resolve_rng`.

    Returns
    -------
    numpy.ndarray of int64 with shape ``size``.

    Notes
    -----
    Exactness and the overflow analysis are described in the module docstring: all
    decisions compare uniform integers with integer thresholds; the rare candidates whose
    ``int64`` brackets are not conclusive are finished with exact Python integers.
    """
    shape = _check_size(size)
    arr = as_real_array(sigma, "sigma")
    if arr.ndim != 0:
        raise ValueError(f"sigma must be a scalar; got an array of shape {arr.shape}")
    check_interval(arr, "sigma", SIGMA_RANGE)
    source = resolve_rng(rng)
    return _sample(float(arr), math.prod(shape), source).reshape(shape)


def _sample(sigma: float, n: int, source: RandomSource) -> np.ndarray:
    """n exact samples of N_Z(0, σ²): by the table (1 ≤ σ ≤ 2^12), the two-level path
    (2^12 < σ ≤ 2^20), the lean path (σ < 1) or CKS20 as written (σ > 2^20)."""
    if _TABLE_SIGMA[0] <= sigma <= _TABLE_SIGMA[1]:
        return _sample_table(Fraction(sigma), n, _Pool(source), source)
    if _TWO_LEVEL_SIGMA[0] < sigma <= _TWO_LEVEL_SIGMA[1]:
        return _sample_two_level(_two_level(sigma), n, source)
    prm = _params(sigma)
    if prm.lean:
        return _sample_lean(prm, n, source)
    return _sample_rejection(prm, n, source)


def _sample_rejection(prm: _Params, n: int, source: RandomSource) -> np.ndarray:
    """n exact samples by CKS20 Algorithms 1-3 as written (module docstring)."""
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        # About 0.6 (discrete Laplace) x 0.75 (rejection) of the attempts give a sample.
        y = _discrete_laplace(prm.t, min(_BATCH, int(need * 2.3) + 32), source)
        z = y[_accept(np.abs(y), prm, source)][:need]
        out[filled : filled + z.size] = z
        filled += z.size
    return out
