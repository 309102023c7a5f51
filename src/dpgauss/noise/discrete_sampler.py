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

Throughput (one core, ``benchmarks/bench_sampler.py``): 4-6 million samples/s seeded and
about 1.6 million/s secure for σ from 1 to 1e6 on the development machine, i.e. 15-20x
(seeded) and ~50x (secure) the time of ``Generator.normal`` for the same size.

Timing: the number of loop rounds is random and depends on the samples drawn (as in every
rejection sampler); this Python implementation makes no attempt at constant time.
"""

from __future__ import annotations

import math
import numbers
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
        state, k = [int(w[i]), _GEO_BITS], 1
        while _less_than_exp_neg(state, k, source):
            k += 1
        g[i] = k - 1
    return g


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
    if ((worst * r + worst) >> shift) + 1 - c > _SQRT_INT64_MAX:  # unreachable in SIGMA_RANGE
        raise ValueError(f"sigma={sigma!r} is outside the range of the int64 fast path")
    return _Params(p=p, q=q, t=t, shift=shift, r=r, c=c, a_big=a_big)


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


def _accept_exact(a: int, prm: _Params, source: RandomSource, state: list[int] | None) -> bool:
    """Bernoulli(exp(-γ(a))) with Fraction arithmetic; ``state`` = bits already drawn for
    the e^{-⌊γ⌋} part (or None to start afresh)."""
    gamma = prm.gamma(a)
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
    prm = _params(float(arr))
    n = math.prod(shape)
    out = np.empty(n, dtype=np.int64)
    filled = 0
    while filled < n:
        need = n - filled
        # About 0.6 (discrete Laplace) x 0.75 (rejection) of the attempts give a sample.
        y = _discrete_laplace(prm.t, min(_BATCH, int(need * 2.3) + 32), source)
        z = y[_accept(np.abs(y), prm, source)][:need]
        out[filled : filled + z.size] = z
        filled += z.size
    return out.reshape(shape)
